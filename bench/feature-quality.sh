#!/usr/bin/env bash
# Ranking quality of the cost model with features derived from the plan against
# features walked from the lowered nest (issue 15), on the committed record logs of
# bench/results (7 workloads: GEMM 512³/1024³, four 3×3 convs, a 1×1 stride-2 conv):
# pairwise accuracy and recall of the 16 best on held-out workloads and within a
# workload, and microseconds per config. Writes bench/results/feature-quality-<time>.log.
# Needs the xgboost feature (cmake, a C++ compiler, libclang).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/feature-quality-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-fq.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for t in experiments-20261129-125603/raw transfer-20261129-141829/raw; do
    mkdir -p "$WORK/${t%%/*}"
    tar xJf "$ROOT/bench/results/$t.tar.xz" -C "$WORK/${t%%/*}"
done
(cd "$ROOT" && cargo build --release -q --locked -p cargo-autotune --example feature_quality)
{
    echo "# feature quality $(date -Is): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), records of bench/results (AMD EPYC, avx512)"
    "$TARGET_DIR/release/examples/feature_quality" x86_64-unknown-linux-gnu/avx512 \
        "$ROOT/bench/ops.rs" -- "$WORK"/*
} | tee "$OUT"
