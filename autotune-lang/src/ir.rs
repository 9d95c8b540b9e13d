//! The tensor-expression IR: what an operator computes, with no notion of how.
//!
//! An [`Operator`] is a list of [`Stage`]s. Each stage defines one tensor over its
//! spatial axes by an [`Expr`] that may read the inputs and earlier stages; the last
//! stage is the output. Shapes are symbolic ([`Extent`]) and become constants in a
//! specialisation. The IR holds plain data only (no spans, no `syn` types), so its
//! `Debug` form is a stable fingerprint of what the kernel computes.

use std::fmt;

/// Element type of every tensor of an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
}

impl DType {
    /// The Rust (and source-language) spelling.
    pub fn rust_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// The C spelling.
    pub fn c_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F64 => "double",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rust_name())
    }
}

/// Index of a shape variable in [`Operator::shape_vars`].
pub type ShapeVarId = usize;

/// A symbolic size: a literal or a shape variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    Const(i64),
    Var(ShapeVarId),
}

impl Extent {
    /// The size at the given values of the shape variables.
    pub fn value(&self, shapes: &[i64]) -> i64 {
        match self {
            Extent::Const(c) => *c,
            Extent::Var(v) => shapes[*v],
        }
    }
}

/// Integer arithmetic over shape variables, for derived shapes such as a
/// convolution's output height. Division rounds toward negative infinity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShapeExpr {
    Const(i64),
    Var(ShapeVarId),
    Add(Box<ShapeExpr>, Box<ShapeExpr>),
    Sub(Box<ShapeExpr>, Box<ShapeExpr>),
    Mul(Box<ShapeExpr>, Box<ShapeExpr>),
    Div(Box<ShapeExpr>, Box<ShapeExpr>),
}

impl ShapeExpr {
    /// Evaluates with checked arithmetic; `None` on overflow or division by zero.
    pub fn eval(&self, vars: &[i64]) -> Option<i64> {
        Some(match self {
            ShapeExpr::Const(c) => *c,
            ShapeExpr::Var(v) => vars[*v],
            ShapeExpr::Add(a, b) => a.eval(vars)?.checked_add(b.eval(vars)?)?,
            ShapeExpr::Sub(a, b) => a.eval(vars)?.checked_sub(b.eval(vars)?)?,
            ShapeExpr::Mul(a, b) => a.eval(vars)?.checked_mul(b.eval(vars)?)?,
            ShapeExpr::Div(a, b) => {
                let (a, b) = (a.eval(vars)?, b.eval(vars)?);
                if b == 0 {
                    return None;
                }
                let q = a.checked_div(b)?;
                // Round toward negative infinity, as sizes like `(H - R) / S + 1` expect.
                if a % b != 0 && ((a < 0) != (b < 0)) {
                    q - 1
                } else {
                    q
                }
            }
        })
    }

    /// Writes the expression with shape variable names and only the parentheses
    /// precedence needs, e.g. `(H + 2 - R) / 2 + 1`.
    pub fn display<'a>(&'a self, op: &'a Operator) -> impl fmt::Display + 'a {
        struct D<'a>(&'a ShapeExpr, &'a Operator);
        fn prec(e: &ShapeExpr) -> u8 {
            match e {
                ShapeExpr::Add(..) | ShapeExpr::Sub(..) => 1,
                ShapeExpr::Mul(..) | ShapeExpr::Div(..) => 2,
                _ => 3,
            }
        }
        impl fmt::Display for D<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let (a, o, b) = match self.0 {
                    ShapeExpr::Const(c) => return write!(f, "{c}"),
                    ShapeExpr::Var(v) => return f.write_str(&self.1.shape_vars[*v].name),
                    ShapeExpr::Add(a, b) => (a, "+", b),
                    ShapeExpr::Sub(a, b) => (a, "-", b),
                    ShapeExpr::Mul(a, b) => (a, "*", b),
                    ShapeExpr::Div(a, b) => (a, "/", b),
                };
                let p = prec(self.0);
                // The right operand of - and / needs parentheses at equal precedence too.
                let right_strict = matches!(o, "-" | "/");
                let side = |f: &mut fmt::Formatter<'_>, e: &ShapeExpr, strict: bool| {
                    if prec(e) < p || (strict && prec(e) == p) {
                        write!(f, "({})", D(e, self.1))
                    } else {
                        write!(f, "{}", D(e, self.1))
                    }
                };
                side(f, a, false)?;
                write!(f, " {o} ")?;
                side(f, b, right_strict)
            }
        }
        D(self, op)
    }
}

