//! The workloads of the headroom benchmark (`bench/headroom.sh`).

use autotune::tensor_op;

#[tensor_op(
    specialize(M = 1024, N = 1024, K = 1024),
    specialize(M = 1000, N = 1000, K = 1000),
    specialize(M = 127, N = 255, K = 511),
    specialize(M = 1, N = 4096, K = 4096),
    specialize(M = 16, N = 4096, K = 4096),
    specialize(M = 512, N = 512, K = 512)
)]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}

/// conv2d NCHW (batch 1), 3×3, stride 1, zero padding 1: ResNet-18 C2, C9 and C6.
#[tensor_op(R = 3, S = 3, specialize(C = 64, H = 56, W = 56, K = 64), specialize(C = 256, H = 14, W = 14, K = 256), specialize(C = 128, H = 28, W = 28, K = 128))]
pub fn conv3x3(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
}
