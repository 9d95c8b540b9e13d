use autotune::tensor_op;

#[tensor_op]
pub fn max_of_sums(a: Tensor<f32, (M, N, K)>) -> Tensor<f32, M> {
    compute(|i| max(|j| sum(|k| a[i][j][k])))
}

fn main() {}