/// Where a shape variable gets its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShapeVarKind {
    /// Read from the first input dimension that names it.
    Input { tensor: usize, dim: usize },
    /// Computed from other shape variables (declared in the attribute).
    Derived(ShapeExpr),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeVar {
    pub name: String,
    pub kind: ShapeVarKind,
}

/// A tensor parameter of the operator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDecl {
    pub name: String,
    pub dims: Vec<Extent>,
}

/// Index of an axis in [`Stage::axes`]: the first `n_spatial` are the stage's
/// spatial axes, the rest are reduction axes.
pub type AxisId = usize;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    pub name: String,
    pub extent: Extent,
}

/// One computed tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub name: String,
    pub dims: Vec<Extent>,
    pub axes: Vec<Axis>,
    pub n_spatial: usize,
    pub body: Expr,
}

impl Stage {
    pub fn spatial_axes(&self) -> &[Axis] {
        &self.axes[..self.n_spatial]
    }
}

/// A tensor an expression can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorRef {
    Input(usize),
    Stage(usize),
}

/// `Σ coeff·axis + offset`: every index the language accepts is affine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Affine {
    /// Sorted by axis, no zero coefficients.
    pub terms: Vec<(AxisId, i64)>,
    pub offset: i64,
}

impl Affine {
    pub fn constant(offset: i64) -> Self {
        Affine {
            terms: Vec::new(),
            offset,
        }
    }

    pub fn axis(axis: AxisId) -> Self {
        Affine {
            terms: vec![(axis, 1)],
            offset: 0,
        }
    }

    /// The axis this index is exactly equal to, if it is a bare axis.
    pub fn as_axis(&self) -> Option<AxisId> {
        match self.terms.as_slice() {
            [(a, 1)] if self.offset == 0 => Some(*a),
            _ => None,
        }
    }

    /// The coefficient of `axis` in this index (0 where it does not read it).
    pub fn coefficient(&self, axis: AxisId) -> i64 {
        self.terms
            .iter()
            .filter(|(a, _)| *a == axis)
            .map(|(_, c)| c)
            .sum()
    }

    pub fn add(&self, other: &Affine, sign: i64) -> Option<Affine> {
        let mut terms = self.terms.clone();
        for &(a, c) in &other.terms {
            let c = c.checked_mul(sign)?;
            match terms.iter_mut().find(|(b, _)| *b == a) {
                Some((_, d)) => *d = d.checked_add(c)?,
                None => terms.push((a, c)),
            }
        }
        terms.retain(|(_, c)| *c != 0);
        terms.sort_unstable();
        Some(Affine {
            terms,
            offset: self.offset.checked_add(other.offset.checked_mul(sign)?)?,
        })
    }

    pub fn scale(&self, k: i64) -> Option<Affine> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for &(a, c) in &self.terms {
            terms.push((a, c.checked_mul(k)?));
        }
        terms.retain(|(_, c)| *c != 0);
        Some(Affine {
            terms,
            offset: self.offset.checked_mul(k)?,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Tanh,
    Sqrt,
    Abs,
}

impl UnaryOp {
    /// Functions callable as `name(x)` in an operator body.
    pub const FUNCTIONS: [(&'static str, UnaryOp); 5] = [
        ("exp", UnaryOp::Exp),
        ("log", UnaryOp::Log),
        ("tanh", UnaryOp::Tanh),
        ("sqrt", UnaryOp::Sqrt),
        ("abs", UnaryOp::Abs),
    ];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    /// The binary operation that folds one more value into the accumulator.
    pub fn combiner(self) -> BinaryOp {
        match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        }
    }

    /// The identity of the combiner: the value of a reduction over nothing.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        }
    }
}

/// A scalar expression evaluated at one point of a stage's iteration space.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A literal, already in the operator's element type's range.
    Const(f64),
    /// The value of a shape variable, converted to the element type.
    ShapeValue(ShapeVarId),
    /// `tensor[index...]`; with `pad`, indices outside the tensor read `pad`.
    Load {
        tensor: TensorRef,
        index: Vec<Affine>,
        pad: Option<f64>,
    },
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// A reduction over `axes` (reduction axes of the enclosing stage).
    /// Reductions do not nest.
    Reduce {
        op: ReduceOp,
        axes: Vec<AxisId>,
        body: Box<Expr>,
    },
}

