//! The API of an operator that declares inputs `blocked(...)`: those inputs and the
//! output are `autotune::Activation`s, and a call runs the blocked variant
//! (`autotune_lang::layout`) of the specialisation its shapes match, in that
//! variant's layouts, else the declared operator on plain tensors.

use crate::checks::{out_dims, shape_checks};
use crate::idents::{free_shape_idents, input_idents, input_lifetimes, spec_pattern};
use autotune_lang::ir::Operator;
use autotune_lang::layout::BlockedVariant;
use proc_macro2::{Ident, Literal, TokenStream as Tokens};
use quote::{format_ident, quote};

pub(crate) fn api(
    op: &Operator,
    variants: &[BlockedVariant],
    vis: &syn::Visibility,
    docs: &[&syn::Attribute],
) -> Tokens {
    let op_name = op.name.as_str();
    let name = format_ident!("{}", op.name);
    let into = format_ident!("{}_into", op.name);
    let reference = format_ident!("{}_reference", op.name);
    let reference_into = format_ident!("{}_reference_into", op.name);
    let dispatch = format_ident!("__autotune_{}_blocked", op.name);
    let t = format_ident!("{}", op.dtype.rust_name());
    let out_rank = Literal::usize_unsuffixed(op.output().dims.len());
    let in_names = input_idents(op);
    let lifetimes = input_lifetimes(op);
    let is_blocked = |i: usize| op.blocked.contains(&i);
    let args: Vec<Tokens> = op
        .inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let n = &in_names[i];
            let r = Literal::usize_unsuffixed(input.dims.len());
            let lt = &lifetimes[i];
            if is_blocked(i) {
                quote!(#n: &#lt ::autotune::Activation<#t, #r>)
            } else {
                quote!(#n: impl ::autotune::IntoTensorRef<#lt, #t, #r>)
            }
        })
        .collect();
    let to_views: Tokens = (0..op.inputs.len())
        .filter(|&i| !is_blocked(i))
        .map(|i| {
            let (n, s) = (&in_names[i], &op.inputs[i].name);
            quote!(let #n = ::autotune::__private::input(#op_name, #s, #n)?;)
        })
        .collect();

    // The blocked inputs in a layout (`block` per input), as views, and the output.
    let call = |callee: &Ident, imp: Tokens, blocks: &dyn Fn(usize) -> i64, out_block: i64| {
        let views: Tokens = (0..op.inputs.len())
            .filter(|&i| is_blocked(i))
            .map(|i| {
                let n = &in_names[i];
                let held = format_ident!("__held_{}", n);
                let r = op.inputs[i].dims.len();
                let b = blocks(i);
                let p = Literal::usize_unsuffixed(if b == 1 { r } else { r + 1 });
                let r = Literal::usize_unsuffixed(r);
                let b = Literal::usize_unsuffixed(b as usize);
                let s = &op.inputs[i].name;
                quote! {
                    let #held = ::autotune::__private::activation_in::<#t, #r, #p>(#n, #b);
                    let #n = ::autotune::__private::input(#op_name, #s,
                        ::autotune::TensorRef::new(&#held.0, #held.1))?;
                }
            })
            .collect();
        let p = op.output().dims.len() + usize::from(out_block != 1);
        let p = Literal::usize_unsuffixed(p);
        let ob = Literal::usize_unsuffixed(out_block as usize);
        quote! {
            #views
            let __o = ::autotune::__private::activation_out::<#t, #out_rank, #p>(
                #op_name, out, __out_dims, #ob)?;
            return #callee(#imp, #(#in_names,)* ::core::option::Option::Some(__o)).map(|_| ());
        }
    };
    let free = free_shape_idents(op);
    let arms: Tokens = variants
        .iter()
        .map(|v| {
            let patterns = v.specs.iter().map(|&s| spec_pattern(op, s));
            let callee = format_ident!("__autotune_{}", v.op.name);
            let block = |i: usize| if v.inputs[i] { v.block() } else { 1 };
            let out_block = if v.output { v.block() } else { 1 };
            let body = call(
                &callee,
                quote!(::autotune::__private::Impl::Kernel),
                &block,
                out_block,
            );
            quote!(#(#patterns)|* => { #body })
        })
        .collect();
    let plain = call(
        &format_ident!("__autotune_{}", op.name),
        quote!(__imp),
        &|_| 1,
        1,
    );
    let checks = shape_checks(op);
    let out_dims = out_dims(op);

    quote! {
        #(#docs)*
        ///
        /// Runs the generated kernel (the specialisation matching the shapes, else the
        /// generic kernel) and returns the output, in that kernel's layout; shape
        /// mismatches are errors.
        #vis fn #name<#(#lifetimes),*>(#(#args),*)
            -> ::core::result::Result<::autotune::Activation<#t, #out_rank>, ::autotune::Error>
        {
            let mut out = ::autotune::__private::activation();
            #dispatch(::autotune::__private::Impl::Kernel, #(#in_names,)* &mut out)?;
            ::core::result::Result::Ok(out)
        }

        #[doc = concat!("Like [`", #op_name, "`], writing into `out` (its memory reused).")]
        #vis fn #into<#(#lifetimes),*>(#(#args,)* out: &mut ::autotune::Activation<#t, #out_rank>)
            -> ::core::result::Result<(), ::autotune::Error>
        {
            #dispatch(::autotune::__private::Impl::Kernel, #(#in_names,)* out)
        }

        #[doc = concat!("The naive Rust reference implementation of [`", #op_name, "`] (a plain output).")]
        #vis fn #reference<#(#lifetimes),*>(#(#args),*)
            -> ::core::result::Result<::autotune::Activation<#t, #out_rank>, ::autotune::Error>
        {
            let mut out = ::autotune::__private::activation();
            #dispatch(::autotune::__private::Impl::Reference, #(#in_names,)* &mut out)?;
            ::core::result::Result::Ok(out)
        }

        #[doc = concat!("The naive Rust reference implementation of [`", #op_name, "_into`].")]
        #vis fn #reference_into<#(#lifetimes),*>(#(#args,)* out: &mut ::autotune::Activation<#t, #out_rank>)
            -> ::core::result::Result<(), ::autotune::Error>
        {
            #dispatch(::autotune::__private::Impl::Reference, #(#in_names,)* out)
        }

        #[doc(hidden)]
        #[allow(non_snake_case, unused_variables, unused_parens, unreachable_code, clippy::all)]
        #vis fn #dispatch<#(#lifetimes),*>(
            __imp: ::autotune::__private::Impl,
            #(#args,)*
            out: &mut ::autotune::Activation<#t, #out_rank>,
        ) -> ::core::result::Result<(), ::autotune::Error>
        {
            #to_views
            #checks
            let __out_dims: [usize; #out_rank] = [#(#out_dims),*];
            if __imp == ::autotune::__private::Impl::Kernel {
                match (#(#free,)*) {
                    #arms
                    _ => {}
                }
            }
            #plain
        }
    }
}
