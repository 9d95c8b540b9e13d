#!/usr/bin/env bash
# Generic kernels at shapes nobody specialised (issue 18), beside the peers, in one run on
# this machine, 1 thread. Writes bench/results/generic-<time>.log.
#   bash bench/generic.sh
# - The shapes: GEMM M×N×K and 3×3 conv (C, H=W, K) drawn from a fixed seed, log-uniform
#   in 1–2048 (conv: C, K in 8–512, H in 7–64), a third of the sizes moved by ±1 (odd
#   sizes), any shape that bench/ops.rs specialises left out; plus the shapes of the issue's
#   table. The list is printed at the top of the log.
# - autotune: `cargo autotune bench --shape … --generic --cached`: the generic kernel as a
#   build of bench/ops.rs ships it (one tiled kernel per specialisation's cached config,
#   dispatched on the call's shapes), checked against the reference and timed by the
#   tuner's harness; `--naive` times the default-schedule generic kernel (what every
#   unspecialised call ran before), at the shapes with a size below 16.
# - At the specialised shapes the generic kernel is timed beside the specialised one
#   (`--spec I --cached`): what being generic costs.
# - The conv is the ResNet-18 example's `conv3x3_relu` (3×3, stride 1, pad 1, + bias +
#   ReLU) with the committed cache; the peers' convs have no epilogue. It is timed again
#   as bench/ops.rs declares it: the same operator and entries plus a bucket for rows of
#   32-64 pixels and one for narrow shapes (H, W, K below 16), each tuned over its range
#   into bench/tuning-cache.
# - ONLY=conv times the convs alone.
# - Peers: OpenBLAS (Debian), the `gemm` and `matrixmultiply` crates (../shared/peers),
#   oneDNN direct conv and im2col+OpenBLAS for the convs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD=/tmp/autotune-generic
OUT="${OUT:-$ROOT/bench/results/generic-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$BUILD" "$(dirname "$OUT")"

install_packages libopenblas-dev libdnnl-dev

build_peers conv
autotune_cli
OPS="--file $ROOT/bench/ops.rs"
CACHE="--cached --cache $ROOT/bench/tuning-cache"

CONV_OPS="--file $ROOT/examples/resnet18/src/ops.rs"
CONV_CACHE="--cached --cache $ROOT/tuning-cache"
SHAPES="$(python3 - "$ROOT/bench/ops.rs" "$ROOT/examples/resnet18/src/ops.rs" <<'EOF'
import math, random, re, sys
def specs(op, path=sys.argv[1]):
    src = open(path).read()
    attr = src[:src.index(f"pub fn {op}(")].rsplit("#[tensor_op(", 1)[1]
    return {tuple(int(v) for v in re.findall(r"= *(\d+)", s)) for s in re.findall(r"specialize\(([^)]*)\)", attr)}
r = random.Random(18)
def size(lo, hi):
    x = int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))
    if r.random() < 1 / 3:
        x = max(lo, x + r.choice([-1, 1]))
    return x
gemm_specs = specs("gemm")  # (M, N, K)
gemms = ["1023x1024x1024", "333x333x333", "768x1536x384", "64x4096x4096"]
while len(gemms) < 18:
    m, n, k = size(1, 2048), size(1, 2048), size(1, 2048)
    if (m, n, k) not in gemm_specs and m * n * k <= 2e9:
        gemms.append(f"{m}x{n}x{k}")
conv_specs = specs("conv3x3_relu", sys.argv[2])  # (C, H, W, K)
convs = []
while len(convs) < 6:
    c, h, k = size(8, 512), size(7, 64), size(8, 512)
    if (c, h, h, k) not in conv_specs and c * h * h * k * 9 <= 1e9:
        convs.append(f"{c},{h},{k}")
print(" ".join(gemms))
print(" ".join(convs))
EOF
)"
GEMMS="$(sed -n 1p <<<"$SHAPES")"
CONVS="$(sed -n 2p <<<"$SHAPES")"
SPECIALISED="0:1024x1024x1024 2:127x255x511 3:1x4096x4096 4:16x4096x4096 5:512x512x512 6:256x256x256"
CONV_SPECIALISED="0:64,56,64 1:128,28,128"

