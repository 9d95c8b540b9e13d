//! The shape of a tiled stage's nest ([`crate::lower::shape`]), from the same
//! geometry ([`Tiling`]) and operand decisions ([`Operands::source`]) the
//! lowering uses: the loops of [`super::nest`] around the register tile of
//! [`super::micro_kernel`], innermost first.

use autotune_lang::analysis::load_sites;
use autotune_lang::ir::{AxisId, Expr, Operator};

use super::geometry::{ceil_div, known, product, reduction, Tiling};
use super::nest::{ahead, copy_depth, outer_levels, OuterLevel};
use super::operands::{Level, Operands, Source};
use crate::loopnest::IExpr;
use crate::lower::dims::Dims;
use crate::lower::shape::{
    covers, direct_footprint, flat_coefficients, flops, iterations, naive_shape, output_operand,
    strides, LoopRun, LoopShape, NestShape, OperandShape, Storage,
};
use crate::space::{Read, StagePlan};

/// The shape of stage `s` tiled with `plan` (`consumer`: the stage computed in
/// its store).
pub(crate) fn stage_shape(
    op: &Operator,
    shapes: &[i64],
    s: usize,
    plan: &StagePlan,
    consumer: Option<usize>,
) -> NestShape {
    let stage = &op.stages[s];
    let (reduction, red_axes) = reduction(stage);
    let rbody = match reduction {
        Some(Expr::Reduce { body, .. }) => body,
        _ => &stage.body,
    };
    let dims = Dims::new(op, Some(shapes));
    let Some(t) = Tiling::new(stage, dims, plan, &red_axes) else {
        return naive_shape(op, shapes, s);
    };
    let order = t.order(plan);
    // The unrolled loop runs no iteration when the block is shorter than the
    // unroll (the remainder loop does all the work). With lanes along the
    // reduction, each unrolled step is a vector of `reduce_lanes` steps.
    let reduce_lanes = t.lane_reduction().map_or(1, |(_, l)| l as i64);
    let u = match t.red.last() {
        Some(r) if r.inner >= plan.unroll.max(1) as i64 * reduce_lanes => plan.unroll.max(1) as i64,
        _ => 1,
    };
    let levels = outer_levels(&t, &order, plan);
    let (loops, inner_loops) = loops(&t, &order, &levels, u * reduce_lanes);
    let extent = |a: AxisId| {
        if a < t.n {
            known(&t.ext[a])
        } else {
            t.reduce_axis(a).map_or(1, |r| known(&r.extent))
        }
    };
    // What one innermost iteration covers: the register tile, `u` steps of
    // the unrolled reduction axis.
    let mut inner = vec![1i64; stage.axes.len()];
    inner[..t.n].copy_from_slice(&t.tile);
    if let Some(r) = t.red.last() {
        inner[r.axis] = u * reduce_lanes;
    }
    let covers = covers(&loops, inner, extent);
    let operands_of = Operands {
        op,
        stage: s,
        in_place: false,
        dims,
        t: &t,
        parallel: plan.parallel > 0,
    };
    let lanes = t.acc_lanes();
    let mut scratch = 0.0;
    let mut prefetched = 0.0;
    let mut operands = Vec::new();
    for (i, site) in load_sites(&stage.body).into_iter().enumerate() {
        let Expr::Load { tensor, index, .. } = site else {
            unreachable!("load sites are loads")
        };
        let involved = |a: AxisId| index.iter().any(|ix| ix.terms.iter().any(|(b, _)| *b == a));
        // Loads of one innermost iteration: one per register-tile element the
        // operand varies over (a vector along the vector axis), per unroll step.
        let loads: f64 = u as f64
            * (0..t.n)
                .filter(|a| involved(*a))
                .map(|a| match t.vector {
                    Some((v, w)) if v == a => ceil_div(t.tile[a], w as i64),
                    _ => t.tile[a],
                })
                .product::<i64>() as f64;
        let read = plan.reads.get(i).copied().unwrap_or(Read::Direct);
        // A specialisation makes its copies of a constant input once per
        // handle, not per call (a declared bucket's generic kernel copies per
        // call; its features do not tell).
        let per_call = !op.is_constant(*tensor);
        let copied = if per_call { 1.0 } else { 0.0 };
        let (storage, strides, footprint) = match operands_of.source(site, read, &plan.order) {
            // (A guarded read's border tests are not features: the model sees
            // the reads in place.)
            Source::Direct { dims } | Source::Guarded { dims, .. } => {
                let dims: Vec<i64> = dims.iter().map(known).collect();
                direct(&loops, &covers, index, &dims, Storage::Direct)
            }
            Source::Copy { dims, .. } => {
                let dims: Vec<i64> = dims.iter().map(known).collect();
                scratch += copied * dims.iter().product::<i64>() as f64;
                direct(&loops, &covers, index, &dims, Storage::Copy)
            }
            Source::Packed { layout } => {
                let elems = known(&product(layout.iter().map(|l| &l.2))) as f64;
                scratch += copied * elems;
                // Where the lowering prefetches the copy's next slice.
                if read == Read::PackAhead
                    && ahead(stage, &t, &order, plan, "", &layout, 1).is_some()
                {
                    prefetched += elems;
                }
                packed(&loops, &inner_loops, &covers, &layout)
            }
            Source::BlockPacked { layout } => {
                // Refilled on every run of the level it is made in, constant
                // inputs' included.
                let axes: Vec<AxisId> = layout.iter().map(|l| l.0).collect();
                let blocks: i64 = levels
                    .iter()
                    .take(copy_depth(&levels, t.n, &axes) + 1)
                    .map(|level| match level {
                        OuterLevel::Parallel(fused) => {
                            fused.iter().map(|a| known(&t.outer[*a])).product()
                        }
                        OuterLevel::Tile(a) => known(&t.outer[*a]),
                        OuterLevel::Reduce => t.red.iter().map(|r| known(&r.outer)).product(),
                    })
                    .product();
                scratch += (blocks * known(&product(layout.iter().map(|l| &l.2)))) as f64;
                packed(&loops, &inner_loops, &covers, &layout)
            }
        };
        operands.push(OperandShape {
            tensor: *tensor,
            storage,
            strides,
            footprint,
            accesses: (0..loops.len())
                .map(|l| loads * iterations(&loops, l))
                .collect(),
        });
    }
    // The tile is stored once per register tile, after the reduction loops.
    let accumulators = plan.accumulators();
    let reductions = t.red.len();
    operands.push(output_operand(
        op,
        shapes,
        consumer.unwrap_or(s),
        &loops,
        &covers,
        t.lanes() as f64,
        |l| {
            if l < reductions {
                0.0
            } else {
                accumulators as f64
                    * loops[reductions..=l]
                        .iter()
                        .map(|x| x.extent)
                        .product::<f64>()
            }
        },
    ));
    NestShape {
        loops,
        operands,
        flops_per_iteration: (u as usize * accumulators * lanes) as f64
            * (flops(rbody) + if t.red.is_empty() { 0.0 } else { 1.0 }),
        statements: (u as usize * accumulators) as f64,
        lanes,
        accumulators,
        unroll: u as usize,
        total_flops: 0.0,
        scratch_elems: scratch,
        prefetched_elems: prefetched,
        fused: consumer.is_some(),
    }
}

