//! Channel-blocked versions of ResNet-18 layers, written by hand in the operator
//! language as it stands (issue 19, deliverable 3): activations `[C/16][H][W][16]`
//! (nChw16c), weights `[K][C][R][S]` as the model has them, `constant` so kernels
//! pack them once. `bench/blocked.sh` times them against the example's NCHW
//! operators. The block size is a shape variable here (`BI`), chosen by hand; in the
//! deliverable it would come from a tuned config.

use autotune::tensor_op;

/// C5 and C11 blocked: conv 1×1, stride 2, + bias.
#[tensor_op(
    constant(w, b),
    OH = (H - 1) / 2 + 1,
    OW = (W - 1) / 2 + 1,
    KB = K / BI,
    specialize(CB = 4, H = 56, W = 56, BI = 16, K = 128, C = 64),
    specialize(CB = 16, H = 14, W = 14, BI = 16, K = 512, C = 256)
)]
pub fn conv1x1s2_blocked(
    x: Tensor<f32, (CB, H, W, BI)>,
    w: Tensor<f32, (K, C)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (KB, OH, OW, BI)> {
    let y: Tensor<f32, (KB, OH, OW, BI)> = compute(|kb, h, v, ki| {
        sum(|cb, ci| x[cb][h * 2][v * 2][ci] * w[kb * 16 + ki][cb * 16 + ci])
    });
    compute(|kb, h, v, ki| y[kb][h][v][ki] + b[kb * 16 + ki])
}

/// C9 blocked: conv 3×3, padding 1, + bias + ReLU; the channel within a block is the
/// innermost reduction axis, as in oneDNN's nChw16c kernels.
#[tensor_op(
    constant(w, b),
    R = 3,
    S = 3,
    KB = K / BI,
    specialize(CB = 16, H = 14, W = 14, BI = 16, K = 256, C = 256)
)]
pub fn conv3x3_blocked(
    x: Tensor<f32, (CB, H, W, BI)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (KB, H, W, BI)> {
    let y: Tensor<f32, (KB, H, W, BI)> = compute(|kb, h, v, ki| {
        sum(|cb, r, s, ci| {
            x.pad(0.0)[cb][h + r - 1][v + s - 1][ci] * w[kb * 16 + ki][cb * 16 + ci][r][s]
        })
    });
    compute(|kb, h, v, ki| max(y[kb][h][v][ki] + b[kb * 16 + ki], 0.0))
}
