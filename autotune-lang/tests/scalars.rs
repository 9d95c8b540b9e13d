//! Rank-0 tensors (`Tensor<T, ()>`, documented in docs/language.md) are read
//! by name, without an index: parameters and stages alike.

fn parse(body: &str) -> Result<autotune_lang::Operator, syn::Error> {
    let item: syn::ItemFn = syn::parse_str(body).unwrap();
    autotune_lang::parse_operator(proc_macro2::TokenStream::new(), &item)
}

#[test]
fn a_scalar_parameter_is_read_by_name() {
    let op = parse(
        "pub fn scale(x: Tensor<f32, N>, s: Tensor<f32, ()>) -> Tensor<f32, N> {
            compute(|i| x[i] * s)
        }",
    )
    .expect("a rank-0 parameter reads as `s`");
    assert_eq!(op.inputs[1].dims.len(), 0);
}

#[test]
fn a_scalar_stage_is_read_by_name() {
    parse(
        "pub fn center(x: Tensor<f32, N>) -> Tensor<f32, N> {
            let m: Tensor<f32, ()> = compute(|| sum(|i| x[i]));
            compute(|i| x[i] - m)
        }",
    )
    .expect("a rank-0 stage reads as `m`");
}

#[test]
fn a_tensor_of_higher_rank_still_needs_its_indices() {
    let e = parse(
        "pub fn f(x: Tensor<f32, N>) -> Tensor<f32, N> {
            compute(|i| x * 2.0)
        }",
    )
    .unwrap_err();
    assert!(e.to_string().contains("`x[i]`"), "{e}");
}
