//! Channel-blocked activations: the operator a `blocked(...)` declaration adds.
//!
//! A tensor *blocked by `B`* along its first dimension, logically `[D0][D1]..[Dn]`,
//! lies in memory as `[D0/B][D1]..[Dn][B]` (oneDNN's `nChw16c` for a `(C, H, W)`
//! activation at `B = 16`): a vector of `B` channels at one pixel is one contiguous
//! load or store, where in the plain layout its lanes lie a plane apart.
//!
//! An operator that declares inputs `blocked(x, ...)` has, for each specialisation
//! where such a tensor's first dimension is a multiple of `B`, a *blocked variant*
//! ([`Operator::blocked_variants`]): the same operator written over the tensors as
//! they lie in memory. Every axis that indexes a blocked tensor's first dimension is
//! split into an outer and an inner axis (`c = B·c_o + c_i`, the inner one innermost
//! among its stage's spatial or reduction axes), and every index is rewritten with
//! it, so every index stays affine. The variant is an ordinary operator: its schedule
//! space, tuning, cache entries and kernels are those of any other, which is how a
//! tuned config chooses the loops over the blocks. Only the macro's wrapper knows that
//! it serves the declared operator, and converts a layout where a call's tensors
//! arrive in another.
//!
//! `B` is one 64-byte cache line of elements ([`block`]: 16 `f32`, 8 `f64`), on
//! every target: the layout is part of the data a network passes between its
//! operators, so every kernel of every ISA clone and CPU must agree on it, and a
//! cache line is a whole vector of AVX-512 and two of AVX2.

use crate::ir::{
    Affine, AxisId, Expr, Extent, Operator, ShapeExpr, ShapeVar, ShapeVarId, ShapeVarKind,
    Specialization, Stage, TensorRef,
};
use std::collections::BTreeMap;

/// Elements of one channel block: a 64-byte cache line of the element type.
pub fn block(op: &Operator) -> i64 {
    64 / op.dtype.size() as i64
}

/// The operator over blocked tensors that serves some specialisations of a
/// `blocked(...)` operator.
#[derive(Clone, Debug)]
pub struct BlockedVariant {
    /// Named `<operator>__b<B>_<blocked inputs>[_o]`, e.g. `conv__b16_x_o`.
    pub op: Operator,
    /// The declared operator's specialisations it serves (by index), in the order
    /// of `op.specializations`.
    pub specs: Vec<usize>,
    /// Per input of the declared operator: whether this variant reads it blocked.
    pub inputs: Vec<bool>,
    /// Whether it writes the output blocked.
    pub output: bool,
}

impl BlockedVariant {
    /// Its block, [`block`] of its element type.
    pub fn block(&self) -> i64 {
        block(&self.op)
    }
}

/// Per specialisation (of `specs`): whether one of `variants` serves it
/// ([`Operator::served_blocked`], for a caller that has the variants already).
pub fn served(variants: &[BlockedVariant], specs: usize) -> Vec<bool> {
    let mut out = vec![false; specs];
    for &i in variants.iter().flat_map(|v| &v.specs) {
        out[i] = true;
    }
    out
}

/// Which tensors one specialisation stores blocked: per input, then per stage.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Blocked {
    inputs: Vec<bool>,
    stages: Vec<bool>,
}

impl Blocked {
    fn of(&self, t: TensorRef) -> bool {
        match t {
            TensorRef::Input(i) => self.inputs[i],
            TensorRef::Stage(s) => self.stages[s],
        }
    }

    fn any(&self) -> bool {
        self.inputs.iter().chain(&self.stages).any(|b| *b)
    }
}

impl Operator {
    /// The blocked variants of this operator: one per set of tensors that its exact
    /// specialisations store blocked (none without a `blocked(...)` declaration, and
    /// none for a specialisation where no tensor can be).
    pub fn blocked_variants(&self) -> Vec<BlockedVariant> {
        if self.blocked.is_empty() {
            return Vec::new();
        }
        let mut groups: BTreeMap<Blocked, Vec<usize>> = BTreeMap::new();
        for (i, spec) in self.specializations.iter().enumerate() {
            if spec.bucket.is_some() {
                continue;
            }
            let b = self.blocked_at(&spec.values);
            if b.any() {
                groups.entry(b).or_default().push(i);
            }
        }
        groups
            .into_iter()
            .filter_map(|(b, specs)| self.rewrite(&b, specs))
            .collect()
    }

