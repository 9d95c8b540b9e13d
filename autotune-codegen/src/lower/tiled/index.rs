//! Index arithmetic at a point of the register tile: the flat index of a load
//! (through its resolved [`Access`]) or of the output element, and the lane
//! stride along the vector axis. A point's index is the tile origin's plus a
//! constant ([`Indexer::load_delta`]), which is what lets the unrolled tile
//! compute each site's index once.

use autotune_lang::ir::{Affine, AxisId, Stage};

use super::geometry::{ceil_div, known, merge_vars, product, tile_var, Tiling};
use super::operands::{Access, Level, Source};
use crate::loopnest::IExpr;

/// A point of the iteration space inside the register tile: per spatial axis
/// its offset in the tile, per reduction axis its unroll offset.
#[derive(Clone)]
pub(super) struct Point {
    pub offset: Vec<i64>,
    pub unroll: i64,
    /// The innermost reduction axis (which the unroll offset applies to).
    pub last_reduce: Option<AxisId>,
    /// Whether the innermost reduction loop's variable counts: not in the
    /// origin index of a site whose loads add it themselves
    /// ([`Indexer::inner_step`]).
    pub inner_var: bool,
    /// Lanes of a load that varies along the vector (1: every load scalar,
    /// as in the scalar remainder of lanes along the reduction).
    pub lanes: usize,
}

impl Point {
    /// The unroll offset of reduction axis `a`: only the innermost one has one.
    fn unroll_of(&self, a: AxisId) -> i64 {
        if self.last_reduce == Some(a) {
            self.unroll
        } else {
            0
        }
    }
}

/// Index arithmetic of one tiled stage.
pub(super) struct Indexer<'a> {
    pub stage: &'a Stage,
    pub t: &'a Tiling,
}

