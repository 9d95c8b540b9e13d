//! The training corpus of the pre-trained cost model (`bench/corpus.sh`): the
//! operator families users write, at shapes none of the examples use (no
//! ResNet-18 layer is here, so a model trained on this corpus has seen none of
//! them). Sizes are kept to tens or hundreds of MFLOP so that a trial is cheap.
//! Families are the operator names (the leave-one-family-out experiments drop
//! one name). Weights are `constant(...)` inputs, as an inference engine's
//! are, so the model learns from configs that pack them once and from calls
//! timed with them cold (as the build times them); the GEMMs, the plain 3×3
//! conv and the element-wise ops keep every input per call.

use autotune::tensor_op;

/// GEMM: square, skinny, wide and odd shapes.
#[tensor_op(
    specialize(M = 384, N = 384, K = 384),
    specialize(M = 768, N = 256, K = 512),
    specialize(M = 128, N = 1024, K = 256),
    specialize(M = 64, N = 64, K = 2048),
    specialize(M = 4, N = 2048, K = 1024),
    specialize(M = 33, N = 257, K = 129),
    specialize(M = 200, N = 300, K = 400),
    specialize(M = 1000, N = 96, K = 500)
)]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// A dense layer with its epilogue: relu(x·wᵀ + b).
#[tensor_op(constant(w, b), specialize(N = 64, M = 512, K = 768), specialize(N = 8, M = 1024, K = 1024))]
pub fn dense_bias_relu(
    x: Tensor<f32, (N, K)>,
    w: Tensor<f32, (M, K)>,
    b: Tensor<f32, M>,
) -> Tensor<f32, (N, M)> {
    let y: Tensor<f32, (N, M)> = compute(|i, j| sum(|k| x[i][k] * w[j][k]));
    compute(|i, j| max(y[i][j] + b[j], 0.0))
}

/// Batched GEMM (attention-like shapes).
#[tensor_op(specialize(B = 8, M = 64, N = 64, K = 64), specialize(B = 12, M = 128, N = 64, K = 64))]
pub fn batch_matmul(
    a: Tensor<f32, (B, M, K)>,
    b: Tensor<f32, (B, K, N)>,
) -> Tensor<f32, (B, M, N)> {
    compute(|n, i, j| sum(|k| a[n][i][k] * b[n][k][j]))
}

/// Matrix-vector product.
#[tensor_op(constant(a), specialize(M = 1024, K = 1024), specialize(M = 4096, K = 512))]
pub fn gemv(a: Tensor<f32, (M, K)>, x: Tensor<f32, K>) -> Tensor<f32, M> {
    compute(|i| sum(|k| a[i][k] * x[k]))
}

/// conv2d NCHW 3×3, stride 1, padding 1.
#[tensor_op(
    R = 3,
    S = 3,
    specialize(C = 32, H = 64, W = 64, K = 32),
    specialize(C = 96, H = 35, W = 35, K = 96),
    specialize(C = 192, H = 17, W = 17, K = 192)
)]
pub fn conv3x3(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
}

/// conv2d 3×3, stride 1, + bias + ReLU (a fused epilogue).
#[tensor_op(constant(w, b), R = 3, S = 3, specialize(C = 64, H = 32, W = 32, K = 64), specialize(C = 160, H = 20, W = 20, K = 160))]
pub fn conv3x3_bias_relu(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> =
        compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

/// conv2d 3×3 over weights pre-blocked by 16 output channels, + bias + ReLU.
#[tensor_op(constant(w, b), R = 3, S = 3, L = 16, specialize(C = 192, H = 12, W = 12, KB = 12), specialize(C = 384, H = 6, W = 6, KB = 24))]
pub fn conv3x3_bias_relu_kb(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (KB, C, R, S, L)>,
    b: Tensor<f32, (KB, L)>,
) -> Tensor<f32, (KB, L, H, W)> {
    let y: Tensor<f32, (KB, L, H, W)> = compute(|kb, l, h, v| {
        sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[kb][c][r][s][l])
    });
    compute(|kb, l, h, v| max(y[kb][l][h][v] + b[kb][l], 0.0))
}

/// conv2d 3×3, stride 2, padding 1.
#[tensor_op(
    constant(w),
    R = 3,
    S = 3,
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 32, H = 64, W = 64, K = 64),
    specialize(C = 96, H = 34, W = 34, K = 192)
)]
pub fn conv3x3s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 1][v * 2 + s - 1] * w[k][c][r][s]))
}

/// conv2d 1×1, stride 1, + bias.
#[tensor_op(constant(w, b), specialize(C = 96, H = 35, W = 35, K = 48), specialize(C = 256, H = 16, W = 16, K = 128))]
pub fn conv1x1_bias(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C)>,
    b: Tensor<f32, K>,
) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> = compute(|k, h, v| sum(|c| x[c][h][v] * w[k][c]));
    compute(|k, h, v| y[k][h][v] + b[k])
}

