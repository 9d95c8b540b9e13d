#!/usr/bin/env bash
# A change to the generator or the runtime that keeps every cache entry (its kernel
# fingerprint unchanged), timed: the committed configs of the peer suite's GEMMs and of
# ResNet-18's conv layers as a build before (BEFORE=<cargo-autotune binary>) and this
# tree ship them, `cargo autotune bench --cached` each, the two alternating, ROUNDS
# rounds (default 3), beside the FMA peak at the start and the end. Writes
# bench/results/cached-ab-<time>.log.
#   BEFORE=/tmp/cargo-autotune-before THREADS=1 bash bench/cached-ab.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
: "${BEFORE:?BEFORE=<the cargo-autotune binary to compare with>}"
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1}
LOG="$ROOT/bench/results/cached-ab-$(date +%Y%m%d-%H%M%S).log"
autotune_cli
build_peak /tmp/autotune-ab-peak
EX="$ROOT/examples/resnet18/src/ops.rs"
# file, operator, specialisation, cache, label
WORKLOADS=(
    "$ROOT/bench/ops.rs gemm 6 $ROOT/bench/tuning-cache gemm-256"
    "$ROOT/bench/ops.rs gemm 5 $ROOT/bench/tuning-cache gemm-512"
    "$ROOT/bench/ops.rs gemm 0 $ROOT/bench/tuning-cache gemm-1024"
    "$ROOT/bench/ops.rs gemm 2 $ROOT/bench/tuning-cache gemm-127x255x511"
    "$ROOT/bench/ops.rs gemm 3 $ROOT/bench/tuning-cache gemm-1x4096x4096"
    "$ROOT/bench/ops.rs gemm 4 $ROOT/bench/tuning-cache gemm-16x4096x4096"
    "$EX conv7x7s2_relu 0 $ROOT/tuning-cache C1"
    "$EX conv3x3_relu 0 $ROOT/tuning-cache C2"
    "$EX conv1x1s2_bias 0 $ROOT/tuning-cache C5"
    "$EX conv3x3_relu 1 $ROOT/tuning-cache C6"
    "$EX conv3x3_relu 2 $ROOT/tuning-cache C9"
    "$EX conv3x3_relu 3 $ROOT/tuning-cache C12"
)
bench() { # binary, workload line, dir
    local file op spec cache label
    read -r file op spec cache label <<<"$2"
    (cd "$ROOT" && "$1" autotune bench --file "$file" --op "$op" --spec "$spec" --cached \
        --cache "$cache" --threads "$THREADS" --dir "$3") | tail -1
}
{
    echo "# cached-ab: before = $BEFORE, after = $(git -C "$ROOT" rev-parse --short HEAD) (this tree); $THREADS thread(s), $ROUNDS rounds; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(cpu_id); $(date -Iseconds)"
    echo "# peak: $(/tmp/autotune-ab-peak 1 2>&1 | grep fma)"
    # Compile every measurement program first (2 cores: nothing builds while timing).
    for w in "${WORKLOADS[@]}"; do
        read -r _ _ _ _ label <<<"$w"
        bench "$BEFORE" "$w" "/tmp/autotune-ab/before-$label" >/dev/null
        bench "$CARGO_AUTOTUNE" "$w" "/tmp/autotune-ab/after-$label" >/dev/null
    done
    for ((r = 1; r <= ROUNDS; r++)); do
        for w in "${WORKLOADS[@]}"; do
            read -r _ _ _ _ label <<<"$w"
            echo "round $r $label before: $(bench "$BEFORE" "$w" "/tmp/autotune-ab/before-$label")"
            echo "round $r $label after:  $(bench "$CARGO_AUTOTUNE" "$w" "/tmp/autotune-ab/after-$label")"
        done
    done
    echo "# peak: $(/tmp/autotune-ab-peak 1 2>&1 | grep fma)"
} | tee "$LOG"
