#!/usr/bin/env bash
# Tuning throughput (issue 4): 200-trial runs of the random and genetic tuners on
# GEMM 512³ and one conv2d layer (ResNet-18 C9), single-threaded measurements,
# on this 2-core machine. Writes bench/results/throughput-<time>.log and the
# record logs beside it, packed as throughput-<time>.records.tar.xz.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
STAMP=$(date +%Y%m%d-%H%M%S)
OUT="$ROOT/bench/results/throughput-$STAMP.log"
mkdir -p "$ROOT/bench/results"
autotune_cli
exec > >(tee "$OUT") 2>&1
echo "# tuning throughput $(date -Is); $(lscpu | grep 'Model name'); load $(cut -d' ' -f1-3 /proc/loadavg)"
for tuner in random genetic; do
  for w in "gemm 5" "conv3x3 1"; do
    set -- $w
    log="$ROOT/bench/results/records-$STAMP-$1-$2-$tuner.jsonl"
    $AT tune --file "$ROOT/bench/ops.rs" --op "$1" --spec "$2" --tuner "$tuner" \
      --trials "${TRIALS:-200}" --batch 16 --log "$log" --dir /tmp/autotune-throughput --json
  done
done
# The record logs, packed beside the log (bench/results/README.md).
(cd "$ROOT/bench/results" &&
  bash "$ROOT/bench/pack-results.sh" . "throughput-$STAMP.records.tar.xz" records-"$STAMP"-*.jsonl)
