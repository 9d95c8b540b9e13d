#!/usr/bin/env bash
# The tuning of a cold ResNet-18 build without the build (issue 16): every workload of
# examples/resnet18 tuned in the build's order as a build tunes it (few-shot, the
# shipped model, 2 threads, 48 trials / 120 s each, the records of the workloads
# tuned before it as its history, no per-user store), with `cargo autotune tune
# --json`, so that each workload's time splits into compiling, the tuner's own time
# and the rest (checking, timing, re-timing). The network's time at 2 threads is
# estimated from each workload's best trial (seconds per call × calls per pass).
# A cold build's tuning in 2.5-4 minutes, without its final compile and latency
# rounds: an A/B of a search change, several seeds, in one sitting.
#   VARIANTS="before:/path/cargo-autotune after:/path/cargo-autotune" SEEDS="1 2 3" \
#     bash bench/network-tuning.sh
# (default: this workspace's build, seed 1). Alternates variants within each seed.
# Writes bench/results/network-tuning-<time>.log and, beside it, each run's records
# and --json summaries packed into <log>-records/raw.tar.xz. Run on an idle machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/network-tuning-$(date +%Y%m%d-%H%M%S).log"
RECORDS="${OUT%.log}-records"
if [ -z "${VARIANTS:-}" ]; then
    autotune_cli
    VARIANTS="$(cd "$ROOT" && git rev-parse --short HEAD):$CARGO_AUTOTUNE"
fi
export AUTOTUNE_HISTORY=""
WORK=$(mktemp -d /tmp/autotune-network-tuning.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
OPS="$ROOT/examples/resnet18/src/ops.rs"
WORKLOADS="$RESNET18_WORKLOADS"
exec > >(tee "$OUT") 2>&1
echo "# network tuning $(date -Is): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) ($(cpu_id)), $(nproc) vCPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# variants: $VARIANTS; seeds: ${SEEDS:-1}"
for seed in ${SEEDS:-1}; do
    for v in $VARIANTS; do
        label=${v%%:*} bin=${v#*:}
        run="$RECORDS/$label-seed$seed"
        mkdir -p "$run/records"
        for w in $WORKLOADS; do
            op=${w%%:*} spec=${w#*:}
            "$bin" autotune tune --file "$OPS" --op "$op" --spec "$spec" --tuner few-shot \
                --trials 48 --seconds 120 --seed "$seed" --threads 2 \
                --log "$run/records/$op.jsonl" --history "$run/records" \
                --dir "$WORK/build" --cache "$WORK/cache" --json >"$run/$op-$spec.json" 2>"$WORK/err" ||
                { cat "$WORK/err"; exit 1; }
        done
        echo "## $label, seed $seed"
        python3 "$ROOT/bench/network_tuning_report.py" "$run" $WORKLOADS
    done
done
bash "$ROOT/bench/pack-results.sh" "$RECORDS" >/dev/null
