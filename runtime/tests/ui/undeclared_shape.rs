use autotune::tensor_op;

#[tensor_op(specialize(M = 64, N = 64, K = 64, Q = 3))]
pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

fn main() {}
