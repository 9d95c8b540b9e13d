//! The `#[tensor_op]` attribute (re-exported by the `autotune` crate).
//!
//! For an operator `op` it parses the function with `autotune-lang` (the same
//! parser the build helper uses) and emits, with the function's visibility:
//! - `op(inputs...) -> Result<Tensor<T, R>, autotune::Error>`: runs the kernel;
//! - `op_into(inputs..., out) -> Result<(), autotune::Error>`: writes into `out`;
//! - `op_reference` / `op_reference_into`: the naive Rust reference;
//! - a hidden `__autotune_op` that checks shapes once and runs either side.
//!
//! With `blocked(...)` inputs, those inputs and the output are `autotune::Activation`s
//! instead, and each blocked variant gets a hidden wrapper of its own (`blocked.rs`).
//!
//! `kernel_threads!()` emits `set_num_threads` / `num_threads` for the calling
//! package's thread pool (each package links its own).
//!
//! The kernels themselves come from the build script (`autotune-build`); the
//! expansion declares them `extern "C"` under names from `autotune_lang::mangle`
//! and never reads a file.

mod blocked;
mod checks;
mod idents;
mod reference;

use checks::{because, out_dims, shape_checks};
use idents::{
    extent_tokens, free_shape_idents, input_idents, input_lifetimes, shape_ident, spec_pattern,
};

