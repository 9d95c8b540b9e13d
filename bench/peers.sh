#!/usr/bin/env bash
# Peer benchmark suite: autotune's tuned kernels beside the peers, in one run on this
# machine, 1 and 2 threads. Writes bench/results/peers-<time>/ (run.log holds every
# figure); `python3 bench/peers_report.py DIR` prints the tables of docs/performance.md.
#   bash bench/peers.sh
# - GEMM 256³, 512³, 1024³, 127×255×511, 1×4096², 16×4096²: autotune (`cargo autotune
#   bench --cached`: the config in bench/tuning-cache, timed by the same harness the tuner
#   uses) vs OpenBLAS (Debian), the `gemm` and `matrixmultiply` crates (../shared/peers).
# - the twelve ResNet-18 conv layers C1-C12: the resnet18 example's kernels (`--layers`)
#   vs im2col+OpenBLAS, oneDNN (Debian) and ONNX Runtime (PyPI).
# - ResNet-18 end to end: the example vs ONNX Runtime on the same weights and input.
# Peers that need system packages or PyPI are installed here when missing.
# ROUNDS=n repeats the GEMM part n times, autotune and the peers alternating (the report
# takes each figure's median over the rounds: for hosts whose speed drifts within
# minutes); ONLY=gemm skips the ResNet-18 part.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD=/tmp/autotune-peers
VENV="${VENV:-/tmp/autotune-peers-venv}"
OUT="${OUT:-$ROOT/bench/results/peers-$(date +%Y%m%d-%H%M%S)}"
ROUNDS="${ROUNDS:-1}"
ONLY="${ONLY:-}"
mkdir -p "$BUILD" "$OUT"

install_peers libopenblas-dev libdnnl-dev

build_peers conv
autotune_cli
# From the committed cache only: a miss fails the build instead of tuning.
(cd "$ROOT" && AUTOTUNE=locked cargo build --release -q -p resnet18)
RESNET="$TARGET_DIR/release/resnet18"
"$RESNET" --threads 1 --export "$BUILD/model" > /dev/null
# Compile each GEMM measurement program now, outside the timed part.
for spec in 5 0 2 3 4 6; do
  $AT bench --file "$ROOT/bench/ops.rs" --op gemm --spec "$spec" --cached --cache "$ROOT/bench/tuning-cache" \
    --samples 1 --dir "$BUILD/at-gemm-$spec" > /dev/null
done

SHAPES="256x256x256 512x512x512 1024x1024x1024 127x255x511 1x4096x4096 16x4096x4096"
SPECS="6 5 0 2 3 4" # bench/ops.rs `gemm` specialisations, in the order of SHAPES
LAYERS="$(python3 "$ROOT/bench/resnet18_layers.py")"
OMPBIND="env OMP_PROC_BIND=true OMP_PLACES=cores"
unset OMP_PROC_BIND OMP_PLACES

exec > >(tee "$OUT/run.log") 2>&1
openblas_env
echo "# peer suite $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD)"
lscpu | grep -E 'Model name|^CPU\(s\)|L1d|L2|L3'
echo "gcc: $(gcc --version | head -1); rustc: $(rustc --version)"
echo "openblas: $(dpkg -s libopenblas0-pthread 2>/dev/null | grep ^Version || true); onednn: $(dpkg -s libdnnl2 2>/dev/null | grep ^Version || true)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for nt in 1 2; do
  if [ $nt = 1 ]; then PIN="taskset -c 1"; else PIN="taskset -c 0,1"; fi
  echo "## $nt thread(s)"
  $BUILD/peak $nt | grep fma
  for ((round = 1; round <= ROUNDS; round++)); do
    echo "# GEMM, round $round"
    set -- $SPECS
    for shape in $SHAPES; do
      echo "autotune gemm $shape:"
      $PIN $AT bench --file "$ROOT/bench/ops.rs" --op gemm --spec "$1" --cached --cache "$ROOT/bench/tuning-cache" \
        --threads "$nt" --samples 9 --dir "$BUILD/at-gemm-$1" | tail -1
      shift
    done
    $BLASENV OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/gemm_bench openblas $nt $SHAPES
    $BLASENV OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/gemm_bench openblas_gemv $nt 1x4096x4096
    $PIN $RUSTGEMM gemm $nt $SHAPES
    MATMUL_NUM_THREADS=$nt $PIN $RUSTGEMM mm $nt $SHAPES
  done
  [ "$ONLY" = gemm ] && continue
  echo "# ResNet-18 and its conv layers"
  $PIN "$RESNET" --layers --threads $nt
  $PIN "$VENV/bin/python" "$ROOT/bench/ort_bench.py" "$BUILD/model" $nt
  $BLASENV OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$nt OPENBLAS_NUM_THREADS=$nt $PIN $BUILD/conv_bench im2col_openblas $nt $LAYERS
  OMP_NUM_THREADS=$nt $OMPBIND $PIN $BUILD/dnnl_conv direct $LAYERS
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results: $OUT"
