#!/usr/bin/env bash
# Tuning-loop throughput on a fixed set of workloads (issue 15's baseline): GEMM
# 512³ and 1024³, a 3×3 conv (ResNet-18 C9), a 1×1 stride-2 conv and a conv with a
# fused bias+ReLU epilogue; xgb-rank, no transfer, fixed seed and budget. Writes
# per workload: trials/s, compile seconds per candidate, featurisation µs per
# scored config and the tuner's own share of the wall time, to
# bench/results/tuning-baseline-<time>.log (or appends to $OUT). Run it before and
# after a change, in one sitting on one machine (CARGO_AUTOTUNE, LABEL and
# WORKLOADS alternate two builds per workload into one OUT).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-$ROOT/bench/results/tuning-baseline-$STAMP.log}
TRIALS=${TRIALS:-96}
SEED=${SEED:-1}
# CARGO_AUTOTUNE names another build of the CLI (the "before" of a comparison).
autotune_cli
LABEL=${LABEL:-$(cd "$ROOT" && git rev-parse --short HEAD)}
WORK=$(mktemp -d /tmp/autotune-baseline.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
{
    echo "# tuning baseline $(date -Is): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) vCPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# $LABEL ($CARGO_AUTOTUNE): xgb-rank, --no-transfer, $TRIALS trials, seed $SEED, batch 16, threads 1"
    printf '%-34s %8s %10s %14s %14s %10s %12s %8s\n' workload trials trials/s compile_s/cand features_us/cfg tuner_share rest_s/trial best
} | tee -a "$OUT"
run() { # file op spec
    local json
    json=$($AT tune --file "$1" --op "$2" --spec "$3" --tuner xgb-rank --no-transfer \
        --trials "$TRIALS" --seed "$SEED" --batch 16 --threads 1 \
        --log "$WORK/$2-$3.jsonl" --dir "$WORK/build" --cache "$WORK/cache" --json)
    python3 - "$json" <<'PY' | tee -a "$OUT"
import json, sys
r = json.loads(sys.argv[1])
new = r["trials"] - r["resumed"]
stats = r.get("tuner_stats", {})
scored = stats.get("configs_scored", 0)
feat = stats.get("features_seconds", 0.0)
# The rest: checking and timing the candidates, and re-timing the winner.
rest = r["seconds"] - r["compile_seconds"] - r["tuner_seconds"]
print("%-34s %8d %10.2f %14.3f %14.1f %9.1f%% %12.3f %8.1f" % (
    r["workload"], new, new / r["seconds"], r["compile_seconds"] / max(new, 1),
    1e6 * feat / scored if scored else float("nan"),
    100 * r["tuner_seconds"] / r["seconds"], rest / max(new, 1), r["best_gflops"] or 0.0))
PY
}
# WORKLOADS picks some of them by operator name.
for w in "bench/ops.rs gemm 5" "bench/ops.rs gemm 0" "bench/ops.rs conv3x3 1" \
    "bench/ops.rs conv1x1s2 0" "examples/resnet18/src/ops.rs conv3x3_relu 0"; do
    set -- $w
    case " ${WORKLOADS:-$2} " in *" $2 "*) run "$ROOT/$1" "$2" "$3" ;; esac
done
