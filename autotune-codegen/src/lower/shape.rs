//! The loop nest a schedule lowers to, as numbers and without lowering it:
//! the loops around the operator's main update (innermost first) and, per
//! operand, how far each loop moves its index, how many elements one full run
//! of the loop touches and how many loads it makes. The tuner's cost model
//! reads its features from this for every config it scores, where lowering
//! the config costs a thousand times more (unrolled register tiles).
//!
//! [`super::nest_shape`] picks the main stage (the one doing the most
//! arithmetic); the tiled lowering describes its own stages from the same
//! geometry and operand decisions it lowers with. This module holds the
//! vocabulary and the default nest's shape, and imports neither.

use autotune_lang::analysis::load_sites;
use autotune_lang::ir::{Affine, AxisId, Expr, Operator, Stage, TensorRef};

/// How a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopRun {
    Serial,
    /// Unrolled in the C (the innermost reduction loop).
    Unrolled,
    /// On the thread pool.
    Parallel,
}

/// One loop around the main update.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopShape {
    pub extent: f64,
    pub run: LoopRun,
    /// The axes one iteration advances, and by how much.
    pub steps: Vec<(AxisId, i64)>,
}

/// Where an operand of the main update lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// The tensor itself (an input or an earlier stage's buffer).
    Direct,
    /// A padded copy made ahead of the nest.
    Copy,
    /// A tile-ordered copy made ahead of the nest.
    Packed,
    /// The stage's output.
    Output,
}

/// One operand of the main update, per loop of [`NestShape::loops`].
#[derive(Clone, Debug, PartialEq)]
pub struct OperandShape {
    pub tensor: TensorRef,
    pub storage: Storage,
    /// Elements the flat index moves per iteration of the loop.
    pub strides: Vec<f64>,
    /// Distinct elements one full run of the loop touches.
    pub footprint: Vec<f64>,
    /// Loads (or stores) one full run of the loop makes; a vector counts once.
    pub accesses: Vec<f64>,
}

/// The main update of a kernel and the loops around it.
#[derive(Clone, Debug, PartialEq)]
pub struct NestShape {
    /// Innermost first.
    pub loops: Vec<LoopShape>,
    /// The update's loads in the order it reads them, then its output.
    pub operands: Vec<OperandShape>,
    /// Arithmetic (lane operations) of one iteration of the innermost loop.
    pub flops_per_iteration: f64,
    /// Statements of one iteration of the innermost loop.
    pub statements: f64,
    pub lanes: usize,
    /// Register-tile locals (a vector counts once).
    pub accumulators: usize,
    pub unroll: usize,
    /// Arithmetic of the whole kernel, every stage.
    pub total_flops: f64,
    /// Elements of every buffer the kernel allocates (stages, copies, packs).
    pub scratch_elems: f64,
    /// Elements of the main stage's copies whose next slice the register
    /// tile prefetches while it reads one ([`crate::space::Read::PackAhead`]).
    pub prefetched_elems: f64,
    /// Whether a consumer is computed in the main stage's store.
    pub fused: bool,
}

impl NestShape {
    /// Iterations of the innermost loop in one run of loop `l` (`l` included).
    pub fn iterations(&self, l: usize) -> f64 {
        iterations(&self.loops, l)
    }
}

/// Arithmetic of one evaluation of `e` (a reduction counts its combine).
pub(crate) fn flops(e: &Expr) -> f64 {
    let mut n = 0.0;
    e.visit(&mut |x| {
        if matches!(x, Expr::Unary(..) | Expr::Binary(..) | Expr::Reduce { .. }) {
            n += 1.0;
        }
    });
    n
}

/// Points of a stage's iteration space (spatial and reduction axes).
pub(crate) fn points(stage: &Stage, shapes: &[i64]) -> f64 {
    stage
        .axes
        .iter()
        .map(|a| a.extent.value(shapes) as f64)
        .product()
}

