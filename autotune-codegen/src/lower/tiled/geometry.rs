//! The geometry of a tiled stage: extents, tiles, blocks and reduction
//! splits, plus the loop-variable names and row-major layout helpers.
//! Every other part of the tiled lowering speaks this vocabulary, so it lives
//! on its own: the parts can share it without depending on one another.

use autotune_lang::analysis::{single_reduction, Reduction};
use autotune_lang::ir::{AxisId, Expr, Stage};

use crate::loopnest::IExpr;
use crate::lower::dims::Dims;
use crate::space::StagePlan;

/// A reduction axis of the stage, split into blocks of `inner` iterations.
#[derive(Clone, Debug)]
pub(super) struct ReduceAxis {
    pub axis: AxisId,
    pub extent: IExpr,
    /// Iterations per block (the split, clamped to a known extent).
    pub inner: i64,
    /// Number of blocks (at least one, so that an empty reduction still
    /// stores its identity).
    pub outer: IExpr,
}

/// Geometry of the tiled stage. Extents and counts are constants in a
/// specialisation and expressions of the shape parameters in the generic
/// kernel; tiles, blocks and splits are always constants.
pub(super) struct Tiling {
    /// Number of spatial axes.
    pub n: usize,
    /// Per spatial axis: extent, register tile, tiles per block, outer count.
    pub ext: Vec<IExpr>,
    pub tile: Vec<i64>,
    pub block: Vec<i64>,
    pub outer: Vec<IExpr>,
    /// Reduction axes, in the order of the stage's reduction.
    pub red: Vec<ReduceAxis>,
    /// Vectorised spatial axis and lanes.
    pub vector: Option<(usize, usize)>,
    /// Or lanes along the innermost reduction axis ([`StagePlan::reduce_lanes`]).
    pub reduce_lanes: Option<usize>,
    /// Spatial axes merged into one ([`StagePlan::merge`]).
    pub merge: Option<Merge>,
}

/// Spatial axis `a` merged with `a + 1`: the tiling runs `a` once (extent 1)
/// and `a + 1` over both (`ext_a × ext_b` points, row-major), so the output's
/// flat index is unchanged; a point's own values of the two axes are its
/// merged index divided by and modulo `ext_b`, bound once per register tile
/// (`nest`) as the locals [`merge_vars`] names.
#[derive(Clone, Copy, Debug)]
pub(super) struct Merge {
    pub a: usize,
    pub ext_a: i64,
    pub ext_b: i64,
}

impl Tiling {
    /// The geometry of `stage` under `plan`, its reduction over `red_axes`;
    /// `None` when the iteration space is known to be empty.
    pub fn new(stage: &Stage, dims: Dims, plan: &StagePlan, red_axes: &[AxisId]) -> Option<Tiling> {
        let n = stage.n_spatial;
        let ext: Vec<IExpr> = (0..n).map(|a| dims.extent(&stage.axes[a].extent)).collect();
        let red: Vec<ReduceAxis> = red_axes
            .iter()
            .zip(&plan.split)
            .map(|(&axis, &k)| {
                let extent = dims.extent(&stage.axes[axis].extent);
                let inner = match extent.as_const() {
                    Some(e) => k.clamp(1, e.max(1)),
                    None => k.max(1),
                };
                ReduceAxis {
                    axis,
                    outer: extent.clone().ceil_div(inner).max(IExpr::Const(1)),
                    extent,
                    inner,
                }
            })
            .collect();
        let empty = |e: &IExpr| e.as_const() == Some(0);
        if ext.iter().any(empty) || red.iter().any(|r| empty(&r.extent)) {
            return None;
        }
        // Only a specialisation merges: the split of a merged index needs the
        // row length as a constant.
        let mut ext = ext;
        let merge = plan.merge.and_then(|a| {
            let (ext_a, ext_b) = (ext[a].as_const()?, ext[a + 1].as_const()?);
            ext[a] = IExpr::Const(1);
            ext[a + 1] = IExpr::Const(ext_a * ext_b);
            Some(Merge { a, ext_a, ext_b })
        });
        let tile: Vec<i64> = plan.tile.iter().map(|t| (*t).max(1)).collect();
        let block: Vec<i64> = plan.block.iter().map(|b| (*b).max(1)).collect();
        let outer = (0..n)
            .map(|a| ext[a].clone().ceil_div(tile[a] * block[a]))
            .collect();
        let vector = plan.vector.filter(|(a, _)| *a < n);
        let reduce_lanes = plan.reduce_lanes.filter(|_| vector.is_none());
        Some(Tiling {
            n,
            ext,
            tile,
            block,
            outer,
            red,
            vector,
            reduce_lanes,
            merge,
        })
    }

