//! A naive interpreter of the IR: what an [`Operator`] computes, at given shapes,
//! on given data.
//!
//! It is the correctness reference of the tuner and of the tests, independent of
//! any code generator: every stage is materialised in a buffer by plain loops over
//! its spatial axes in order, a reduction folds its body over its axes (first axis
//! outermost) from the identity, exactly as the generated kernels do. Arithmetic is
//! in `f64`; for `f32` operators every intermediate value is rounded to `f32`, so
//! the result follows an `f32` kernel closely (up to the kernel's own reordering).

use std::fmt;

use crate::ir::{AxisId, BinaryOp, DType, Expr, Operator, ReduceOp, Stage, TensorRef, UnaryOp};

/// Why [`evaluate`] could not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// `shapes` does not hold one value per shape variable.
    ShapeCount { expected: usize, given: usize },
    /// A dimension of a tensor is negative, or its element count overflows.
    InvalidShape {
        tensor: String,
        dim: usize,
        extent: i64,
    },
    /// Not one data vector per input tensor.
    InputCount { expected: usize, given: usize },
    /// An input's data does not have the length its dimensions give.
    InputLength {
        tensor: String,
        expected: usize,
        given: usize,
    },
    /// A read without padding outside its tensor (`index` saturates to the `i64` range).
    OutOfBounds {
        tensor: String,
        dim: usize,
        index: i64,
        extent: i64,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::ShapeCount { expected, given } => write!(
                f,
                "expected values for {expected} shape variable(s), got {given}"
            ),
            EvalError::InvalidShape {
                tensor,
                dim,
                extent,
            } => write!(
                f,
                "tensor `{tensor}`: dimension {dim} of size {extent} is negative or makes \
                 the element count overflow"
            ),
            EvalError::InputCount { expected, given } => {
                write!(f, "expected {expected} input tensor(s), got {given}")
            }
            EvalError::InputLength {
                tensor,
                expected,
                given,
            } => write!(
                f,
                "input `{tensor}` has {given} element(s), its shape needs {expected}"
            ),
            EvalError::OutOfBounds {
                tensor,
                dim,
                index,
                extent,
            } => write!(
                f,
                "read of `{tensor}` out of bounds: index {index} of dimension {dim} \
                 (size {extent})"
            ),
        }
    }
}

impl std::error::Error for EvalError {}

/// Evaluates `op` naively at the shapes `shapes` (value of every shape variable,
/// indexed by [`ShapeVarId`](crate::ir::ShapeVarId)), on `inputs` (one flat
/// row-major vector per input, lengths must match their dims), returning the flat
/// output. Arithmetic is done in `f64`, but when `op.dtype == DType::F32` every
/// intermediate result of each [`Expr`] node (and each reduction accumulation
/// step, and every stored stage element) is rounded to `f32` so that it mimics
/// `f32` kernels closely.
pub fn evaluate(op: &Operator, shapes: &[i64], inputs: &[Vec<f64>]) -> Result<Vec<f64>, EvalError> {
    if shapes.len() != op.shape_vars.len() {
        return Err(EvalError::ShapeCount {
            expected: op.shape_vars.len(),
            given: shapes.len(),
        });
    }
    if inputs.len() != op.inputs.len() {
        return Err(EvalError::InputCount {
            expected: op.inputs.len(),
            given: inputs.len(),
        });
    }
    for (i, data) in inputs.iter().enumerate() {
        let layout = Layout::of(op, TensorRef::Input(i), shapes)?;
        if data.len() != layout.len {
            return Err(EvalError::InputLength {
                tensor: op.inputs[i].name.clone(),
                expected: layout.len,
                given: data.len(),
            });
        }
    }
    let round = op.dtype == DType::F32;
    let mut stages: Vec<Vec<f64>> = Vec::with_capacity(op.stages.len());
    for (s, stage) in op.stages.iter().enumerate() {
        let layout = Layout::of(op, TensorRef::Stage(s), shapes)?;
        let body = compile(op, stage, &stage.body, shapes, round)?;
        let interp = Interp {
            op,
            inputs,
            stages: &stages,
            round,
        };
        let spatial: Vec<(AxisId, i64)> = layout.dims.iter().copied().enumerate().collect();
        let mut axes = vec![0i64; stage.axes.len()];
        let mut buf = Vec::with_capacity(layout.len);
        if layout.len > 0 {
            // The odometer visits the points in row-major order, the buffer's order.
            loop {
                buf.push(interp.eval(&body, &mut axes)?);
                if !advance(&mut axes, &spatial) {
                    break;
                }
            }
        }
        stages.push(buf);
    }
    Ok(stages.pop().expect("an operator has at least one stage"))
}