/// conv2d 1×1, stride 2.
#[tensor_op(
    constant(w),
    OH = (H - 1) / 2 + 1,
    OW = (W - 1) / 2 + 1,
    specialize(C = 48, H = 40, W = 40, K = 96),
    specialize(C = 192, H = 20, W = 20, K = 384)
)]
pub fn conv1x1s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c]))
}

/// conv2d 7×7, stride 2, padding 3 (a stem).
#[tensor_op(
    constant(w),
    R = 7,
    S = 7,
    OH = (H + 6 - 7) / 2 + 1,
    OW = (W + 6 - 7) / 2 + 1,
    specialize(C = 3, H = 128, W = 128, K = 32)
)]
pub fn conv7x7s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 3][v * 2 + s - 3] * w[k][c][r][s]))
}

/// conv2d 5×5, stride 1, padding 2.
#[tensor_op(constant(w), R = 5, S = 5, specialize(C = 16, H = 32, W = 32, K = 32))]
pub fn conv5x5(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 2][v + s - 2] * w[k][c][r][s]))
}

/// conv2d NHWC activations, RSCK weights, 3×3, stride 1, no padding.
#[tensor_op(
    constant(w),
    R = 3,
    S = 3,
    OH = H - R + 1,
    OW = W - S + 1,
    specialize(N = 1, H = 30, W = 30, C = 64, K = 64),
    specialize(N = 1, H = 16, W = 16, C = 128, K = 128)
)]
pub fn conv2d_nhwc(
    x: Tensor<f32, (N, H, W, C)>,
    w: Tensor<f32, (R, S, C, K)>,
) -> Tensor<f32, (N, OH, OW, K)> {
    compute(|n, oh, ow, k| sum(|r, s, c| x[n][oh + r][ow + s][c] * w[r][s][c][k]))
}

/// Depthwise conv2d 3×3, stride 1, padding 1.
#[tensor_op(constant(w), R = 3, S = 3, specialize(C = 64, H = 56, W = 56), specialize(C = 256, H = 14, W = 14))]
pub fn depthwise_conv2d(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (C, R, S)>,
) -> Tensor<f32, (C, H, W)> {
    compute(|c, h, v| sum(|r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[c][r][s]))
}

/// Max-pool 3×3, stride 2, padding 1.
#[tensor_op(
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 32, H = 64, W = 64),
    specialize(C = 128, H = 28, W = 28)
)]
pub fn max_pool3x3s2(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, OH, OW)> {
    compute(|c, h, v| {
        max(|r @ 0..3, s @ 0..3| x.pad(f32::NEG_INFINITY)[c][h * 2 + r - 1][v * 2 + s - 1])
    })
}

/// Global average pool.
#[tensor_op(specialize(C = 256, H = 14, W = 14), specialize(C = 1024, H = 4, W = 4))]
pub fn global_avg_pool(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, C> {
    compute(|c| sum(|h, w| x[c][h][w]) / (H * W) as f32)
}

/// Column sums and row maxima.
#[tensor_op(specialize(M = 512, N = 1024))]
pub fn column_sum(a: Tensor<f32, (M, N)>) -> Tensor<f32, N> {
    compute(|j| sum(|i| a[i][j]))
}

#[tensor_op(specialize(M = 1024, N = 512))]
pub fn row_max(a: Tensor<f32, (M, N)>) -> Tensor<f32, M> {
    compute(|i| max(|j| a[i][j]))
}

/// Row-wise softmax: max, exp-sum, divide.
#[tensor_op(specialize(N = 64, D = 1000), specialize(N = 256, D = 128))]
pub fn softmax(x: Tensor<f32, (N, D)>) -> Tensor<f32, (N, D)> {
    let m: Tensor<f32, N> = compute(|i| max(|j| x[i][j]));
    let e: Tensor<f32, (N, D)> = compute(|i, j| exp(x[i][j] - m[i]));
    let s: Tensor<f32, N> = compute(|i| sum(|j| e[i][j]));
    compute(|i, j| e[i][j] / s[i])
}

/// An element-wise chain (GELU-like).
#[tensor_op(specialize(N = 1048576))]
pub fn gelu_like(x: Tensor<f32, N>, y: Tensor<f32, N>) -> Tensor<f32, N> {
    compute(|i| 0.5 * x[i] * (1.0 + tanh(0.79788456 * (x[i] + 0.044715 * x[i] * x[i] * x[i]))) + y[i])
}

/// A broadcast bias add with ReLU over a 2-D activation.
#[tensor_op(specialize(N = 256, D = 1024))]
pub fn bias_relu(x: Tensor<f32, (N, D)>, b: Tensor<f32, D>) -> Tensor<f32, (N, D)> {
    compute(|i, j| max(x[i][j] + b[j], 0.0))
}
