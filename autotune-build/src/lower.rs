//! IR → loop nest. Each stage is lowered with its schedule: the default one
//! (here: a nest over the spatial axes in declaration order, each reduction
//! accumulating in a scalar local, the value stored once), a tiled one from the
//! schedule space (`tiled`), or not at all when it is fused into its producer's
//! store.

use autotune_lang::ir::{Affine, Expr, Extent, Operator, Stage, TensorRef};
use autotune_lang::mangle::Variant;

use crate::loopnest::{IExpr, Kernel, Param, ParamKind, Scratch, Stmt, VExpr};
use crate::space::StageSchedule;
use crate::tiled;

/// C keywords and names the generated code uses itself; a user name equal to one
/// of them gets a trailing `_`.
const RESERVED: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "out", "status", "ctx", "int64_t", "int32_t",
    "INFINITY", "NAN", "NULL",
];

/// The C name of a user's index variable or shape.
pub fn c_ident(name: &str) -> String {
    // Generated names contain `__` (tiled code) or start with `in_`, `st_`, `acc`:
    // user names are kept apart from both.
    let name = name.replace("__", "_0_");
    let generated = name.starts_with("in_")
        || name.starts_with("st_")
        || (name.starts_with("acc") && name[3..].chars().all(|c| c.is_ascii_digit()));
    if RESERVED.contains(&name.as_str()) || generated || name.starts_with('_') {
        format!("{name}_")
    } else {
        name
    }
}

/// The C name of a tensor's buffer.
pub fn buffer_name(op: &Operator, t: TensorRef) -> String {
    match t {
        TensorRef::Input(i) => format!("in_{}", op.inputs[i].name),
        TensorRef::Stage(s) if s + 1 == op.stages.len() => "out".to_string(),
        TensorRef::Stage(s) => format!("st_{}", op.stages[s].name),
    }
}

pub(crate) struct Lowerer<'a> {
    pub op: &'a Operator,
    /// Shape values of a specialisation; `None` for the generic kernel.
    pub shapes: Option<&'a [i64]>,
    next_acc: usize,
}

