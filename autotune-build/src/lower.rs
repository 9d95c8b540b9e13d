//! IR → loop nest, with the default schedule: every stage is a nest over its
//! spatial axes in declaration order; each reduction accumulates in a scalar
//! local inside it, and the stage's value is stored once.

use autotune_lang::ir::{Affine, Expr, Extent, Operator, Stage, TensorRef};
use autotune_lang::mangle::Variant;

use crate::loopnest::{IExpr, Kernel, Param, ParamKind, Scratch, Stmt, VExpr};

/// C keywords and names the generated code uses itself; a user name equal to one
/// of them gets a trailing `_`.
const RESERVED: &[&str] = &[
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "out", "status", "int64_t", "int32_t",
    "INFINITY", "NAN", "NULL",
];

/// The C name of a user's index variable or shape.
pub fn c_ident(name: &str) -> String {
    let generated = name.starts_with("in_")
        || name.starts_with("st_")
        || (name.starts_with("acc") && name[3..].chars().all(|c| c.is_ascii_digit()));
    if RESERVED.contains(&name) || generated || name.starts_with("__") {
        format!("{name}_")
    } else {
        name.to_string()
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

struct Lowerer<'a> {
    op: &'a Operator,
    /// Shape values of a specialisation; `None` for the generic kernel.
    shapes: Option<&'a [i64]>,
    next_acc: usize,
}

/// Lowers one variant of `op` with the default schedule.
pub fn lower(op: &Operator, variant: Variant, symbol: String) -> Kernel {
    let shapes = match variant {
        Variant::Generic => None,
        Variant::Specialized(i) => Some(op.specializations[i].values.as_slice()),
    };
    let mut l = Lowerer {
        op,
        shapes,
        next_acc: 0,
    };
    let mut params: Vec<Param> = op
        .inputs
        .iter()
        .enumerate()
        .map(|(i, _)| Param {
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
    let scratch = op.stages[..op.stages.len() - 1]
        .iter()
        .enumerate()
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
        body.push(Stmt::Comment(format!(
            "stage {}",
            op.tensor_name(TensorRef::Stage(s))
        )));
        body.extend(l.stage(s, stage));
    }
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
        "schedule: default (loops in declaration order, scalar accumulators)".to_string(),
    ];
    Kernel {
        symbol,
        dtype: op.dtype,
        doc,
        params,
        scratch,
        body,
    }
}

impl Lowerer<'_> {
    fn extent(&self, e: &Extent) -> IExpr {
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
    fn stage(&mut self, s: usize, stage: &Stage) -> Vec<Stmt> {
        let mut body = Vec::new();
        let value = self.value(stage, &stage.body, &mut body);
        let out = TensorRef::Stage(s);
        let index = self.flat_index(
            out,
            &(0..stage.n_spatial).map(Affine::axis).collect::<Vec<_>>(),
            stage,
        );
        body.push(Stmt::Store {
            buf: buffer_name(self.op, out),
            index,
            value,
        });
        for a in (0..stage.n_spatial).rev() {
            body = vec![Stmt::For {
                var: Self::axis_var(stage, a),
                extent: self.extent(&stage.axes[a].extent),
                body,
            }];
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
                    inner = vec![Stmt::For {
                        var: Self::axis_var(stage, a),
                        extent: self.extent(&stage.axes[a].extent),
                        body: inner,
                    }];
                }
                pre.push(Stmt::Local {
                    name: acc.clone(),
                    init: VExpr::Const(op.identity()),
                });
                pre.extend(inner);
                VExpr::Local(acc)
            }
        }
    }
}
