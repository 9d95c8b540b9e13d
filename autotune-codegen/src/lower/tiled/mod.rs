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
//! The plan may place the reduction blocks among the outer tile loops instead
//! (`order = j/i`: `o_j`, `ro_*`, `o_i`), so that what one block of the
//! reduction reads along `j` is copied once ([`crate::space::Read::PackBlock`])
//! and read for every tile of `i`: the loop order of GotoBLAS.
//!
//! In a specialisation every extent is a constant; in the generic kernel the
//! extents (and the tile counts) are expressions of the shape parameters, and
//! tiles, blocks and splits are the plan's constants either way. Tiles that
//! overhang the stage are computed whole and stored partially; every load they
//! make stays inside its buffer because operands whose index range would leave
//! the buffer (or that are padded) are first copied into a buffer that covers
//! the range, with the padding materialised; the generic kernel packs every
//! operand, as only run time knows which reads leave. So no innermost loop
//! branches on bounds, except where the plan reads a padded operand in place
//! instead of copying it ([`crate::space::Read::Guard`]): there each register
//! tile tests once whether its reads stay inside, and only a border tile's
//! code tests each read.
//!
//! This module only ties the parts together; each owns one concern, and each
//! uses only those before it in this list:
//!
//! - [`geometry`]: the shape of the tiling and the loop-variable names;
//! - [`operands`]: where each load reads from, and the copies that decides;
//! - [`index`]: index arithmetic of loads and stores at a point of the tile;
//! - [`sites`]: the resolved load sites, and expressions read through them;
//! - [`micro_kernel`]: the register tile (accumulate, reduce, store);
//! - [`nest`]: the loops around the register tile;
//! - [`shape`]: the same nest as numbers, for the cost model, without lowering it.

mod geometry;
mod index;
mod micro_kernel;
mod nest;
mod operands;
mod shape;
mod sites;

pub(crate) use shape::stage_shape;

use autotune_lang::analysis::load_sites;
use autotune_lang::ir::{Expr, Operator, TensorRef};

use super::dims::Dims;
use super::naive::Lowerer;
use super::names::{buffer_name, slot_name, PARTIAL_SUMS};
use crate::loopnest::{ConstantCopies, IExpr, Scratch, Stmt};
use crate::space::{Read, StagePlan};
use geometry::{product, Tiling};
use index::Indexer;
use micro_kernel::MicroKernel;
use operands::{Operands, Source};
use sites::Sites;

/// Bytes of a cache line, the unit of a prefetch.
const CACHE_LINE: i64 = 64;

/// Lowers stage `s` of `op` (and the consumer fused into it) with `plan`,
/// adding the buffers it allocates to `scratch`. Also returns the elements
/// its copies fill per call (the smaller of the two variants where the
/// generic kernel picks one at run time).
/// The copies of constant inputs go to `constants` instead (made once per
/// handle; in the generic kernel, once per handle and call shape).
pub(crate) fn lower_stage(
    op: &Operator,
    dims: Dims,
    s: usize,
    plan: &StagePlan,
    consumer: Option<usize>,
    scratch: &mut Vec<Scratch>,
    constants: &mut Vec<ConstantCopies>,
) -> (Vec<Stmt>, IExpr) {
    let stage = &op.stages[s];
    let (reduction, red_axes) = geometry::reduction(stage);
    let Some(t) = Tiling::new(stage, dims, plan, &red_axes) else {
        // Known-empty iteration spaces keep the default lowering. (In the
        // generic kernel, an empty reduction runs one block of no iterations,
        // which stores the identity.)
        return (
            lower_default(op, dims, s, consumer, scratch),
            IExpr::Const(0),
        );
    };
    let mut out = vec![Stmt::Comment(format!(
        "stage {}: tiled {}",
        op.tensor_name(TensorRef::Stage(s)),
        describe(op, s, &t, plan, consumer)
    ))];
    let lower = |in_place: bool,
                 tag: &str,
                 scratch: &mut Vec<Scratch>,
                 constants: &mut Vec<ConstantCopies>| {
        let operands = Operands {
            op,
            stage: s,
            dims,
            t: &t,
            parallel: plan.parallel > 0,
            in_place,
        };
        let before = scratch.len();
        let (nest, block_fill) = tiled_nest(
            &operands, plan, reduction, consumer, tag, scratch, constants,
        );
        let filled = Scratch::total(&scratch[before..]).plus(IExpr::Const(block_fill));
        (nest, filled)
    };
    if t.known() {
        let (nest, filled) = lower(false, "", scratch, constants);
        out.extend(nest);
        return (out, filled);
    }
    // The generic kernel reads unpacked operands in place where the call's
    // extents are whole tiles along the axes they read, and packs them otherwise.
    let probe = Operands {
        op,
        stage: s,
        dims,
        t: &t,
        parallel: false,
        in_place: true,
    };
    let in_place: Vec<Vec<usize>> = sites_of(op, s, plan, consumer)
        .into_iter()
        .filter(|site| {
            !matches!(
                site.read,
                Read::Pack | Read::PackBlock | Read::PackAhead | Read::PackInOrder
            )
        })
        .filter_map(|site| probe.in_place_axes(site.load))
        .collect();
    if in_place.is_empty() {
        let (nest, filled) = lower(false, "", scratch, constants);
        out.extend(nest);
        return (out, filled);
    }
    let mut axes: Vec<usize> = in_place
        .into_iter()
        .flatten()
        .filter(|a| t.may_overhang(*a))
        .collect();
    axes.sort_unstable();
    axes.dedup();
    if axes.is_empty() {
        // Tiles of one element along those axes never overhang: always in place.
        let (nest, filled) = lower(true, "d", scratch, constants);
        out.extend(nest);
        return (out, filled);
    }
    // (A constant's copies, made once before either runs, serve both.)
    let (direct, direct_filled) = lower(true, "d", scratch, constants);
    let (packed, packed_filled) = lower(false, "", scratch, constants);
    out.push(Stmt::If {
        // `ext % tile < 1` along every such axis.
        conds: axes
            .iter()
            .map(|&a| {
                (
                    t.ext[a].clone().rem_by(IExpr::Const(t.tile[a])),
                    IExpr::Const(1),
                )
            })
            .collect(),
        then: direct,
        otherwise: packed,
    });
    (out, direct_filled.min(packed_filled))
}

