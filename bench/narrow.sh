#!/usr/bin/env bash
# Few-shot tuning of narrow 3x3 convs (every spatial extent below one vector: few
# output channels of short rows), as a default build tunes them (48 trials, 120 s,
# the machine's thread count, or THREADS=1 pinned to one core), seeds 1-3, this
# tree's CLI against BEFORE's (another cargo-autotune binary), alternating. Prints
# the confirmed best GFLOP/s of each run; writes bench/results/narrow-<time>.log.
#   BEFORE=/path/to/cargo-autotune [THREADS=1] [CONVS="44,11,12 96,9,10 160,7,12"] \
#     bash bench/narrow.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
CONVS=${CONVS-"44,11,12 96,9,10 160,7,12"}
OUT="$ROOT/bench/results/narrow-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-narrow.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
export AUTOTUNE_HISTORY=""
THREADS=${THREADS:-$(nproc)}
PIN=""
[ "$THREADS" = 1 ] && PIN="taskset -c 1"
exec > >(tee "$OUT") 2>&1
echo "# narrow convs $(date -Is): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $(nproc) vCPUs, $THREADS thread(s), at $(git -C "$ROOT" rev-parse --short HEAD); before: ${BEFORE:?}"
for conv in $CONVS; do
    IFS=, read -r c h k <<<"$conv"
    write_conv3x3 "$WORK/conv-$conv.rs" "$c" "$h" "$k"
    for seed in 1 2 3; do
        for which in before after; do
            cli=$CARGO_AUTOTUNE
            [ $which = before ] && cli=$BEFORE
            rm -rf "$WORK/cache" "$WORK/log.jsonl"
            $PIN "$cli" autotune tune --file "$WORK/conv-$conv.rs" --op conv3x3 --tuner few-shot \
                --trials 48 --seconds 120 --no-transfer --threads "$THREADS" --seed $seed --log "$WORK/log.jsonl" \
                --dir "$WORK/tune" --cache "$WORK/cache" --json |
                python3 -c 'import json,sys; r=json.load(sys.stdin); print("RESULT conv=%s seed=%s build=%s gflops=%.2f trials=%d seconds=%.1f" % (sys.argv[1], sys.argv[2], sys.argv[3], r["best_gflops"], r["trials"], r["seconds"]))' "$conv" $seed $which
        done
    done
done
python3 - "$OUT" <<'PY'
import re, statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"RESULT conv=(\S+) seed=\d+ build=(\w+) gflops=([\d.]+)", line)
    if m:
        runs[(m[1], m[2])].append(float(m[3]))
print("\n| conv C,H=W,K | before (3 seeds) | after | after / before (medians) |\n|---|---|---|---|")
for conv in dict.fromkeys(c for c, _ in runs):
    b, a = runs[(conv, "before")], runs[(conv, "after")]
    f = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
    print(f"| {conv} | {f(b)} | {f(a)} | {statistics.median(a) / statistics.median(b):.2f}× |")
PY