/// Lowers one variant of `op`: with `schedule` (one entry per stage; used only
/// for a specialisation) or the default schedule. `runtime` prefixes the
/// runtime's C functions (the thread pool) the kernel may call.
pub fn lower(
    op: &Operator,
    variant: Variant,
    schedule: Option<&[StageSchedule]>,
    symbol: String,
    runtime: String,
) -> Kernel {
    let shapes = match variant {
        Variant::Generic => None,
        Variant::Specialized(i) => Some(op.specializations[i].values.as_slice()),
    };
    let schedule = match (schedule, shapes) {
        (Some(s), Some(_)) => s.to_vec(),
        _ => vec![StageSchedule::Default; op.stages.len()],
    };
    let mut l = Lowerer::new(op, shapes);
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
    let mut body = Vec::new();
    for (s, stage) in op.stages.iter().enumerate() {
        let name = op.tensor_name(TensorRef::Stage(s));
        match &schedule[s] {
            StageSchedule::Fused(p) => body.push(Stmt::Comment(format!(
                "stage {name}: computed in the store of stage {}",
                op.tensor_name(TensorRef::Stage(*p))
            ))),
            StageSchedule::Default => {
                body.push(Stmt::Comment(format!("stage {name}: default schedule")));
                body.extend(l.stage(s, stage));
            }
            StageSchedule::Tiled(plan) => {
                let shapes = shapes.expect("tiled stages are specialised");
                body.extend(tiled::lower_stage(
                    op,
                    shapes,
                    s,
                    plan,
                    fused_consumer(s),
                    &mut scratch,
                ));
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
        } else {
            "schedule: default (loops in declaration order, scalar accumulators)".to_string()
        },
    ];
    Kernel {
        symbol,
        runtime,
        dtype: op.dtype,
        doc,
        params,
        scratch,
        body,
    }
}

impl<'a> Lowerer<'a> {
    pub fn new(op: &'a Operator, shapes: Option<&'a [i64]>) -> Lowerer<'a> {
        Lowerer {
            op,
            shapes,
            next_acc: 0,
        }
    }

    pub fn extent(&self, e: &Extent) -> IExpr {
        match (e, self.shapes) {
            (Extent::Const(c), _) => IExpr::Const(*c),
            (Extent::Var(v), Some(values)) => IExpr::Const(values[*v]),
            (Extent::Var(v), None) => IExpr::Var(c_ident(&self.op.shape_vars[*v].name)),
        }
    }

    fn axis_var(stage: &Stage, a: usize) -> String {
        c_ident(&stage.axes[a].name)
    }

    /// The loop nest of one stage.
    pub fn stage(&mut self, s: usize, stage: &Stage) -> Vec<Stmt> {
        let mut body = Vec::new();
        let value = self.value(stage, &stage.body, &mut body);
        let out = TensorRef::Stage(s);
        let index = self.flat_index(
            out,
            &(0..stage.n_spatial).map(Affine::axis).collect::<Vec<_>>(),
            stage,
        );
        body.push(Stmt::store(&buffer_name(self.op, out), index, value));
        for a in (0..stage.n_spatial).rev() {
            body = vec![Stmt::serial(
                &Self::axis_var(stage, a),
                self.extent(&stage.axes[a].extent),
                body,
            )];
        }
        body
    }

    fn affine(&self, ix: &Affine, stage: &Stage) -> IExpr {
        ix.terms
            .iter()
            .fold(IExpr::Const(0), |acc, &(a, c)| {
                acc.plus(IExpr::var(&Self::axis_var(stage, a)).times(IExpr::Const(c)))
            })
            .plus(IExpr::Const(ix.offset))
    }

    /// Row-major flat offset of `tensor[index...]`.
    fn flat_index(&self, tensor: TensorRef, index: &[Affine], stage: &Stage) -> IExpr {
        let dims = self.op.tensor_dims(tensor);
        index
            .iter()
            .zip(dims)
            .fold(IExpr::Const(0), |acc, (ix, d)| {
                acc.times(self.extent(d)).plus(self.affine(ix, stage))
            })
    }

    /// Lowers an expression; reductions become accumulator loops pushed to `pre`.
    fn value(&mut self, stage: &Stage, e: &Expr, pre: &mut Vec<Stmt>) -> VExpr {
        match e {
            Expr::Const(c) => VExpr::Const(*c),
            Expr::ShapeValue(v) => VExpr::FromIndex(self.extent(&Extent::Var(*v))),
            Expr::Load { tensor, index, pad } => {
                let dims = self.op.tensor_dims(*tensor);
                let guard = match pad {
                    None => Vec::new(),
                    Some(_) => index
                        .iter()
                        .zip(dims)
                        .filter(|(ix, d)| {
                            // A bare axis running over exactly this dimension is in range.
                            ix.as_axis().map(|a| stage.axes[a].extent) != Some(**d)
                        })
                        .map(|(ix, d)| (self.affine(ix, stage), self.extent(d)))
                        .collect(),
                };
                VExpr::Load {
                    buf: buffer_name(self.op, *tensor),
                    index: self.flat_index(*tensor, index, stage),
                    guard,
                    pad: pad.unwrap_or(0.0),
                    lanes: 1,
                    stride: 1,
                }
            }
            Expr::Unary(op, a) => VExpr::Unary(*op, Box::new(self.value(stage, a, pre))),
            Expr::Binary(op, a, b) => {
                let a = self.value(stage, a, pre);
                let b = self.value(stage, b, pre);
                VExpr::Binary(*op, Box::new(a), Box::new(b))
            }
            Expr::Reduce { op, axes, body } => {
                let acc = format!("acc{}", self.next_acc);
                self.next_acc += 1;
                let mut inner = Vec::new();
                let v = self.value(stage, body, &mut inner);
                inner.push(Stmt::Assign {
                    name: acc.clone(),
                    value: VExpr::Binary(
                        op.combiner(),
                        Box::new(VExpr::Local(acc.clone())),
                        Box::new(v),
                    ),
                });
                for &a in axes.iter().rev() {
                    inner = vec![Stmt::serial(
                        &Self::axis_var(stage, a),
                        self.extent(&stage.axes[a].extent),
                        inner,
                    )];
                }
                pre.push(Stmt::Local {
                    name: acc.clone(),
                    lanes: 1,
                    init: VExpr::Const(op.identity()),
                });
                pre.extend(inner);
                VExpr::Local(acc)
            }
        }
    }
}
