//! A GEMM specialised at one small shape.
use autotune::tensor_op;

#[tensor_op(specialize(M = 48, N = 64, K = 32))]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}
