#!/usr/bin/env bash
# What replaying another CPU's tuning-cache entry costs on this CPU (issue: caches
# that know the CPU). For every workload of the committed caches with an entry of this
# CPU and of another, `cargo autotune verify --other-cpus` compiles both configs in one
# batch, checks them and times them in alternating rounds (median of ROUNDS), at the
# thread count the kernels ship with. The FMA peak is measured in the same run.
# Writes bench/results/foreign-cpu-<time>.log.
#   bash bench/foreign-cpu.sh            # ROUNDS=5 THREADS=<shipped>
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
ROUNDS="${ROUNDS:-5}"
OUT="${OUT:-$ROOT/bench/results/foreign-cpu-$(date +%Y%m%d-%H%M%S).log}"
BUILD=/tmp/autotune-foreign
mkdir -p "$BUILD"
cd "$ROOT"
# Everything is built before anything is timed.
autotune_cli
cp "$CARGO_AUTOTUNE" "$BUILD/cargo-autotune"
build_peak "$BUILD/peak"
threads=(${THREADS:+--threads "$THREADS"})
{
  echo "# foreign-cpu $(date -u +%FT%TZ) $(git rev-parse --short HEAD)"
  grep -m1 'model name' /proc/cpuinfo
  "$BUILD/peak" 1
  "$BUILD/peak" 2
  for spec in "bench/ops.rs:bench/tuning-cache" \
              "examples/matmul/src/ops.rs:tuning-cache" \
              "examples/resnet18/src/ops.rs:tuning-cache"; do
    echo "## ${spec%%:*} (${spec##*:})"
    "$BUILD/cargo-autotune" autotune verify --other-cpus --rounds "$ROUNDS" "${threads[@]}" \
      --file "${spec%%:*}" --cache "${spec##*:}"
  done
} 2>&1 | tee "$OUT"
echo "written to $OUT"