gemm_args() { IFS=x read -r m n k <<<"$1"; echo "M=$m,N=$n,K=$k"; }
conv_args() { IFS=, read -r c h k <<<"$1"; echo "C=$c,H=$h,W=$h,K=$k"; }
small() { for v in $(echo "$1" | tr 'x,' '  '); do ((v < 16)) && return 0; done; return 1; }
rate() { tail -1 | awk '{print $1}'; }
# GFLOP/s of the generic kernel as a build ships it: generic OPS CACHE OP SIZES.
generic() { $PIN $AT bench $1 --op "$3" --shape "$4" --generic $2 --samples 5 --dir "$BUILD/g" | rate; }

PIN="taskset -c 1"
exec > >(tee "$OUT") 2>&1
openblas_env
echo "# generic kernels $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), 1 thread"
lscpu | grep -E 'Model name|L1d|L2|L3'
echo "gcc: $(gcc --version | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
$PIN "$BUILD/peak" 1 | grep fma
echo "gemm shapes (MxNxK): $GEMMS"
echo "conv 3x3 shapes (C,H,K): $CONVS"
if [ "${ONLY:-}" != conv ]; then
  echo "# GEMM, GFLOP/s: shape generic naive"
  for s in $GEMMS; do
    g=$(generic "$OPS" "$CACHE" gemm "$(gemm_args "$s")")
    n=-
    if small "$s"; then n=$($PIN $AT bench $OPS --op gemm --shape "$(gemm_args "$s")" --naive --samples 5 --dir "$BUILD/n" | rate); fi
    echo "autotune $s $g $n"
  done
  echo "# GEMM at the specialised shapes, GFLOP/s: shape generic specialised"
  for e in $SPECIALISED; do
    i=${e%%:*}; s=${e#*:}
    g=$(generic "$OPS" "$CACHE" gemm "$(gemm_args "$s")")
    p=$($PIN $AT bench $OPS --op gemm --spec "$i" $CACHE --samples 5 --dir "$BUILD/s" | rate)
    echo "specialised $s $g $p"
  done
  echo "# GEMM peers"
  $BLASENV OPENBLAS_NUM_THREADS=1 $PIN "$BUILD/gemm_bench" openblas 1 $GEMMS
  $PIN "$RUSTGEMM" gemm 1 $GEMMS
  MATMUL_NUM_THREADS=1 $PIN "$RUSTGEMM" mm 1 $GEMMS
fi
echo "# conv 3x3, GFLOP/s: C,H,K generic naive"
for s in $CONVS; do
  g=$(generic "$CONV_OPS" "$CONV_CACHE" conv3x3_relu "$(conv_args "$s")")
  echo "autotune $s $g -"
done
echo "# conv 3x3 with declared buckets (H = W = 32..=64; 16..=31; 7..=15 with K = 8..=15), GFLOP/s: C,H,K bucketed"
for s in $CONVS; do
  g=$(generic "$OPS" "$CACHE" conv3x3_relu "$(conv_args "$s")")
  echo "bucketed $s $g"
done
echo "# conv 3x3 at the specialised shapes: C,H,K generic specialised"
for e in $CONV_SPECIALISED; do
  i=${e%%:*}; s=${e#*:}
  g=$(generic "$CONV_OPS" "$CONV_CACHE" conv3x3_relu "$(conv_args "$s")")
  p=$($PIN $AT bench $CONV_OPS --op conv3x3_relu --spec "$i" $CONV_CACHE --samples 5 --dir "$BUILD/s" | rate)
  echo "specialised $s $g $p"
done
echo "# conv peers"
LAYERS=$(for s in $CONVS; do printf '%s,3,1,1 ' "$s"; done)
OMP_NUM_THREADS=1 $BLASENV OPENBLAS_NUM_THREADS=1 $PIN "$BUILD/conv_bench" im2col_openblas 1 $LAYERS
OMP_NUM_THREADS=1 $PIN "$BUILD/dnnl_conv" direct $LAYERS
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
