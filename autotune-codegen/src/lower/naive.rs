//! The default schedule of a stage: a nest over the spatial axes in declaration
//! order, each reduction accumulating in a scalar local, the value stored once.
//! It serves the generic kernel (symbolic shapes) and stages the tiled
//! structure does not handle (several reductions).

use autotune_lang::ir::{Affine, Expr, Extent, Operator, Stage, TensorRef};

use super::dims::Dims;
use super::names::{buffer_name, c_ident};
use crate::loopnest::{Guard, IExpr, Stmt, VExpr};

pub(crate) struct Lowerer<'a> {
    pub op: &'a Operator,
    dims: Dims<'a>,
    next_acc: usize,
}

impl<'a> Lowerer<'a> {
    pub fn new(op: &'a Operator, dims: Dims<'a>) -> Lowerer<'a> {
        Lowerer {
            op,
            dims,
            next_acc: 0,
        }
    }

    pub fn extent(&self, e: &Extent) -> IExpr {
        self.dims.extent(e)
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
            Expr::ShapeValue(v) => VExpr::FromIndex(self.dims.shape_value(*v)),
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
                        .map(|(ix, d)| Guard {
                            index: self.affine(ix, stage),
                            lane_step: 0,
                            bound: self.extent(d),
                        })
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