/// A load site of a tiled stage: the stage's own or its fused consumer's.
struct Site<'e> {
    load: &'e Expr,
    /// How the plan reads it (a consumer's loads are read directly).
    read: Read,
    /// Names its copies: the stage's and the load's positions.
    tag: String,
}

/// The load sites of stage `s` and of its fused consumer (not the consumer's
/// read of `s`).
fn sites_of<'e>(
    op: &'e Operator,
    s: usize,
    plan: &StagePlan,
    consumer: Option<usize>,
) -> Vec<Site<'e>> {
    let mut out: Vec<Site> = load_sites(&op.stages[s].body)
        .into_iter()
        .enumerate()
        .map(|(i, load)| Site {
            load,
            read: plan.reads.get(i).copied().unwrap_or(Read::Direct),
            tag: format!("{s}_{i}"),
        })
        .collect();
    if let Some(c) = consumer {
        for (i, load) in load_sites(&op.stages[c].body).into_iter().enumerate() {
            if !matches!(load, Expr::Load { tensor: TensorRef::Stage(p), .. } if *p == s) {
                out.push(Site {
                    load,
                    read: Read::Direct,
                    tag: format!("{c}_{i}"),
                });
            }
        }
    }
    out
}

/// The tiled nest of one stage with `operands`' decisions: copies, then the
/// loops around the register tile; and the elements of its per-block copies'
/// arrays (a block each: what the generic kernel's dispatcher weighs them at,
/// though a border block fills only what its tiles read). `tag` tells this
/// nest's copies apart from another variant's; the copies of constant inputs
/// go to `constants`, under names both variants share.
fn tiled_nest(
    operands: &Operands,
    plan: &StagePlan,
    reduction: Option<&Expr>,
    consumer: Option<usize>,
    tag: &str,
    scratch: &mut Vec<Scratch>,
    constants: &mut Vec<ConstantCopies>,
) -> (Vec<Stmt>, i64) {
    let (op, s, t) = (operands.op, operands.stage, operands.t);
    let stage = &op.stages[s];
    let mut out = Vec::new();
    // The copies made at the start of a block.
    let mut block = Vec::new();
    let mut sites = Sites::new(Indexer { stage, t }, operands.dims);
    let order = t.order(plan);
    let mut ahead = Vec::new();
    // Resolve every load: the stage's own, then the fused consumer's.
    for site in sites_of(op, s, plan, consumer) {
        let tag = match constant_input(op, site.load) {
            Some(_) => site.tag.clone(),
            None => format!("{tag}{}", site.tag),
        };
        let (stmts, buffers) = (out.len(), scratch.len());
        let access = operands.resolve(
            site.load,
            site.read,
            &plan.order,
            &tag,
            scratch,
            &mut out,
            &mut block,
        );
        keep_constant_copies(op, site.load, constants, scratch, buffers, &mut out, stmts);
        if let (Read::PackAhead, Source::Packed { layout }) = (site.read, &access.source) {
            let line = CACHE_LINE / op.dtype.size() as i64;
            ahead.extend(nest::ahead(
                stage,
                t,
                &order,
                plan,
                &access.buf,
                layout,
                line,
            ));
        }
        sites.push(site.load, access);
    }
    let target = buffer_name(op, TensorRef::Stage(consumer.unwrap_or(s)));
    let partial = index::partial_sums(t).map(|elems| {
        let name = format!("{PARTIAL_SUMS}{tag}{s}");
        scratch.push(Scratch {
            name: name.clone(),
            elems: IExpr::Const(elems),
        });
        name
    });
    let micro = MicroKernel::new(
        &sites,
        s,
        consumer.map(|c| &op.stages[c].body),
        target,
        &order,
    )
    .prefetching(ahead)
    .keeping_partial_sums(partial)
    .lower(reduction, plan.unroll);
    let block_fill = block.iter().map(|b| b.elems).sum();
    out.extend(nest::nest(stage, t, &order, plan, block, micro));
    (out, block_fill)
}