/// The default nest of stage `s`: spatial axes in declaration order, then the
/// reduction axes, scalar accumulators.
pub(crate) fn naive_shape(op: &Operator, shapes: &[i64], s: usize) -> NestShape {
    let stage = &op.stages[s];
    let extent = |a: AxisId| stage.axes[a].extent.value(shapes);
    let loops: Vec<LoopShape> = (0..stage.axes.len())
        .rev()
        .map(|a| LoopShape {
            extent: extent(a) as f64,
            run: LoopRun::Serial,
            steps: vec![(a, 1)],
        })
        .collect();
    let covers = covers(&loops, vec![1; stage.axes.len()], extent);
    let mut operands: Vec<OperandShape> = load_sites(&stage.body)
        .into_iter()
        .map(|site| {
            let Expr::Load { tensor, index, .. } = site else {
                unreachable!("load sites are loads")
            };
            let dims = dims_of(op, *tensor, shapes);
            let flat = flat_coefficients(index, &dims, stage.axes.len());
            OperandShape {
                tensor: *tensor,
                storage: Storage::Direct,
                strides: strides(&loops, |a| flat[a] as f64),
                footprint: covers
                    .iter()
                    .map(|c| direct_footprint(index, &dims, c))
                    .collect(),
                accesses: (0..loops.len()).map(|l| iterations(&loops, l)).collect(),
            }
        })
        .collect();
    // One store per spatial point, after the reduction loops.
    let reductions = stage.axes.len() - stage.n_spatial;
    operands.push(output_operand(op, shapes, s, &loops, &covers, 1.0, |l| {
        if l < reductions {
            0.0
        } else {
            loops[reductions..=l].iter().map(|x| x.extent).product()
        }
    }));
    NestShape {
        loops,
        operands,
        flops_per_iteration: flops(&stage.body),
        statements: 1.0,
        lanes: 1,
        accumulators: 1,
        unroll: 1,
        total_flops: 0.0,
        scratch_elems: 0.0,
        prefetched_elems: 0.0,
        fused: false,
    }
}

/// Iterations of the innermost loop in one run of loop `l` of `loops`.
pub(crate) fn iterations(loops: &[LoopShape], l: usize) -> f64 {
    loops[..=l].iter().map(|x| x.extent).product()
}

/// Per loop, the values each axis takes in one full run of it (and the loops
/// inside), starting from `inner` (the values one innermost iteration covers)
/// and capped at the axis's `extent`.
pub(crate) fn covers(
    loops: &[LoopShape],
    inner: Vec<i64>,
    extent: impl Fn(AxisId) -> i64,
) -> Vec<Vec<i64>> {
    let mut cover = inner;
    loops
        .iter()
        .map(|l| {
            for &(a, m) in &l.steps {
                cover[a] = ((l.extent as i64 - 1) * m + cover[a]).min(extent(a).max(1));
            }
            cover.clone()
        })
        .collect()
}

/// Per loop, how far a flat index moves per iteration, given how far it moves
/// per unit of each axis (`per_axis`).
pub(crate) fn strides(loops: &[LoopShape], per_axis: impl Fn(AxisId) -> f64) -> Vec<f64> {
    loops
        .iter()
        .map(|l| {
            l.steps
                .iter()
                .map(|&(a, m)| m as f64 * per_axis(a))
                .sum::<f64>()
                .abs()
        })
        .collect()
}

/// The dimensions of tensor `t` at `shapes`.
pub(crate) fn dims_of(op: &Operator, t: TensorRef, shapes: &[i64]) -> Vec<i64> {
    op.tensor_dims(t).iter().map(|d| d.value(shapes)).collect()
}

/// Per axis, how far a row-major flat index of `index` into `dims` moves when
/// the axis grows by one.
pub(crate) fn flat_coefficients(index: &[Affine], dims: &[i64], axes: usize) -> Vec<i64> {
    let mut out = vec![0i64; axes];
    for (d, ix) in index.iter().enumerate() {
        let stride: i64 = dims[d + 1..].iter().product();
        for &(a, c) in &ix.terms {
            out[a] += c * stride;
        }
    }
    out
}

/// Distinct elements of a row-major tensor of `dims` that `index` reaches
/// while each axis `a` takes `cover[a]` consecutive values.
pub(crate) fn direct_footprint(index: &[Affine], dims: &[i64], cover: &[i64]) -> f64 {
    index
        .iter()
        .zip(dims)
        .map(|(ix, d)| {
            let span: i64 = ix
                .terms
                .iter()
                .map(|&(a, c)| c.abs() * (cover[a] - 1))
                .sum();
            (span + 1).min(*d).max(1) as f64
        })
        .product()
}

/// The output operand of stage `s` (its spatial axis `a` is dimension `a`),
/// with `accesses(l)` stores in a run of loop `l`.
pub(crate) fn output_operand(
    op: &Operator,
    shapes: &[i64],
    s: usize,
    loops: &[LoopShape],
    covers: &[Vec<i64>],
    lanes: f64,
    accesses: impl Fn(usize) -> f64,
) -> OperandShape {
    let stage = &op.stages[s];
    let dims: Vec<i64> = stage.dims.iter().map(|d| d.value(shapes)).collect();
    OperandShape {
        tensor: TensorRef::Stage(s),
        storage: Storage::Output,
        strides: strides(loops, |a| {
            if a < stage.n_spatial {
                dims[a + 1..].iter().product::<i64>() as f64
            } else {
                0.0
            }
        }),
        footprint: covers
            .iter()
            .map(|c| {
                (0..stage.n_spatial)
                    .map(|a| c[a].min(dims[a]) as f64)
                    .product::<f64>()
                    .max(lanes)
            })
            .collect(),
        accesses: (0..loops.len()).map(accesses).collect(),
    }
}
