#!/usr/bin/env bash
# How many loops a conv's first register-tile start runs in parallel (issues
# 16 and 19): for each conv workload of OPS (file:op pairs; by default the
# ResNet-18 example's and the corpus's), the generator's first start for
# THREADS (2) threads (`cargo autotune space --starts`) measured on them with
# its reducing stage's `parallel` at 1 (the outer loop, the channels' tiles)
# and 2 (the outer two collapsed), in one sweep per workload; the log names
# which the generator proposed. Beside the FMA peak.
# Writes bench/results/start-parallel-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/start-parallel-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-start-parallel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
build_peak "$WORK/peak"
THREADS=${THREADS:-2}
# file:op pairs; every specialisation of each is measured.
OPS=${OPS-"examples/resnet18/src/ops.rs:conv7x7s2_relu examples/resnet18/src/ops.rs:conv3x3_relu
examples/resnet18/src/ops.rs:conv3x3_add_relu examples/resnet18/src/ops.rs:conv3x3s2_relu
examples/resnet18/src/ops.rs:conv1x1s2_bias examples/resnet18/src/ops.rs:conv1x1_bias
bench/corpus.rs:conv3x3 bench/corpus.rs:conv3x3s2 bench/corpus.rs:conv1x1_bias bench/corpus.rs:conv1x1s2
bench/corpus.rs:conv5x5"}
exec > >(tee "$OUT") 2>&1
echo "# start parallel $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $(nproc) vCPUs, $THREADS thread(s)"
"$WORK/peak" "$THREADS" | grep fma | sed 's/^/peak: /'
for pair in $OPS; do
    file=${pair%%:*} op=${pair#*:}
    # The first start of each specialisation, in source order.
    $AT space --file "$ROOT/$file" --op "$op" --starts --threads "$THREADS" |
        awk '/^[^ ]/{n++; first=1} /^  start: /{ if (first) { sub(/^  start: /, ""); print > ("'"$WORK"'/start-" n-1 ".txt"); first=0 } }'
    for f in "$WORK"/start-*.txt; do
        spec=${f##*/start-} spec=${spec%.txt}
        # The reducing stage's parallel (the stage with a split knob).
        stage=$(grep -oE '[a-z_0-9]+\.split\.' "$f" | head -1 | cut -d. -f1)
        sed -E "s/(^| )($stage\.parallel=)[12]( |\$)/\1\21|2\3/" "$f" >"$WORK/alts.txt"
        $AT sweep --file "$ROOT/$file" --op "$op" --spec "$spec" --threads "$THREADS" --samples 15 \
            --configs "$WORK/alts.txt" --dir "$WORK/sweep" >"$WORK/sweep.txt"
        python3 - "$f" "$WORK/sweep.txt" "$stage" <<'PY'
import re, sys
stage = sys.argv[3]
start = open(sys.argv[1]).read().strip()
head, rows = "", []
for l in open(sys.argv[2]):
    m = re.match(r"\s*([\d.]+) GFLOP/s\s+(.*)", l)
    if m:
        rows.append((float(m.group(1)), m.group(2).strip()))
    elif "[" in l and not head:
        head = l.split(" (")[0].strip()
par = lambda c: [kv for kv in c.split() if kv.startswith(stage + ".parallel=")][0].split("=")[1]
by = {par(c): g for g, c in rows}
tile = " ".join(kv.split(".", 1)[1] for kv in start.split()
                if re.match(stage + r"\.(vector|tile\.\w+|order)=", kv))
print(f"{head:40} start parallel {par(start)}  parallel 1: {by.get('1', 0):7.1f}  parallel 2: {by.get('2', 0):7.1f}  1/2: {by.get('1', 0) / by.get('2', 1):.2f}  {tile}")
PY
    done
    rm -f "$WORK"/start-*.txt
done
