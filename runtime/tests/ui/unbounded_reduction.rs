use autotune::tensor_op;

#[tensor_op]
pub fn smooth(x: Tensor<f32, N>) -> Tensor<f32, N> {
    compute(|i| sum(|r| x.pad(0.0)[i + r - 1]))
}

fn main() {}
