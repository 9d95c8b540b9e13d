#!/usr/bin/env bash
# Headroom benchmark: autotune's kernels (hand-swept configs from
# bench/configs/best.txt) beside the physical limits and the peers of
# ../shared/peers, measured in one run on this machine, 1 and 2 threads.
#   bash bench/headroom.sh            # writes bench/results/headroom-<time>.log
# Peers are built from ../shared/peers/c with their own flags (-O3 -march=native);
# OpenBLAS and oneDNN come from Debian and are installed if missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD=/tmp/autotune-headroom
OUT="$ROOT/bench/results/headroom-$(date +%Y%m%d-%H%M%S).log"
mkdir -p "$BUILD" "$(dirname "$OUT")"

install_packages libopenblas-dev libdnnl-dev
CFLAGS="-O3 -march=native"
build_peak "$BUILD/peak"
gcc $CFLAGS -fopenmp "$PEERS/c/stream.c" -o "$BUILD/stream"
gcc $CFLAGS -fopenmp "$PEERS/c/gemm_bench.c" -o "$BUILD/gemm_bench" -lopenblas -lm
gcc $CFLAGS -fopenmp "$PEERS/c/conv_bench.c" -o "$BUILD/conv_bench" -lopenblas -lm
g++ $CFLAGS -fopenmp "$PEERS/c/dnnl_conv.cpp" -o "$BUILD/dnnl_conv" -ldnnl
autotune_cli

SHAPES="1024x1024x1024 1000x1000x1000 127x255x511 1x4096x4096 16x4096x4096"
LAYERS="64,56,64,3,1,1 256,14,256,3,1,1"
OMPBIND="env OMP_PROC_BIND=true OMP_PLACES=cores"
unset OMP_PROC_BIND OMP_PLACES

exec > >(tee "$OUT") 2>&1
openblas_env
echo "# headroom run $(date -Is)"
lscpu | grep -E 'Model name|^CPU\(s\)|L1d|L2|L3'
echo "gcc: $(gcc --version | head -1); rustc: $(rustc --version)"
echo "openblas: $(dpkg -s libopenblas0-pthread 2>/dev/null | grep ^Version || true); onednn: $(dpkg -s libdnnl2 2>/dev/null | grep ^Version || true)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

for nt in 1 2; do
  if [ $nt = 1 ]; then PIN="taskset -c 1"; else PIN="taskset -c 0,1"; fi
  echo "## $nt thread(s)"
  $BUILD/peak $nt
  OMP_NUM_THREADS=$nt $OMPBIND $PIN $BUILD/stream
  $BLASENV OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/gemm_bench openblas $nt $SHAPES
  $BLASENV OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/gemm_bench openblas_gemv $nt 1x4096x4096
  OMP_NUM_THREADS=$nt $OMPBIND $PIN $BUILD/dnnl_conv direct $LAYERS
  $BLASENV OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$nt OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/conv_bench im2col_openblas $nt $LAYERS
  grep -v '^#' "$ROOT/bench/configs/best.txt" | while read -r op spec threads config; do
    [ "$threads" = "$nt" ] || continue
    echo "autotune $op spec $spec:"
    $PIN $AT bench --file "$ROOT/bench/ops.rs" --op "$op" --spec "$spec" --threads "$nt" \
      --samples 9 --dir "$BUILD/at-$op-$spec-$nt" --config "$config" | tail -1
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results: $OUT"
