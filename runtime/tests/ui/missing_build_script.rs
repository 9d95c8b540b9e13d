// A correct operator in a crate whose build.rs does not compile it.
use autotune::tensor_op;

#[tensor_op]
pub fn swap_axes(a: Tensor<f32, (M, N)>) -> Tensor<f32, (N, M)> {
    compute(|j, i| a[i][j])
}

fn main() {}
