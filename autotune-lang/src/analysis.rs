//! Analyses of the IR that code generation builds on: load sites, the
//! reductions of a stage, which consumer stages can be fused, and which inputs
//! a function needs positive.

use crate::ir::{Expr, Operator, TensorRef, UnaryOp};

/// Per input: whether some stage takes `log` or `sqrt` of it directly, so test
/// inputs should be drawn positive to keep the function in its domain.
pub fn positive_inputs(op: &Operator) -> Vec<bool> {
    let mut out = vec![false; op.inputs.len()];
    for stage in &op.stages {
        stage.body.visit(&mut |x| {
            if let Expr::Unary(UnaryOp::Log | UnaryOp::Sqrt, arg) = x {
                if let Expr::Load {
                    tensor: TensorRef::Input(i),
                    ..
                } = **arg
                {
                    out[i] = true;
                }
            }
        });
    }
    out
}

/// Load sites of an expression in pre-order.
pub fn load_sites(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    e.visit(&mut |x| {
        if matches!(x, Expr::Load { .. }) {
            out.push(x);
        }
    });
    out
}

/// The reductions of a stage body: the tiled structure handles at most one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reduction<'a> {
    None,
    One(&'a Expr),
    Several,
}

pub fn single_reduction(e: &Expr) -> Reduction<'_> {
    let mut found = Vec::new();
    e.visit(&mut |x| {
        if matches!(x, Expr::Reduce { .. }) {
            found.push(x);
        }
    });
    match found.as_slice() {
        [] => Reduction::None,
        [r] => Reduction::One(r),
        _ => Reduction::Several,
    }
}

/// The element-wise consumer that may be fused into stage `s`: the only stage
/// reading `s`, with the same dimensions, reading it only at its own indices.
pub fn fusible_consumer(op: &Operator, s: usize) -> Option<usize> {
    let readers: Vec<usize> = (0..op.stages.len())
        .filter(|&c| {
            load_sites(&op.stages[c].body)
                .iter()
                .any(|l| matches!(l, Expr::Load { tensor: TensorRef::Stage(t), .. } if *t == s))
        })
        .collect();
    let [c] = readers.as_slice() else { return None };
    let consumer = &op.stages[*c];
    if consumer.dims != op.stages[s].dims || single_reduction(&consumer.body) != Reduction::None {
        return None;
    }
    let identity = load_sites(&consumer.body).iter().all(|l| match l {
        Expr::Load {
            tensor: TensorRef::Stage(t),
            index,
            pad,
        } if *t == s => {
            pad.is_none()
                && index
                    .iter()
                    .enumerate()
                    .all(|(d, ix)| ix.as_axis() == Some(d))
        }
        _ => true,
    });
    identity.then_some(*c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_under_log_or_sqrt_are_positive() {
        let item: syn::ItemFn = syn::parse_str(
            "fn f(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: Tensor<f32, (N,)>)
                -> Tensor<f32, (N,)> {
                compute(|i| sqrt(a[i]) + log(b[i] * 2.0) + c[i])
            }",
        )
        .unwrap();
        let op = crate::parse_operator(proc_macro2::TokenStream::new(), &item).unwrap();
        // `b` is scaled first: its domain is not this analysis's to guess.
        assert_eq!(positive_inputs(&op), vec![true, false, false]);
    }
}
