//! Sizes as index expressions: constants in a specialisation, the kernel's
//! shape parameters in the generic kernel. Both schedules read sizes only
//! through here, so one lowering serves both kinds of kernel.

use autotune_lang::ir::{Extent, Operator, ShapeExpr, ShapeVarId, ShapeVarKind, Stage, TensorRef};

use super::names::c_ident;
use crate::loopnest::IExpr;

#[derive(Clone, Copy)]
pub(crate) struct Dims<'a> {
    op: &'a Operator,
    /// Shape values of a specialisation; `None` for the generic kernel.
    values: Option<&'a [i64]>,
}

impl<'a> Dims<'a> {
    pub fn new(op: &'a Operator, values: Option<&'a [i64]>) -> Dims<'a> {
        Dims { op, values }
    }

    pub fn shape_value(&self, v: ShapeVarId) -> IExpr {
        match self.values {
            Some(values) => IExpr::Const(values[v]),
            None => match &self.op.shape_vars[v].kind {
                // A size the attribute fixes (`R = 3`) is a constant in the
                // generic kernel too: as a variable it reached the inner loops'
                // bounds and indices (a generic 3×3 conv ran at 0.6× its
                // specialisation at the same shapes and config).
                ShapeVarKind::Derived(ShapeExpr::Const(c)) => IExpr::Const(*c),
                _ => IExpr::Var(c_ident(&self.op.shape_vars[v].name)),
            },
        }
    }

    pub fn extent(&self, e: &Extent) -> IExpr {
        match e {
            Extent::Const(c) => IExpr::Const(*c),
            Extent::Var(v) => self.shape_value(*v),
        }
    }

    /// The iterations of `stage`'s loops: the product of its axes' extents.
    pub fn iterations(&self, stage: &Stage) -> IExpr {
        stage
            .axes
            .iter()
            .fold(IExpr::Const(1), |p, a| p.times(self.extent(&a.extent)))
    }

    /// The dimensions of a tensor, outer to inner.
    pub fn tensor(&self, t: TensorRef) -> Vec<IExpr> {
        self.op
            .tensor_dims(t)
            .iter()
            .map(|d| self.extent(d))
            .collect()
    }
}
