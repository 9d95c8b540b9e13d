//! Tiled lowering of one stage with a [`StagePlan`]: the schedule primitives of
//! the space, applied to the loop nest.
//!
//! ```text
//! [pack / pad-copy operands]                       cache-read, padding
//! for o_* (outer tiles; leading ones fused, parallel)    split, reorder, fuse, parallel
//!   for ro_* (outer reduction blocks)                    split of reduction axes
//!     for b_* (register tiles of the block)
//!       acc = identity | partial sums of earlier blocks  cache-write (register tile)
//!       for ri_* (inner reduction, last one unrolled)    unroll
//!         acc = combine(acc, body)  for every element    vectorize (one spatial axis)
//!       store f(acc) [+ fused consumer]                  inline / compute-at
//! ```
//!
//! All extents are constants (this path serves specialisations only). Tiles
//! that overhang the stage are computed whole and stored partially; every load
//! they make stays inside its buffer because operands whose index range would
//! leave the buffer (or that are padded) are first copied into a buffer that
//! covers the range, with the padding materialised. So no innermost loop
//! branches on bounds.

use std::collections::BTreeMap;

use autotune_lang::ir::{Affine, AxisId, Expr, Operator, Stage, TensorRef};

use super::naive::Lowerer;
use super::names::buffer_name;
use crate::loopnest::{IExpr, LoopKind, Scratch, Stmt, VExpr};
use crate::space::StagePlan;
use autotune_lang::analysis::{load_sites, single_reduction, Reduction};

/// Where a load reads from.
#[derive(Clone, Debug)]
enum Source {
    /// The tensor itself, row-major with these dimensions.
    Direct { dims: Vec<i64> },
    /// A copy whose dimension `d` covers indices `lo[d]..lo[d] + dims[d]`.
    Copy { lo: Vec<i64>, dims: Vec<i64> },
    /// A tile-ordered copy; dimensions from outer to inner.
    Packed { layout: Vec<(AxisId, Level, i64)> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Outer,
    Block,
    Reg,
    ReduceOuter,
    ReduceInner,
}

#[derive(Clone, Debug)]
struct Access {
    buf: String,
    source: Source,
}

/// Geometry of the tiled stage.
struct Tiling {
    n: usize,
    /// Spatial: extent, tile, tiles per block, outer count.
    ext: Vec<i64>,
    tile: Vec<i64>,
    block: Vec<i64>,
    outer: Vec<i64>,
    /// Reduction axes with extent, inner block, outer count.
    red: Vec<(AxisId, i64, i64, i64)>,
    vector: Option<(usize, usize)>,
}

impl Tiling {
    fn block_size(&self, a: usize) -> i64 {
        self.tile[a] * self.block[a]
    }

    /// Largest value axis `a` takes in computed (possibly overhanging) tiles.
    fn max_value(&self, a: AxisId) -> i64 {
        if a < self.n {
            ceil_div(self.ext[a], self.tile[a]) * self.tile[a] - 1
        } else {
            self.red.iter().find(|r| r.0 == a).map_or(0, |r| r.1 - 1)
        }
    }

    fn may_overhang(&self, a: usize) -> bool {
        self.ext[a] % self.tile[a] != 0
    }

    /// Spatial axes inside the register tile: plan order with the vector axis last.
    fn reg_order(&self, order: &[usize]) -> Vec<usize> {
        let mut o: Vec<usize> = order
            .iter()
            .copied()
            .filter(|a| Some(*a) != self.vector.map(|v| v.0))
            .collect();
        if let Some((v, _)) = self.vector {
            o.push(v);
        }
        o
    }

    fn lanes(&self) -> usize {
        self.vector.map_or(1, |v| v.1)
    }
}

/// A scalar read of `buf` at per-dimension indices, `pad` outside its `dims`.
fn guarded_load(buf: &str, idx: &[IExpr], dims: &[i64], pad: f64) -> VExpr {
    VExpr::Load {
        buf: buf.to_string(),
        index: row_major_flat(idx, dims),
        guard: idx
            .iter()
            .zip(dims)
            .map(|(i, d)| (i.clone(), IExpr::Const(*d)))
            .collect(),
        pad,
        lanes: 1,
        stride: 1,
    }
}

/// Load sites of `e`, not descending into reductions.
fn collect_outside_reduce<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Load { .. } => out.push(e),
        Expr::Unary(_, a) => collect_outside_reduce(a, out),
        Expr::Binary(_, a, b) => {
            collect_outside_reduce(a, out);
            collect_outside_reduce(b, out);
        }
        Expr::Const(_) | Expr::ShapeValue(_) | Expr::Reduce { .. } => {}
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

fn row_major_flat(idx: &[IExpr], dims: &[i64]) -> IExpr {
    idx.iter().zip(dims).fold(IExpr::Const(0), |acc, (i, d)| {
        acc.times(IExpr::Const(*d)).plus(i.clone())
    })
}

/// Stride of a dimension in a row-major layout.
fn stride(dims: &[i64], d: usize) -> i64 {
    dims[d + 1..].iter().product()
}

/// A tile-loop variable of the generated code: `o__i` (outer tile), `b__i`
/// (register tile in the block), `base__i` (the tile's first index), `ro__k` /
/// `ri__k` (outer / inner reduction block), `k0__k` (the block's first index).
/// All contain `__`, which user names never do.
fn tile_var(kind: &str, stage: &Stage, a: usize) -> String {
    format!("{kind}__{}", stage.axes[a].name)
}

/// A point of the iteration space inside the register tile: per spatial axis
/// its offset in the tile, per reduction axis its unroll offset.
#[derive(Clone)]
struct Point {
    offset: Vec<i64>,
    unroll: i64,
    /// The innermost reduction axis (which the unroll offset applies to).
    last_reduce: Option<AxisId>,
}

struct StageLowerer<'a> {
    op: &'a Operator,
    /// The stage being lowered.
    s: usize,
    /// Whether the nest runs on the thread pool.
    parallel: bool,
    shapes: &'a [i64],
    stage: &'a Stage,
    t: Tiling,
    /// Access per load site, keyed by the address of its `Expr::Load`.
    accesses: Vec<(*const Expr, Access)>,
}