/// Dimensions, row-major strides and element count of a tensor at given shapes.
struct Layout {
    dims: Vec<i64>,
    strides: Vec<usize>,
    len: usize,
}

impl Layout {
    fn of(op: &Operator, t: TensorRef, shapes: &[i64]) -> Result<Layout, EvalError> {
        let dims: Vec<i64> = op.tensor_dims(t).iter().map(|e| e.value(shapes)).collect();
        let mut strides = vec![0usize; dims.len()];
        let mut len = 1usize;
        for (d, &n) in dims.iter().enumerate().rev() {
            // Strides saturate: one only matters when every index is in bounds,
            // and then the element count did not overflow.
            strides[d] = len;
            len = usize::try_from(n)
                .ok()
                .and_then(|n| len.checked_mul(n))
                .ok_or_else(|| EvalError::InvalidShape {
                    tensor: op.tensor_name(t).to_string(),
                    dim: d,
                    extent: n,
                })?;
        }
        Ok(Layout { dims, strides, len })
    }
}

/// One dimension of a load: `Σ coeff·axis + offset`, checked against `extent`.
struct LoadDim {
    terms: Vec<(AxisId, i64)>,
    offset: i64,
    extent: i64,
    stride: usize,
}

/// An [`Expr`] with shapes resolved and constants rounded, ready to run.
enum Node {
    Const(f64),
    Load {
        tensor: TensorRef,
        dims: Vec<LoadDim>,
        pad: Option<f64>,
    },
    Unary(UnaryOp, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    Reduce {
        op: ReduceOp,
        /// `(axis, extent)` per reduction axis, outermost first.
        axes: Vec<(AxisId, i64)>,
        body: Box<Node>,
    },
}

fn compile(
    op: &Operator,
    stage: &Stage,
    e: &Expr,
    shapes: &[i64],
    round: bool,
) -> Result<Node, EvalError> {
    let r = |x: f64| if round { x as f32 as f64 } else { x };
    let sub = |e: &Expr| compile(op, stage, e, shapes, round).map(Box::new);
    Ok(match e {
        Expr::Const(c) => Node::Const(r(*c)),
        Expr::ShapeValue(v) => Node::Const(r(shapes[*v] as f64)),
        Expr::Load { tensor, index, pad } => {
            let layout = Layout::of(op, *tensor, shapes)?;
            let dims = index
                .iter()
                .enumerate()
                .map(|(d, ix)| LoadDim {
                    terms: ix.terms.clone(),
                    offset: ix.offset,
                    extent: layout.dims[d],
                    stride: layout.strides[d],
                })
                .collect();
            Node::Load {
                tensor: *tensor,
                dims,
                pad: pad.map(r),
            }
        }
        Expr::Unary(u, a) => Node::Unary(*u, sub(a)?),
        Expr::Binary(b, x, y) => Node::Binary(*b, sub(x)?, sub(y)?),
        Expr::Reduce {
            op: rop,
            axes,
            body,
        } => Node::Reduce {
            op: *rop,
            axes: axes
                .iter()
                .map(|&a| (a, stage.axes[a].extent.value(shapes)))
                .collect(),
            body: sub(body)?,
        },
    })
}

/// Steps `values` (indexed by axis) to the next point of the box `axes` spans, the
/// last axis fastest; `false` (with every axis back at 0) after the last point.
fn advance(values: &mut [i64], axes: &[(AxisId, i64)]) -> bool {
    for &(a, n) in axes.iter().rev() {
        values[a] += 1;
        if values[a] < n {
            return true;
        }
        values[a] = 0;
    }
    false
}

struct Interp<'a> {
    op: &'a Operator,
    inputs: &'a [Vec<f64>],
    /// The stages computed so far.
    stages: &'a [Vec<f64>],
    round: bool,
}