    /// Per specialisation: whether a blocked variant serves it, so that the
    /// declared operator's own kernel for it is never called (nor built).
    pub fn served_blocked(&self) -> Vec<bool> {
        served(&self.blocked_variants(), self.specializations.len())
    }

    /// Which tensors can be stored blocked at these shapes: a declared input or a
    /// stage (the output, and the stages before it, whose layout is the kernel's
    /// own) whose first dimension is a multiple of the block, and which every load
    /// indexes there by a bare axis that can be split: a reduction axis, or the
    /// first spatial axis of a stage that is itself blocked. Tensors are dropped
    /// until that holds for all that remain.
    fn blocked_at(&self, values: &[i64]) -> Blocked {
        let b = block(self);
        let splits = |d: &Extent| {
            let v = d.value(values);
            v > 0 && v % b == 0
        };
        let first_splits = |dims: &[Extent]| dims.first().is_some_and(splits);
        let mut out = Blocked {
            inputs: (0..self.inputs.len())
                .map(|i| self.blocked.contains(&i) && first_splits(&self.inputs[i].dims))
                .collect(),
            stages: self.stages.iter().map(|s| first_splits(&s.dims)).collect(),
        };
        loop {
            let mut changed = false;
            for (s, stage) in self.stages.iter().enumerate() {
                stage.body.visit(&mut |e| {
                    let Expr::Load { tensor, index, .. } = e else {
                        return;
                    };
                    if !out.of(*tensor) {
                        return;
                    }
                    let ok = index[0].as_axis().is_some_and(|a| {
                        splits(&stage.axes[a].extent)
                            && (a >= stage.n_spatial || (a == 0 && out.stages[s]))
                    });
                    if !ok {
                        match *tensor {
                            TensorRef::Input(i) => out.inputs[i] = false,
                            TensorRef::Stage(t) => out.stages[t] = false,
                        }
                        changed = true;
                    }
                });
            }
            if !changed {
                return out;
            }
        }
    }

    /// This operator over the tensors of `blocked` as they lie in memory, serving
    /// `specs`; `None` where a specialisation's values do not carry over (a shape
    /// that an earlier derived shape reads becomes derived itself).
    fn rewrite(&self, blocked: &Blocked, specs: Vec<usize>) -> Option<BlockedVariant> {
        let b = block(self);
        let mut op = self.clone();
        op.blocked.clear();
        let mut names: Vec<&str> = Vec::new();
        for (i, _) in blocked.inputs.iter().enumerate().filter(|(_, b)| **b) {
            names.push(&self.inputs[i].name);
        }
        let output = *blocked.stages.last().unwrap_or(&false);
        op.name = format!(
            "{}__b{b}{}{}",
            self.name,
            names.iter().map(|n| format!("_{n}")).collect::<String>(),
            if output { "_o" } else { "" }
        );

        // The number of blocks of each blocked first dimension.
        let mut vars = Blocks {
            op: &mut op,
            block: b,
            of_var: BTreeMap::new(),
        };
        for (i, input) in self.inputs.iter().enumerate() {
            if blocked.inputs[i] {
                let outer = vars.blocks_of(input.dims[0], Some(i));
                vars.op.inputs[i].dims = blocked_dims(&input.dims, outer, b);
            }
        }
        for (s, stage) in self.stages.iter().enumerate() {
            let split = split_axes(stage, s, blocked);
            let outer: Vec<Option<Extent>> = stage
                .axes
                .iter()
                .enumerate()
                .map(|(a, axis)| split[a].then(|| vars.blocks_of(axis.extent, None)))
                .collect();
            let dims = if blocked.stages[s] {
                let d0 = outer[0].expect("a blocked stage splits its first axis");
                blocked_dims(&stage.dims, d0, b)
            } else {
                stage.dims.clone()
            };
            vars.op.stages[s] = split_stage(stage, &split, &outer, dims, b, blocked);
        }

        // The specialisations at the new shape variables: a number of blocks is
        // its size's value over the block.
        let counts: BTreeMap<ShapeVarId, ShapeVarId> =
            vars.of_var.iter().map(|(&size, &n)| (n, size)).collect();
        let mut out_specs = Vec::new();
        for &i in &specs {
            let old = &self.specializations[i].values;
            let inputs: Vec<(ShapeVarId, i64)> = op
                .input_shape_vars()
                .map(|(v, _)| match counts.get(&v) {
                    Some(&size) => (v, old[size] / b),
                    None => (v, old[v]),
                })
                .collect();
            let values = op.resolve_shapes(&inputs)?;
            if values[..old.len()] != old[..] {
                return None;
            }
            out_specs.push(Specialization::exact(values));
        }
        op.specializations = out_specs;
        Some(BlockedVariant {
            op,
            specs,
            inputs: blocked.inputs.clone(),
            output,
        })
    }
}

