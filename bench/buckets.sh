#!/usr/bin/env bash
# A shape bucket (issue 18) beside the generic kernel without it and the peers, in one run
# on this machine, 1 thread. Writes bench/results/buckets-<time>.log.
#   bash bench/buckets.sh
# - The bucket: bench/ops.rs `gemm_rows`, `specialize(M = 1..=2048, N = 1024, K = 1024)`,
#   tuned over its range (bench/tuning-cache, 1-thread entry); `cargo autotune bench --shape
#   … --generic --cached` times its generic kernel as a build ships it, which runs the
#   bucket's kernel for every M of the range.
# - Two buckets: bench/ops.rs `gemm_rows2`, the same range split at M = 128 (each tuned over
#   its own range): what a narrower range buys.
# - Without the bucket: the same shapes through bench/ops.rs `gemm`'s generic kernel (one
#   tiled kernel per exact specialisation's cached config, the nearest anchor's run).
# - The shapes: M drawn log-uniform in 1–2048 from a fixed seed, N = K = 1024, plus the
#   range's ends and its anchor (M = 45); printed at the top of the log.
# - Peers: OpenBLAS (Debian), the `gemm` and `matrixmultiply` crates (../shared/peers).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD="${BUILD:-/tmp/autotune-buckets}"
OUT="${OUT:-$ROOT/bench/results/buckets-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$BUILD" "$(dirname "$OUT")"
install_packages libopenblas-dev

build_peers
autotune_cli
OPS="--file $ROOT/bench/ops.rs"
CACHE="--cached --cache $ROOT/bench/tuning-cache"
MS="$(python3 -c '
import math, random
r = random.Random(18)
ms = {1, 45, 2048}
while len(ms) < 14:
    ms.add(int(round(math.exp(r.uniform(0, math.log(2048))))))
print(" ".join(str(m) for m in sorted(ms)))')"
SHAPES="$(for m in $MS; do printf '%sx1024x1024 ' "$m"; done)"

PIN="taskset -c 1"
exec > >(tee "$OUT") 2>&1
openblas_env
echo "# shape buckets $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), 1 thread"
lscpu | grep -E 'Model name|L1d|L2|L3'
echo "gcc: $(gcc --version | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
$PIN "$BUILD/peak" 1 | grep fma
echo "gemm shapes (MxNxK): $SHAPES"
generic() { $PIN $AT bench $OPS --op "$1" --shape "M=$2,N=1024,K=1024" --generic $CACHE --threads 1 \
  --samples 5 --dir "$BUILD/$1" | tail -1 | awk '{print $1}'; }
echo "# GEMM, GFLOP/s: shape bucket two-buckets generic-without-bucket"
for m in $MS; do
  echo "autotune ${m}x1024x1024 $(generic gemm_rows "$m") $(generic gemm_rows2 "$m") $(generic gemm "$m")"
done
echo "# GEMM peers"
$BLASENV OPENBLAS_NUM_THREADS=1 $PIN "$BUILD/gemm_bench" openblas 1 $SHAPES
$PIN "$RUSTGEMM" gemm 1 $SHAPES
MATMUL_NUM_THREADS=1 $PIN "$RUSTGEMM" mm 1 $SHAPES
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
