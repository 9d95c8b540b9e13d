#!/usr/bin/env bash
# This CPU's own entries for the examples' workloads, on a CPU the caches have not met
# (issue 17): where a build replays another CPU's entries, `cargo autotune tune --save`
# of every workload of the ResNet-18 and matmul examples, as a user's `AUTOTUNE=retune`
# would, but with TRIALS (64) trials of xgb-rank with transfer at each of THREADS ("2 1")
# kernel threads. Every CPU's current entry of the workload is measured first and
# re-timed beside the search's best (the cache's configs are the search's incumbents), so
# an entry saved here is this CPU's fastest of those it timed, the replayed one included.
# WORKLOADS (op:spec ..., default every one of both examples) narrows it.
# Writes bench/results/tune-cpu-<cpu id>-<time>.log and, beside it, the record logs
# (one per thread count; records do not say their thread count) packed as
# <log>.records.tar.xz. Run on an idle machine.
#   bash bench/tune-cpu.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
TRIALS="${TRIALS:-64}"
THREADS="${THREADS:-2 1}"
OUT="$ROOT/bench/results/tune-cpu-$(cpu_id)-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-tune-cpu.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
autotune_cli
WORKLOADS="${WORKLOADS:-$RESNET18_WORKLOADS matmul:0}"
mkdir -p "$WORK/records"
exec > >(tee "$OUT") 2>&1
echo "# tune-cpu $(date -u +%FT%TZ) $(git rev-parse --short HEAD): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) ($(cpu_id)), $TRIALS trials, threads $THREADS"
build_peak "$WORK/peak"
for t in $THREADS; do "$WORK/peak" "$t" | grep fma; done
for t in $THREADS; do
    for w in $WORKLOADS; do
        op=${w%%:*} spec=${w#*:}
        file=examples/resnet18/src/ops.rs
        if [ "$op" = matmul ]; then file=examples/matmul/src/ops.rs; fi
        echo "## $op spec $spec, $t thread(s)"
        $AT tune --file "$file" --op "$op" --spec "$spec" --threads "$t" --trials "$TRIALS" \
            --tuner xgb-rank --save --cache tuning-cache --log "$WORK/records/records-$t.jsonl" \
            --dir "$WORK/dir" >"$WORK/out" 2>&1 || { cat "$WORK/out"; exit 1; }
        cat "$WORK/out"
    done
done
tar -cJf "${OUT%.log}.records.tar.xz" -C "$WORK/records" .
echo "written to $OUT"