impl Expr {
    /// Calls `f` on this node and every node below it, parents first.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Const(_) | Expr::ShapeValue(_) | Expr::Load { .. } => {}
            Expr::Unary(_, a) => a.visit(f),
            Expr::Binary(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Reduce { body, .. } => body.visit(f),
        }
    }
}

/// One build-time shape: a value for every input shape variable; or, with a
/// [`Bucket`], a range of shapes that one tuned kernel serves, with `values`
/// its anchor (the top of every range: where its space is built and its
/// kernels checked).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Specialization {
    /// Values of all shape variables (inputs and derived), by [`ShapeVarId`].
    pub values: Vec<i64>,
    pub bucket: Option<Bucket>,
}

impl Specialization {
    /// One shape.
    pub fn exact(values: Vec<i64>) -> Specialization {
        Specialization {
            values,
            bucket: None,
        }
    }

    /// The size range of input shape variable `v`: its value where exact.
    pub fn range(&self, v: ShapeVarId) -> (i64, i64) {
        self.bucket
            .as_ref()
            .and_then(|b| b.ranges.iter().find(|r| r.var == v))
            .map_or((self.values[v], self.values[v]), |r| (r.lo, r.hi))
    }

    /// The size of input shape variable `v` as written: `1024`, or `1..=4096`.
    pub fn size_text(&self, v: ShapeVarId) -> String {
        match self.range(v) {
            (lo, hi) if lo == hi => lo.to_string(),
            (lo, hi) => format!("{lo}..={hi}"),
        }
    }
}

// `Debug` feeds the IR fingerprint (kernel symbols): without a bucket it
// prints as it did before buckets existed, so existing kernels keep their names.
impl fmt::Debug for Specialization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Specialization");
        d.field("values", &self.values);
        if let Some(b) = &self.bucket {
            d.field("bucket", b);
        }
        d.finish()
    }
}

/// `specialize(M = 1..=4096, N = 1024)`: the input shape variables given as
/// ranges (inclusive bounds, `lo >= 1`); the others are the exact values of
/// the specialisation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket {
    pub ranges: Vec<ShapeRange>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShapeRange {
    pub var: ShapeVarId,
    pub lo: i64,
    pub hi: i64,
}

/// A parsed and checked `#[tensor_op]`.
#[derive(Clone, PartialEq)]
pub struct Operator {
    pub name: String,
    pub dtype: DType,
    pub shape_vars: Vec<ShapeVar>,
    pub inputs: Vec<TensorDecl>,
    /// The last stage is the output.
    pub stages: Vec<Stage>,
    pub specializations: Vec<Specialization>,
    /// Inputs declared `constant(...)` (indices, ascending): the same values on
    /// every call through a handle, so a kernel may keep its copies of them.
    pub constants: Vec<usize>,
    /// Inputs declared `blocked(...)` (indices, ascending): activations that, with
    /// the output, may be stored channel-blocked (`crate::layout`).
    pub blocked: Vec<usize>,
}

