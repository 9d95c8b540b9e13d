//! The checks every wrapper runs before a kernel: each shape variable bound from
//! the inputs or derived, every dimension and every unpadded read checked.

use crate::idents::{extent_tokens, shape_ident};
use autotune_lang::ir::{Extent, Operator, ShapeVarKind};
use proc_macro2::{Ident, Span, TokenStream as Tokens};
use quote::{format_ident, quote};

/// Why a shape variable has the value it has, for error messages.
pub(crate) fn because(op: &Operator, v: usize) -> String {
    match &op.shape_vars[v].kind {
        ShapeVarKind::Input { tensor, dim } => {
            format!("as `{}` dimension {dim}", op.inputs[*tensor].name)
        }
        ShapeVarKind::Derived(e) => format!("{} = {}", op.shape_vars[v].name, e.display(op)),
    }
}

/// The output's dimensions, once [`shape_checks`] bound the shapes.
pub(crate) fn out_dims(op: &Operator) -> Vec<Tokens> {
    let op_name = op.name.as_str();
    op.output()
        .dims
        .iter()
        .map(|d| {
            let e = extent_tokens(op, d);
            quote!(::autotune::__private::dim(#op_name, #e)?)
        })
        .collect()
}

/// Binds every shape variable, checks every dimension and every unpadded read.
pub(crate) fn shape_checks(op: &Operator) -> Tokens {
    let op_name = &op.name;
    let mut out = Tokens::new();
    for (i, input) in op.inputs.iter().enumerate() {
        let n = Ident::new(&input.name, Span::call_site());
        let d = format_ident!("__d_{}", i);
        out.extend(quote!(let #d = #n.dims();));
    }
    // Input shape variables take the first dimension that names them.
    for (v, var) in op.shape_vars.iter().enumerate() {
        if let ShapeVarKind::Input { tensor, dim } = var.kind {
            let s = shape_ident(op, v);
            let d = format_ident!("__d_{}", tensor);
            out.extend(quote!(let #s: i64 = ::autotune::__private::size(#d[#dim]);));
        }
    }
    for (v, var) in op.shape_vars.iter().enumerate() {
        if let ShapeVarKind::Derived(e) = &var.kind {
            let s = shape_ident(op, v);
            let value = shape_expr_tokens(op, e);
            let name = &var.name;
            let text = e.display(op).to_string();
            out.extend(quote! {
                let #s: i64 = ::autotune::__private::derived(#op_name, #name, #text,
                    (|| -> ::core::option::Option<i64> { ::core::option::Option::Some(#value) })())?;
            });
        }
    }
    for (i, input) in op.inputs.iter().enumerate() {
        let d = format_ident!("__d_{}", i);
        let tname = &input.name;
        for (dim, ext) in input.dims.iter().enumerate() {
            let is_binding = matches!(ext, Extent::Var(v)
                if op.shape_vars[*v].kind == ShapeVarKind::Input { tensor: i, dim });
            if is_binding {
                continue;
            }
            let e = extent_tokens(op, ext);
            let (dim_name, why) = match ext {
                Extent::Var(v) => (op.shape_vars[*v].name.clone(), because(op, *v)),
                Extent::Const(c) => (c.to_string(), "a constant".to_string()),
            };
            out.extend(quote! {
                ::autotune::__private::check_dim(#op_name, #tname, #dim, #dim_name, #d[#dim], #e, #why)?;
            });
        }
    }
    for b in op.access_bounds() {
        let tname = op.tensor_name(b.tensor);
        let dim = b.dim;
        let terms = b.terms.iter().map(|(c, e)| {
            let e = extent_tokens(op, e);
            quote!((#c, #e))
        });
        let offset = b.offset;
        let domain = b.domain.iter().map(|e| extent_tokens(op, e));
        let size = extent_tokens(op, &op.tensor_dims(b.tensor)[b.dim]);
        out.extend(quote! {
            ::autotune::__private::check_access(#op_name, #tname, #dim,
                &[#(#terms),*], #offset, &[#(#domain),*], #size)?;
        });
    }
    out
}

/// `checked_*` arithmetic for a derived shape, inside a closure returning `Option`.
fn shape_expr_tokens(op: &Operator, e: &autotune_lang::ir::ShapeExpr) -> Tokens {
    use autotune_lang::ir::ShapeExpr as S;
    let bin = |a: &S, b: &S, f: Tokens| {
        let (a, b) = (shape_expr_tokens(op, a), shape_expr_tokens(op, b));
        quote!(#f(#a, #b)?)
    };
    match e {
        S::Const(c) => extent_tokens(op, &Extent::Const(*c)),
        S::Var(v) => extent_tokens(op, &Extent::Var(*v)),
        S::Add(a, b) => bin(a, b, quote!(i64::checked_add)),
        S::Sub(a, b) => bin(a, b, quote!(i64::checked_sub)),
        S::Mul(a, b) => bin(a, b, quote!(i64::checked_mul)),
        S::Div(a, b) => bin(a, b, quote!(::autotune::__private::floor_div)),
    }
}