/// The loops of the tiled nest, innermost first: inner reduction (the last
/// axis unrolled by `u`), register tiles of the block, then the `levels`
/// (outer tiles, the leading ones fused into one parallel loop, and the outer
/// reduction blocks among them). Also, per loop, the level of a packed layout
/// it walks.
fn loops(
    t: &Tiling,
    order: &[usize],
    levels: &[OuterLevel],
    u: i64,
) -> (Vec<LoopShape>, Vec<Vec<(AxisId, Level)>>) {
    let mut loops = Vec::new();
    let mut walked = Vec::new();
    let mut push = |extent: i64, run: LoopRun, steps: Vec<(AxisId, i64)>, level: Level| {
        walked.push(steps.iter().map(|s| (s.0, level)).collect());
        loops.push(LoopShape {
            extent: extent.max(1) as f64,
            run,
            steps,
        });
    };
    for (i, r) in t.red.iter().enumerate().rev() {
        if i + 1 == t.red.len() && u > 1 {
            push(
                r.inner / u,
                LoopRun::Unrolled,
                vec![(r.axis, u)],
                Level::ReduceInner,
            );
        } else {
            push(
                r.inner,
                LoopRun::Serial,
                vec![(r.axis, 1)],
                Level::ReduceInner,
            );
        }
    }
    for &a in order.iter().rev() {
        let tiles = ceil_div(known(&t.ext[a]), t.tile[a]).min(t.block[a]);
        push(tiles, LoopRun::Serial, vec![(a, t.tile[a])], Level::Block);
    }
    for level in levels.iter().rev() {
        match level {
            OuterLevel::Reduce => {
                for r in t.red.iter().rev() {
                    push(
                        known(&r.outer),
                        LoopRun::Serial,
                        vec![(r.axis, r.inner)],
                        Level::ReduceOuter,
                    );
                }
            }
            &OuterLevel::Tile(a) => push(
                known(&t.outer[a]),
                LoopRun::Serial,
                vec![(a, t.block_size(a))],
                Level::Outer,
            ),
            OuterLevel::Parallel(fused) => push(
                fused.iter().map(|a| known(&t.outer[*a])).product(),
                LoopRun::Parallel,
                fused.iter().map(|&a| (a, t.block_size(a))).collect(),
                Level::Outer,
            ),
        }
    }
    (loops, walked)
}