/// Lowers stage `s` of `op` (and the consumer fused into it) with `plan`,
/// adding the buffers it allocates to `scratch`.
pub(crate) fn lower_stage(
    op: &Operator,
    shapes: &[i64],
    s: usize,
    plan: &StagePlan,
    consumer: Option<usize>,
    scratch: &mut Vec<Scratch>,
) -> Vec<Stmt> {
    let stage = &op.stages[s];
    let reduction = match single_reduction(&stage.body) {
        Reduction::One(r) => Some(r),
        Reduction::None => None,
        Reduction::Several => {
            unreachable!("stages with several reductions keep the default schedule")
        }
    };
    let red_axes: Vec<AxisId> = match reduction {
        Some(Expr::Reduce { axes, .. }) => axes.clone(),
        _ => Vec::new(),
    };
    let n = stage.n_spatial;
    let ext: Vec<i64> = (0..n).map(|a| stage.axes[a].extent.value(shapes)).collect();
    let red: Vec<(AxisId, i64, i64, i64)> = red_axes
        .iter()
        .zip(&plan.split)
        .map(|(&a, &k)| {
            let e = stage.axes[a].extent.value(shapes);
            let k = k.clamp(1, e.max(1));
            (a, e, k, ceil_div(e, k))
        })
        .collect();
    // Empty iteration spaces keep the default lowering (a reduction over nothing
    // must still store its identity, which the tiled nest would skip).
    if ext.contains(&0) || red.iter().any(|r| r.1 == 0) {
        let mut l = Lowerer::new(op, Some(shapes));
        let mut out = Vec::new();
        if consumer.is_some() {
            scratch.push(Scratch {
                name: buffer_name(op, TensorRef::Stage(s)),
                elems: IExpr::Const(stage.dims.iter().map(|d| d.value(shapes)).product()),
            });
        }
        out.extend(l.stage(s, stage));
        if let Some(c) = consumer {
            out.extend(l.stage(c, &op.stages[c]));
        }
        return out;
    }
    let tile: Vec<i64> = plan.tile.iter().map(|t| (*t).max(1)).collect();
    let block: Vec<i64> = plan.block.iter().map(|b| (*b).max(1)).collect();
    let outer = (0..n)
        .map(|a| ceil_div(ext[a], tile[a] * block[a]))
        .collect();
    let t = Tiling {
        n,
        ext,
        tile,
        block,
        outer,
        red,
        vector: plan.vector.filter(|(a, _)| *a < n),
    };
    let mut l = StageLowerer {
        op,
        s,
        parallel: plan.parallel > 0,
        shapes,
        stage,
        t,
        accesses: Vec::new(),
    };
    let mut out = vec![Stmt::Comment(format!(
        "stage {}: tiled {}",
        op.tensor_name(TensorRef::Stage(s)),
        l.describe(plan, consumer)
    ))];
    // Resolve every load: the stage's own, then the fused consumer's.
    let own_sites = load_sites(&stage.body);
    for (i, site) in own_sites.iter().enumerate() {
        let pack = plan.pack.get(i).copied().unwrap_or(false);
        let acc = l.resolve(
            site,
            pack,
            &plan.order,
            &format!("{s}_{i}"),
            scratch,
            &mut out,
        );
        l.accesses.push((*site as *const Expr, acc));
    }
    if let Some(c) = consumer {
        for (i, site) in load_sites(&op.stages[c].body).iter().enumerate() {
            if matches!(site, Expr::Load { tensor: TensorRef::Stage(t), .. } if *t == s) {
                continue;
            }
            let acc = l.resolve(
                site,
                false,
                &plan.order,
                &format!("{c}_{i}"),
                scratch,
                &mut out,
            );
            l.accesses.push((*site as *const Expr, acc));
        }
    }
    let target = consumer.unwrap_or(s);
    out.extend(l.nest(plan, reduction, consumer, target));
    out
}