/// As derived, but without `constants` and `blocked` where there are none: the `Debug` form is
/// what [`crate::mangle::fingerprint`] hashes, and operators without constants
/// keep the fingerprints (and so the cache entries) they had before the field.
impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Operator");
        d.field("name", &self.name)
            .field("dtype", &self.dtype)
            .field("shape_vars", &self.shape_vars)
            .field("inputs", &self.inputs)
            .field("stages", &self.stages)
            .field("specializations", &self.specializations);
        if !self.constants.is_empty() {
            d.field("constants", &self.constants);
        }
        if !self.blocked.is_empty() {
            d.field("blocked", &self.blocked);
        }
        d.finish()
    }
}

/// One read of a tensor without padding, with the iteration domain it runs over:
/// the caller must make sure it stays inside the tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessBound {
    pub tensor: TensorRef,
    pub dim: usize,
    /// `(coefficient, extent of the axis)` per term.
    pub terms: Vec<(i64, Extent)>,
    pub offset: i64,
    /// Extents of every axis of the loop nest around the access; if any is zero
    /// the access never runs.
    pub domain: Vec<Extent>,
}

impl Operator {
    pub fn output(&self) -> &Stage {
        self.stages
            .last()
            .expect("an operator has at least one stage")
    }

    /// Whether `t` is an input declared `constant(...)`.
    pub fn is_constant(&self, t: TensorRef) -> bool {
        matches!(t, TensorRef::Input(i) if self.constants.contains(&i))
    }

    /// Name of a tensor, as the user wrote it (`output` for the result).
    pub fn tensor_name(&self, t: TensorRef) -> &str {
        match t {
            TensorRef::Input(i) => &self.inputs[i].name,
            TensorRef::Stage(s) if s + 1 == self.stages.len() => "output",
            TensorRef::Stage(s) => &self.stages[s].name,
        }
    }

    pub fn tensor_dims(&self, t: TensorRef) -> &[Extent] {
        match t {
            TensorRef::Input(i) => &self.inputs[i].dims,
            TensorRef::Stage(s) => &self.stages[s].dims,
        }
    }

    /// The first unpadded read that leaves its tensor at these shape values:
    /// the access and the range `low..=high` it reads in a dimension of `size`.
    pub fn read_out_of_bounds(&self, values: &[i64]) -> Option<(AccessBound, i128, i128, i64)> {
        self.access_bounds().into_iter().find_map(|b| {
            if b.domain.iter().any(|e| e.value(values) <= 0) {
                return None;
            }
            let (lo, hi) =
                index_range(b.offset, b.terms.iter().map(|(c, e)| (*c, e.value(values))));
            let size = self.tensor_dims(b.tensor)[b.dim].value(values);
            (lo < 0 || hi >= i128::from(size)).then_some((b, lo, hi, size))
        })
    }

    /// The first read (padded or not) whose index box, the range of every index
    /// over the stage's axes, is not addressable in `i64` bytes, or reaches past
    /// ±2^62: a padded read is lowered through a copy of that box, and tiles
    /// compute its bounds in `i64`.
    pub fn read_too_large(&self, values: &[i64]) -> Option<TensorRef> {
        let elem = self.dtype.size() as i128;
        let mut bad = None;
        for stage in &self.stages {
            stage.body.visit(&mut |e| {
                let Expr::Load { tensor, index, .. } = e else {
                    return;
                };
                let mut bytes = elem;
                for ix in index {
                    let (lo, hi) = index_range(
                        ix.offset,
                        ix.terms
                            .iter()
                            .map(|&(a, c)| (c, stage.axes[a].extent.value(values))),
                    );
                    bytes = bytes.saturating_mul(hi - lo + 1);
                    // Tiles offset these in i64: keep clear of its ends.
                    if lo < -(1i128 << 62) || hi > 1i128 << 62 {
                        bytes = i128::MAX;
                    }
                }
                if bytes > i128::from(i64::MAX) && bad.is_none() {
                    bad = Some(*tensor);
                }
            });
        }
        bad
    }