/// Strides and footprints of an operand read in place (or from a pad-copy of
/// `dims`), row-major.
fn direct(
    loops: &[LoopShape],
    covers: &[Vec<i64>],
    index: &[autotune_lang::ir::Affine],
    dims: &[i64],
    storage: Storage,
) -> (Storage, Vec<f64>, Vec<f64>) {
    let axes = covers.first().map_or(0, |c| c.len());
    let flat = flat_coefficients(index, dims, axes);
    (
        storage,
        strides(loops, |a| flat[a] as f64),
        covers
            .iter()
            .map(|c| direct_footprint(index, dims, c))
            .collect(),
    )
}

/// Strides and footprints of a tile-ordered pack: a loop walking level `L` of
/// axis `a` moves along the pack's `(a, L)` dimension; the pack holds one
/// element per value combination of the axes it involves.
fn packed(
    loops: &[LoopShape],
    levels: &[Vec<(AxisId, Level)>],
    covers: &[Vec<i64>],
    layout: &[(AxisId, Level, IExpr)],
) -> (Storage, Vec<f64>, Vec<f64>) {
    let stride_of = |a: AxisId, level: Level| -> f64 {
        layout
            .iter()
            .position(|l| l.0 == a && l.1 == level)
            .map_or(0.0, |p| {
                known(&product(layout[p + 1..].iter().map(|l| &l.2))) as f64
            })
    };
    let strides = loops
        .iter()
        .zip(levels)
        .map(|(l, lv)| {
            l.steps
                .iter()
                .zip(lv)
                .map(|(&(_, m), &(a, level))| {
                    // An unrolled inner step moves `m` elements of its dimension.
                    let per = if level == Level::ReduceInner {
                        m as f64
                    } else {
                        1.0
                    };
                    per * stride_of(a, level)
                })
                .sum()
        })
        .collect();
    let mut axes: Vec<AxisId> = layout.iter().map(|l| l.0).collect();
    axes.sort_unstable();
    axes.dedup();
    let footprint = covers
        .iter()
        .map(|c| axes.iter().map(|&a| c[a] as f64).product())
        .collect();
    (Storage::Packed, strides, footprint)
}
