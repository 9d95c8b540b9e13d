use autotune::tensor_op;

#[tensor_op(constant(b, b), specialize(M = 4, N = 16))]
pub fn scale(a: Tensor<f32, (M, N)>, b: Tensor<f32, N>) -> Tensor<f32, (M, N)> {
    compute(|i, j| a[i][j] * b[j])
}

fn main() {}