    /// Every tensor of the operator: the inputs, then the stages.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef> + '_ {
        (0..self.inputs.len())
            .map(TensorRef::Input)
            .chain((0..self.stages.len()).map(TensorRef::Stage))
    }

    /// Bytes of a tensor at these shape values, or `None` where the count
    /// overflows `i64` (the index type of the kernels).
    pub fn tensor_bytes(&self, t: TensorRef, values: &[i64]) -> Option<i64> {
        self.tensor_dims(t)
            .iter()
            .try_fold(self.dtype.size() as i64, |n, d| {
                n.checked_mul(d.value(values))
            })
    }

    /// Shape variables whose values come from the inputs, in id order: the
    /// variables a specialisation names.
    pub fn input_shape_vars(&self) -> impl Iterator<Item = (ShapeVarId, &ShapeVar)> {
        self.shape_vars
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v.kind, ShapeVarKind::Input { .. }))
    }

    /// Value of every shape variable given the input ones (`None` on overflow,
    /// division by zero, or a negative derived size).
    pub fn resolve_shapes(&self, inputs: &[(ShapeVarId, i64)]) -> Option<Vec<i64>> {
        let mut values = vec![0; self.shape_vars.len()];
        for &(v, x) in inputs {
            values[v] = x;
        }
        for (v, var) in self.shape_vars.iter().enumerate() {
            if let ShapeVarKind::Derived(e) = &var.kind {
                values[v] = e.eval(&values).filter(|x| *x >= 0)?;
            }
        }
        Some(values)
    }

    /// Every read without padding whose index is not trivially in bounds.
    pub fn access_bounds(&self) -> Vec<AccessBound> {
        let mut out = Vec::new();
        for stage in &self.stages {
            stage.body.visit(&mut |e| {
                let Expr::Load {
                    tensor,
                    index,
                    pad: None,
                } = e
                else {
                    return;
                };
                let dims = self.tensor_dims(*tensor);
                for (d, ix) in index.iter().enumerate() {
                    if ix
                        .as_axis()
                        .is_some_and(|a| stage.axes[a].extent == dims[d])
                    {
                        continue;
                    }
                    out.push(AccessBound {
                        tensor: *tensor,
                        dim: d,
                        terms: ix
                            .terms
                            .iter()
                            .map(|&(a, c)| (c, stage.axes[a].extent))
                            .collect(),
                        offset: ix.offset,
                        domain: stage.axes.iter().map(|a| a.extent).collect(),
                    });
                }
            });
        }
        out
    }

    /// Floating-point operations of one call at the given shapes, counting one per
    /// arithmetic node and per reduction step (a multiply-add is two).
    pub fn flops(&self, shapes: &[i64]) -> f64 {
        let ext = |e: &Extent| e.value(shapes) as f64;
        self.stages
            .iter()
            .map(|s| {
                let points: f64 = s.spatial_axes().iter().map(|a| ext(&a.extent)).product();
                points * expr_flops(&s.body, s, &ext)
            })
            .sum()
    }
}

fn expr_flops(e: &Expr, s: &Stage, ext: &impl Fn(&Extent) -> f64) -> f64 {
    match e {
        Expr::Const(_) | Expr::ShapeValue(_) | Expr::Load { .. } => 0.0,
        Expr::Unary(UnaryOp::Neg | UnaryOp::Abs, a) => expr_flops(a, s, ext),
        Expr::Unary(_, a) => 1.0 + expr_flops(a, s, ext),
        Expr::Binary(_, a, b) => 1.0 + expr_flops(a, s, ext) + expr_flops(b, s, ext),
        Expr::Reduce { axes, body, .. } => {
            let n: f64 = axes.iter().map(|a| ext(&s.axes[*a].extent)).product();
            n * (1.0 + expr_flops(body, s, ext))
        }
    }
}

/// The lowest and highest value of `offset + Σ coefficient·x` with each `x` in
/// `0..extent`, in `i128` (no overflow for any `i64` inputs).
fn index_range(offset: i64, terms: impl Iterator<Item = (i64, i64)>) -> (i128, i128) {
    terms.fold(
        (i128::from(offset), i128::from(offset)),
        |(lo, hi), (c, e)| {
            let span = i128::from(c) * i128::from(e - 1);
            (lo + span.min(0), hi + span.max(0))
        },
    )
}