use autotune_lang::ir::{Extent, Operator, TensorRef};
use autotune_lang::mangle::{self, Package, Variant};
use proc_macro::TokenStream;
use proc_macro2::{Ident, Literal, Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{parse_macro_input, ItemFn};

/// Marks a function as a tensor operator; see `docs/language.md` for the language.
#[proc_macro_attribute]
pub fn tensor_op(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ItemFn);
    match autotune_lang::parse_operator(attr.into(), &item) {
        Ok(op) => expand(&op, &item).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Emits `pub fn set_num_threads(n: usize)` and `pub fn num_threads() -> usize`,
/// which control the thread pool that this package's kernels share. The pool is
/// compiled by the package's build script with its kernels, so the package must
/// have at least one `#[tensor_op]`.
#[proc_macro]
pub fn kernel_threads(input: TokenStream) -> TokenStream {
    if !input.is_empty() {
        return syn::Error::new(Span::call_site(), "kernel_threads!() takes no arguments")
            .to_compile_error()
            .into();
    }
    let prefix = mangle::runtime_prefix(&Package::from_env());
    let set = format!("{prefix}_set_num_threads");
    let get = format!("{prefix}_num_threads");
    quote! {
        /// Sets how many threads this package's kernels use from now on (clamped to
        /// at least 1). The default is `AUTOTUNE_NUM_THREADS`, else every online CPU.
        pub fn set_num_threads(n: usize) {
            extern "C" {
                #[link_name = #set]
                fn __set(n: i32);
            }
            let n = i32::try_from(n).unwrap_or(i32::MAX);
            // SAFETY: the pool's setter takes any value and clamps it.
            unsafe { __set(n) }
        }

        /// The number of threads this package's kernels use.
        pub fn num_threads() -> usize {
            extern "C" {
                #[link_name = #get]
                fn __get() -> i32;
            }
            // SAFETY: a plain getter; the pool initialises itself on first use.
            unsafe { __get() }.max(1) as usize
        }
    }
    .into()
}

fn expand(op: &Operator, item: &ItemFn) -> Tokens {
    let pkg = Package::from_env();
    let vis = &item.vis;
    let variants = op.blocked_variants();
    let served = autotune_lang::layout::served(&variants, op.specializations.len());
    let mut hidden_fn = hidden_fn(op, &pkg, vis, &served);
    for v in &variants {
        hidden_fn.extend(self::hidden_fn(&v.op, &pkg, vis, &[]));
    }
    let docs: Vec<_> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let name = &item.sig.ident;
    let op_name = name.to_string();
    let t = format_ident!("{}", op.dtype.rust_name());
    let rank = |dims: &[Extent]| Literal::usize_unsuffixed(dims.len());
    let out_rank = rank(&op.output().dims);
    let hidden = format_ident!("__autotune_{}", name);
    let into = format_ident!("{}_into", name);
    let reference = format_ident!("{}_reference", name);
    let reference_into = format_ident!("{}_reference_into", name);

    let in_names = input_idents(op);
    let in_strs: Vec<&str> = op.inputs.iter().map(|i| i.name.as_str()).collect();
    let lifetimes = input_lifetimes(op);
    let in_ranks: Vec<Literal> = op.inputs.iter().map(|i| rank(&i.dims)).collect();
    let generic_args = quote! {
        #( #in_names: impl ::autotune::IntoTensorRef<#lifetimes, #t, #in_ranks> ),*
    };
    let to_views = quote! {
        #( let #in_names = ::autotune::__private::input(#op_name, #in_strs, #in_names)?; )*
    };

    let marker = mangle::built_marker(&op_name);
    let marker_msg = format!(
        "autotune: no kernel was built for the operator `{op_name}`. Add a build script that \
         compiles the file defining it:\n\n    // build.rs\n    fn main() {{\n        \
         autotune_build::Builder::new().file(\"src/<file>.rs\").compile();\n    }}\n\nwith \
         `autotune-build` in [build-dependencies]"
    );

    if !op.blocked.is_empty() {
        let api = blocked::api(op, &variants, vis, &docs);
        return quote! {
            const _: &str = ::core::env!(#marker, #marker_msg);
            #api
            #hidden_fn
        };
    }

    quote! {
        const _: &str = ::core::env!(#marker, #marker_msg);

        #(#docs)*
        ///
        /// Runs the generated kernel (the specialisation matching the shapes, else the
        /// generic kernel) and returns the output; shape mismatches are errors.
        #vis fn #name<#(#lifetimes),*>(#generic_args)
            -> ::core::result::Result<::autotune::Tensor<#t, #out_rank>, ::autotune::Error>
        {
            #to_views
            #hidden(::autotune::__private::Impl::Kernel, #(#in_names,)* ::core::option::Option::None)
                .map(|o| o.expect("an owned output"))
        }

        #[doc = concat!("Like [`", #op_name, "`], writing into `out`.")]
        #vis fn #into<#(#lifetimes,)* 'o>(#generic_args, out: impl ::autotune::IntoTensorMut<'o, #t, #out_rank>)
            -> ::core::result::Result<(), ::autotune::Error>
        {
            #to_views
            let out = ::autotune::__private::output(#op_name, out)?;
            #hidden(::autotune::__private::Impl::Kernel, #(#in_names,)* ::core::option::Option::Some(out))
                .map(|_| ())
        }

        #[doc = concat!("The naive Rust reference implementation of [`", #op_name, "`].")]
        #vis fn #reference<#(#lifetimes),*>(#generic_args)
            -> ::core::result::Result<::autotune::Tensor<#t, #out_rank>, ::autotune::Error>
        {
            #to_views
            #hidden(::autotune::__private::Impl::Reference, #(#in_names,)* ::core::option::Option::None)
                .map(|o| o.expect("an owned output"))
        }

        #[doc = concat!("The naive Rust reference implementation of [`", #op_name, "_into`].")]
        #vis fn #reference_into<#(#lifetimes,)* 'o>(#generic_args, out: impl ::autotune::IntoTensorMut<'o, #t, #out_rank>)
            -> ::core::result::Result<(), ::autotune::Error>
        {
            #to_views
            let out = ::autotune::__private::output(#op_name, out)?;
            #hidden(::autotune::__private::Impl::Reference, #(#in_names,)* ::core::option::Option::Some(out))
                .map(|_| ())
        }

        #hidden_fn
    }
}

/// The hidden `__autotune_<op>`: checks the shapes once, then runs the kernel
/// matching them (none of the specialisations in `served`, which a blocked variant
/// serves) or the reference.
fn hidden_fn(op: &Operator, pkg: &Package, vis: &syn::Visibility, served: &[bool]) -> Tokens {
    let op_name = op.name.as_str();
    let t = format_ident!("{}", op.dtype.rust_name());
    let out_rank = Literal::usize_unsuffixed(op.output().dims.len());
    let hidden = format_ident!("__autotune_{}", op.name);
    let in_names = input_idents(op);
    let lifetimes = input_lifetimes(op);
    let in_ranks: Vec<Literal> = op
        .inputs
        .iter()
        .map(|i| Literal::usize_unsuffixed(i.dims.len()))
        .collect();
    let view_args = quote! {
        #( #in_names: ::autotune::TensorRef<#lifetimes, #t, #in_ranks> ),*
    };
    let checks = shape_checks(op);
    let run_kernel = kernel_call(op, pkg, served);
    let run_reference = reference::reference(op);

    let out_dims = out_dims(op);
    let out_checks: Vec<Tokens> = op
        .output()
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let e = extent_tokens(op, d);
            let (dim_name, why) = match d {
                Extent::Var(v) => (op.shape_vars[*v].name.clone(), because(op, *v)),
                Extent::Const(c) => (c.to_string(), "a constant".to_string()),
            };
            quote! {
                ::autotune::__private::check_dim(
                    #op_name, "output", #i, #dim_name, __given[#i], #e, #why)?;
            }
        })
        .collect();

    // Every tensor the kernel allocates or indexes beyond the inputs: sizes it
    // computes in int64 must not overflow there.
    let elem_bytes = op.dtype.size();
    let size_checks: Tokens = op
        .stages
        .iter()
        .enumerate()
        .map(|(s, stage)| {
            let name = op.tensor_name(TensorRef::Stage(s));
            let dims = stage.dims.iter().map(|d| extent_tokens(op, d));
            quote! {
                ::autotune::__private::check_size(#op_name, #name, &[#(#dims),*], #elem_bytes)?;
            }
        })
        .collect();

    quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, unused_variables, unused_mut, unused_parens, clippy::all)]
        #vis fn #hidden<#(#lifetimes,)* 'o>(
            __imp: ::autotune::__private::Impl,
            #view_args,
            out: ::core::option::Option<::autotune::TensorMut<'o, #t, #out_rank>>,
        ) -> ::core::result::Result<::core::option::Option<::autotune::Tensor<#t, #out_rank>>, ::autotune::Error>
        {
            #checks
            let __out_dims: [usize; #out_rank] = [#(#out_dims),*];
            ::autotune::__private::elements(#op_name, &__out_dims)?;
            #size_checks
            let mut __owned: ::core::option::Option<::autotune::Tensor<#t, #out_rank>> = ::core::option::Option::None;
            {
                let __out: &mut [#t] = match out {
                    ::core::option::Option::Some(o) => {
                        let __given = o.dims();
                        #(#out_checks)*
                        o.into_data()
                    }
                    ::core::option::Option::None => {
                        __owned = ::core::option::Option::Some(
                            ::autotune::__private::owned_output(#op_name, __out_dims)?);
                        __owned.as_mut().expect("just set").data_mut()
                    }
                };
                if __imp == ::autotune::__private::Impl::Reference {
                    #run_reference
                } else {
                    #run_kernel
                }
            }
            ::core::result::Result::Ok(__owned)
        }
    }
}

/// Declares the kernels and calls the one matching the shapes (no specialisation
/// that `served` marks: a blocked variant's kernel serves it).
fn kernel_call(op: &Operator, pkg: &Package, served: &[bool]) -> Tokens {
    let t = format_ident!("{}", op.dtype.rust_name());
    let op_name = &op.name;
    let in_names = input_idents(op);
    // A constant input also passes its handle's slot (null for a plain tensor).
    let slots: Vec<Ident> = op
        .constants
        .iter()
        .map(|&i| format_ident!("{}__slot", op.inputs[i].name))
        .collect();
    let const_names: Vec<&Ident> = op.constants.iter().map(|&i| &in_names[i]).collect();
    let ptr_params = quote!(
        #( #in_names: *const #t, )* out: *mut #t
        #(, #slots: *mut ::core::ffi::c_void )*
    );
    let ptr_args = quote!(
        #( #in_names.data().as_ptr(), )* __out.as_mut_ptr()
        #(, ::autotune::__private::slot(&#const_names) )*
    );
    let shape_vars: Vec<Ident> = (0..op.shape_vars.len())
        .map(|v| shape_ident(op, v))
        .collect();
    let free = free_shape_idents(op);

    let mut decls = Tokens::new();
    let mut arms = Tokens::new();
    // A bucket is a schedule of the generic kernel, which dispatches on it.
    for (i, spec) in op.specializations.iter().enumerate() {
        if spec.bucket.is_some() || served.get(i) == Some(&true) {
            continue;
        }
        let sym = mangle::kernel_symbol(pkg, op, Variant::Specialized(i));
        let f = format_ident!("__kernel_{}", i);
        decls.extend(quote! {
            #[link_name = #sym]
            fn #f(#ptr_params) -> i32;
        });
        let values = spec_pattern(op, i);
        arms.extend(quote! {
            (::autotune::__private::Impl::Kernel, #values) => unsafe { #f(#ptr_args) },
        });
    }
    let generic_sym = mangle::kernel_symbol(pkg, op, Variant::Generic);
    quote! {
        extern "C" {
            #decls
            #[link_name = #generic_sym]
            fn __kernel_generic(#ptr_params, #( #shape_vars: i64 ),*) -> i32;
        }
        // SAFETY: every buffer length matches its dimensions, the dimensions agree
        // with the shape variables, and every unpadded read was checked to stay in
        // bounds above; the kernel writes only `out`, its own scratch memory and,
        // through a constant's slot, the blocks of copies the handle owns.
        let __code = match (__imp, (#(#free,)*)) {
            #arms
            _ => unsafe { __kernel_generic(#ptr_args, #(#shape_vars),*) },
        };
        ::autotune::__private::status(#op_name, __code)?;
    }
}
