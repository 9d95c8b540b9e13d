//! The operators of batch-1 ResNet-18 (NCHW, f32), each specialised to the shapes
//! the network uses. Batch norm is folded into each convolution's weights and bias
//! (see `net.rs`); bias, ReLU and the residual add are epilogue stages that the
//! schedule space may fuse into the convolution's store.
//!
//! Activations are `blocked(...)`: between layers they lie channel-blocked by 16
//! (`nChw16c`), each kernel storing and loading a vector of 16 channels at a pixel
//! whole; the network converts its input and its logits only (`net.rs`).
//!
//! Weights and biases are `constant(...)` inputs, in the layout the model has them
//! (`[K][C][R][S]`): the network passes them as `autotune::Constant` handles, so a
//! kernel whose config packs them (into its own tile order, which is how it reads
//! megabytes of weights contiguously) does so on its first call only and keeps the
//! pack in the handle, as inference engines reorder weights once at load time.

use autotune::tensor_op;

autotune::kernel_threads!();

/// The stem: conv 7×7, stride 2, padding 3, + bias + ReLU.
#[tensor_op(
    constant(w, b),
    blocked(x),
    R = 7,
    S = 7,
    OH = (H + 6 - 7) / 2 + 1,
    OW = (W + 6 - 7) / 2 + 1,
    specialize(C = 3, H = 224, W = 224, K = 64)
)]
pub fn conv7x7s2_relu(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, OH, OW)> {
    let y: Tensor<f32, (K, OH, OW)> = compute(|k, h, v| {
        sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 3][v * 2 + s - 3] * w[k][c][r][s])
    });
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

/// Max-pool 3×3, stride 2, padding 1.
#[tensor_op(
    blocked(x),
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 64, H = 112, W = 112)
)]
pub fn max_pool3x3s2(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, OH, OW)> {
    compute(|c, h, v| {
        max(|r @ 0..3, s @ 0..3| x.pad(f32::NEG_INFINITY)[c][h * 2 + r - 1][v * 2 + s - 1])
    })
}

/// conv 3×3, stride 1, padding 1, + bias + ReLU: the first conv of each residual block
/// that keeps its shape.
#[tensor_op(
    constant(w, b),
    blocked(x),
    R = 3,
    S = 3,
    specialize(C = 64, H = 56, W = 56, K = 64),
    specialize(C = 128, H = 28, W = 28, K = 128),
    specialize(C = 256, H = 14, W = 14, K = 256),
    specialize(C = 512, H = 7, W = 7, K = 512)
)]
pub fn conv3x3_relu(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> =
        compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

/// conv 3×3, stride 1, padding 1, + bias + the block's shortcut + ReLU: the second
/// conv of every residual block.
#[tensor_op(
    constant(w, b),
    blocked(x, shortcut),
    R = 3,
    S = 3,
    specialize(C = 64, H = 56, W = 56, K = 64),
    specialize(C = 128, H = 28, W = 28, K = 128),
    specialize(C = 256, H = 14, W = 14, K = 256),
    specialize(C = 512, H = 7, W = 7, K = 512)
)]
pub fn conv3x3_add_relu(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
    shortcut: Tensor<f32, (K, H, W)>,
) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> =
        compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k] + shortcut[k][h][v], 0.0))
}

/// conv 3×3, stride 2, padding 1, + bias + ReLU: the first conv of a block that halves
/// the resolution.
#[tensor_op(
    constant(w, b),
    blocked(x),
    R = 3,
    S = 3,
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 64, H = 56, W = 56, K = 128),
    specialize(C = 128, H = 28, W = 28, K = 256),
    specialize(C = 256, H = 14, W = 14, K = 512)
)]
pub fn conv3x3s2_relu(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, OH, OW)> {
    let y: Tensor<f32, (K, OH, OW)> = compute(|k, h, v| {
        sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 1][v * 2 + s - 1] * w[k][c][r][s])
    });
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

/// conv 1×1, stride 2, + bias: the downsampling shortcut.
#[tensor_op(
    constant(w, b),
    blocked(x),
    R = 1,
    S = 1,
    OH = (H - 1) / 2 + 1,
    OW = (W - 1) / 2 + 1,
    specialize(C = 64, H = 56, W = 56, K = 128),
    specialize(C = 128, H = 28, W = 28, K = 256),
    specialize(C = 256, H = 14, W = 14, K = 512)
)]
pub fn conv1x1s2_bias(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, OH, OW)> {
    let y: Tensor<f32, (K, OH, OW)> =
        compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c][0][0]));
    compute(|k, h, v| y[k][h][v] + b[k])
}

/// conv 1×1, stride 1, + bias. Not in ResNet-18 itself: layer C3 of the benchmark
/// table of the AutoTVM paper, timed by `--layers` only.
#[tensor_op(
    constant(w, b),
    blocked(x),
    R = 1,
    S = 1,
    specialize(C = 64, H = 56, W = 56, K = 64)
)]
pub fn conv1x1_bias(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> = compute(|k, h, v| sum(|c| x[c][h][v] * w[k][c][0][0]));
    compute(|k, h, v| y[k][h][v] + b[k])
}

/// Global average pool.
#[tensor_op(blocked(x), specialize(C = 512, H = 7, W = 7))]
pub fn global_avg_pool(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, C> {
    compute(|c| sum(|h, v| x[c][h][v]) / (H * W) as f32)
}

/// The classifier: dense 512 → 1000 + bias.
#[tensor_op(constant(w, b), blocked(x), specialize(K = 512, N = 1000))]
pub fn dense_bias(x: Tensor<f32, K>, w: Tensor<f32, (N, K)>, b: Tensor<f32, N>) -> Tensor<f32, N> {
    let y: Tensor<f32, N> = compute(|j| sum(|k| w[j][k] * x[k]));
    compute(|j| y[j] + b[j])
}
