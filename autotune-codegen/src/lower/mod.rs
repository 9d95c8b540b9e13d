//! IR → loop nest (and, for the cost model, [`nest_shape`]: the same nest as
//! numbers, without lowering it). Each stage is lowered with its schedule: the default one
//! (`naive`: a nest over the spatial axes in declaration order, each reduction
//! accumulating in a scalar local, the value stored once), a tiled one from the
//! schedule space (`tiled`), or not at all when it is fused into its producer's
//! store.

mod dims;
mod naive;
mod names;
pub mod shape;
mod small;
mod tiled;

use autotune_lang::ir::{Operator, TensorRef};
use autotune_lang::mangle::Variant;

use crate::loopnest::{IExpr, Kernel, Param, ParamKind, Scratch, Stmt};
use crate::space::StageSchedule;
use dims::Dims;
use naive::Lowerer;
pub use names::{buffer_name, c_ident};
use names::{slot_name, PARTIAL_SUMS};
use shape::{flops, naive_shape, points, NestShape};
pub use small::GRAIN as SMALL_GRAIN;

/// Lowers one variant of `op`: with `schedule` (one entry per stage) or the
/// default schedule. A generic kernel's schedule is lowered with symbolic
/// extents. `runtime` prefixes the runtime's C functions (the thread pool) the
/// kernel may call.
pub fn lower(
    op: &Operator,
    variant: Variant,
    schedule: Option<&[StageSchedule]>,
    symbol: String,
    runtime: String,
) -> Kernel {
    lower_with(op, variant, schedule, None, symbol, runtime)
}

/// The generic kernel of `op` in the small-call schedule (`small`: the default
/// schedule's loops with vectors of `lanes` along each stage's last axis, rows
/// of the one before in registers, nothing copied), for calls too small for
/// tiled kernels; `None` where no stage can take it.
pub fn lower_small(op: &Operator, lanes: usize, symbol: String, runtime: String) -> Option<Kernel> {
    op.stages
        .iter()
        .any(small::applies)
        .then(|| lower_with(op, Variant::Generic, None, Some(lanes), symbol, runtime))
}

/// How the small-call schedule of `op`'s generic kernel fits a call, where it
/// competes with tiled kernels ([`small::fit`]).
pub fn small_fit(op: &Operator) -> Option<crate::emit::SmallFit> {
    small::fit(op, Dims::new(op, None))
}

/// [`lower`], with the default schedule's stages in the small-call schedule
/// where `small` gives its vectors' lanes and they can take it.
fn lower_with(
    op: &Operator,
    variant: Variant,
    schedule: Option<&[StageSchedule]>,
    small: Option<usize>,
    symbol: String,
    runtime: String,
) -> Kernel {
    let shapes = match variant {
        Variant::Generic => None,
        Variant::Specialized(i) => Some(op.specializations[i].values.as_slice()),
    };
    let schedule = match schedule {
        Some(s) => s.to_vec(),
        None => vec![StageSchedule::Default; op.stages.len()],
    };
    let dims = Dims::new(op, shapes);
    let mut l = Lowerer::new(op, dims);
    let mut params: Vec<Param> = (0..op.inputs.len())
        .map(|i| Param {
            name: buffer_name(op, TensorRef::Input(i)),
            kind: ParamKind::Input,
        })
        .collect();
    params.push(Param {
        name: "out".to_string(),
        kind: ParamKind::Output,
    });
    params.extend(op.constants.iter().map(|&i| Param {
        name: slot_name(op, i),
        kind: ParamKind::Slot,
    }));
    if shapes.is_none() {
        params.extend(op.shape_vars.iter().map(|v| Param {
            name: c_ident(&v.name),
            kind: ParamKind::Shape,
        }));
    }
    let fused_consumer = |s: usize| schedule.iter().position(|x| *x == StageSchedule::Fused(s));
    // A stage whose consumer is fused into it writes the consumer's buffer instead.
    let mut scratch: Vec<Scratch> = op.stages[..op.stages.len() - 1]
        .iter()
        .enumerate()
        .filter(|(s, _)| fused_consumer(*s).is_none())
        .map(|(s, stage)| Scratch {
            name: buffer_name(op, TensorRef::Stage(s)),
            elems: stage
                .dims
                .iter()
                .fold(IExpr::Const(1), |acc, d| acc.times(l.extent(d))),
        })
        .collect();
    // The stages' buffers, and below what each tiled stage's copies fill.
    let mut setup = Scratch::total(&scratch);
    let mut body = Vec::new();
    let mut constants = Vec::new();
    for (s, stage) in op.stages.iter().enumerate() {
        let name = op.tensor_name(TensorRef::Stage(s));
        match &schedule[s] {
            StageSchedule::Fused(p) => body.push(Stmt::Comment(format!(
                "stage {name}: computed in the store of stage {}",
                op.tensor_name(TensorRef::Stage(*p))
            ))),
            StageSchedule::Default => match small.filter(|_| small::applies(stage)) {
                Some(lanes) => {
                    body.push(Stmt::Comment(format!(
                        "stage {name}: small-call schedule, vectors of {lanes} along its last axis"
                    )));
                    body.extend(small::stage(op, dims, s, lanes));
                }
                None => {
                    body.push(Stmt::Comment(format!("stage {name}: default schedule")));
                    body.extend(l.stage(s, stage));
                }
            },
            StageSchedule::Tiled(plan) => {
                let (nest, filled) = tiled::lower_stage(
                    op,
                    dims,
                    s,
                    plan,
                    fused_consumer(s),
                    &mut scratch,
                    &mut constants,
                );
                body.extend(nest);
                setup = setup.plus(filled);
            }
        }
    }
    let tiled = schedule
        .iter()
        .any(|s| matches!(s, StageSchedule::Tiled(_)));
    let doc = vec![
        format!(
            "operator `{}` ({}), {} kernel",
            op.name,
            op.dtype,
            match variant {
                Variant::Generic => "generic".to_string(),
                Variant::Specialized(_) => format!(
                    "specialised ({})",
                    autotune_lang::mangle::variant_name(op, variant).replace('_', ", ")
                ),
            }
        ),
        if tiled {
            "schedule: tiled (each stage's comment gives its plan)".to_string()
        } else if small.is_some() {
            "schedule: small-call (each stage's comment says which)".to_string()
        } else {
            "schedule: default (loops in declaration order, scalar accumulators)".to_string()
        },
    ];
    for c in &mut constants {
        // (A specialisation's copies read no shape parameters.)
        c.key = params
            .iter()
            .filter(|p| p.kind == ParamKind::Shape)
            .map(|p| p.name.clone())
            .filter(|v| {
                c.fill.iter().any(|s| s.mentions(v))
                    || c.buffers.iter().any(|b| b.elems.mentions(v))
            })
            .collect();
        let text = format!("{symbol}\0{}\0{:?}\0{:?}", c.input, c.buffers, c.fill);
        c.layout = autotune_lang::mangle::fnv1a(text.as_bytes());
    }
    Kernel {
        symbol,
        runtime,
        dtype: op.dtype,
        doc,
        params,
        // A buffer of partial sums is the size of the output and filled by
        // every call: allocated per call, it page-faulted in again each time
        // (glibc trims it): a 256-channel 3×3 conv at 14×14 took 1.97–2.09 ms
        // a call so, 1.68–1.71 with it kept. Other specialisations allocate
        // per call: kept, their buffers gained nothing (0.97–1.03×,
        // `keep-scratch-ab-20261206-040500.log`) and would change every
        // entry's kernel.
        keeps_scratch: scratch.iter().any(|b| b.name.starts_with(PARTIAL_SUMS)),
        scratch,
        constants,
        setup,
        body,
    }
}

