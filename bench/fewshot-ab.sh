#!/usr/bin/env bash
# Few-shot tuning as a cold build runs it (48 trials / 120 s, 2 threads, no
# history, the shipped model), two builds of the CLI alternating per workload
# over ROUNDS rounds: per run the trials, seconds, compile and tuner seconds, the
# winner's re-timing seconds, the default's and the best GFLOP/s. For changes to
# the tuning loop's cost (issues 15, 16); TRIALS (48) caps the trials, so that
# fixed costs compare at equal trials:
#   BEFORE=<cargo-autotune binary> AFTER=<cargo-autotune binary> bash bench/fewshot-ab.sh
# WORKLOADS: "op spec" pairs of examples/resnet18/src/ops.rs. Writes
# bench/results/fewshot-ab-<time>.log (or appends to $OUT); run on an idle machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT=${OUT:-$ROOT/bench/results/fewshot-ab-$(date +%Y%m%d-%H%M%S).log}
ROUNDS=${ROUNDS:-2}
TRIALS=${TRIALS:-48}
WORKLOADS=${WORKLOADS:-"conv3x3_relu:1 conv3x3s2_relu:0 max_pool3x3s2:0"}
: "${BEFORE:?the CLI build to compare against}" "${AFTER:?the CLI build under test}"
WORK=$(mktemp -d /tmp/autotune-fewshot-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
{
    echo "# few-shot a/b $(date -Is): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) vCPUs; before $BEFORE, after $AFTER"
    echo "# $TRIALS trials at most"
    printf '%-6s %-6s %-38s %7s %9s %10s %9s %10s %9s %9s\n' round build workload trials seconds compile_s tuner_s retiming_s default best
} | tee -a "$OUT"
for round in $(seq "$ROUNDS"); do
    for w in $WORKLOADS; do
        for v in before after; do
            bin=$BEFORE
            [ $v = after ] && bin=$AFTER
            rm -rf "${WORK:?}/$v"
            json=$(AUTOTUNE_HISTORY= "$bin" autotune tune --file examples/resnet18/src/ops.rs \
                --op "${w%:*}" --spec "${w#*:}" --tuner few-shot --trials "$TRIALS" --seconds 120 \
                --threads 2 --no-transfer --log "$WORK/$v/r.jsonl" --dir "$WORK/$v/d" \
                --cache "$WORK/$v/cache" --json)
            python3 - "$json" "$round" "$v" <<'PY' | tee -a "$OUT"
import json, re, sys
r = json.loads(sys.argv[1])
m = re.search(r" in ([0-9.]+) s:", r.get("confirmed") or "")
print("%-6s %-6s %-38s %7d %9.1f %10.1f %9.1f %10.1f %9.1f %9.1f" % (sys.argv[2], sys.argv[3], r["workload"],
      r["trials"], r["seconds"], r["compile_seconds"], r["tuner_seconds"], float(m.group(1)) if m else 0.0,
      r["default_gflops"] or 0, r["best_gflops"] or 0))
PY
        done
    done
done
