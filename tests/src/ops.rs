//! The operator test set: one operator per construct the language must express.

use autotune::tensor_op;

autotune::kernel_threads!();

/// C = A·B.
#[tensor_op(specialize(M = 64, N = 48, K = 32), specialize(M = 1, N = 17, K = 127))]
pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// C = A·B with shape buckets: each range is one kernel tuned over it, an
/// exact shape inside a bucket its own.
#[tensor_op(
    specialize(M = 1..=64, N = 48, K = 32),
    specialize(M = 65..300, N = 17..=40, K = 127),
    specialize(M = 64, N = 48, K = 32)
)]
pub fn matmul_buckets(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// C = A·B with few columns: lanes along the reduction read `b` through a copy
/// with `k` innermost, in an exact shape and in a bucket.
#[tensor_op(
    specialize(M = 37, N = 3, K = 45),
    specialize(M = 1..=100, N = 1..=4, K = 1..=70)
)]
pub fn matmul_narrow(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

#[tensor_op(specialize(M = 33, N = 17, K = 65))]
pub fn matmul_f64(a: Tensor<f64, (M, K)>, b: Tensor<f64, (K, N)>) -> Tensor<f64, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// Batched GEMM.
#[tensor_op(specialize(B = 3, M = 17, N = 16, K = 9))]
pub fn batch_matmul(
    a: Tensor<f32, (B, M, K)>,
    b: Tensor<f32, (B, K, N)>,
) -> Tensor<f32, (B, M, N)> {
    compute(|n, i, j| sum(|k| a[n][i][k] * b[n][k][j]))
}

/// y = A·x.
#[tensor_op(specialize(M = 127, K = 255))]
pub fn gemv(a: Tensor<f32, (M, K)>, x: Tensor<f32, K>) -> Tensor<f32, M> {
    compute(|i| sum(|k| a[i][k] * x[k]))
}

#[tensor_op(specialize(M = 17, N = 3))]
pub fn transpose(a: Tensor<f32, (M, N)>) -> Tensor<f32, (N, M)> {
    compute(|j, i| a[i][j])
}

#[tensor_op(specialize(M = 5, N = 7))]
pub fn transpose_f64(a: Tensor<f64, (M, N)>) -> Tensor<f64, (N, M)> {
    compute(|j, i| a[i][j])
}

/// conv2d, NCHW, stride 2, zero padding 1, dilation 2.
#[tensor_op(
    OH = (H + 2 * 1 - 2 * (R - 1) - 1) / 2 + 1,
    OW = (W + 2 * 1 - 2 * (S - 1) - 1) / 2 + 1,
    specialize(N = 1, C = 3, H = 17, W = 15, K = 4, R = 3, S = 3)
)]
pub fn conv2d_nchw(
    x: Tensor<f32, (N, C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
) -> Tensor<f32, (N, K, OH, OW)> {
    compute(|n, k, oh, ow| {
        sum(|c, r, s| x.pad(0.0)[n][c][oh * 2 + r * 2 - 1][ow * 2 + s * 2 - 1] * w[k][c][r][s])
    })
}

/// conv2d 3×3, stride 1, padding 1 (the ResNet layer shape), f64.
#[tensor_op(R = 3, S = 3, specialize(C = 4, H = 9, W = 9, K = 5))]
pub fn conv3x3_f64(
    x: Tensor<f64, (C, H, W)>,
    w: Tensor<f64, (K, C, R, S)>,
) -> Tensor<f64, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
}

/// conv2d, NHWC activations, RSCK weights, stride 1, no padding.
#[tensor_op(
    OH = H - R + 1,
    OW = W - S + 1,
    specialize(N = 2, H = 8, W = 7, C = 3, R = 3, S = 2, K = 5)
)]
pub fn conv2d_nhwc(
    x: Tensor<f32, (N, H, W, C)>,
    w: Tensor<f32, (R, S, C, K)>,
) -> Tensor<f32, (N, OH, OW, K)> {
    compute(|n, oh, ow, k| sum(|r, s, c| x[n][oh + r][ow + s][c] * w[r][s][c][k]))
}

/// Depthwise conv2d 3×3, stride 1, padding 1.
#[tensor_op(R = 3, S = 3, specialize(C = 8, H = 17, W = 13))]
pub fn depthwise_conv2d(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (C, R, S)>,
) -> Tensor<f32, (C, H, W)> {
    compute(|c, h, v| sum(|r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[c][r][s]))
}

/// relu(x·wᵀ + b): a reduction stage and an element-wise epilogue.
#[tensor_op(specialize(N = 16, M = 33, K = 64))]
pub fn dense_bias_relu(
    x: Tensor<f32, (N, K)>,
    w: Tensor<f32, (M, K)>,
    b: Tensor<f32, M>,
) -> Tensor<f32, (N, M)> {
    let y: Tensor<f32, (N, M)> = compute(|i, j| sum(|k| x[i][k] * w[j][k]));
    compute(|i, j| max(y[i][j] + b[j], 0.0))
}

/// Max-pool 3×3, stride 2, padding 1 (padding reads -∞).
#[tensor_op(OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1, specialize(C = 4, H = 17, W = 16))]
pub fn max_pool2d(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, OH, OW)> {
    compute(|c, oh, ow| {
        max(|r @ 0..3, s @ 0..3| x.pad(f32::NEG_INFINITY)[c][oh * 2 + r - 1][ow * 2 + s - 1])
    })
}