impl Interp<'_> {
    fn round(&self, x: f64) -> f64 {
        if self.round {
            x as f32 as f64
        } else {
            x
        }
    }

    /// The value of `n` at the point `axes` (indexed by axis; reductions move their
    /// own axes and leave them at 0).
    fn eval(&self, n: &Node, axes: &mut [i64]) -> Result<f64, EvalError> {
        let v = match n {
            Node::Const(c) => return Ok(*c),
            Node::Load { tensor, dims, pad } => {
                let mut flat = 0usize;
                for (d, dim) in dims.iter().enumerate() {
                    let i = dim
                        .terms
                        .iter()
                        .fold(i128::from(dim.offset), |acc, &(a, c)| {
                            acc + i128::from(c) * i128::from(axes[a])
                        });
                    if i < 0 || i >= i128::from(dim.extent) {
                        return match pad {
                            Some(p) => Ok(*p),
                            None => Err(EvalError::OutOfBounds {
                                tensor: self.op.tensor_name(*tensor).to_string(),
                                dim: d,
                                index: i.clamp(i64::MIN.into(), i64::MAX.into()) as i64,
                                extent: dim.extent,
                            }),
                        };
                    }
                    // Wraps only when another index is out of bounds (an empty tensor).
                    flat = flat.wrapping_add((i as usize).wrapping_mul(dim.stride));
                }
                match tensor {
                    TensorRef::Input(t) => self.inputs[*t][flat],
                    TensorRef::Stage(s) => self.stages[*s][flat],
                }
            }
            Node::Unary(u, a) => {
                let a = self.eval(a, axes)?;
                match u {
                    UnaryOp::Neg => -a,
                    UnaryOp::Exp => a.exp(),
                    UnaryOp::Log => a.ln(),
                    UnaryOp::Tanh => a.tanh(),
                    UnaryOp::Sqrt => a.sqrt(),
                    UnaryOp::Abs => a.abs(),
                }
            }
            Node::Binary(b, x, y) => {
                let x = self.eval(x, axes)?;
                let y = self.eval(y, axes)?;
                binary(*b, x, y)
            }
            Node::Reduce {
                op,
                axes: red,
                body,
            } => {
                let mut acc = self.round(op.identity());
                if red.iter().all(|&(_, n)| n > 0) {
                    loop {
                        let v = self.eval(body, axes)?;
                        acc = self.round(binary(op.combiner(), acc, v));
                        if !advance(axes, red) {
                            break;
                        }
                    }
                }
                acc
            }
        };
        Ok(self.round(v))
    }
}