    /// Whether the extents are those of a specialisation.
    pub fn known(&self) -> bool {
        self.ext
            .iter()
            .chain(self.red.iter().map(|r| &r.extent))
            .all(|e| e.as_const().is_some())
    }

    /// The spatial loop order of `plan` (declaration order if it names
    /// another number of axes).
    pub fn order(&self, plan: &StagePlan) -> Vec<usize> {
        if plan.order.len() == self.n {
            plan.order.clone()
        } else {
            (0..self.n).collect()
        }
    }

    pub fn block_size(&self, a: usize) -> i64 {
        self.tile[a] * self.block[a]
    }

    /// The number of register tiles along spatial axis `a` in the block whose
    /// tile loop variable (`o__`) has the value `outer` (the last block may
    /// hold fewer).
    pub fn tiles_in_block(&self, a: usize, outer: IExpr) -> IExpr {
        if self.ext[a]
            .as_const()
            .is_some_and(|e| e % self.block_size(a) == 0)
        {
            IExpr::Const(self.block[a])
        } else {
            self.ext[a]
                .clone()
                .plus(IExpr::Const(self.tile[a] - 1))
                .plus(outer.times(IExpr::Const(-self.block_size(a))))
                .floor_div(self.tile[a])
                .min(IExpr::Const(self.block[a]))
        }
    }

    /// The trip count of the inner loop of reduction axis `r` in the block
    /// starting at `first` (the `k0__` variable's value; the last block may be
    /// shorter).
    pub fn inner_bound(&self, r: &ReduceAxis, first: IExpr) -> IExpr {
        if r.extent.as_const().is_some_and(|e| e % r.inner == 0) {
            IExpr::Const(r.inner)
        } else {
            r.extent
                .clone()
                .plus(first.times(IExpr::Const(-1)))
                .min(IExpr::Const(r.inner))
        }
    }

    /// The reduction axis `a`, if it is one.
    pub fn reduce_axis(&self, a: AxisId) -> Option<&ReduceAxis> {
        self.red.iter().find(|r| r.axis == a)
    }

    /// The innermost reduction axis (the one that is unrolled).
    pub fn last_reduce(&self) -> Option<AxisId> {
        self.red.last().map(|r| r.axis)
    }

    /// Largest value axis `a` takes in computed (possibly overhanging) tiles,
    /// in a specialisation.
    pub fn max_value(&self, a: AxisId) -> i64 {
        match self.merge {
            // A merged pair's points are clamped to the last one (see `merge_vars`).
            Some(m) if a == m.a => return m.ext_a - 1,
            Some(m) if a == m.a + 1 => return m.ext_b - 1,
            _ => {}
        }
        if a < self.n {
            ceil_div(known(&self.ext[a]), self.tile[a]) * self.tile[a] - 1
        } else {
            self.reduce_axis(a).map_or(0, |r| known(&r.extent) - 1)
        }
    }

    /// [`Tiling::max_value`] as an expression, for the generic kernel too.
    pub fn max_index(&self, a: AxisId) -> IExpr {
        if a < self.n {
            self.ext[a]
                .clone()
                .ceil_div(self.tile[a])
                .times(IExpr::Const(self.tile[a]))
                .plus(IExpr::Const(-1))
        } else {
            self.extent(a).plus(IExpr::Const(-1))
        }
    }

