use autotune::tensor_op;

#[tensor_op]
pub fn gelu(x: Tensor<f32, N>) -> Tensor<f32, N> {
    compute(|i| x[i] * erf(x[i]))
}

fn main() {}
