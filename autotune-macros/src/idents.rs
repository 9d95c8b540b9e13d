//! Names of the expansion's parameters and locals (inputs, their lifetimes, shape
//! values, buffers), shared by the wrappers and the reference.

use autotune_lang::ir::{Extent, Operator, TensorRef};
use proc_macro2::{Ident, Literal, Span, TokenStream as Tokens};
use quote::{format_ident, quote};

/// The inputs as the wrappers' parameters, named as in the signature.
pub(crate) fn input_idents(op: &Operator) -> Vec<Ident> {
    op.inputs
        .iter()
        .map(|i| Ident::new(&i.name, Span::call_site()))
        .collect()
}

/// A lifetime per input, `'t0`, `'t1`, ...
pub(crate) fn input_lifetimes(op: &Operator) -> Vec<syn::Lifetime> {
    (0..op.inputs.len())
        .map(|i| syn::Lifetime::new(&format!("'t{i}"), Span::call_site()))
        .collect()
}

/// The locals of the input shape variables, the ones a specialisation names.
pub(crate) fn free_shape_idents(op: &Operator) -> Vec<Ident> {
    op.input_shape_vars()
        .map(|(v, _)| shape_ident(op, v))
        .collect()
}

/// A specialisation's values of the input shape variables, as the tuple pattern a
/// call's [`free_shape_idents`] are matched against.
pub(crate) fn spec_pattern(op: &Operator, spec: usize) -> Tokens {
    let values = op
        .input_shape_vars()
        .map(|(v, _)| Literal::i64_suffixed(op.specializations[spec].values[v]));
    quote!((#(#values,)*))
}

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
