use autotune::tensor_op;

/// C = A·B for row-major f32 matrices, specialised for 1024³.
#[tensor_op(specialize(M = 1024, N = 1024, K = 1024))]
pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}