/// New shape variables for numbers of blocks, made once per size.
struct Blocks<'a> {
    op: &'a mut Operator,
    block: i64,
    of_var: BTreeMap<ShapeVarId, ShapeVarId>,
}

impl Blocks<'_> {
    /// The number of blocks of a size. A size that a blocked input's first
    /// dimension binds is bound to its number of blocks instead (`C_blocks`, the
    /// dimension as it lies in memory), and becomes derived from it (`C = C_blocks
    /// * 16`); any other becomes `size / B`.
    fn blocks_of(&mut self, e: Extent, bound_by: Option<usize>) -> Extent {
        let v = match e {
            Extent::Const(c) => return Extent::Const(c / self.block),
            Extent::Var(v) => v,
        };
        if let Some(&n) = self.of_var.get(&v) {
            return Extent::Var(n);
        }
        let n = self.op.shape_vars.len();
        let binds = |t| self.op.shape_vars[v].kind == ShapeVarKind::Input { tensor: t, dim: 0 };
        let kind = match bound_by {
            Some(t) if binds(t) => {
                self.op.shape_vars[v].kind = ShapeVarKind::Derived(ShapeExpr::Mul(
                    Box::new(ShapeExpr::Var(n)),
                    Box::new(ShapeExpr::Const(self.block)),
                ));
                ShapeVarKind::Input { tensor: t, dim: 0 }
            }
            _ => ShapeVarKind::Derived(ShapeExpr::Div(
                Box::new(ShapeExpr::Var(v)),
                Box::new(ShapeExpr::Const(self.block)),
            )),
        };
        let name = format!("{}_blocks", self.op.shape_vars[v].name);
        self.op.shape_vars.push(ShapeVar { name, kind });
        self.of_var.insert(v, n);
        Extent::Var(n)
    }
}

/// `[D0][D1]..[Dn]` as it lies blocked: `[outer][D1]..[Dn][B]`.
fn blocked_dims(dims: &[Extent], outer: Extent, b: i64) -> Vec<Extent> {
    let mut out = vec![outer];
    out.extend_from_slice(&dims[1..]);
    out.push(Extent::Const(b));
    out
}

/// Which axes of a stage are split: its first one where the stage is blocked, and
/// every one that indexes a blocked tensor's first dimension.
fn split_axes(stage: &Stage, s: usize, blocked: &Blocked) -> Vec<bool> {
    let mut split = vec![false; stage.axes.len()];
    if blocked.stages[s] {
        split[0] = true;
    }
    stage.body.visit(&mut |e| {
        if let Expr::Load { tensor, index, .. } = e {
            if blocked.of(*tensor) {
                let a = index[0].as_axis().expect("checked by blocked_at");
                split[a] = true;
            }
        }
    });
    split
}