impl Indexer<'_> {
    /// The point at `offset` in the tile, `unroll` iterations into the
    /// innermost reduction block.
    pub fn point(&self, offset: &[i64], unroll: i64) -> Point {
        Point {
            offset: offset.to_vec(),
            unroll,
            last_reduce: self.t.last_reduce(),
            inner_var: true,
            lanes: self.t.acc_lanes(),
        }
    }

    /// The step of a load's flat index per iteration of the innermost
    /// reduction loop, where its loads add that loop's variable themselves:
    /// a load from a buffer of symbolic dimensions (the generic kernel's)
    /// whose index has the innermost reduction axis in its last dimension
    /// only, beside a spatial axis (a window). Its origin index then leaves
    /// the variable out, and each load is
    /// `origin + symbolic stride + variable + constant`: once GCC unrolls the
    /// loop, loads of the same element at different steps (a 3×3 window's
    /// neighbours) are one expression and load once. With the variable in
    /// the origin, `(origin + s) + stride + 1` and `(origin + s + 1) + stride`
    /// were two loads of one element, which cost a generic 3×3 conv 8%. Not
    /// without a window (a GEMM's `a[i][k]`), where no two steps share an
    /// element: there it cost the 127×255×511 config's kernel, whose 16 rows
    /// of `a` it reads in place, a sixth.
    pub fn inner_step(&self, acc: &Access, index: &[Affine]) -> Option<i64> {
        let dims = match &acc.source {
            Source::Direct { dims } | Source::Guarded { dims, .. } | Source::Copy { dims, .. } => {
                dims
            }
            Source::Packed { .. } | Source::BlockPacked { .. } => return None,
        };
        let r = self.t.last_reduce()?;
        let (last, outer) = index.split_last()?;
        let symbolic = dims.iter().any(|d| !matches!(d, IExpr::Const(_)));
        let step = last.coefficient(r);
        let window = last.terms.iter().any(|(a, _)| *a < self.t.n);
        (symbolic && window && step != 0 && outer.iter().all(|ix| ix.coefficient(r) == 0))
            .then_some(step)
    }

    /// Index (at lane 0) and lane stride of a load at a point.
    pub fn load_index(&self, acc: &Access, index: &[Affine], p: &Point) -> (IExpr, i64) {
        match &acc.source {
            Source::Direct { dims } | Source::Guarded { dims, .. } => {
                self.row_major_index(&vec![0; dims.len()], dims, index, p)
            }
            Source::Copy { lo, dims } => self.row_major_index(lo, dims, index, p),
            Source::Packed { layout } | Source::BlockPacked { layout } => {
                self.packed_index(layout, p)
            }
        }
    }

    /// Index and lane stride of a load from a row-major buffer of `dims` whose
    /// dimension `d` starts at index `lo[d]`.
    fn row_major_index(
        &self,
        lo: &[i64],
        dims: &[IExpr],
        index: &[Affine],
        p: &Point,
    ) -> (IExpr, i64) {
        let vec_axis = self.t.vector_axis();
        let lane_axis = self.t.lane_reduction().map(|(r, _)| r);
        let mut flat = IExpr::Const(0);
        let mut lane_stride = 0;
        for (d, ix) in index.iter().enumerate() {
            let mut e = IExpr::Const(ix.offset - lo[d]);
            for &(a, c) in &ix.terms {
                e = e.plus(self.axis_value(a, p).times(IExpr::Const(c)));
                // (Lanes along the reduction run in the last dimension.)
                if Some(a) == vec_axis || Some(a) == lane_axis {
                    // Constant: only the generic kernel's in-place loads have
                    // symbolic dimensions, and they read the vector axis innermost.
                    lane_stride += c * known(&product(&dims[d + 1..]));
                }
            }
            flat = flat.times(dims[d].clone()).plus(e);
        }
        (flat, lane_stride)
    }

    /// Index and lane stride of a load from a packed copy: each dimension is a
    /// loop variable of the nest, or a constant offset inside the tile.
    fn packed_index(&self, layout: &[(AxisId, Level, IExpr)], p: &Point) -> (IExpr, i64) {
        let stage = self.stage;
        let mut flat = IExpr::Const(0);
        let mut lane_stride = 0;
        for (i, (a, level, ext)) in layout.iter().enumerate() {
            let (a, level) = (*a, *level);
            let v = match level {
                Level::Outer => IExpr::var(&tile_var("o", stage, a)),
                Level::Block => IExpr::var(&tile_var("b", stage, a)),
                Level::Reg => IExpr::Const(p.offset[a]),
                Level::ReduceOuter => IExpr::var(&tile_var("ro", stage, a)),
                Level::ReduceInner => {
                    IExpr::var(&tile_var("ri", stage, a)).plus(IExpr::Const(p.unroll_of(a)))
                }
            };
            // (A pack read along lanes on the reduction has that axis
            // innermost: `Operands::pack_layout`.)
            let lanes_here = match level {
                Level::Reg => Some(a) == self.t.vector_axis(),
                Level::ReduceInner => self.t.lane_reduction().is_some_and(|(r, _)| r == a),
                _ => false,
            };
            if lanes_here {
                lane_stride = inner_size(&layout[i + 1..]);
            }
            flat = flat.times(ext.clone()).plus(v);
        }
        (flat, lane_stride)
    }

    /// The value of an axis at a point (lane 0 for the vector axis); a merged
    /// axis's own value, not the tiling's ([`Indexer::coordinate`]).
    pub fn axis_value(&self, a: AxisId, p: &Point) -> IExpr {
        let stage = self.stage;
        if let Some(v) = self.merged_value(a, self.pair_offset(p)) {
            return v;
        }
        if a < self.t.n {
            self.coordinate(a, p)
        } else {
            let ri = match p.inner_var || p.last_reduce != Some(a) {
                true => IExpr::var(&tile_var("ri", stage, a)),
                false => IExpr::Const(0),
            };
            IExpr::var(&tile_var("k0", stage, a))
                .plus(ri)
                .plus(IExpr::Const(p.unroll_of(a)))
        }
    }

    /// Axis `a`'s own value, if it is one of a merged pair, at offset `o`
    /// along the pair: the tile's local for that offset.
    fn merged_value(&self, a: AxisId, o: i64) -> Option<IExpr> {
        let m = self.t.merge.filter(|m| a == m.a || a == m.a + 1)?;
        let (va, vb) = merge_vars(self.stage, m, o);
        Some(IExpr::var(if a == m.a { &va } else { &vb }))
    }

    /// A point's offset in the tile along the merged pair (0 if none).
    fn pair_offset(&self, p: &Point) -> i64 {
        self.t.merge.map_or(0, |m| p.offset[m.a + 1])
    }

    /// The tiling's index of spatial axis `a` at a point: for a merged pair,
    /// 0 on the first and the merged index on the second.
    fn coordinate(&self, a: AxisId, p: &Point) -> IExpr {
        IExpr::var(&tile_var("base", self.stage, a)).plus(IExpr::Const(p.offset[a]))
    }

    /// The part of a load's flat index that a point's tile offset and unroll
    /// offset contribute: a constant, or in the generic kernel's in-place loads
    /// constants times the tensor's symbolic strides, or along a merged pair
    /// the difference of the tile's locals for the point and its origin.
    pub fn load_delta(&self, acc: &Access, index: &[Affine], p: &Point) -> IExpr {
        let vary = |a: AxisId| -> i64 {
            if a < self.t.n {
                p.offset[a]
            } else {
                p.unroll_of(a)
            }
        };
        match &acc.source {
            Source::Direct { dims } | Source::Guarded { dims, .. } | Source::Copy { dims, .. } => {
                // A merged axis's step depends on where the tile starts in its
                // row: its local at this point less its local at the origin.
                let o = self.pair_offset(p);
                let step = |a: AxisId| -> IExpr {
                    match (self.merged_value(a, o), self.merged_value(a, 0)) {
                        (Some(at), Some(from)) if o != 0 => at.plus(from.times(IExpr::Const(-1))),
                        (Some(_), _) => IExpr::Const(0),
                        _ => IExpr::Const(vary(a)),
                    }
                };
                index
                    .iter()
                    .enumerate()
                    .fold(IExpr::Const(0), |acc, (d, ix)| {
                        let steps = ix.terms.iter().fold(IExpr::Const(0), |s, &(a, c)| {
                            s.plus(step(a).times(IExpr::Const(c)))
                        });
                        acc.plus(product(&dims[d + 1..]).times(steps))
                    })
            }
            Source::Packed { layout } | Source::BlockPacked { layout } => IExpr::Const(
                layout
                    .iter()
                    .enumerate()
                    .map(|(i, &(a, level, _))| {
                        let v = match level {
                            Level::Reg => p.offset[a],
                            Level::ReduceInner => p.unroll_of(a),
                            _ => 0,
                        };
                        // Only the dimensions inside a varying one need be constants.
                        if v == 0 {
                            0
                        } else {
                            v * inner_size(&layout[i + 1..])
                        }
                    })
                    .sum::<i64>(),
            ),
        }
    }

    /// Index and lane stride of the element at a point in the output buffer,
    /// of dimensions `target_dims`.
    pub fn target_index(&self, target_dims: &[IExpr], p: &Point) -> (IExpr, IExpr) {
        let mut flat = IExpr::Const(0);
        for (d, dim) in target_dims.iter().enumerate() {
            flat = flat.times(dim.clone()).plus(self.coordinate(d, p));
        }
        let lane_stride = self
            .t
            .vector
            .map_or(IExpr::Const(0), |(v, _)| product(&target_dims[v + 1..]));
        (flat, lane_stride)
    }

    /// The index of the element at a point in a stage's partial sums kept
    /// apart from its output ([`partial_sums`]): the vector axis blocked by
    /// `lanes`, outermost, and the lanes innermost, so an accumulator is one
    /// aligned run whatever its stride in the output. Needs every extent
    /// known and the vector's start at a multiple of `lanes`.
    pub fn partial_index(&self, p: &Point) -> IExpr {
        let (v, lanes) = self.t.vector.expect("partial sums kept apart are vectors");
        let mut others = IExpr::Const(0);
        for a in (0..self.t.n).filter(|&a| a != v) {
            others = others
                .times(self.t.ext[a].clone())
                .plus(self.coordinate(a, p));
        }
        self.coordinate(v, p)
            .times(beside(self.t, v))
            .plus(others.times(IExpr::Const(lanes as i64)))
    }
}

