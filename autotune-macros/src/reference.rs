//! The naive Rust reference: every stage as plain loops in declaration order,
//! reductions as scalar accumulators, in the operator's element type. It is the
//! ground truth the tests and the tuner's correctness check compare kernels with.

use autotune_lang::ir::{Affine, BinaryOp, DType, Expr, Operator, Stage, TensorRef, UnaryOp};
use proc_macro2::{Literal, TokenStream as Tokens};
use quote::{format_ident, quote};

use crate::idents::{buffer_ident, extent_tokens};

/// The body that fills `__out` from the input views (shape locals already bound).
pub fn reference(op: &Operator) -> Tokens {
    let t = format_ident!("{}", op.dtype.rust_name());
    let mut out = Tokens::new();
    for (i, input) in op.inputs.iter().enumerate() {
        let n = format_ident!("{}", input.name);
        let b = buffer_ident(op, TensorRef::Input(i));
        out.extend(quote!(let #b: &[#t] = #n.data();));
    }
    let op_name = &op.name;
    for (s, stage) in op.stages.iter().enumerate() {
        let buf = buffer_ident(op, TensorRef::Stage(s));
        if s + 1 < op.stages.len() {
            let dims = stage.dims.iter().map(|d| extent_tokens(op, d));
            let name = op.tensor_name(TensorRef::Stage(s));
            out.extend(quote! {
                let mut #buf: ::std::vec::Vec<#t> = ::autotune::__private::zeroed(#op_name, #name,
                    ::autotune::__private::elements(
                        #op_name, &[#(::autotune::__private::dim(#op_name, #dims)?),*])?)?;
            });
        }
        out.extend(stage_loops(op, s, stage));
    }
    out
}

fn axis(stage: &Stage, a: usize) -> proc_macro2::Ident {
    format_ident!("__ax_{}", stage.axes[a].name)
}

fn stage_loops(op: &Operator, s: usize, stage: &Stage) -> Tokens {
    let buf = buffer_ident(op, TensorRef::Stage(s));
    let spatial: Vec<Affine> = (0..stage.n_spatial).map(Affine::axis).collect();
    let index = flat(op, TensorRef::Stage(s), &spatial, stage);
    let value = value(op, stage, &stage.body);
    let mut body = quote!(#buf[(#index) as usize] = #value;);
    for a in (0..stage.n_spatial).rev() {
        let ax = axis(stage, a);
        let e = extent_tokens(op, &stage.axes[a].extent);
        body = quote!(for #ax in 0..#e { #body });
    }
    body
}

fn affine(stage: &Stage, ix: &Affine) -> Tokens {
    let offset = Literal::i64_suffixed(ix.offset);
    let terms = ix.terms.iter().map(|&(a, c)| {
        let ax = axis(stage, a);
        let c = Literal::i64_suffixed(c);
        quote!(#ax * #c +)
    });
    quote!((#(#terms)* #offset))
}

/// Row-major flat offset from per-dimension index tokens.
fn flat_from(op: &Operator, t: TensorRef, idx: &[Tokens]) -> Tokens {
    let dims = op.tensor_dims(t);
    let mut acc = quote!(0i64);
    for (ix, d) in idx.iter().zip(dims) {
        let d = extent_tokens(op, d);
        acc = quote!((#acc * #d + #ix));
    }
    acc
}

fn flat(op: &Operator, t: TensorRef, index: &[Affine], stage: &Stage) -> Tokens {
    let idx: Vec<Tokens> = index.iter().map(|ix| affine(stage, ix)).collect();
    flat_from(op, t, &idx)
}

fn constant(dtype: DType, c: f64) -> Tokens {
    let t = format_ident!("{}", dtype.rust_name());
    if c.is_nan() {
        quote!(#t::NAN)
    } else if c == f64::INFINITY {
        quote!(#t::INFINITY)
    } else if c == f64::NEG_INFINITY {
        quote!(#t::NEG_INFINITY)
    } else {
        let lit = match dtype {
            DType::F32 => Literal::f32_suffixed((c as f32).abs()),
            DType::F64 => Literal::f64_suffixed(c.abs()),
        };
        if c.is_sign_negative() {
            quote!((-#lit))
        } else {
            quote!(#lit)
        }
    }
}

fn value(op: &Operator, stage: &Stage, e: &Expr) -> Tokens {
    let t = format_ident!("{}", op.dtype.rust_name());
    match e {
        Expr::Const(c) => constant(op.dtype, *c),
        Expr::ShapeValue(v) => {
            let s = extent_tokens(op, &autotune_lang::ir::Extent::Var(*v));
            quote!((#s as #t))
        }
        Expr::Load { tensor, index, pad } => {
            let buf = buffer_ident(op, *tensor);
            match pad {
                None => {
                    let f = flat(op, *tensor, index, stage);
                    quote!(#buf[(#f) as usize])
                }
                Some(p) => {
                    let names: Vec<_> = (0..index.len())
                        .map(|d| format_ident!("__i{}", d))
                        .collect();
                    let values = index.iter().map(|ix| affine(stage, ix));
                    let dims = op.tensor_dims(*tensor).iter().map(|d| extent_tokens(op, d));
                    let idx: Vec<Tokens> = names.iter().map(|n| quote!(#n)).collect();
                    let f = flat_from(op, *tensor, &idx);
                    let pad = constant(op.dtype, *p);
                    quote! {{
                        #( let #names: i64 = #values; )*
                        if true #( && 0 <= #names && #names < #dims )* {
                            #buf[(#f) as usize]
                        } else {
                            #pad
                        }
                    }}
                }
            }
        }
        Expr::Unary(u, a) => {
            let a = value(op, stage, a);
            match u {
                UnaryOp::Neg => quote!((-#a)),
                UnaryOp::Exp => quote!((#a).exp()),
                UnaryOp::Log => quote!((#a).ln()),
                UnaryOp::Tanh => quote!((#a).tanh()),
                UnaryOp::Sqrt => quote!((#a).sqrt()),
                UnaryOp::Abs => quote!((#a).abs()),
            }
        }
        Expr::Binary(b, x, y) => binary(*b, value(op, stage, x), value(op, stage, y)),
        Expr::Reduce {
            op: rop,
            axes,
            body,
        } => {
            let init = constant(op.dtype, rop.identity());
            let step = binary(rop.combiner(), quote!(__acc), value(op, stage, body));
            let mut inner = quote!(__acc = #step;);
            for &a in axes.iter().rev() {
                let ax = axis(stage, a);
                let e = extent_tokens(op, &stage.axes[a].extent);
                inner = quote!(for #ax in 0..#e { #inner });
            }
            quote!({
                let mut __acc: #t = #init;
                #inner
                __acc
            })
        }
    }
}

fn binary(op: BinaryOp, a: Tokens, b: Tokens) -> Tokens {
    match op {
        BinaryOp::Add => quote!((#a + #b)),
        BinaryOp::Sub => quote!((#a - #b)),
        BinaryOp::Mul => quote!((#a * #b)),
        BinaryOp::Div => quote!((#a / #b)),
        BinaryOp::Max => quote!((#a).max(#b)),
        BinaryOp::Min => quote!((#a).min(#b)),
    }
}