/// The stage with its split axes: the outer parts in the axes' places, the inner
/// parts after the stage's other spatial (or reduction) axes, and every index
/// rewritten (`a = B·a_o + a_i`; a blocked tensor's first index becomes `a_o`, and
/// `a_i` its last).
fn split_stage(
    stage: &Stage,
    split: &[bool],
    outer: &[Option<Extent>],
    dims: Vec<Extent>,
    b: i64,
    blocked: &Blocked,
) -> Stage {
    let mut axes = Vec::new();
    let mut new_id = vec![0; stage.axes.len()];
    let mut inner_id: Vec<Option<AxisId>> = vec![None; stage.axes.len()];
    for range in [0..stage.n_spatial, stage.n_spatial..stage.axes.len()] {
        for a in range.clone() {
            new_id[a] = axes.len();
            let axis = &stage.axes[a];
            axes.push(match outer[a] {
                Some(extent) => crate::ir::Axis {
                    name: format!("{}_o", axis.name),
                    extent,
                },
                None => axis.clone(),
            });
        }
        for a in range.filter(|&a| split[a]) {
            inner_id[a] = Some(axes.len());
            axes.push(crate::ir::Axis {
                name: format!("{}_i", stage.axes[a].name),
                extent: Extent::Const(b),
            });
        }
    }
    let n_spatial = stage.n_spatial + split[..stage.n_spatial].iter().filter(|s| **s).count();
    let affine = |ix: &Affine| {
        let mut terms = Vec::new();
        for &(a, c) in &ix.terms {
            match inner_id[a] {
                Some(i) => {
                    terms.push((new_id[a], c * b));
                    terms.push((i, c));
                }
                None => terms.push((new_id[a], c)),
            }
        }
        terms.sort_unstable();
        Affine {
            terms,
            offset: ix.offset,
        }
    };
    let body = rewrite_expr(&stage.body, &mut |e| match e {
        Expr::Load { tensor, index, pad } => {
            let index = if blocked.of(*tensor) {
                let a = index[0].as_axis().expect("checked by blocked_at");
                let mut ix = vec![Affine::axis(new_id[a])];
                ix.extend(index[1..].iter().map(&affine));
                ix.push(Affine::axis(inner_id[a].expect("split")));
                ix
            } else {
                index.iter().map(&affine).collect()
            };
            Some(Expr::Load {
                tensor: *tensor,
                index,
                pad: *pad,
            })
        }
        Expr::Reduce { op, axes: r, body } => {
            let mut axes: Vec<AxisId> = Vec::new();
            for &a in r {
                axes.push(new_id[a]);
                axes.extend(inner_id[a]);
            }
            axes.sort_unstable();
            Some(Expr::Reduce {
                op: *op,
                axes,
                body: body.clone(),
            })
        }
        _ => None,
    });
    Stage {
        name: stage.name.clone(),
        dims,
        axes,
        n_spatial,
        body,
    }
}