/// The extent of each axis of stage `s` at the generic kernel's symbolic
/// shapes, in the stage's axis order.
pub fn generic_extents(op: &Operator, s: usize) -> Vec<IExpr> {
    let dims = Dims::new(op, None);
    op.stages[s]
        .axes
        .iter()
        .map(|a| dims.extent(&a.extent))
        .collect()
}

/// The iterations of every stage's loops (spatial and reduction) at the
/// generic kernel's symbolic shapes: a measure of one call's work.
pub fn iterations(op: &Operator) -> IExpr {
    let dims = Dims::new(op, None);
    op.stages.iter().fold(IExpr::Const(0), |acc, stage| {
        acc.plus(dims.iterations(stage))
    })
}

/// The shape of the nest `op` lowers to at `shapes` with `schedule`.
pub fn nest_shape(op: &Operator, shapes: &[i64], schedule: &[StageSchedule]) -> NestShape {
    let fused_consumer = |s: usize| schedule.iter().position(|x| *x == StageSchedule::Fused(s));
    let work = |s: usize| flops(&op.stages[s].body).max(1.0) * points(&op.stages[s], shapes);
    let total_flops: f64 = (0..op.stages.len())
        .map(|s| flops(&op.stages[s].body) * points(&op.stages[s], shapes))
        .sum();
    let main = (0..op.stages.len())
        .filter(|s| !matches!(schedule.get(*s), Some(StageSchedule::Fused(_))))
        .max_by(|a, b| work(*a).total_cmp(&work(*b)).then(b.cmp(a)))
        .unwrap_or(0);
    // Buffers of the stages that are not the output or computed in a store.
    let stage_scratch: f64 = (0..op.stages.len().saturating_sub(1))
        .filter(|s| fused_consumer(*s).is_none())
        .map(|s| {
            op.stages[s]
                .dims
                .iter()
                .map(|d| d.value(shapes) as f64)
                .product::<f64>()
        })
        .sum();
    let mut shape = match schedule.get(main) {
        Some(StageSchedule::Tiled(plan)) => {
            tiled::stage_shape(op, shapes, main, plan, fused_consumer(main))
        }
        _ => naive_shape(op, shapes, main),
    };
    // The copies of every other tiled stage.
    let other_copies: f64 = (0..op.stages.len())
        .filter(|s| *s != main)
        .filter_map(|s| match &schedule[s] {
            StageSchedule::Tiled(plan) => {
                Some(tiled::stage_shape(op, shapes, s, plan, fused_consumer(s)).scratch_elems)
            }
            _ => None,
        })
        .sum();
    shape.total_flops = total_flops;
    shape.scratch_elems += stage_scratch + other_copies;
    shape
}