/// Elements of the buffer that keeps the partial sums of a tiled stage apart
/// from its output, if it needs one: where the reduction runs in several
/// blocks and the accumulators' lanes are strided in the output (a conv's
/// output channels in NCHW), each block but the last would store its partial
/// sums lane by lane and the next reload them so, code that was most of the
/// C of such a candidate and of its compile time. Kept with the lanes
/// innermost, each is one vector store and load. Only in a specialisation
/// (every extent known) with whole vectors along the vector axis.
pub(super) fn partial_sums(t: &Tiling) -> Option<i64> {
    let (v, lanes) = t.vector?;
    if !t.split_reduction() || lanes < 2 || t.lane_reduction().is_some() || !t.known() {
        return None;
    }
    let lanes = lanes as i64;
    if t.tile[v] % lanes != 0 || known(&product(&t.ext[v + 1..])) == 1 {
        return None;
    }
    let rest = known(&beside(t, v));
    Some(ceil_div(known(&t.ext[v]), lanes) * lanes * rest)
}

/// The size of the innermost dimensions of a packed layout (inside the
/// register-tile and inner-reduction levels, which are constants).
fn inner_size(layout: &[(AxisId, Level, IExpr)]) -> i64 {
    known(&product(layout.iter().map(|l| &l.2)))
}

/// The product of the extents of every spatial axis but `v`.
fn beside(t: &Tiling, v: usize) -> IExpr {
    product(
        t.ext
            .iter()
            .enumerate()
            .filter(|(a, _)| *a != v)
            .map(|(_, e)| e),
    )
}
