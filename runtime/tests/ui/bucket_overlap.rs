use autotune::tensor_op;

#[tensor_op(specialize(M = 1..=64, N = 16), specialize(M = 64..=128, N = 8..=16))]
pub fn scale(a: Tensor<f32, (M, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| a[i][j] * 2.0)
}

fn main() {}
