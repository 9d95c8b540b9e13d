//! The operator language of autotune, shared by `autotune-macros` and
//! `autotune-build` (as cxx shares its `syntax/` between macro and build helper).
//!
//! It owns the grammar of `#[tensor_op]` functions ([`parse`]), the IR they become
//! ([`ir`]), the kernel symbol names ([`mangle`]) and the blocked variants an operator
//! with `blocked(...)` activations adds ([`layout`]). It knows nothing of
//! schedules, C or Rust code generation: the macro and the build helper each lower
//! the same [`ir::Operator`] to their side. [`eval`] interprets the IR directly,
//! as the reference the tuner and the tests check kernels against; [`analysis`]
//! holds the facts about the IR that code generation builds on.

pub mod analysis;
pub mod eval;
pub mod ir;
pub mod layout;
pub mod mangle;
pub mod parse;

pub use ir::Operator;
pub use parse::parse_operator;

/// A `#[tensor_op]` function found in a source file, with its attribute arguments.
pub struct FoundOp<'a> {
    pub item: &'a syn::ItemFn,
    pub attr: proc_macro2::TokenStream,
}

/// Every `#[tensor_op]` function of a file, including those in inline modules, in
/// source order. Out-of-line modules (`mod x;`) are not followed: list their
/// files separately.
pub fn find_tensor_ops(file: &syn::File) -> Vec<FoundOp<'_>> {
    fn walk<'a>(items: &'a [syn::Item], out: &mut Vec<FoundOp<'a>>) {
        for item in items {
            match item {
                syn::Item::Fn(f) => {
                    for a in &f.attrs {
                        if a.path()
                            .segments
                            .last()
                            .is_some_and(|s| s.ident == "tensor_op")
                        {
                            let attr = match &a.meta {
                                syn::Meta::List(l) => l.tokens.clone(),
                                _ => proc_macro2::TokenStream::new(),
                            };
                            out.push(FoundOp { item: f, attr });
                        }
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, items)) = &m.content {
                        walk(items, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&file.items, &mut out);
    out
}