/// `max` and `min` ignore NaN, as C's `fmax` and `fmin` do.
fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::test_parse as parse;

    /// All shape values from the input shape variables, given by name.
    fn shapes(op: &Operator, values: &[(&str, i64)]) -> Vec<i64> {
        let inputs: Vec<_> = op
            .input_shape_vars()
            .map(|(id, v)| {
                let x = values.iter().find(|(n, _)| *n == v.name).unwrap().1;
                (id, x)
            })
            .collect();
        op.resolve_shapes(&inputs).unwrap()
    }

    const MATMUL: &str = "pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) \
        -> Tensor<f32, (M, N)> { compute(|i, j| sum(|k| a[i][k] * b[k][j])) }";

    #[test]
    fn matmul() {
        let op = parse("specialize(M = 2, K = 3, N = 2)", MATMUL);
        let a = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = vec![7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let c = evaluate(&op, &op.specializations[0].values, &[a, b]).unwrap();
        // [1 2 3; 4 5 6] * [7 8; 9 10; 11 12]
        assert_eq!(c, vec![58.0, 64.0, 139.0, 154.0]);
    }

    #[test]
    fn empty_reduction_is_the_identity() {
        let op = parse("", MATMUL);
        let s = shapes(&op, &[("M", 2), ("K", 0), ("N", 1)]);
        assert_eq!(
            evaluate(&op, &s, &[vec![], vec![]]).unwrap(),
            vec![0.0, 0.0]
        );
        let s = shapes(&op, &[("M", 0), ("K", 2), ("N", 3)]);
        let out = evaluate(&op, &s, &[vec![], vec![0.0; 6]]).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn padded_max_pool() {
        let op = parse(
            "OH = (H + 2 - 3) / 2 + 1",
            "pub fn pool(x: Tensor<f32, (C, H)>) -> Tensor<f32, (C, OH)> { \
             compute(|c, o| max(|r @ 0..3| x.pad(f32::NEG_INFINITY)[c][o * 2 + r - 1])) }",
        );
        let s = shapes(&op, &[("C", 2), ("H", 5)]);
        let x = vec![1.0, 5.0, 2.0, 4.0, 3.0, -1.0, -2.0, -3.0, -4.0, -5.0];
        // OH = 3; windows read rows -1..=1, 1..=3, 3..=5 with -inf outside.
        let out = evaluate(&op, &s, &[x]).unwrap();
        assert_eq!(out, vec![5.0, 5.0, 4.0, -1.0, -2.0, -4.0]);
    }

    #[test]
    fn softmax_with_intermediate_stages() {
        let op = parse(
            "",
            "pub fn softmax(x: Tensor<f64, (N, D)>) -> Tensor<f64, (N, D)> { \
             let m: Tensor<f64, N> = compute(|i| max(|j| x[i][j])); \
             let e: Tensor<f64, (N, D)> = compute(|i, j| exp(x[i][j] - m[i])); \
             let s: Tensor<f64, N> = compute(|i| sum(|j| e[i][j])); \
             compute(|i, j| e[i][j] / s[i]) }",
        );
        let s = shapes(&op, &[("N", 2), ("D", 3)]);
        let x = vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
        let out = evaluate(&op, &s, &[x]).unwrap();
        let (e1, e2) = ((-2.0f64).exp(), (-1.0f64).exp());
        let z = e1 + e2 + 1.0;
        let expected = [e1 / z, e2 / z, 1.0 / z, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
        assert_eq!(out.len(), 6);
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-15, "{o} vs {e}");
        }
    }

    const FD: &str = "pub fn fd(x: Tensor<f32, N>, y: Tensor<f32, M>) -> Tensor<f32, M> { \
        compute(|i| x[i + 1] - y[i]) }";

    #[test]
    fn unpadded_read_out_of_bounds_is_an_error() {
        let op = parse("", FD);
        let s = shapes(&op, &[("N", 4), ("M", 3)]);
        let ok = evaluate(&op, &s, &[vec![1.0, 2.0, 4.0, 8.0], vec![1.0; 3]]).unwrap();
        assert_eq!(ok, vec![1.0, 3.0, 7.0]);

        let s = shapes(&op, &[("N", 3), ("M", 3)]);
        let err = evaluate(&op, &s, &[vec![1.0; 3], vec![1.0; 3]]).unwrap_err();
        assert_eq!(
            err,
            EvalError::OutOfBounds {
                tensor: "x".into(),
                dim: 0,
                index: 3,
                extent: 3
            }
        );
        assert!(err.to_string().contains("`x`"));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let op = parse("", FD);
        let s = shapes(&op, &[("N", 4), ("M", 3)]);
        assert_eq!(
            evaluate(&op, &s, &[vec![0.0; 4]]),
            Err(EvalError::InputCount {
                expected: 2,
                given: 1
            })
        );
        assert_eq!(
            evaluate(&op, &s, &[vec![0.0; 4], vec![0.0; 4]]),
            Err(EvalError::InputLength {
                tensor: "y".into(),
                expected: 3,
                given: 4
            })
        );
        assert_eq!(
            evaluate(&op, &[4], &[vec![0.0; 4], vec![0.0; 3]]),
            Err(EvalError::ShapeCount {
                expected: 2,
                given: 1
            })
        );
        let s = shapes(&op, &[("N", -1), ("M", 3)]);
        assert!(matches!(
            evaluate(&op, &s, &[vec![], vec![0.0; 3]]),
            Err(EvalError::InvalidShape { .. })
        ));
    }

    #[test]
    fn f32_rounds_every_step() {
        let src = |t: &str| {
            format!(
                "pub fn rowsum(a: Tensor<{t}, (M, K)>) -> Tensor<{t}, M> {{ \
                 compute(|i| sum(|k| a[i][k])) }}"
            )
        };
        let a = vec![16777216.0, 1.0, 1.0];
        let f32_op = parse("", &src("f32"));
        let s = shapes(&f32_op, &[("M", 1), ("K", 3)]);
        // 2^24 + 1 is not an f32: each step rounds back to 2^24.
        assert_eq!(
            evaluate(&f32_op, &s, std::slice::from_ref(&a)).unwrap(),
            vec![16777216.0]
        );
        let f64_op = parse("", &src("f64"));
        assert_eq!(evaluate(&f64_op, &s, &[a]).unwrap(), vec![16777218.0]);
    }

    #[test]
    fn max_min_ignore_nan_and_shape_values() {
        let op = parse(
            "",
            "pub fn f(a: Tensor<f64, N>, b: Tensor<f64, N>) -> Tensor<f64, N> { \
             compute(|i| max(a[i], b[i]) + min(a[i], b[i]) * N + max(|k @ 0..2| a[k])) }",
        );
        let s = shapes(&op, &[("N", 3)]);
        let a = vec![f64::NAN, 2.0, -1.0];
        let b = vec![5.0, f64::NAN, 3.0];
        let out = evaluate(&op, &s, &[a, b]).unwrap();
        // max(a[0..2]) ignores the NaN: 2.
        assert_eq!(
            out,
            vec![5.0 + 15.0 + 2.0, 2.0 + 6.0 + 2.0, 3.0 - 3.0 + 2.0]
        );
    }

    #[test]
    fn unary_functions() {
        let op = parse(
            "",
            "pub fn u(a: Tensor<f64, N>) -> Tensor<f64, N> { \
             compute(|i| -abs(a[i]) + sqrt(abs(a[i])) + log(exp(a[i])) + tanh(0.0)) }",
        );
        let s = shapes(&op, &[("N", 2)]);
        let out = evaluate(&op, &s, &[vec![4.0, -9.0]]).unwrap();
        let expected = [-4.0 + 2.0 + 4.0, -9.0 + 3.0 - 9.0];
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-12, "{o} vs {e}");
        }
    }
}