    /// The extent of axis `a`, spatial or reduction.
    pub fn extent(&self, a: AxisId) -> IExpr {
        if a < self.n {
            self.ext[a].clone()
        } else {
            self.reduce_axis(a)
                .map_or(IExpr::Const(0), |r| r.extent.clone())
        }
    }

    pub fn may_overhang(&self, a: usize) -> bool {
        match self.ext[a].as_const() {
            Some(e) => e % self.tile[a] != 0,
            None => self.tile[a] > 1,
        }
    }

    /// Spatial axes inside the register tile: plan order with the vector axis last.
    pub fn reg_order(&self, order: &[usize]) -> Vec<usize> {
        let mut o: Vec<usize> = order
            .iter()
            .copied()
            .filter(|a| Some(*a) != self.vector_axis())
            .collect();
        if let Some(v) = self.vector_axis() {
            o.push(v);
        }
        o
    }

    pub fn vector_axis(&self) -> Option<usize> {
        self.vector.map(|v| v.0)
    }

    /// Whether the reduction runs in several outer blocks (each but the
    /// first resuming the partial sums of the one before).
    pub fn split_reduction(&self) -> bool {
        self.red
            .iter()
            .any(|r| r.outer.as_const().is_none_or(|o| o > 1))
    }

    /// Lanes of a stored value (and of a spatial vector).
    pub fn lanes(&self) -> usize {
        self.vector.map_or(1, |v| v.1)
    }

    /// The reduction axis the lanes run along, if they do, and how many.
    pub fn lane_reduction(&self) -> Option<(AxisId, usize)> {
        Some((self.red.last()?.axis, self.reduce_lanes?))
    }

    /// Lanes of an accumulator: along the spatial vector or the reduction.
    pub fn acc_lanes(&self) -> usize {
        self.lane_reduction().map_or(self.lanes(), |(_, l)| l)
    }
}

/// The locals naming each merged axis's own value at tile offset `o` along
/// the merged axis: `(a's, a + 1's)`.
pub(super) fn merge_vars(stage: &Stage, m: Merge, o: i64) -> (String, String) {
    (
        format!("{}__{o}", tile_var("m", stage, m.a)),
        format!("{}__{o}", tile_var("m", stage, m.a + 1)),
    )
}

/// The one reduction of a tiled stage, if it has one, and its axes.
pub(super) fn reduction(stage: &Stage) -> (Option<&Expr>, Vec<AxisId>) {
    match single_reduction(&stage.body) {
        Reduction::One(r @ Expr::Reduce { axes, .. }) => (Some(r), axes.clone()),
        Reduction::One(r) => (Some(r), Vec::new()),
        Reduction::None => (None, Vec::new()),
        Reduction::Several => {
            unreachable!("stages with several reductions keep the default schedule")
        }
    }
}

/// A tile-loop variable of the generated code: `o__i` (outer tile), `b__i`
/// (register tile in the block), `base__i` (the tile's first index), `ro__k` /
/// `ri__k` (outer / inner reduction block), `k0__k` (the block's first index).
/// All contain `__`, which user names never do.
pub(super) fn tile_var(kind: &str, stage: &Stage, a: usize) -> String {
    format!("{kind}__{}", stage.axes[a].name)
}

pub(super) fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// A size of a specialisation (where only a specialisation reads it).
pub(super) fn known(e: &IExpr) -> i64 {
    e.as_const()
        .expect("a specialisation's sizes are constants")
}

/// The product of sizes.
pub(super) fn product<'e>(sizes: impl IntoIterator<Item = &'e IExpr>) -> IExpr {
    sizes
        .into_iter()
        .fold(IExpr::Const(1), |acc, e| acc.times(e.clone()))
}

/// The flat index of `idx` in a row-major layout with dimensions `dims`.
pub(super) fn row_major_flat(idx: &[IExpr], dims: &[IExpr]) -> IExpr {
    idx.iter().zip(dims).fold(IExpr::Const(0), |acc, (i, d)| {
        acc.times(d.clone()).plus(i.clone())
    })
}
