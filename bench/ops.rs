//! The workloads of the benchmarks (`bench/headroom.sh`, `bench/peers.sh`, the tuner
//! experiments); specialisations are only ever appended, since scripts name them by index.

use autotune::tensor_op;

#[tensor_op(
    specialize(M = 1024, N = 1024, K = 1024),
    specialize(M = 1000, N = 1000, K = 1000),
    specialize(M = 127, N = 255, K = 511),
    specialize(M = 1, N = 4096, K = 4096),
    specialize(M = 16, N = 4096, K = 4096),
    specialize(M = 512, N = 512, K = 512),
    specialize(M = 256, N = 256, K = 256),
    // Few columns (a matrix times up to four vectors; issue 18's worst generic
    // shapes had N ≤ 4): a kernel for one column and one for two to four, with
    // lanes along `k`.
    specialize(M = 8..=4096, N = 1, K = 8..=4096),
    specialize(M = 8..=4096, N = 2..=4, K = 8..=4096)
)]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// conv2d NCHW (batch 1), 3×3, stride 1, zero padding 1: ResNet-18 C2, C9 and C6.
#[tensor_op(R = 3, S = 3, specialize(C = 64, H = 56, W = 56, K = 64), specialize(C = 256, H = 14, W = 14, K = 256), specialize(C = 128, H = 28, W = 28, K = 128))]
pub fn conv3x3(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
}

/// conv2d NCHW 7×7, stride 2, zero padding 3: ResNet-18 C1.
#[tensor_op(
    R = 7,
    S = 7,
    OH = (H + 6 - 7) / 2 + 1,
    OW = (W + 6 - 7) / 2 + 1,
    specialize(C = 3, H = 224, W = 224, K = 64)
)]
pub fn conv7x7s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 3][v * 2 + s - 3] * w[k][c][r][s]))
}

/// conv2d 3×3, stride 2, zero padding 1: C4, C7, C10.
#[tensor_op(
    R = 3,
    S = 3,
    OH = (H + 2 - 3) / 2 + 1,
    OW = (W + 2 - 3) / 2 + 1,
    specialize(C = 64, H = 56, W = 56, K = 128),
    specialize(C = 128, H = 28, W = 28, K = 256),
    specialize(C = 256, H = 14, W = 14, K = 512)
)]
pub fn conv3x3s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h * 2 + r - 1][v * 2 + s - 1] * w[k][c][r][s]))
}

/// conv2d 1×1, stride 1: C3.
#[tensor_op(specialize(C = 64, H = 56, W = 56, K = 64))]
pub fn conv1x1(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c| x[c][h][v] * w[k][c]))
}

/// conv2d 1×1, stride 2: C5, C8, C11.
#[tensor_op(
    OH = (H - 1) / 2 + 1,
    OW = (W - 1) / 2 + 1,
    specialize(C = 64, H = 56, W = 56, K = 128),
    specialize(C = 128, H = 28, W = 28, K = 256),
    specialize(C = 256, H = 14, W = 14, K = 512)
)]
pub fn conv1x1s2(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>) -> Tensor<f32, (K, OH, OW)> {
    compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c]))
}

/// GEMM with a shape bucket (issue 18): every M of 1–2048 at N = K = 1024 is one
/// kernel, tuned over a sweep of the range (`bench/buckets.sh`).
#[tensor_op(specialize(M = 1..=2048, N = 1024, K = 1024))]
pub fn gemm_rows(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// The same range as two buckets (`bench/buckets.sh`): what a narrower range buys.
#[tensor_op(
    specialize(M = 1..=127, N = 1024, K = 1024),
    specialize(M = 128..=2048, N = 1024, K = 1024)
)]
pub fn gemm_rows2(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// The ResNet-18 example's `conv3x3_relu` (the same IR, so the example's cache entries
/// are its entries), plus a declared bucket for wide rows (issue 18): the example's
/// configs put 16 output channels in a vector, which idles lanes wherever `K` is not a
/// multiple of 16 (most of them below 48), while rows of 32 pixels or more fill vectors
/// along the row. Its sweep chose row vectors; one bucket down to 7-pixel rows chose
/// channel vectors, its narrow corner weighing as much as the rest
/// (`bench/results/tune-conv-bucket-*`); and one for narrow shapes, where every
/// spatial extent is below a vector (its register-tile starts fill one partly).
/// `bench/generic.sh` times the generic kernel with and without them.
#[tensor_op(
    constant(w, b),
    R = 3,
    S = 3,
    specialize(C = 64, H = 56, W = 56, K = 64),
    specialize(C = 128, H = 28, W = 28, K = 128),
    specialize(C = 256, H = 14, W = 14, K = 256),
    specialize(C = 512, H = 7, W = 7, K = 512),
    specialize(C = 8..=512, H = 32..=64, W = 32..=64, K = 8..=512),
    specialize(C = 8..=512, H = 7..=15, W = 7..=15, K = 8..=15)
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
