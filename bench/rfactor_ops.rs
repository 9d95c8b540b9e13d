//! GEMV (`y = A x`, a GEMM with N = 1) two ways, for `bench/rfactor.sh`: as written, and
//! with its reduction split by hand into `KO` blocks of `L = 16` lanes that the first
//! stage keeps apart (the "rfactor" of TVM): `A` is viewed as `(M, KO, L)`, a free view of
//! a row-major `M × K` matrix with `K = KO · L`, and the lanes become a spatial axis that
//! the space can vectorise, the second stage summing them.
use autotune::tensor_op;

#[tensor_op(
    specialize(M = 472, K = 560),
    specialize(M = 1024, K = 1024),
    specialize(M = 256, K = 4096)
)]
pub fn gemv(a: Tensor<f32, (M, K)>, x: Tensor<f32, K>) -> Tensor<f32, M> {
    compute(|i| sum(|k| a[i][k] * x[k]))
}

#[tensor_op(
    L = 16,
    specialize(M = 472, KO = 35),
    specialize(M = 1024, KO = 64),
    specialize(M = 256, KO = 256)
)]
pub fn gemv_rf(a: Tensor<f32, (M, KO, L)>, x: Tensor<f32, (KO, L)>) -> Tensor<f32, M> {
    let p: Tensor<f32, (M, L)> = compute(|i, l| sum(|ko| a[i][ko][l] * x[ko][l]));
    compute(|i| sum(|l| p[i][l]))
}