/// The input `load` reads, if it is one of `op`'s constants.
fn constant_input(op: &Operator, load: &Expr) -> Option<usize> {
    match load {
        Expr::Load {
            tensor: t @ TensorRef::Input(i),
            ..
        } if op.is_constant(*t) => Some(*i),
        _ => None,
    }
}

/// Moves the copies `load` just made (the buffers from `scratch[buffers..]`,
/// the loops from `out[stmts..]`) to its input's entry of `constants`, if it
/// reads a constant input. The generic kernel's second variant makes the same
/// copies under the same names as its first: those are kept once.
fn keep_constant_copies(
    op: &Operator,
    load: &Expr,
    constants: &mut Vec<ConstantCopies>,
    scratch: &mut Vec<Scratch>,
    buffers: usize,
    out: &mut Vec<Stmt>,
    stmts: usize,
) {
    let Some(i) = constant_input(op, load) else {
        return;
    };
    if scratch.len() == buffers {
        return;
    }
    let input = buffer_name(op, TensorRef::Input(i));
    let c = match constants.iter().position(|c| c.input == input) {
        Some(c) => &mut constants[c],
        None => {
            constants.push(ConstantCopies {
                input,
                slot: slot_name(op, i),
                // Both set once the kernel is whole.
                layout: 0,
                key: Vec::new(),
                buffers: Vec::new(),
                fill: Vec::new(),
            });
            constants.last_mut().expect("just pushed")
        }
    };
    let (copies, fill) = (scratch.split_off(buffers), out.split_off(stmts));
    if copies.iter().all(|b| c.buffers.contains(b)) {
        return;
    }
    let clash = copies
        .iter()
        .any(|b| c.buffers.iter().any(|kept| kept.name == b.name));
    assert!(!clash, "the variants copy {} differently", c.input);
    c.buffers.extend(copies);
    c.fill.extend(fill);
}

/// Stage `s` (and its fused consumer, which then reads a scratch buffer) with
/// the default schedule.
fn lower_default(
    op: &Operator,
    dims: Dims,
    s: usize,
    consumer: Option<usize>,
    scratch: &mut Vec<Scratch>,
) -> Vec<Stmt> {
    let stage = &op.stages[s];
    let mut l = Lowerer::new(op, dims);
    let mut out = Vec::new();
    if consumer.is_some() {
        scratch.push(Scratch {
            name: buffer_name(op, TensorRef::Stage(s)),
            elems: product(&dims.tensor(TensorRef::Stage(s))),
        });
    }
    out.extend(l.stage(s, stage));
    if let Some(c) = consumer {
        out.extend(l.stage(c, &op.stages[c]));
    }
    out
}

/// The plan, as the stage's comment in the C gives it.
fn describe(
    op: &Operator,
    s: usize,
    t: &Tiling,
    plan: &StagePlan,
    consumer: Option<usize>,
) -> String {
    let stage = &op.stages[s];
    let axes = |f: &dyn Fn(usize) -> String| {
        plan.order
            .iter()
            .map(|a| f(*a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut d = format!(
        "(tile {}; block {}",
        axes(&|a| format!("{}={}", stage.axes[a].name, t.tile[a])),
        axes(&|a| format!("{}={}", stage.axes[a].name, t.block[a]))
    );
    for r in &t.red {
        d += &format!("; split {}={}", stage.axes[r.axis].name, r.inner);
    }
    let order = t.order(plan);
    let depth = plan.reduction_depth().min(order.len());
    if !t.red.is_empty() && depth < order.len() {
        let inside: Vec<&str> = order[depth..]
            .iter()
            .map(|a| stage.axes[*a].name.as_str())
            .collect();
        d += &format!("; reduction blocks outside {}", inside.join(" "));
    }
    if let Some(m) = t.merge {
        let name = |a: usize| stage.axes[a].name.as_str();
        d += &format!("; {}*{} merged", name(m.a), name(m.a + 1));
    }
    if let Some((v, w)) = t.vector {
        d += &format!("; vector {}x{w}", stage.axes[v].name);
    }
    d += &format!("; unroll {}; parallel {}", plan.unroll, plan.parallel);
    if let Some(c) = consumer {
        d += &format!("; fused {}", op.tensor_name(TensorRef::Stage(c)));
    }
    d + ")"
}
