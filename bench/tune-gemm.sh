#!/usr/bin/env bash
# Tunes the GEMM shapes of the peer suite (bench/peers.sh) into bench/tuning-cache/, as a
# build would: the model-guided tuner (xgb-rank), timed with the pool's default thread
# count (all cores), learning from the GEMM trials of the tuner experiments and of each
# other (transfer). TRIALS per shape (default 96). THREADS=1 tunes entries for one kernel
# thread instead, saved beside the others (kernels pick them when the pool runs 1 thread),
# with their own record log (records do not say the thread count they were timed at).
#   bash bench/tune-gemm.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
TRIALS="${TRIALS:-96}"
CACHE="$ROOT/bench/tuning-cache"
mkdir -p "$CACHE/records"
autotune_cli
THREADS="${THREADS:-$(nproc)}"
LOG="$CACHE/records/gemm.jsonl"
if [ "$THREADS" != "$(nproc)" ]; then LOG="$CACHE/records/gemm-${THREADS}thread.jsonl"; fi
HISTORY=(--history "$CACHE/records")
for d in "$ROOT"/bench/results/experiments-*/; do
  # A packed run's record logs (bench/results/README.md), unpacked in place (git ignores them).
  if [ -f "$d/raw.tar.xz" ]; then tar -xJf "$d/raw.tar.xz" -C "$d" --skip-old-files; fi
  HISTORY+=(--history "$d")
done
# Each shape's search also starts from the configs its records lack (bench/configs/):
# GotoBLAS's loops for the square and odd GEMMs, the GEMV orders for M = 1, B copied per
# block for M = 16.
start_of() {
  case "$1" in
  3) echo gemv-orders.txt ;;
  4) echo gemm16x4096-block-pack.txt ;;
  *) echo gemm-goto.txt ;;
  esac
}
for spec in 6 5 0 2 3 4; do # 256³, 512³, 1024³, 127×255×511, 1×4096², 16×4096²
  echo "## spec $spec, start bench/configs/$(start_of "$spec")"
  $AT tune --file "$ROOT/bench/ops.rs" --op gemm \
    --spec "$spec" --threads "$THREADS" --trials "$TRIALS" --save --cache "$CACHE" \
    --start "$ROOT/bench/configs/$(start_of "$spec")" \
    --log "$LOG" --dir /tmp/autotune-tune-gemm \
    "${HISTORY[@]}"
done
$AT show --cache "$CACHE"
