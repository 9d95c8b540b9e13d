use autotune::tensor_op;

#[tensor_op]
pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k][j] * b[k][j]))
}

fn main() {}