impl StageLowerer<'_> {
    /// The loops of a copy (one per variable, outer first) around `body`, with a
    /// comment; on the pool when the stage's nest is parallel.
    fn copy_nest(
        &self,
        what: String,
        vars: &[String],
        extents: &[i64],
        body: Vec<Stmt>,
    ) -> Vec<Stmt> {
        let mut body = body;
        for (v, e) in vars.iter().zip(extents).rev() {
            body = vec![Stmt::serial(v, IExpr::Const(*e), body)];
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
            ) if end.as_const().is_some_and(|e| e > 1) => {
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

    fn describe(&self, plan: &StagePlan, consumer: Option<usize>) -> String {
        let t = &self.t;
        let axes = |f: &dyn Fn(usize) -> String| {
            plan.order
                .iter()
                .map(|a| f(*a))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut s = format!(
            "(tile {}; block {}",
            axes(&|a| format!("{}={}", self.stage.axes[a].name, t.tile[a])),
            axes(&|a| format!("{}={}", self.stage.axes[a].name, t.block[a]))
        );
        for (a, _, k, _) in &t.red {
            s += &format!("; split {}={k}", self.stage.axes[*a].name);
        }
        if let Some((v, w)) = t.vector {
            s += &format!("; vector {}x{w}", self.stage.axes[v].name);
        }
        s += &format!("; unroll {}; parallel {}", plan.unroll, plan.parallel);
        if let Some(c) = consumer {
            s += &format!("; fused {}", self.op.tensor_name(TensorRef::Stage(c)));
        }
        s + ")"
    }

    /// Decides where a load reads from, emitting the copy or packing code.
    fn resolve(
        &self,
        site: &Expr,
        pack: bool,
        order: &[usize],
        tag: &str,
        scratch: &mut Vec<Scratch>,
        out: &mut Vec<Stmt>,
    ) -> Access {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        let dims: Vec<i64> = self
            .op
            .tensor_dims(*tensor)
            .iter()
            .map(|d| d.value(self.shapes))
            .collect();
        let src = buffer_name(self.op, *tensor);
        if pack {
            return self.pack(site, &dims, order, tag, scratch, out);
        }
        // The index range over every computed point, overhanging tiles included.
        let ranges: Vec<(i64, i64)> = index
            .iter()
            .map(|ix| {
                ix.terms
                    .iter()
                    .fold((ix.offset, ix.offset), |(lo, hi), &(a, c)| {
                        let span = c * self.t.max_value(a);
                        (lo + span.min(0), hi + span.max(0))
                    })
            })
            .collect();
        let inside = ranges
            .iter()
            .zip(&dims)
            .all(|((lo, hi), d)| *lo >= 0 && hi < d);
        if pad.is_none() && inside {
            return Access {
                buf: src,
                source: Source::Direct { dims },
            };
        }
        // Copy into a buffer covering both the tensor and the index range.
        let lo: Vec<i64> = ranges.iter().map(|r| r.0.min(0)).collect();
        let cdims: Vec<i64> = ranges
            .iter()
            .zip(&dims)
            .map(|((l, h), d)| (*h).max(d - 1) - (*l).min(0) + 1)
            .collect();
        let buf = format!("cp__{tag}");
        scratch.push(Scratch {
            name: buf.clone(),
            elems: IExpr::Const(cdims.iter().product()),
        });
        let vars: Vec<String> = (0..dims.len()).map(|d| format!("q{d}__{tag}")).collect();
        let src_idx: Vec<IExpr> = vars
            .iter()
            .zip(&lo)
            .map(|(v, l)| IExpr::var(v).plus(IExpr::Const(*l)))
            .collect();
        let value = guarded_load(&src, &src_idx, &dims, pad.unwrap_or(0.0));
        let dst: Vec<IExpr> = vars.iter().map(|v| IExpr::var(v)).collect();
        let body = vec![Stmt::store(&buf, row_major_flat(&dst, &cdims), value)];
        let what = format!(
            "pad-copy of {} for this stage",
            self.op.tensor_name(*tensor)
        );
        out.extend(self.copy_nest(what, &vars, &cdims, body));
        Access {
            buf,
            source: Source::Copy { lo, dims: cdims },
        }
    }

    /// Copies the operand into tile order: the loops of the nest that index it,
    /// outer to inner, so the register tile reads it contiguously.
    fn pack(
        &self,
        site: &Expr,
        dims: &[i64],
        order: &[usize],
        tag: &str,
        scratch: &mut Vec<Scratch>,
        out: &mut Vec<Stmt>,
    ) -> Access {
        let Expr::Load { tensor, index, pad } = site else {
            unreachable!("load sites are loads")
        };
        let t = &self.t;
        let involved = |a: AxisId| index.iter().any(|ix| ix.terms.iter().any(|(b, _)| *b == a));
        let mut layout = Vec::new();
        for &a in order.iter().filter(|a| involved(**a)) {
            layout.push((a, Level::Outer, t.outer[a]));
        }
        for &(a, _, _, ro) in t.red.iter().filter(|r| involved(r.0)) {
            layout.push((a, Level::ReduceOuter, ro));
        }
        for &a in order.iter().filter(|a| involved(**a)) {
            layout.push((a, Level::Block, t.block[a]));
        }
        for &(a, _, k, _) in t.red.iter().filter(|r| involved(r.0)) {
            layout.push((a, Level::ReduceInner, k));
        }
        for a in t.reg_order(order).into_iter().filter(|a| involved(*a)) {
            layout.push((a, Level::Reg, t.tile[a]));
        }
        let buf = format!("pk__{tag}");
        let size: i64 = layout.iter().map(|l| l.2).product();
        scratch.push(Scratch {
            name: buf.clone(),
            elems: IExpr::Const(size),
        });
        let vars: Vec<String> = (0..layout.len()).map(|i| format!("q{i}__{tag}")).collect();
        // The value of each involved axis at a packed position.
        let mut value_of: BTreeMap<AxisId, IExpr> = BTreeMap::new();
        for (i, &(a, level, _)) in layout.iter().enumerate() {
            let v = IExpr::var(&vars[i]);
            let term = match level {
                Level::Outer => v.times(IExpr::Const(t.block_size(a))),
                Level::Block => v.times(IExpr::Const(t.tile[a])),
                Level::ReduceOuter => {
                    let k = t.red.iter().find(|r| r.0 == a).map_or(1, |r| r.2);
                    v.times(IExpr::Const(k))
                }
                Level::Reg | Level::ReduceInner => v,
            };
            let e = value_of.remove(&a).unwrap_or(IExpr::Const(0)).plus(term);
            value_of.insert(a, e);
        }
        let src_idx: Vec<IExpr> = index
            .iter()
            .map(|ix| {
                ix.terms
                    .iter()
                    .fold(IExpr::Const(ix.offset), |acc, (a, c)| {
                        acc.plus(value_of[a].clone().times(IExpr::Const(*c)))
                    })
            })
            .collect();
        // Positions outside the iteration domain are never read into stored
        // results; they hold zeros.
        let mut guard: Vec<(IExpr, IExpr)> = value_of
            .iter()
            .map(|(a, e)| {
                let ext = if *a < t.n {
                    t.ext[*a]
                } else {
                    t.red.iter().find(|r| r.0 == *a).map_or(0, |r| r.1)
                };
                (e.clone(), IExpr::Const(ext))
            })
            .collect();
        let load = guarded_load(
            &buffer_name(self.op, *tensor),
            &src_idx,
            dims,
            pad.unwrap_or(0.0),
        );
        let inner = match pad {
            // Inside the domain, a padded read outside the tensor reads the pad value.
            Some(_) => load,
            None => {
                let VExpr::Load {
                    buf,
                    index,
                    guard: g,
                    ..
                } = load
                else {
                    unreachable!("built as a load above")
                };
                guard.extend(g);
                VExpr::load(&buf, index)
            }
        };
        let dst: Vec<IExpr> = vars.iter().map(|v| IExpr::var(v)).collect();
        let pdims: Vec<i64> = layout.iter().map(|l| l.2).collect();
        let store_idx = row_major_flat(&dst, &pdims);
        let body = vec![Stmt::If {
            conds: guard,
            then: vec![Stmt::store(&buf, store_idx.clone(), inner)],
            otherwise: vec![Stmt::store(&buf, store_idx, VExpr::Const(0.0))],
        }];
        let what = format!("pack {} in tile order", self.op.tensor_name(*tensor));
        out.extend(self.copy_nest(what, &vars, &pdims, body));
        Access {
            buf,
            source: Source::Packed { layout },
        }
    }

    /// Index (at lane 0) and lane stride of a load at a point.
    fn load_index(&self, acc: &Access, index: &[Affine], p: &Point) -> (IExpr, i64) {
        let stage = self.stage;
        let vec_axis = self.t.vector.map(|v| v.0);
        match &acc.source {
            Source::Direct { dims } | Source::Copy { dims, .. } => {
                let lo = match &acc.source {
                    Source::Copy { lo, .. } => lo.clone(),
                    _ => vec![0; dims.len()],
                };
                let mut flat = IExpr::Const(0);
                let mut lane_stride = 0;
                for (d, ix) in index.iter().enumerate() {
                    let mut e = IExpr::Const(ix.offset - lo[d]);
                    for &(a, c) in &ix.terms {
                        e = e.plus(self.axis_value(a, p).times(IExpr::Const(c)));
                        if Some(a) == vec_axis {
                            lane_stride += c * stride(dims, d);
                        }
                    }
                    flat = flat.times(IExpr::Const(dims[d])).plus(e);
                }
                (flat, lane_stride)
            }
            Source::Packed { layout } => {
                let mut flat = IExpr::Const(0);
                let mut lane_stride = 0;
                for (i, &(a, level, ext)) in layout.iter().enumerate() {
                    let v = match level {
                        Level::Outer => IExpr::var(&tile_var("o", stage, a)),
                        Level::Block => IExpr::var(&tile_var("b", stage, a)),
                        Level::Reg => IExpr::Const(p.offset[a]),
                        Level::ReduceOuter => IExpr::var(&tile_var("ro", stage, a)),
                        Level::ReduceInner => {
                            let u = if p.last_reduce == Some(a) {
                                p.unroll
                            } else {
                                0
                            };
                            IExpr::var(&tile_var("ri", stage, a)).plus(IExpr::Const(u))
                        }
                    };
                    if level == Level::Reg && Some(a) == vec_axis {
                        lane_stride = layout[i + 1..].iter().map(|l| l.2).product();
                    }
                    flat = flat.times(IExpr::Const(ext)).plus(v);
                }
                (flat, lane_stride)
            }
        }
    }

    /// The value of an axis at a point (lane 0 for the vector axis).
    fn axis_value(&self, a: AxisId, p: &Point) -> IExpr {
        let stage = self.stage;
        if a < self.t.n {
            IExpr::var(&tile_var("base", stage, a)).plus(IExpr::Const(p.offset[a]))
        } else {
            let u = if p.last_reduce == Some(a) {
                p.unroll
            } else {
                0
            };
            IExpr::var(&tile_var("k0", stage, a))
                .plus(IExpr::var(&tile_var("ri", stage, a)))
                .plus(IExpr::Const(u))
        }
    }

    /// The part of a load's flat index that a point's tile offset and unroll
    /// offset contribute: a constant.
    fn load_delta(&self, acc: &Access, index: &[Affine], p: &Point) -> i64 {
        let vary = |a: AxisId| -> i64 {
            if a < self.t.n {
                p.offset[a]
            } else if p.last_reduce == Some(a) {
                p.unroll
            } else {
                0
            }
        };
        match &acc.source {
            Source::Direct { dims } | Source::Copy { dims, .. } => index
                .iter()
                .enumerate()
                .map(|(d, ix)| {
                    ix.terms.iter().map(|&(a, c)| c * vary(a)).sum::<i64>() * stride(dims, d)
                })
                .sum(),
            Source::Packed { layout } => layout
                .iter()
                .enumerate()
                .map(|(i, &(a, level, _))| {
                    let v = match level {
                        Level::Reg => p.offset[a],
                        Level::ReduceInner if p.last_reduce == Some(a) => p.unroll,
                        _ => 0,
                    };
                    v * layout[i + 1..].iter().map(|l| l.2).product::<i64>()
                })
                .sum(),
        }
    }

    /// The `const int64_t` holding a load site's index at the tile origin.
    fn site_var(&self, e: &Expr) -> String {
        let k = self
            .accesses
            .iter()
            .position(|(p, _)| std::ptr::eq(*p, e))
            .expect("every load site is resolved");
        format!("ix__{k}")
    }

    /// `Let`s of the origin index of every load site in `e` (not the producer's).
    fn base_lets(&self, e: &Expr, producer: Option<usize>) -> Vec<Stmt> {
        let origin = Point {
            offset: vec![0; self.t.n],
            unroll: 0,
            last_reduce: self.t.red.last().map(|r| r.0),
        };
        // Loads under a reduction live in the reduction loops, which have their own.
        let mut sites = Vec::new();
        collect_outside_reduce(e, &mut sites);
        sites
            .into_iter()
            .filter(|l| !matches!(l, Expr::Load { tensor: TensorRef::Stage(t), .. } if Some(*t) == producer))
            .map(|l| {
                let Expr::Load { index, .. } = l else { unreachable!("load sites are loads") };
                Stmt::Let {
                    name: self.site_var(l),
                    value: self.load_index(self.access_of(l), index, &origin).0,
                }
            })
            .collect()
    }

    fn access_of(&self, e: &Expr) -> &Access {
        &self
            .accesses
            .iter()
            .find(|(p, _)| std::ptr::eq(*p, e))
            .expect("every load site is resolved")
            .1
    }

    /// An expression at a point, with lanes along the vector axis; the
    /// reduction node (and, in a consumer, the producer's value) is `acc`.
    fn value(&self, e: &Expr, p: &Point, acc: &VExpr, producer: Option<usize>) -> VExpr {
        let lanes = self.t.lanes();
        match e {
            Expr::Const(c) => VExpr::Const(*c),
            Expr::ShapeValue(v) => VExpr::FromIndex(IExpr::Const(self.shapes[*v])),
            Expr::Load {
                tensor: TensorRef::Stage(t),
                ..
            } if Some(*t) == producer => acc.clone(),
            Expr::Load { index, .. } => {
                let access = self.access_of(e);
                let (_, stride) = self.load_index(access, index, p);
                // The site's index at the tile origin (a `Let` of `base_lets`) plus
                // this point's constant offset.
                let index = IExpr::var(&self.site_var(e))
                    .plus(IExpr::Const(self.load_delta(access, index, p)));
                VExpr::Load {
                    buf: access.buf.clone(),
                    index,
                    guard: Vec::new(),
                    pad: 0.0,
                    lanes: if stride == 0 { 1 } else { lanes },
                    stride,
                }
            }
            Expr::Unary(op, a) => VExpr::Unary(*op, Box::new(self.value(a, p, acc, producer))),
            Expr::Binary(op, a, b) => VExpr::Binary(
                *op,
                Box::new(self.value(a, p, acc, producer)),
                Box::new(self.value(b, p, acc, producer)),
            ),
            Expr::Reduce { .. } => acc.clone(),
        }
    }

    /// Index and lane stride of the element at `offset` in the output buffer.
    fn target_index(&self, target_dims: &[i64], p: &Point) -> (IExpr, i64) {
        let mut flat = IExpr::Const(0);
        for (d, dim) in target_dims.iter().enumerate() {
            flat = flat.times(IExpr::Const(*dim)).plus(self.axis_value(d, p));
        }
        let lane_stride = self.t.vector.map_or(0, |(v, _)| stride(target_dims, v));
        (flat, lane_stride)
    }

    fn nest(
        &self,
        plan: &StagePlan,
        reduction: Option<&Expr>,
        consumer: Option<usize>,
        target: usize,
    ) -> Vec<Stmt> {
        let stage = self.stage;
        let t = &self.t;
        let n = t.n;
        let order: Vec<usize> = if plan.order.len() == n {
            plan.order.clone()
        } else {
            (0..n).collect()
        };
        let micro = self.micro_kernel(plan, &order, reduction, consumer, target);
        // Level 1: register tiles of the block.
        let mut body = micro;
        for &a in order.iter().rev() {
            let base = IExpr::var(&tile_var("o", stage, a))
                .times(IExpr::Const(t.block_size(a)))
                .plus(IExpr::var(&tile_var("b", stage, a)).times(IExpr::Const(t.tile[a])));
            body.insert(
                0,
                Stmt::Let {
                    name: tile_var("base", stage, a),
                    value: base,
                },
            );
            let end = if t.ext[a] % t.block_size(a) == 0 {
                IExpr::Const(t.block[a])
            } else {
                // The last block holds fewer tiles.
                IExpr::Const(t.ext[a] + t.tile[a] - 1)
                    .plus(
                        IExpr::var(&tile_var("o", stage, a)).times(IExpr::Const(-t.block_size(a))),
                    )
                    .floor_div(t.tile[a])
                    .min(IExpr::Const(t.block[a]))
            };
            body = vec![Stmt::For {
                var: tile_var("b", stage, a),
                start: IExpr::Const(0),
                end,
                step: 1,
                kind: LoopKind::Serial,
                body,
            }];
        }
        // Reduction outer blocks.
        for &(a, _, k, ro) in t.red.iter().rev() {
            body.insert(
                0,
                Stmt::Let {
                    name: tile_var("k0", stage, a),
                    value: IExpr::var(&tile_var("ro", stage, a)).times(IExpr::Const(k)),
                },
            );
            body = vec![Stmt::serial(
                &tile_var("ro", stage, a),
                IExpr::Const(ro),
                body,
            )];
        }
        // Level 0: outer tiles; the leading `parallel` ones fused into one parallel loop.
        let par = plan.parallel.min(n);
        for &a in order[par..].iter().rev() {
            body = vec![Stmt::serial(
                &tile_var("o", stage, a),
                IExpr::Const(t.outer[a]),
                body,
            )];
        }
        if par > 0 {
            let fused: Vec<usize> = order[..par].to_vec();
            let total: i64 = fused.iter().map(|a| t.outer[*a]).product();
            let mut lets = Vec::new();
            let mut inner: i64 = 1;
            for &a in fused.iter().rev() {
                lets.insert(
                    0,
                    Stmt::Let {
                        name: tile_var("o", stage, a),
                        value: IExpr::var("par__").floor_div(inner).modulo(t.outer[a]),
                    },
                );
                inner *= t.outer[a];
            }
            lets.extend(body);
            body = vec![Stmt::Parallel {
                var: "par__".to_string(),
                extent: IExpr::Const(total),
                body: lets,
            }];
        }
        body
    }

    /// The register tile: accumulate, then store.
    fn micro_kernel(
        &self,
        plan: &StagePlan,
        order: &[usize],
        reduction: Option<&Expr>,
        consumer: Option<usize>,
        target: usize,
    ) -> Vec<Stmt> {
        let stage = self.stage;
        let t = &self.t;
        let lanes = t.lanes();
        let reg = t.reg_order(order);
        // Elements of the register tile: offsets per spatial axis (vector axis by chunks).
        let mut elems: Vec<Vec<i64>> = vec![vec![0; t.n]];
        for &a in &reg {
            let step = if Some(a) == t.vector.map(|v| v.0) {
                lanes as i64
            } else {
                1
            };
            elems = elems
                .into_iter()
                .flat_map(|e| {
                    (0..t.tile[a] / step).map(move |i| {
                        let mut e = e.clone();
                        e[a] = i * step;
                        e
                    })
                })
                .collect();
        }
        let last_reduce = t.red.last().map(|r| r.0);
        let point = |offset: &Vec<i64>, unroll: i64| Point {
            offset: offset.clone(),
            unroll,
            last_reduce,
        };
        let acc_name = |i: usize| format!("acc__{i}");
        // The target has the stage's dimensions (a fused consumer has the same).
        let target_dims: Vec<i64> = t.ext.clone();
        let target_buf = buffer_name(self.op, TensorRef::Stage(target));
        let overhang: Vec<usize> = (0..t.n).filter(|a| t.may_overhang(*a)).collect();
        let full_conds: Vec<(IExpr, IExpr)> = overhang
            .iter()
            .map(|&a| {
                (
                    IExpr::var(&tile_var("base", stage, a)).plus(IExpr::Const(t.tile[a] - 1)),
                    IExpr::Const(t.ext[a]),
                )
            })
            .collect();
        // Lane-wise guarded code for an overhanging tile.
        let in_range = |offset: &Vec<i64>, lane: Option<&str>| -> Vec<(IExpr, IExpr)> {
            overhang
                .iter()
                .map(|&a| {
                    let mut e =
                        IExpr::var(&tile_var("base", stage, a)).plus(IExpr::Const(offset[a]));
                    if let (Some(l), Some((v, _))) = (lane, t.vector) {
                        if v == a {
                            e = e.plus(IExpr::var(l));
                        }
                    }
                    (e, IExpr::Const(t.ext[a]))
                })
                .collect()
        };
        let store = |name: &str, offset: &Vec<i64>, full: bool| -> Stmt {
            let (index, stride) = self.target_index(&target_dims, &point(offset, 0));
            if full || lanes == 1 {
                let st = Stmt::Store {
                    buf: target_buf.clone(),
                    index,
                    value: VExpr::Local(name.to_string()),
                    lanes,
                    stride,
                };
                if full {
                    st
                } else {
                    Stmt::If {
                        conds: in_range(offset, None),
                        then: vec![st],
                        otherwise: Vec::new(),
                    }
                }
            } else {
                let l = "l__";
                let idx = index.plus(IExpr::var(l).times(IExpr::Const(stride)));
                Stmt::For {
                    var: l.to_string(),
                    start: IExpr::Const(0),
                    end: IExpr::Const(lanes as i64),
                    step: 1,
                    kind: LoopKind::Lanes,
                    body: vec![Stmt::If {
                        conds: in_range(offset, Some(l)),
                        then: vec![Stmt::store(
                            &target_buf,
                            idx,
                            VExpr::Lane(name.to_string(), IExpr::var(l)),
                        )],
                        otherwise: Vec::new(),
                    }],
                }
            }
        };
        let split_full = |full: Vec<Stmt>, partial: Vec<Stmt>| -> Vec<Stmt> {
            if overhang.is_empty() {
                full
            } else {
                vec![Stmt::If {
                    conds: full_conds.clone(),
                    then: full,
                    otherwise: partial,
                }]
            }
        };

        let mut out = Vec::new();
        let Some(Expr::Reduce {
            op: rop,
            body: rbody,
            ..
        }) = reduction
        else {
            // Element-wise stage: compute each element and store it.
            out.extend(self.base_lets(&stage.body, None));
            let mut full = Vec::new();
            let mut partial = Vec::new();
            for (i, e) in elems.iter().enumerate() {
                let name = format!("v__{i}");
                let v = self.value(&stage.body, &point(e, 0), &VExpr::Const(0.0), None);
                full.push(Stmt::Local {
                    name: name.clone(),
                    lanes,
                    init: v.clone(),
                });
                full.push(store(&name, e, true));
                partial.push(Stmt::Local {
                    name: name.clone(),
                    lanes,
                    init: v,
                });
                partial.push(store(&name, e, false));
            }
            out.extend(split_full(full, partial));
            return out;
        };
        let identity = VExpr::Const(rop.identity());
        for (i, _) in elems.iter().enumerate() {
            out.push(Stmt::Local {
                name: acc_name(i),
                lanes,
                init: identity.clone(),
            });
        }
        let split = t.red.iter().any(|r| r.3 > 1);
        let first_block: Vec<(IExpr, IExpr)> = t
            .red
            .iter()
            .map(|r| (IExpr::var(&tile_var("ro", stage, r.0)), IExpr::Const(1)))
            .collect();
        if split {
            // Later reduction blocks continue from the partial sums in the output.
            let mut full = Vec::new();
            let mut partial = Vec::new();
            for (i, e) in elems.iter().enumerate() {
                let (index, stride) = self.target_index(&target_dims, &point(e, 0));
                full.push(Stmt::Assign {
                    name: acc_name(i),
                    value: VExpr::Load {
                        buf: target_buf.clone(),
                        index: index.clone(),
                        guard: Vec::new(),
                        pad: 0.0,
                        lanes,
                        stride,
                    },
                });
                let reload = |lane: Option<&str>| {
                    let idx = match lane {
                        Some(l) => index
                            .clone()
                            .plus(IExpr::var(l).times(IExpr::Const(stride))),
                        None => index.clone(),
                    };
                    let v = VExpr::load(&target_buf, idx);
                    let st = match lane {
                        Some(l) => Stmt::SetLane {
                            name: acc_name(i),
                            lane: IExpr::var(l),
                            value: v,
                        },
                        None => Stmt::Assign {
                            name: acc_name(i),
                            value: v,
                        },
                    };
                    Stmt::If {
                        conds: in_range(e, lane),
                        then: vec![st],
                        otherwise: Vec::new(),
                    }
                };
                partial.push(if lanes == 1 {
                    reload(None)
                } else {
                    Stmt::For {
                        var: "l__".into(),
                        start: IExpr::Const(0),
                        end: IExpr::Const(lanes as i64),
                        step: 1,
                        kind: LoopKind::Lanes,
                        body: vec![reload(Some("l__"))],
                    }
                });
            }
            out.push(Stmt::If {
                conds: first_block,
                then: Vec::new(),
                otherwise: split_full(full, partial),
            });
        }
        // The reduction loops; the innermost is unrolled.
        let update = |u: i64| -> Vec<Stmt> {
            elems
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let v = self.value(rbody, &point(e, u), &VExpr::Const(0.0), None);
                    Stmt::Assign {
                        name: acc_name(i),
                        value: VExpr::Binary(
                            rop.combiner(),
                            Box::new(VExpr::Local(acc_name(i))),
                            Box::new(v),
                        ),
                    }
                })
                .collect()
        };
        let bound = |&(a, e, k, _): &(AxisId, i64, i64, i64)| -> IExpr {
            if e % k == 0 {
                IExpr::Const(k)
            } else {
                IExpr::Const(e)
                    .plus(IExpr::var(&tile_var("k0", stage, a)).times(IExpr::Const(-1)))
                    .min(IExpr::Const(k))
            }
        };
        let mut body;
        let last = t.red.last().expect("a reduction has axes");
        let u = plan.unroll.max(1) as i64;
        let ri = tile_var("ri", stage, last.0);
        if u == 1 {
            body = vec![Stmt::serial(
                &ri,
                bound(last),
                self.base_lets(rbody, None)
                    .into_iter()
                    .chain(update(0))
                    .collect(),
            )];
        } else {
            let end = bound(last);
            let main_end = end.clone().plus(IExpr::Const(-(u - 1)));
            let rem_start = end.clone().floor_div(u).times(IExpr::Const(u));
            body = vec![Stmt::For {
                var: ri.clone(),
                start: IExpr::Const(0),
                end: main_end,
                step: u,
                kind: LoopKind::Unrolled(u as usize),
                body: self
                    .base_lets(rbody, None)
                    .into_iter()
                    .chain((0..u).flat_map(update))
                    .collect(),
            }];
            // The remainder, unless the trip count is a known multiple of the unroll.
            if end.as_const().is_none_or(|e| e % u != 0) {
                body.push(Stmt::For {
                    var: ri,
                    start: rem_start,
                    end,
                    step: 1,
                    kind: LoopKind::Serial,
                    body: self
                        .base_lets(rbody, None)
                        .into_iter()
                        .chain(update(0))
                        .collect(),
                });
            }
        }
        for r in t.red.iter().rev().skip(1) {
            body = vec![Stmt::serial(&tile_var("ri", stage, r.0), bound(r), body)];
        }
        out.extend(body);
        // Store: the final value after the last block, the partial sums before it.
        let fin = |full: bool| -> Vec<Stmt> {
            let mut v = Vec::new();
            for (i, e) in elems.iter().enumerate() {
                let acc = VExpr::Local(acc_name(i));
                let mut value = self.value(&stage.body, &point(e, 0), &acc, None);
                if let Some(c) = consumer {
                    value = self.value(&self.op.stages[c].body, &point(e, 0), &value, Some(self.s));
                }
                let name = format!("v__{i}");
                v.push(Stmt::Local {
                    name: name.clone(),
                    lanes,
                    init: value,
                });
                v.push(store(&name, e, full));
            }
            v
        };
        let mut final_store = self.base_lets(&stage.body, None);
        if let Some(c) = consumer {
            final_store.extend(self.base_lets(&self.op.stages[c].body, Some(self.s)));
        }
        final_store.extend(split_full(fin(true), fin(false)));
        if split {
            let raw = |full: bool| -> Vec<Stmt> {
                elems
                    .iter()
                    .enumerate()
                    .map(|(i, e)| store(&acc_name(i), e, full))
                    .collect()
            };
            let last_block: Vec<(IExpr, IExpr)> = t
                .red
                .iter()
                .map(|r| {
                    (
                        IExpr::Const(r.3 - 2),
                        IExpr::var(&tile_var("ro", stage, r.0)),
                    )
                })
                .collect();
            out.push(Stmt::If {
                conds: last_block,
                then: final_store,
                otherwise: split_full(raw(true), raw(false)),
            });
        } else {
            out.extend(final_store);
        }
        out
    }
}
