# Shared by the bench scripts: sourced after they set ROOT (and, for
# build_peers, PEERS and BUILD; for install_peers, VENV).

# Where cargo puts builds: CARGO_TARGET_DIR where it is set, else target/.
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

# The ResNet-18 example's workloads (op:spec) in a build's order: operators as
# examples/resnet18/src/ops.rs declares them, specialisations in order.
RESNET18_WORKLOADS="conv7x7s2_relu:0 max_pool3x3s2:0 conv3x3_relu:0 conv3x3_relu:1 conv3x3_relu:2
conv3x3_relu:3 conv3x3_add_relu:0 conv3x3_add_relu:1 conv3x3_add_relu:2 conv3x3_add_relu:3
conv3x3s2_relu:0 conv3x3s2_relu:1 conv3x3s2_relu:2 conv1x1s2_bias:0 conv1x1s2_bias:1
conv1x1s2_bias:2 conv1x1_bias:0 global_avg_pool:0 dense_bias:0"

# Sets CARGO_AUTOTUNE (the CLI's binary) and AT (how the scripts call it).
# CARGO_AUTOTUNE may name another build (the "before" of a comparison); else
# the workspace's is built.
autotune_cli() {
    if [ -z "${CARGO_AUTOTUNE:-}" ]; then
        (cd "$ROOT" && cargo build --release -q --locked -p cargo-autotune)
        CARGO_AUTOTUNE="$TARGET_DIR/release/cargo-autotune"
    fi
    AT="$CARGO_AUTOTUNE autotune"
}

# This CPU as cache entries name it (`CpuId`): vendor-family-model, e.g.
# GenuineIntel-6-167.
cpu_id() {
    awk -F': ' '/vendor_id/{v=$2} /cpu family/{f=$2} /^model\t/{m=$2} END{print v"-"f"-"m}' /proc/cpuinfo
}

# Installs the Debian packages named where they are missing.
install_packages() {
    local need=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
    if ((${#need[@]})); then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
    fi
}

# Installs what the peers need where it is missing: the Debian packages named, and
# ONNX Runtime in the virtual environment $VENV.
install_peers() {
    install_packages "$@" python3-venv
    if ! "$VENV/bin/python" -c 'import onnxruntime, onnx' 2>/dev/null; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q onnxruntime==1.32.0 onnx==1.23.2 numpy
    fi
}

# Builds the FMA peak probe (bench/peak.c: zmm FMAs where the CPU has AVX-512F, else
# ymm) at $1.
build_peak() {
    gcc -O2 -pthread "$ROOT/bench/peak.c" -o "$1"
}

# Builds the peers' programs into $BUILD: the FMA peak probe, GEMM with
# OpenBLAS and the `gemm` crate (RUSTGEMM), and with `conv` the im2col +
# OpenBLAS and oneDNN convolutions. Everything is built before anything is
# timed (2 cores: a build would disturb timing).
build_peers() {
    local cflags="-O3 -march=native"
    build_peak "$BUILD/peak"
    gcc $cflags -fopenmp "$PEERS/c/gemm_bench.c" -o "$BUILD/gemm_bench" -lopenblas -lm
    if [ "${1:-}" = conv ]; then
        gcc $cflags -fopenmp "$PEERS/c/conv_bench.c" -o "$BUILD/conv_bench" -lopenblas -lm
        g++ $cflags -fopenmp "$PEERS/c/dnnl_conv.cpp" -o "$BUILD/dnnl_conv" -ldnnl
    fi
    (cd "$PEERS/rust-gemm" && RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR="$BUILD/rust-gemm" \
        cargo build --release -q --features x86-v4)
    RUSTGEMM="$BUILD/rust-gemm/release/peers-rust-gemm"
}

# Writes to file $1 a source with one operator, `conv3x3` (stride 1, zero padding 1),
# specialised at C = $2, H = W = $3, K = $4: a user's new conv shape.
write_conv3x3() {
    cat >"$1" <<RS
use autotune::tensor_op;
#[tensor_op(R = 3, S = 3, specialize(C = $2, H = $3, W = $3, K = $4))]
pub fn conv3x3(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
    compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
}
RS
}

# Writes to $1 an operator file with one GEMM, `gemm`, specialised at M=$2, N=$3, K=$4.
gemm_op_file() {
    cat >"$1" <<RS
use autotune::tensor_op;
#[tensor_op(specialize(M = $2, N = $3, K = $4))]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}
RS
}

# Sets BLASENV, the environment OpenBLAS runs in (after build_peers): any
# OPENBLAS_CORETYPE of the caller's unset, so that OpenBLAS picks its kernels for
# this CPU, unless it does not know the CPU. Debian's 0.3.21 takes an Intel Xeon of
# model 207 (GenuineIntel-6-207) for a Prescott, whose SSE3 kernels ran GEMM 1023x1024x1024
# at 44.9 GFLOP/s where its SkylakeX kernels ran 218; on a CPU with AVX-512 it picks
# SkylakeX then (AVX2: Haswell), and says so.
openblas_env() {
    BLASENV="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
    local core
    core=$($BLASENV OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$BUILD/gemm_bench" openblas 1 8x8x8 2>&1 |
        awk '/^Core: /{print $2; exit}')
    local want=""
    if grep -qw avx512f /proc/cpuinfo; then want=SkylakeX; elif grep -qw avx2 /proc/cpuinfo; then want=Haswell; fi
    case "$core" in
    Prescott | Core2 | Nehalem | Katmai | "")
        if [ -n "$want" ]; then
            BLASENV="env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=$want"
            echo "# OpenBLAS does not know this CPU ($(cpu_id)): it picked ${core:-no core}; run with OPENBLAS_CORETYPE=$want"
        fi
        ;;
    *) echo "# OpenBLAS picked its $core kernels" ;;
    esac
}
