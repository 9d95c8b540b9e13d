use autotune::tensor_op;

#[tensor_op]
pub fn squares(a: Tensor<f32, N>) -> Tensor<f32, N> {
    compute(|i| a[i * i])
}

fn main() {}
