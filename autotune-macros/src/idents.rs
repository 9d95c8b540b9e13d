//! Names of the expansion's locals (shape values, buffers), shared by the
//! wrapper and the reference.

use autotune_lang::ir::{Extent, Operator, TensorRef};
use proc_macro2::{Ident, Literal, TokenStream as Tokens};
use quote::{format_ident, quote};

/// `__s_M`: the local holding a shape variable's value (`i64`).
pub(crate) fn shape_ident(op: &Operator, v: usize) -> Ident {
    format_ident!("__s_{}", op.shape_vars[v].name)
}

pub(crate) fn extent_tokens(op: &Operator, e: &Extent) -> Tokens {
    match e {
        Extent::Const(c) => {
            let c = Literal::i64_suffixed(*c);
            quote!(#c)
        }
        Extent::Var(v) => {
            let id = shape_ident(op, *v);
            quote!(#id)
        }
    }
}

/// Names an input or stage buffer in the reference implementation.
pub(crate) fn buffer_ident(op: &Operator, t: TensorRef) -> Ident {
    match t {
        TensorRef::Input(i) => format_ident!("__in_{}", op.inputs[i].name),
        TensorRef::Stage(s) if s + 1 == op.stages.len() => format_ident!("__out"),
        TensorRef::Stage(s) => format_ident!("__st_{}", op.stages[s].name),
    }
}
