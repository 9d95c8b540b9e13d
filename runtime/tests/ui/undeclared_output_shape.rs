use autotune::tensor_op;

#[tensor_op]
pub fn pool(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, OH, OW)> {
    compute(|c, oh, ow| max(|r @ 0..2, s @ 0..2| x[c][oh * 2 + r][ow * 2 + s]))
}

fn main() {}
