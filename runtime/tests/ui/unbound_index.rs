use autotune::tensor_op;

#[tensor_op]
pub fn transpose(a: Tensor<f32, (M, N)>) -> Tensor<f32, (N, M)> {
    compute(|j, i| a[i][q])
}

fn main() {}
