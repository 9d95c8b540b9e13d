#!/usr/bin/env bash
# ResNet-18 end to end against ONNX Runtime, in alternating rounds: on a machine whose
# speed drifts from minute to minute (a shared VM), one pass of bench/peers.sh compares
# figures taken minutes apart; here each round times the FMA peak, the example (network,
# each operator call on its own, layers C1-C12), ONNX Runtime (network, layers) and
# oneDNN (layers) back to back, at 1 and 2 threads, and the report gives every round's
# ratios and their medians. Writes bench/results/network-<time>.log. BEFORE=<a resnet18
# binary of another build> also times that build's network in each round, right after
# this one's (a before/after in one sitting).
#   ROUNDS=3 bash bench/network.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD=/tmp/autotune-peers
VENV="${VENV:-/tmp/autotune-peers-venv}"
ROUNDS="${ROUNDS:-3}"
LOG="${LOG:-$ROOT/bench/results/network-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$BUILD" "$(dirname "$LOG")"

install_peers libdnnl-dev
# Everything is built before anything is timed.
build_peak "$BUILD/peak"
g++ -O3 -march=native -fopenmp "$PEERS/c/dnnl_conv.cpp" -o "$BUILD/dnnl_conv" -ldnnl
(cd "$ROOT" && AUTOTUNE=locked cargo build --release -q -p resnet18)
RESNET="$TARGET_DIR/release/resnet18"
"$RESNET" --threads 1 --export "$BUILD/model" > /dev/null
LAYERS="$(python3 "$ROOT/bench/resnet18_layers.py")"

exec > >(tee "$LOG") 2>&1
echo "# network rounds $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), $ROUNDS rounds${BEFORE:+, before: $BEFORE}"
lscpu | grep -E 'Model name|^CPU\(s\)'
echo "cpuid: $(grep -m1 'cpu family' /proc/cpuinfo | tr -dc 0-9)-$(grep -m1 '^model\s' /proc/cpuinfo | tr -dc 0-9)"
for round in $(seq "$ROUNDS"); do
  for nt in 1 2; do
    if [ $nt = 1 ]; then PIN="taskset -c 1"; else PIN="taskset -c 0,1"; fi
    echo "## round $round, $nt thread(s), load $(cut -d' ' -f1 /proc/loadavg)"
    $BUILD/peak $nt | grep fma
    $PIN "$RESNET" --layers --threads $nt
    if [ -n "${BEFORE:-}" ]; then $PIN "$BEFORE" --threads $nt | sed -n 's/^network threads=/before network: threads=/p'; fi
    $PIN "$VENV/bin/python" "$ROOT/bench/ort_bench.py" "$BUILD/model" $nt
    OMP_NUM_THREADS=$nt OMP_PROC_BIND=true OMP_PLACES=cores $PIN $BUILD/dnnl_conv direct $LAYERS
  done
done
python3 "$ROOT/bench/network_report.py" "$LOG"
