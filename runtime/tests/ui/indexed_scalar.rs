use autotune::tensor_op;

#[tensor_op(specialize(N = 8))]
pub fn scale(x: Tensor<f32, N>, s: Tensor<f32, ()>) -> Tensor<f32, N> {
    compute(|i| x[i] * s[0])
}

fn main() {}
