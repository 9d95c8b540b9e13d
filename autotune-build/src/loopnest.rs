//! The loop-nest AST: an imperative kernel (loops, scalar locals, loads and
//! stores on flat buffers) that schedules transform and `codegen` prints as C.
//!
//! Index arithmetic ([`IExpr`]) is kept symbolic and folded as it is built, so a
//! specialised kernel shows plain constants and a generic one shows shape names.

use autotune_lang::ir::{BinaryOp, DType, UnaryOp};

/// Integer (index) expression; C type `int64_t`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IExpr {
    Const(i64),
    Var(String),
    Add(Box<IExpr>, Box<IExpr>),
    Mul(Box<IExpr>, Box<IExpr>),
}

impl IExpr {
    pub fn var(name: &str) -> IExpr {
        IExpr::Var(name.to_string())
    }

    /// `self + other`, folding constants.
    pub fn plus(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a + b),
            (IExpr::Const(0), e) | (e, IExpr::Const(0)) => e,
            // Keep constants last so `i * 64 + 3` reads naturally.
            (IExpr::Add(a, b), IExpr::Const(c)) if matches!(*b, IExpr::Const(_)) => {
                let IExpr::Const(bc) = *b else { unreachable!() };
                a.plus(IExpr::Const(bc + c))
            }
            (a, b) => IExpr::Add(Box::new(a), Box::new(b)),
        }
    }

    /// `self * other`, folding constants.
    pub fn times(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a * b),
            (IExpr::Const(0), _) | (_, IExpr::Const(0)) => IExpr::Const(0),
            (IExpr::Const(1), e) | (e, IExpr::Const(1)) => e,
            (IExpr::Const(c), e) => IExpr::Mul(Box::new(e), Box::new(IExpr::Const(c))),
            (a, b) => IExpr::Mul(Box::new(a), Box::new(b)),
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        match self {
            IExpr::Const(c) => Some(*c),
            _ => None,
        }
    }
}

/// Value expression in the kernel's element type.
#[derive(Clone, Debug, PartialEq)]
pub enum VExpr {
    Const(f64),
    /// An index expression converted to the element type (shape values).
    FromIndex(IExpr),
    /// `buf[index]`; when `guard` is not empty the load happens only if every
    /// `0 <= e < bound` holds, and `pad` is the value otherwise.
    Load {
        buf: String,
        index: IExpr,
        guard: Vec<(IExpr, IExpr)>,
        pad: f64,
    },
    Local(String),
    Unary(UnaryOp, Box<VExpr>),
    Binary(BinaryOp, Box<VExpr>, Box<VExpr>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `for (int64_t var = 0; var < extent; ++var)`.
    For {
        var: String,
        extent: IExpr,
        body: Vec<Stmt>,
    },
    /// Declares a scalar local of the element type.
    Local {
        name: String,
        init: VExpr,
    },
    Assign {
        name: String,
        value: VExpr,
    },
    Store {
        buf: String,
        index: IExpr,
        value: VExpr,
    },
    Comment(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Input,
    Output,
    Shape,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// A buffer the kernel allocates for one call (an intermediate stage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scratch {
    pub name: String,
    pub elems: IExpr,
}

/// One C function.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub symbol: String,
    pub dtype: DType,
    /// Lines of the comment above the function.
    pub doc: Vec<String>,
    pub params: Vec<Param>,
    pub scratch: Vec<Scratch>,
    pub body: Vec<Stmt>,
}
