//! Where each load of the tiled stage reads from: the tensor itself, a
//! pad-copy, or a tile-ordered pack. The decision is made once per load site,
//! before the nest, and any copy is emitted ahead of it: that is what lets the
//! register tile load without bounds checks, overhanging tiles included. (Or,
//! where the plan asks, a padded tensor itself, whose border tiles test their
//! reads: [`Source::Guarded`]; or a copy of one block at a time, made inside
//! the nest: [`Source::BlockPacked`].)

use std::collections::BTreeMap;

use autotune_lang::ir::{Affine, AxisId, Expr, Operator, TensorRef};

use super::geometry::{ceil_div, known, product, row_major_flat, tile_var, Merge, Tiling};
use crate::loopnest::{Guard, IExpr, LoopKind, Scratch, Stmt, VExpr};
use crate::lower::dims::Dims;
use crate::lower::names::buffer_name;
use crate::space::{Read, BLOCK_PACK_BYTES, BLOCK_PACK_KEPT_BYTES};

/// Where a load reads from.
#[derive(Clone, Debug)]
pub(super) enum Source {
    /// The tensor itself, row-major with these dimensions.
    Direct { dims: Vec<IExpr> },
    /// A copy whose dimension `d` covers indices `lo[d]..lo[d] + dims[d]`.
    Copy { lo: Vec<i64>, dims: Vec<IExpr> },
    /// The tensor itself (`dims` as `Direct`), read outside it along the
    /// dimensions `guarded`: a border tile tests those reads ([`Read::Guard`]).
    Guarded {
        dims: Vec<IExpr>,
        guarded: Vec<usize>,
    },
    /// A tile-ordered copy; dimensions from outer to inner (the outer ones
    /// symbolic in the generic kernel, the others constants).
    Packed { layout: Vec<(AxisId, Level, IExpr)> },
    /// A tile-ordered copy of what one outer reduction block of one outer
    /// tile reads, refilled for each: the [`Source::Packed`] layout without its
    /// outer levels, every dimension a constant.
    BlockPacked { layout: Vec<(AxisId, Level, IExpr)> },
}

/// A copy made at the start of a block ([`Source::BlockPacked`]): its code,
/// and the axes whose outer loops (or outer reduction blocks) it depends on,
/// so the nest runs it inside the last of those and no deeper.
pub(super) struct BlockCopy {
    pub axes: Vec<AxisId>,
    pub code: Vec<Stmt>,
    /// The elements each run of the copy stores: the whole block, whatever
    /// part of it the call's sizes reach (the rest is zeroed).
    pub elems: i64,
}

/// The loop level a dimension of a packed copy follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Level {
    Outer,
    Block,
    Reg,
    ReduceOuter,
    ReduceInner,
}

/// A resolved load site: the buffer it reads and how that buffer is laid out.
#[derive(Clone, Debug)]
pub(super) struct Access {
    pub buf: String,
    pub source: Source,
}

/// Resolves the load sites of a tiled stage.
pub(super) struct Operands<'a> {
    pub op: &'a Operator,
    /// The stage whose loads these are (a fused consumer's included).
    pub stage: usize,
    pub dims: Dims<'a>,
    pub t: &'a Tiling,
    /// Whether the stage's nest runs on the thread pool (its copies do too).
    pub parallel: bool,
    /// In the generic kernel: whether the loads [`Operands::in_place`] allows
    /// read their tensor in place (the caller has checked at run time that no
    /// tile overhangs the axes they read along).
    pub in_place: bool,
}

