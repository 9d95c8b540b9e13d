//! Specialisations a kernel cannot index are refused at compile time, with a
//! span on the offending value.

fn parse(attr: &str, body: &str) -> Result<autotune_lang::Operator, syn::Error> {
    let item: syn::ItemFn = syn::parse_str(body).unwrap();
    autotune_lang::parse_operator(attr.parse().unwrap(), &item)
}

const GEMM: &str =
    "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}";

#[test]
fn a_zero_size_specialisation_is_refused() {
    let e = parse("specialize(M = 0, N = 16, K = 8)", GEMM).expect_err("M = 0 has no elements");
    assert!(e.to_string().contains("`M = 0`"), "{e}");
    // The span is the value's.
    assert_eq!(e.span().start().column, "specialize(M = ".len());
}

#[test]
fn element_counts_beyond_the_index_type_are_refused() {
    // 2^40 · 2^40 elements in the output: no int64 index reaches them.
    let e = parse(
        "specialize(M = 1099511627776, N = 1099511627776, K = 8)",
        GEMM,
    )
    .expect_err("the output overflows");
    let msg = e.to_string();
    assert!(msg.contains("output") && msg.contains("elements"), "{msg}");
    // An intermediate stage counts as well: three axes of 2^21 · 2^21 · 2^22.
    let e = parse(
        "specialize(A = 2097152, B = 2097152, C = 4194304)",
        "pub fn f(x: Tensor<f32, (A,)>, y: Tensor<f32, (B,)>, z: Tensor<f32, (C,)>)
            -> Tensor<f32, (A,)> {
            let t: Tensor<f32, (A, B, C)> = compute(|i, j, k| x[i] * y[j] * z[k]);
            compute(|i| sum(|j| sum(|k| t[i][j][k])))
        }",
    );
    // (Nested sums are refused anyway; either way this must not be accepted.)
    assert!(e.is_err());
    let e = parse(
        "specialize(A = 2097152, B = 2097152, C = 4194304)",
        "pub fn f(x: Tensor<f32, (A,)>, y: Tensor<f32, (B,)>, z: Tensor<f32, (C,)>)
            -> Tensor<f32, (A,)> {
            let t: Tensor<f32, (A, B, C)> = compute(|i, j, k| x[i] * y[j] * z[k]);
            compute(|i| t[i][0][0])
        }",
    )
    .expect_err("the stage `t` overflows");
    assert!(e.to_string().contains("`t`"), "{e}");
    // Large but indexable is fine.
    parse("specialize(M = 65536, N = 65536, K = 8)", GEMM).unwrap();
}

/// Found by the fuzzer (tests/fuzz.rs, seed 1): a specialisation whose unpadded
/// reads leave their tensor. Every call at those shapes would be refused at run
/// time, and the tuner would time kernels reading past their inputs.
#[test]
fn a_specialisation_that_reads_out_of_bounds_is_refused() {
    let e = parse(
        "OH = H - R + 2, OW = W - S + 1, specialize(H = 8, W = 7, C = 3, R = 3, S = 2, K = 5)",
        "pub fn conv(x: Tensor<f32, (H, W, C)>, w: Tensor<f32, (R, S, C, K)>)
            -> Tensor<f32, (OH, OW, K)> {
            compute(|oh, ow, k| sum(|r, s, c| x[oh + r][ow + s][c] * w[r][s][c][k]))
        }",
    )
    .expect_err("x is read at row 8 of 8");
    let msg = e.to_string();
    assert!(msg.contains("`x`") && msg.contains("dimension 0"), "{msg}");
}

/// Found by the language fuzzer (seed 2): a reduction over `0..i64::MAX` makes the
/// range a read covers overflow the code generator's arithmetic.
#[test]
fn a_read_whose_range_overflows_is_refused() {
    let e = parse(
        "OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1, specialize(C = 4, H = 17, W = 16)",
        "pub fn pool(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, OH, OW)> {
            compute(|c, oh, ow| {
                max(|r @ 0..3, s @ 0..9223372036854775807|
                    x.pad(f32::NEG_INFINITY)[c][oh * 2 + r - 1][ow * 2 + s - 1])
            })
        }",
    )
    .expect_err("the read of x spans 2^63 columns");
    assert!(e.to_string().contains("`x`"), "{e}");
    // Seed 8: an index offset near i64::MIN.
    let e = parse(
        "R = 3, S = 3, specialize(C = 8, H = 17, W = 13)",
        "pub fn dw(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (C, R, S)>) -> Tensor<f32, (C, H, W)> {
            compute(|c, h, v| sum(|r, s|
                x.pad(0.0)[c][h + r - 9223372036854775807][v + s - 1] * w[c][r][s]))
        }",
    )
    .expect_err("x is read near i64::MIN");
    assert!(e.to_string().contains("`x`"), "{e}");
}