/// Max-pool 3×3, stride 1, padding 1 (padding reads -∞): its reads step along
/// the row by one, so a small call runs the small-call schedule, whose masked
/// loads put the -∞ in the lanes past a row's ends.
#[tensor_op(specialize(C = 4, H = 15, W = 15))]
pub fn max_pool3x3(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, (C, H, W)> {
    compute(|c, h, v| max(|r @ 0..3, s @ 0..3| x.pad(f32::NEG_INFINITY)[c][h + r - 1][v + s - 1]))
}

/// Global average pool over H×W.
#[tensor_op(specialize(C = 16, H = 7, W = 7))]
pub fn global_avg_pool(x: Tensor<f32, (C, H, W)>) -> Tensor<f32, C> {
    compute(|c| sum(|h, w| x[c][h][w]) / (H * W) as f32)
}

/// Row-wise softmax: max, exp-sum, divide.
#[tensor_op(specialize(N = 4, D = 127))]
pub fn softmax(x: Tensor<f32, (N, D)>) -> Tensor<f32, (N, D)> {
    let m: Tensor<f32, N> = compute(|i| max(|j| x[i][j]));
    let e: Tensor<f32, (N, D)> = compute(|i, j| exp(x[i][j] - m[i]));
    let s: Tensor<f32, N> = compute(|i| sum(|j| e[i][j]));
    compute(|i, j| e[i][j] / s[i])
}

#[tensor_op(specialize(N = 3, D = 17))]
pub fn softmax_f64(x: Tensor<f64, (N, D)>) -> Tensor<f64, (N, D)> {
    let m: Tensor<f64, N> = compute(|i| max(|j| x[i][j]));
    let e: Tensor<f64, (N, D)> = compute(|i, j| exp(x[i][j] - m[i]));
    let s: Tensor<f64, N> = compute(|i| sum(|j| e[i][j]));
    compute(|i, j| e[i][j] / s[i])
}

/// Element-wise maths: every function and a few constants.
#[tensor_op(specialize(N = 127))]
pub fn elementwise(x: Tensor<f32, N>, y: Tensor<f32, N>) -> Tensor<f32, N> {
    compute(|i| {
        tanh(x[i]) * exp(-y[i]) + sqrt(abs(x[i])) - log(1.5 + y[i] * y[i])
            + max(x[i], 0.25) * min(y[i], -0.5) / 2.0
            + x[i].max(y[i])
    })
}

#[tensor_op(specialize(N = 17))]
pub fn elementwise_f64(x: Tensor<f64, N>, y: Tensor<f64, N>) -> Tensor<f64, N> {
    compute(|i| tanh(x[i]) * exp(-y[i]) + sqrt(abs(x[i])) - min(x[i], y[i]) * 3.0)
}

/// Min over the rows of each column (reduction `min`, rank-1 output).
#[tensor_op(specialize(M = 3, N = 17))]
pub fn column_min(a: Tensor<f32, (M, N)>) -> Tensor<f32, N> {
    compute(|j| min(|i| a[i][j]))
}

/// Sum of all elements into a rank-0 tensor.
#[tensor_op]
pub fn total(a: Tensor<f64, (M, N)>) -> Tensor<f64, ()> {
    compute(|| sum(|i, j| a[i][j]))
}

/// Forward difference `x[i + 1] - y[i]`: valid only while `M < N`, which the
/// wrapper checks at run time (there is no padding to fall back on).
#[tensor_op]
pub fn forward_diff(x: Tensor<f32, N>, y: Tensor<f32, M>) -> Tensor<f32, M> {
    compute(|i| x[i + 1] - y[i])
}

/// An intermediate stage far larger than the inputs and the output (an outer
/// product, read at one corner): the wrapper must refuse sizes whose scratch
/// buffer the kernel cannot address.
#[tensor_op]
pub fn outer3_corner(x: Tensor<f32, A>, y: Tensor<f32, B>, z: Tensor<f32, C>) -> Tensor<f32, A> {
    let t: Tensor<f32, (A, B, C)> = compute(|i, j, k| x[i] * y[j] * z[k]);
    compute(|i| t[i][0][0])
}

/// A scalar parameter, read by name.
#[tensor_op(specialize(N = 37))]
pub fn scale_by(x: Tensor<f32, N>, s: Tensor<f32, ()>) -> Tensor<f32, N> {
    compute(|i| x[i] * s + s)
}

/// A scalar stage (the mean), read by name.
#[tensor_op(specialize(N = 4, D = 33))]
pub fn center_rows(x: Tensor<f32, (N, D)>) -> Tensor<f32, (N, D)> {
    let total: Tensor<f32, ()> = compute(|| sum(|i, j| x[i][j]));
    compute(|i, j| x[i][j] - total / 132.0)
}

/// conv 3×3, stride 2, + bias + shortcut + ReLU on blocked activations: the
/// schedule-space tests draw configs of its blocked variant.
#[tensor_op(
    constant(w, b),
    blocked(x, s),
    R = 3,
    S = 3,
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 32, H = 9, W = 7, K = 16)
)]
pub fn conv3x3s2_blocked(
    x: Tensor<f32, (C, H, W)>,
    w: Tensor<f32, (K, C, R, S)>,
    b: Tensor<f32, K>,
    s: Tensor<f32, (K, OH, OW)>,
) -> Tensor<f32, (K, OH, OW)> {
    let y: Tensor<f32, (K, OH, OW)> = compute(|k, h, v| {
        sum(|c, r, q| x.pad(0.0)[c][h * 2 + r - 1][v * 2 + q - 1] * w[k][c][r][q])
    });
    compute(|k, h, v| max(y[k][h][v] + b[k] + s[k][h][v], 0.0))
}