impl Operands<'_> {
    /// Where the load `site` reads from, as `read` asks (packed in the tile
    /// order of `order`): the decision alone, which the cost model's features
    /// read too.
    pub fn source(&self, site: &Expr, read: Read, order: &[usize]) -> Source {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        // A merged pair's tile spans rows, which the border tests of a guarded
        // read and a padded block's range test do not follow: such a load reads
        // from its pad-copy, or its whole pack.
        let merged = |m: Merge| {
            index
                .iter()
                .any(|ix| ix.terms.iter().any(|&(a, _)| a == m.a || a == m.a + 1))
        };
        let read = match read {
            Read::Guard if self.t.merge.is_some_and(merged) => Read::Direct,
            Read::PackBlock if pad.is_some() && self.t.merge.is_some_and(merged) => Read::Pack,
            // (Its prefetches are the nest's, the other's loop order the
            // copy's: the copy is the same.)
            Read::PackAhead | Read::PackInOrder => Read::Pack,
            read => read,
        };
        let pack = matches!(read, Read::Pack | Read::PackBlock);
        if !self.t.known() && !pack && self.in_place && self.in_place_axes(site).is_some() {
            return Source::Direct {
                dims: self.dims.tensor(*tensor),
            };
        }
        if !self.t.known() && !pack {
            if let Some(copy) = self.symbolic_copy(site) {
                return copy;
            }
        }
        // Otherwise the generic kernel packs: where a read may leave its tensor
        // is only known at run time, and the pack's guards handle it.
        if read == Read::PackBlock {
            let layout = self.block_layout(index, order);
            let bytes = self.op.dtype.size() as i64 * known(&product(layout.iter().map(|l| &l.2)));
            if bytes <= BLOCK_PACK_KEPT_BYTES {
                return Source::BlockPacked { layout };
            }
        }
        if pack || !self.t.known() {
            return Source::Packed {
                layout: self.pack_layout(index, order),
            };
        }
        let dims = self.known_dims(*tensor);
        let ranges = self.index_ranges(index);
        let inside = ranges
            .iter()
            .zip(&dims)
            .all(|((lo, hi), d)| *lo >= 0 && hi < d);
        let consts = || dims.iter().map(|d| IExpr::Const(*d)).collect();
        if (pad.is_none() || read == Read::Guard) && inside {
            return Source::Direct { dims: consts() };
        }
        if read == Read::Guard {
            return Source::Guarded {
                dims: consts(),
                guarded: (0..dims.len())
                    .filter(|&d| ranges[d].0 < 0 || ranges[d].1 >= dims[d])
                    .collect(),
            };
        }
        // A copy covering both the tensor and the index ranges.
        Source::Copy {
            lo: ranges.iter().map(|r| r.0.min(0)).collect(),
            dims: ranges
                .iter()
                .zip(&dims)
                .map(|((l, h), d)| IExpr::Const((*h).max(d - 1) - (*l).min(0) + 1))
                .collect(),
        }
    }

    /// In the generic kernel, a copy covering the tensor and the load's index
    /// range over whole tiles, for a load whose indices grow with every axis
    /// (so the range starts at a constant) and whose lanes, if any, are
    /// adjacent: a padded input is copied once rather than packed per tap.
    fn symbolic_copy(&self, site: &Expr) -> Option<Source> {
        let Expr::Load { tensor, index, .. } = site else {
            unreachable!("load sites are loads")
        };
        let tdims = self.dims.tensor(*tensor);
        let mut lo = Vec::new();
        let mut dims = Vec::new();
        for (d, ix) in index.iter().enumerate() {
            if ix.terms.iter().any(|&(a, c)| {
                c < 0 || (Some(a) == self.t.vector_axis() && (c != 1 || d + 1 != index.len()))
            }) {
                return None;
            }
            let l = ix.offset.min(0);
            let hi = ix
                .terms
                .iter()
                .fold(IExpr::Const(ix.offset), |acc, &(a, c)| {
                    acc.plus(self.t.max_index(a).times(IExpr::Const(c)))
                });
            lo.push(l);
            dims.push(
                hi.max(tdims[d].clone().plus(IExpr::Const(-1)))
                    .plus(IExpr::Const(1 - l)),
            );
        }
        Some(Source::Copy { lo, dims })
    }

    /// Decides where the load `site` reads from ([`Operands::source`]), adding
    /// the copy it needs to `out` (before the nest) or `block` (at the start of
    /// a block, [`Source::BlockPacked`]), and its buffer to `scratch`; `tag`
    /// names the copy.
    #[allow(clippy::too_many_arguments)]
    pub fn resolve(
        &self,
        site: &Expr,
        read: Read,
        order: &[usize],
        tag: &str,
        scratch: &mut Vec<Scratch>,
        out: &mut Vec<Stmt>,
        block: &mut Vec<BlockCopy>,
    ) -> Access {
        let Expr::Load { tensor, .. } = site else {
            unreachable!("load sites are loads")
        };
        match self.source(site, read, order) {
            source @ (Source::Direct { .. } | Source::Guarded { .. }) => Access {
                buf: buffer_name(self.op, *tensor),
                source,
            },
            Source::Copy { lo, dims } => self.pad_copy(site, lo, dims, tag, scratch, out),
            Source::Packed { layout } => {
                let in_order = read == Read::PackInOrder;
                self.pack(site, layout, in_order, tag, scratch, out)
            }
            Source::BlockPacked { layout } => self.pack_block(site, layout, tag, block),
        }
    }

    /// For a load the generic kernel may read in place, the spatial axes it
    /// reads along: an unpadded load whose every index is an axis running over
    /// exactly its dimension, each once, the vector axis (if read) indexing the
    /// innermost dimension. Its reads stay in the tensor when no tile
    /// overhangs those axes.
    pub fn in_place_axes(&self, site: &Expr) -> Option<Vec<usize>> {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        let tdims = self.op.tensor_dims(*tensor);
        let stage_axes = &self.op.stages[self.stage].axes;
        let mut axes = Vec::new();
        for (d, ix) in index.iter().enumerate() {
            let a = ix.as_axis()?;
            if stage_axes[a].extent != tdims[d] || axes.contains(&a) {
                return None;
            }
            if Some(a) == self.t.vector_axis() && d + 1 != index.len() {
                return None;
            }
            axes.push(a);
        }
        if pad.is_some() {
            return None;
        }
        Some(axes.into_iter().filter(|a| *a < self.t.n).collect())
    }

    /// The dimensions of a tensor of a specialisation.
    fn known_dims(&self, t: TensorRef) -> Vec<i64> {
        self.dims.tensor(t).iter().map(known).collect()
    }

    /// Per dimension of a load, the range of its index over every computed
    /// point, overhanging tiles included.
    fn index_ranges(&self, index: &[Affine]) -> Vec<(i64, i64)> {
        index
            .iter()
            .map(|ix| {
                ix.terms
                    .iter()
                    .fold((ix.offset, ix.offset), |(lo, hi), &(a, c)| {
                        let span = c * self.t.max_value(a);
                        (lo + span.min(0), hi + span.max(0))
                    })
            })
            .collect()
    }

    /// Copies the operand into a buffer whose dimension `d` covers indices
    /// `lo[d]..lo[d] + cdims[d]`, with the load's pad (or zero) outside the
    /// tensor.
    fn pad_copy(
        &self,
        site: &Expr,
        lo: Vec<i64>,
        copy_dims: Vec<IExpr>,
        tag: &str,
        scratch: &mut Vec<Scratch>,
        out: &mut Vec<Stmt>,
    ) -> Access {
        let Expr::Load { tensor, pad, .. } = site else {
            unreachable!("load sites are loads")
        };
        let dims = self.dims.tensor(*tensor);
        let buf = format!("cp__{tag}");
        scratch.push(Scratch {
            name: buf.clone(),
            elems: product(&copy_dims),
        });
        let vars: Vec<String> = (0..dims.len()).map(|d| format!("q{d}__{tag}")).collect();
        let src_idx: Vec<IExpr> = vars
            .iter()
            .zip(&lo)
            .map(|(v, l)| IExpr::var(v).plus(IExpr::Const(*l)))
            .collect();
        let src = buffer_name(self.op, *tensor);
        let pad = VExpr::Const(pad.unwrap_or(0.0));
        let dst: Vec<IExpr> = vars.iter().map(|v| IExpr::var(v)).collect();
        let dst = row_major_flat(&dst, &copy_dims);
        let what = format!(
            "pad-copy of {} for this stage",
            self.op.tensor_name(*tensor)
        );
        // The loops around a row: every dimension but the last (a scalar has none).
        let outer = dims.len().saturating_sub(1);
        let body = if dims.is_empty() {
            vec![Stmt::store(&buf, dst, VExpr::load(&src, IExpr::Const(0)))]
        } else {
            // A row of the copy (its last dimension) is the pad value where the
            // outer indices leave the tensor, else pad, the tensor's row, pad: its
            // middle is a plain copy with no test per element, which vectorises.
            let d = outer;
            let copy_row = |start: IExpr, end: IExpr, value: VExpr| Stmt::For {
                var: vars[d].clone(),
                start,
                end,
                step: 1,
                kind: LoopKind::Serial,
                body: vec![Stmt::store(&buf, dst.clone(), value)],
            };
            let width = copy_dims[d].clone();
            // Where `q + lo[d]` enters and leaves `0..dims[d]` (lo <= 0).
            let first = IExpr::Const(-lo[d]);
            let end = dims[d]
                .clone()
                .plus(IExpr::Const(-lo[d]))
                .min(width.clone());
            let inside = VExpr::load(&src, row_major_flat(&src_idx, &dims));
            let row = [
                copy_row(IExpr::Const(0), first.clone(), pad.clone()),
                copy_row(first, end.clone(), inside),
                copy_row(end, width.clone(), pad.clone()),
            ]
            .into_iter()
            // (Without the loops that are empty at every size.)
            .filter(|r| {
                let Stmt::For { start, end, .. } = r else {
                    unreachable!("rows are loops")
                };
                !matches!((start.as_const(), end.as_const()), (Some(a), Some(b)) if a >= b)
            })
            .collect();
            let outer_inside: Vec<(IExpr, IExpr)> = src_idx[..d]
                .iter()
                .zip(&dims)
                .flat_map(|(i, n)| [(IExpr::Const(-1), i.clone()), (i.clone(), n.clone())])
                .collect();
            if outer_inside.is_empty() {
                row
            } else {
                vec![Stmt::If {
                    conds: outer_inside,
                    then: row,
                    otherwise: vec![copy_row(IExpr::Const(0), width, pad)],
                }]
            }
        };
        out.extend(self.copy_nest(what, &vars[..outer], &copy_dims[..outer], body));
        Access {
            buf,
            source: Source::Copy {
                lo,
                dims: copy_dims,
            },
        }
    }

    /// Copies the operand into tile order: the loops of the nest that index it,
    /// outer to inner, so the register tile reads it contiguously.
    ///
    /// In the generic kernel the copy fills only what the register tiles read
    /// (the nest's own bounds over a block's tiles and a reduction block's
    /// rows: at K = 1051 in blocks of 512, and N = 262 in blocks of 8 tiles
    /// of 32, the pack was 2.9× B's size, most of it zeros), and a register
    /// tile's run that lies inside the domain is copied plainly, where GCC
    /// vectorises it; only an overhanging tile's run tests each element.
    fn pack(
        &self,
        site: &Expr,
        layout: Vec<(AxisId, Level, IExpr)>,
        in_order: bool,
        tag: &str,
        scratch: &mut Vec<Scratch>,
        out: &mut Vec<Stmt>,
    ) -> Access {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        let t = self.t;
        let buf = format!("pk__{tag}");
        let pdims: Vec<IExpr> = layout.iter().map(|l| l.2.clone()).collect();
        scratch.push(Scratch {
            name: buf.clone(),
            elems: product(&pdims),
        });
        let vars: Vec<String> = (0..layout.len()).map(|i| format!("q{i}__{tag}")).collect();
        let value_of = self.packed_axis_values(&layout, &vars, BTreeMap::new());
        let (conds, value) = self.pack_element(site, &value_of);
        let dst: Vec<IExpr> = vars.iter().map(|v| IExpr::var(v)).collect();
        let store_idx = row_major_flat(&dst, &pdims);
        let tested = vec![store_or_zero(&buf, store_idx.clone(), conds, value.clone())];
        let what = format!("pack {} in tile order", self.op.tensor_name(*tensor));
        let access = Access {
            buf: buf.clone(),
            source: Source::Packed {
                layout: layout.clone(),
            },
        };
        if t.known() {
            let loops: Vec<usize> = if in_order && t.merge.is_none() {
                self.read_order(*tensor, index, &layout)
            } else {
                (0..layout.len()).collect()
            };
            let vars: Vec<String> = loops.iter().map(|&i| vars[i].clone()).collect();
            let pdims: Vec<IExpr> = loops.iter().map(|&i| pdims[i].clone()).collect();
            out.extend(self.copy_nest(what, &vars, &pdims, tested));
            return access;
        }
        // The variable of level `level` of axis `a` in this layout.
        let var_of = |a: AxisId, level: Level| {
            let i = layout
                .iter()
                .position(|l| l.0 == a && l.1 == level)
                .expect("a pack's layout has the outer levels of its inner ones");
            IExpr::var(&vars[i])
        };
        let lanes = t.lane_reduction().map(|(r, _)| r);
        let bounds: Vec<IExpr> = layout
            .iter()
            .map(|&(a, level, ref dim)| match (level, t.reduce_axis(a)) {
                (Level::Block, _) => t.tiles_in_block(a, var_of(a, Level::Outer)),
                // (Lanes along the reduction read whole vectors of it.)
                (Level::ReduceInner, Some(r)) if Some(a) != lanes => t.inner_bound(
                    r,
                    var_of(a, Level::ReduceOuter).times(IExpr::Const(r.inner)),
                ),
                _ => dim.clone(),
            })
            .collect();
        // The run: the levels of the register tile (and lanes along the
        // reduction) the layout ends with. Inside the domain along its axes
        // (the other levels are, by their bounds), an unpadded read is inside
        // its tensor, as in the nest.
        let run = layout
            .iter()
            .rposition(|&(a, level, _)| {
                level != Level::Reg && !(level == Level::ReduceInner && Some(a) == lanes)
            })
            .map_or(0, |i| i + 1);
        if pad.is_some() || t.merge.is_some() || run == layout.len() {
            out.extend(self.copy_nest(what, &vars, &bounds, tested));
            return access;
        }
        let first = self.packed_axis_values(&layout[..run], &vars[..run], BTreeMap::new());
        let inside = layout[run..]
            .iter()
            .map(|&(a, _, ref len)| {
                let at = first.get(&a).cloned().unwrap_or(IExpr::Const(0));
                (at.plus(IExpr::Const(known(len) - 1)), t.extent(a))
            })
            .collect();
        let run_nest = |body: Vec<Stmt>| {
            (run..layout.len()).rev().fold(body, |body, i| {
                vec![Stmt::serial(&vars[i], bounds[i].clone(), body)]
            })
        };
        let plain = vec![Stmt::store(&buf, store_idx, unguarded(value))];
        let body = vec![Stmt::If {
            conds: inside,
            then: run_nest(plain),
            otherwise: run_nest(tested),
        }];
        out.extend(self.copy_nest(what, &vars[..run], &bounds[..run], body));
        access
    }

    /// The loops of a pack laid out as `layout` (indices into it), outer to
    /// inner, in the order its reads walk the tensor ([`Read::PackInOrder`]):
    /// by the elements one step of each moves through the tensor, the most
    /// outermost (ties in layout order). A loop of one iteration goes just
    /// inside the outermost longer one, so that it keeps none from the pool.
    fn read_order(
        &self,
        tensor: TensorRef,
        index: &[Affine],
        layout: &[(AxisId, Level, IExpr)],
    ) -> Vec<usize> {
        let dims = self.known_dims(tensor);
        let stride = |d: usize| dims[d + 1..].iter().product::<i64>();
        let step = |&(a, level, _): &(AxisId, Level, IExpr)| {
            let per_unit: i64 = index
                .iter()
                .enumerate()
                .flat_map(|(d, ix)| {
                    ix.terms
                        .iter()
                        .filter(move |(b, _)| *b == a)
                        .map(move |(_, c)| c.abs() * stride(d))
                })
                .sum();
            per_unit * self.level_unit(a, level)
        };
        let mut order: Vec<usize> = (0..layout.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(step(&layout[i])));
        let (ones, longer): (Vec<usize>, Vec<usize>) =
            order.into_iter().partition(|&i| known(&layout[i].2) == 1);
        match longer.split_first() {
            Some((first, rest)) => [&[*first], &ones[..], rest].concat(),
            None => ones,
        }
    }

    /// How far one step of a copy's loop of `level` moves along axis `a`.
    fn level_unit(&self, a: AxisId, level: Level) -> i64 {
        match level {
            Level::Outer => self.t.block_size(a),
            Level::Block => self.t.tile[a],
            Level::ReduceOuter => self.t.reduce_axis(a).map_or(1, |r| r.inner),
            Level::Reg | Level::ReduceInner => 1,
        }
    }

    /// Copies what one block reads of the operand into tile order, at the
    /// start of the block, into an array of the thread running it. Where the
    /// block lies inside the iteration domain and its reads inside the tensor
    /// (every block but the borders), a plain copy that vectorises along the
    /// rows it reads; else each element tested.
    fn pack_block(
        &self,
        site: &Expr,
        layout: Vec<(AxisId, Level, IExpr)>,
        tag: &str,
        block: &mut Vec<BlockCopy>,
    ) -> Access {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        let t = self.t;
        let stage = &self.op.stages[self.stage];
        let buf = format!("pk__{tag}");
        let pdims: Vec<IExpr> = layout.iter().map(|l| l.2.clone()).collect();
        let vars: Vec<String> = (0..layout.len()).map(|i| format!("q{i}__{tag}")).collect();
        // Per involved axis, its first value in the block and how many it spans.
        let mut spans: BTreeMap<AxisId, (IExpr, i64)> = BTreeMap::new();
        for &(a, level, ref ext) in &layout {
            let (first, span) = match level {
                Level::Block => (
                    IExpr::var(&tile_var("o", stage, a)).times(IExpr::Const(t.block_size(a))),
                    known(ext) * t.tile[a],
                ),
                Level::ReduceInner => (IExpr::var(&tile_var("k0", stage, a)), known(ext)),
                _ => continue,
            };
            spans.insert(a, (first, span));
        }
        let base = spans.iter().map(|(a, (f, _))| (*a, f.clone())).collect();
        let value_of = self.packed_axis_values(&layout, &vars, base);
        let (conds, value) = self.pack_element(site, &value_of);
        let dst: Vec<IExpr> = vars.iter().map(|v| IExpr::var(v)).collect();
        let store_idx = row_major_flat(&dst, &pdims);
        let last = |a: &AxisId| {
            let (f, n) = &spans[a];
            f.clone().plus(IExpr::Const(n - 1))
        };
        let mut inside: Vec<(IExpr, IExpr)> =
            spans.keys().map(|a| (last(a), self.t.extent(*a))).collect();
        if pad.is_some() {
            // The block's index range per dimension, inside the tensor.
            for (ix, dim) in index.iter().zip(self.dims.tensor(*tensor)) {
                let (mut lo, mut hi) = (IExpr::Const(ix.offset), IExpr::Const(ix.offset));
                for &(a, c) in &ix.terms {
                    let (at_lo, at_hi) = if c > 0 {
                        (spans[&a].0.clone(), last(&a))
                    } else {
                        (last(&a), spans[&a].0.clone())
                    };
                    lo = lo.plus(at_lo.times(IExpr::Const(c)));
                    hi = hi.plus(at_hi.times(IExpr::Const(c)));
                }
                inside.push((IExpr::Const(-1), lo));
                inside.push((hi, dim));
            }
        }
        // The copy loops read the tensor in its own order: a dimension whose
        // axis indexes an outer dimension of the tensor runs outside, and the
        // register tile's run (contiguous in both) innermost; a tile-ordered
        // walk would read one cache line of each of many far-apart rows.
        let outermost_dim = |a: AxisId| {
            index
                .iter()
                .position(|ix| ix.terms.iter().any(|(b, _)| *b == a))
                .unwrap_or(index.len())
        };
        let mut walk: Vec<usize> = (0..layout.len()).collect();
        walk.sort_by_key(|&i| (outermost_dim(layout[i].0), layout[i].1 == Level::Reg));
        let nest = |dims: &[IExpr], body: Vec<Stmt>| {
            walk.iter().rev().fold(body, |body, &i| {
                vec![Stmt::serial(&vars[i], dims[i].clone(), body)]
            })
        };
        // In the generic kernel a border block fills only what its register
        // tiles read: the loops' own bounds over the reduction's rows and the
        // block's tiles. (A small call's block lies mostly past both: at
        // K = 14 a 511-row block zeroed 497 rows, 8× the call's work.)
        let generic = !t.known();
        let filled: Vec<IExpr> = layout
            .iter()
            .zip(&pdims)
            .map(|(&(a, level, _), dim)| match level {
                Level::ReduceInner if generic => t.reduce_axis(a).map_or(dim.clone(), |r| {
                    t.inner_bound(r, IExpr::var(&tile_var("k0", stage, a)))
                }),
                Level::Block if generic => {
                    t.tiles_in_block(a, IExpr::var(&tile_var("o", stage, a)))
                }
                _ => dim.clone(),
            })
            .collect();
        let plain = vec![Stmt::store(
            &buf,
            store_idx.clone(),
            unguarded(value.clone()),
        )];
        let tested = vec![store_or_zero(&buf, store_idx, conds, value)];
        let elems = known(&product(&pdims));
        block.push(BlockCopy {
            axes: spans.keys().copied().collect(),
            elems,
            code: vec![
                Stmt::Array {
                    name: buf.clone(),
                    elems,
                    kept: self.op.dtype.size() as i64 * elems > BLOCK_PACK_BYTES,
                },
                Stmt::Comment(format!(
                    "pack {} for this block in tile order",
                    self.op.tensor_name(*tensor)
                )),
                Stmt::If {
                    conds: inside,
                    then: nest(&pdims, plain),
                    otherwise: nest(&filled, tested),
                },
            ],
        });
        Access {
            buf,
            source: Source::BlockPacked { layout },
        }
    }

    /// The element a pack stores where the involved axes have the values
    /// `value_of`: under the returned conditions the load's value (read as
    /// the load reads, its pad value outside the tensor), else zero.
    fn pack_element(
        &self,
        site: &Expr,
        value_of: &BTreeMap<AxisId, IExpr>,
    ) -> (Vec<(IExpr, IExpr)>, VExpr) {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        // A pack is laid out along the tiling's axes: a merged pair's own
        // values come from its merged index (inside the domain where read).
        let mut own = value_of.clone();
        if let Some(m) = self.t.merge {
            if let Some(at) = value_of.get(&(m.a + 1)) {
                own.insert(m.a + 1, at.clone().modulo(m.ext_b));
                own.insert(m.a, at.clone().floor_div(m.ext_b));
            }
        }
        let src_idx: Vec<IExpr> = index
            .iter()
            .map(|ix| {
                ix.terms
                    .iter()
                    .fold(IExpr::Const(ix.offset), |acc, (a, c)| {
                        acc.plus(own[a].clone().times(IExpr::Const(*c)))
                    })
            })
            .collect();
        // Positions outside the iteration domain are never read into stored
        // results; they hold zeros.
        let mut conds: Vec<(IExpr, IExpr)> = value_of
            .iter()
            .map(|(a, e)| (e.clone(), self.t.extent(*a)))
            .collect();
        let load = guarded_load(
            &buffer_name(self.op, *tensor),
            &src_idx,
            &self.dims.tensor(*tensor),
            pad.unwrap_or(0.0),
        );
        let value = match pad {
            // Inside the domain, a padded read outside the tensor reads the pad value.
            Some(_) => load,
            None => {
                let VExpr::Load { guard, .. } = &load else {
                    unreachable!("built as a load above")
                };
                conds.extend(guard.iter().map(|g| (g.index.clone(), g.bound.clone())));
                unguarded(load)
            }
        };
        (conds, value)
    }

    /// The dimensions of a packed copy: the levels of the nest whose axes the
    /// load's `index` involves, outer to inner, each with its extent.
    fn pack_layout(&self, index: &[Affine], order: &[usize]) -> Vec<(AxisId, Level, IExpr)> {
        let t = self.t;
        let reads = |a: AxisId| index.iter().any(|ix| ix.terms.iter().any(|(b, _)| *b == a));
        // A merged pair is laid out along its second axis, the tiling's.
        let involved = |a: AxisId| match t.merge {
            Some(m) if a == m.a => false,
            Some(m) if a == m.a + 1 => reads(m.a) || reads(m.a + 1),
            _ => reads(a),
        };
        let mut layout = Vec::new();
        for &a in order.iter().filter(|a| involved(**a)) {
            layout.push((a, Level::Outer, t.outer[a].clone()));
        }
        for r in t.red.iter().filter(|r| involved(r.axis)) {
            layout.push((r.axis, Level::ReduceOuter, r.outer.clone()));
        }
        // A block may hold more tiles than the extent has (a specialisation's
        // or the call's, in the generic kernel): the pack holds only the tiles
        // the extent fills. So may a reduction split, in the generic kernel.
        let generic = !t.known();
        for &a in order.iter().filter(|a| involved(**a)) {
            layout.push((
                a,
                Level::Block,
                match t.ext[a].as_const() {
                    Some(e) => IExpr::Const(ceil_div(e, t.tile[a]).min(t.block[a])),
                    None => IExpr::Const(t.block[a]).min(t.ext[a].clone().ceil_div(t.tile[a])),
                },
            ));
        }
        // Lanes along a reduction read their axis innermost, whole vectors of
        // it (its block's full length, a constant the loads' offsets need).
        let lanes = t.lane_reduction().map(|(r, _)| r);
        for r in t
            .red
            .iter()
            .filter(|r| involved(r.axis) && Some(r.axis) != lanes)
        {
            let inner = IExpr::Const(r.inner);
            layout.push((
                r.axis,
                Level::ReduceInner,
                if generic {
                    inner.min(r.extent.clone())
                } else {
                    inner
                },
            ));
        }
        for a in t.reg_order(order).into_iter().filter(|a| involved(*a)) {
            layout.push((a, Level::Reg, IExpr::Const(t.tile[a])));
        }
        if let Some(r) = t
            .red
            .iter()
            .find(|r| involved(r.axis) && Some(r.axis) == lanes)
        {
            layout.push((r.axis, Level::ReduceInner, IExpr::Const(r.inner)));
        }
        layout
    }

    /// The layout of a [`Source::BlockPacked`] copy: [`Operands::pack_layout`]'s
    /// levels inside the outer ones, with the constant extents of a block.
    fn block_layout(&self, index: &[Affine], order: &[usize]) -> Vec<(AxisId, Level, IExpr)> {
        let t = self.t;
        self.pack_layout(index, order)
            .into_iter()
            .filter_map(|(a, level, ext)| {
                let n = match level {
                    Level::Outer | Level::ReduceOuter => return None,
                    // (The call's extent, in the generic kernel: a block's.)
                    Level::Block => ext.as_const().unwrap_or(t.block[a]),
                    Level::ReduceInner => t.reduce_axis(a).map_or(1, |r| r.inner),
                    Level::Reg => known(&ext),
                };
                Some((a, level, IExpr::Const(n)))
            })
            .collect()
    }

    /// The value of each involved axis at a packed position, whose coordinate
    /// along dimension `i` of `layout` is the copy loop's variable `vars[i]`,
    /// plus its value in `base` (a block's first).
    fn packed_axis_values(
        &self,
        layout: &[(AxisId, Level, IExpr)],
        vars: &[String],
        base: BTreeMap<AxisId, IExpr>,
    ) -> BTreeMap<AxisId, IExpr> {
        let mut value_of = base;
        for (i, &(a, level, _)) in layout.iter().enumerate() {
            let v = IExpr::var(&vars[i]);
            let term = v.times(IExpr::Const(self.level_unit(a, level)));
            let e = value_of.remove(&a).unwrap_or(IExpr::Const(0)).plus(term);
            value_of.insert(a, e);
        }
        value_of
    }

    /// The loops of a copy (one per variable, outer first) around `body`, with a
    /// comment; on the pool when the stage's nest is parallel.
    fn copy_nest(
        &self,
        what: String,
        vars: &[String],
        extents: &[IExpr],
        body: Vec<Stmt>,
    ) -> Vec<Stmt> {
        let mut body = body;
        for (v, e) in vars.iter().zip(extents).rev() {
            body = vec![Stmt::serial(v, e.clone(), body)];
        }
        let mut out = vec![Stmt::Comment(what)];
        out.extend(self.maybe_parallel(body));
        out
    }

    /// Copy loops run on the pool too when the stage's nest is parallel.
    fn maybe_parallel(&self, body: Vec<Stmt>) -> Vec<Stmt> {
        match (self.parallel, <[Stmt; 1]>::try_from(body)) {
            (
                true,
                Ok(
                    [Stmt::For {
                        var,
                        start: IExpr::Const(0),
                        end,
                        step: 1,
                        body,
                        ..
                    }],
                ),
            ) if end.as_const().is_none_or(|e| e > 1) => {
                vec![Stmt::Parallel {
                    var,
                    extent: end,
                    body,
                }]
            }
            (_, Ok(one)) => one.into(),
            (_, Err(body)) => body,
        }
    }
}

/// `buf[index] = value` where every one of `conds` holds, else zero: a pack's
/// element, zero outside the iteration domain.
fn store_or_zero(buf: &str, index: IExpr, conds: Vec<(IExpr, IExpr)>, value: VExpr) -> Stmt {
    Stmt::If {
        conds,
        then: vec![Stmt::store(buf, index.clone(), value)],
        otherwise: vec![Stmt::store(buf, index, VExpr::Const(0.0))],
    }
}

/// `load` without its guard: a read known to stay inside its buffer.
fn unguarded(load: VExpr) -> VExpr {
    match load {
        VExpr::Load { buf, index, .. } => VExpr::load(&buf, index),
        other => other,
    }
}

/// A scalar read of `buf` at per-dimension indices, `pad` outside its `dims`.
fn guarded_load(buf: &str, idx: &[IExpr], dims: &[IExpr], pad: f64) -> VExpr {
    VExpr::Load {
        buf: buf.to_string(),
        index: row_major_flat(idx, dims),
        guard: idx
            .iter()
            .zip(dims)
            .map(|(i, d)| Guard {
                index: i.clone(),
                lane_step: 0,
                bound: d.clone(),
            })
            .collect(),
        pad,
        lanes: 1,
        stride: 1,
    }
}
