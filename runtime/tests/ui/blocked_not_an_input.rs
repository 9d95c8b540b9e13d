use autotune::tensor_op;

#[tensor_op(blocked(y), specialize(C = 16, K = 16))]
pub fn dense(x: Tensor<f32, C>, w: Tensor<f32, (K, C)>) -> Tensor<f32, K> {
    compute(|k| sum(|c| w[k][c] * x[c]))
}

fn main() {}