/// `e` with every node that `f` replaces replaced (`f` sees the original node; a
/// replaced reduction's body is walked on, any other replacement is final).
fn rewrite_expr(e: &Expr, f: &mut impl FnMut(&Expr) -> Option<Expr>) -> Expr {
    if let Some(new) = f(e) {
        return match new {
            Expr::Reduce { op, axes, body } => Expr::Reduce {
                op,
                axes,
                body: Box::new(rewrite_expr(&body, f)),
            },
            other => other,
        };
    }
    match e {
        Expr::Const(_) | Expr::ShapeValue(_) | Expr::Load { .. } => e.clone(),
        Expr::Unary(o, a) => Expr::Unary(*o, Box::new(rewrite_expr(a, f))),
        Expr::Binary(o, a, c) => Expr::Binary(
            *o,
            Box::new(rewrite_expr(a, f)),
            Box::new(rewrite_expr(c, f)),
        ),
        Expr::Reduce { op, axes, body } => Expr::Reduce {
            op: *op,
            axes: axes.clone(),
            body: Box::new(rewrite_expr(body, f)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::evaluate;
    use crate::parse::test_parse as parse;

    /// `data`, a tensor of `dims` in the plain layout, blocked by `b` along its first
    /// dimension (which `b` divides).
    fn to_blocked<T: Copy>(data: &[T], dims: &[usize], b: usize) -> Vec<T> {
        relayout(data, dims, b, true)
    }

    /// The inverse of [`to_blocked`].
    fn from_blocked<T: Copy>(data: &[T], dims: &[usize], b: usize) -> Vec<T> {
        relayout(data, dims, b, false)
    }

    fn relayout<T: Copy>(data: &[T], dims: &[usize], b: usize, to: bool) -> Vec<T> {
        let inner: usize = dims[1..].iter().product();
        let mut out = data.to_vec();
        for (i, x) in data.iter().enumerate() {
            // Plain position (c, p) with c = B·co + ci lies blocked at (co, p, ci).
            let (c, p) = (i / inner.max(1), i % inner.max(1));
            let j = (c / b * inner + p) * b + c % b;
            if to {
                out[j] = *x;
            } else {
                out[i] = data[j];
            }
        }
        out
    }

    const CONV: &str = "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, \
        b: Tensor<f32, K>, s: Tensor<f32, (K, OH, OW)>) -> Tensor<f32, (K, OH, OW)> { \
        let y: Tensor<f32, (K, OH, OW)> = compute(|k, h, v| \
            sum(|c, r, q| x.pad(0.0)[c][h * 2 + r - 1][v * 2 + q - 1] * w[k][c][r][q])); \
        compute(|k, h, v| max(y[k][h][v] + b[k] + s[k][h][v], 0.0)) }";
    const CONV_ATTR: &str = "constant(w, b), blocked(x, s), R = 3, S = 3, \
        OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1";

    /// Deterministic, distinct values.
    fn data(n: usize, seed: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7 + seed * 13) % 23) as f64 - 11.0)
            .collect()
    }

    /// Every variant computes, on its blocked tensors, what the declared operator
    /// computes on the plain ones.
    fn agrees(op: &Operator) -> usize {
        let mut checked = 0;
        for v in op.blocked_variants() {
            for (k, &i) in v.specs.iter().enumerate() {
                let values = &op.specializations[i].values;
                let dims = |t: TensorRef| -> Vec<usize> {
                    op.tensor_dims(t)
                        .iter()
                        .map(|d| d.value(values) as usize)
                        .collect()
                };
                let plain: Vec<Vec<f64>> = (0..op.inputs.len())
                    .map(|t| data(dims(TensorRef::Input(t)).iter().product(), t))
                    .collect();
                let given: Vec<Vec<f64>> = plain
                    .iter()
                    .enumerate()
                    .map(|(t, x)| match v.inputs[t] {
                        true => to_blocked(x, &dims(TensorRef::Input(t)), v.block() as usize),
                        false => x.clone(),
                    })
                    .collect();
                let want = evaluate(op, values, &plain).unwrap();
                let out_dims = dims(TensorRef::Stage(op.stages.len() - 1));
                let want = match v.output {
                    true => to_blocked(&want, &out_dims, v.block() as usize),
                    false => want,
                };
                let got = evaluate(&v.op, &v.op.specializations[k].values, &given).unwrap();
                assert_eq!(got, want, "{} at {:?}", v.op.name, values);
                checked += 1;
            }
        }
        checked
    }

    #[test]
    fn a_blocked_variant_computes_what_its_operator_computes() {
        let op = parse(
            &format!(
                "{CONV_ATTR}, specialize(C = 32, H = 5, W = 6, K = 16), \
                      specialize(C = 3, H = 5, W = 4, K = 32), \
                      specialize(C = 16, H = 3, W = 3, K = 8)"
            ),
            CONV,
        );
        let variants = op.blocked_variants();
        let names: Vec<&str> = variants.iter().map(|v| v.op.name.as_str()).collect();
        // The shortcut and the output (C = 3); only x (K = 8); all three.
        assert_eq!(names, ["conv__b16_s_o", "conv__b16_x", "conv__b16_x_s_o"]);
        assert_eq!(agrees(&op), 3);
    }

    #[test]
    fn pools_and_vectors_block_too() {
        let pool = parse(
            "blocked(x), OH = (H + 2 - 3) / 2 + 1, specialize(C = 32, H = 7)",
            "pub fn pool(x: Tensor<f32, (C, H)>) -> Tensor<f32, (C, OH)> { \
             compute(|c, o| max(|r @ 0..3| x.pad(f32::NEG_INFINITY)[c][o * 2 + r - 1])) }",
        );
        assert_eq!(agrees(&pool), 1);
        let dense = parse(
            "constant(w), blocked(x), specialize(K = 32, N = 5)",
            "pub fn dense(x: Tensor<f64, K>, w: Tensor<f64, (N, K)>) -> Tensor<f64, N> { \
             compute(|j| sum(|k| w[j][k] * x[k])) }",
        );
        let v = dense.blocked_variants();
        // f64: blocks of 8; the output (5) stays plain.
        assert_eq!((v[0].block(), v[0].output), (8, false));
        assert_eq!(agrees(&dense), 1);
    }

    #[test]
    fn a_tensor_read_off_its_first_axis_stays_plain() {
        // `x[c + 1]` cannot be split; `x` stays plain, the output is still blocked.
        let op = parse(
            "blocked(x), specialize(C = 32)",
            "pub fn shift(x: Tensor<f32, C>) -> Tensor<f32, C> { \
             compute(|c| x.pad(0.0)[c + 1]) }",
        );
        let v = op.blocked_variants();
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].inputs.as_slice(), v[0].output), (&[false][..], true));
        assert_eq!(agrees(&op), 1);
    }

    #[test]
    fn blocking_round_trips() {
        let x: Vec<u32> = (0..32 * 3).collect();
        let b = to_blocked(&x, &[32, 3], 16);
        assert_eq!(&b[..4], &[0, 3, 6, 9]);
        assert_eq!(from_blocked(&b, &[32, 3], 16), x);
    }
}
