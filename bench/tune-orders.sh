#!/usr/bin/env bash
# Re-tunes this CPU's cache entries of an example with the reduction blocks'
# place among the outer loops as a start (generator 6, `j/i` order values): for
# every entry of this CPU (its ISA level, THREADS), its config with the `/` at
# each position of the reducing stage's order is measured first
# (`cargo autotune tune --start`), then TRIALS more trials of the search; the
# entry changes only where the winner's re-timing beats it. The search's model
# learned on records without these orders and rarely proposes them itself.
#   bash bench/tune-orders.sh                       # examples/resnet18, 1 and 2 threads
#   OPS="conv3x3_relu" THREADS=1 bash bench/tune-orders.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
autotune_cli
EXAMPLE=${EXAMPLE:-$ROOT/examples/resnet18}
FILE=$EXAMPLE/src/ops.rs
CACHE=${CACHE:-$ROOT/tuning-cache}
TRIALS=${TRIALS:-32}
ISA=$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)
WORK=$(mktemp -d /tmp/autotune-orders.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for threads in ${THREADS:-1 2}; do
    # One start file per entry: op, spec index and file, from the cache and the source.
    python3 - "$FILE" "$CACHE" "$ISA" "$threads" "$WORK/$threads" "${OPS:-}" <<'PY'
import os, re, sys, tomllib
src, cache, isa, threads, out, only = sys.argv[1:7]
os.makedirs(out, exist_ok=True)
text = open(src).read()
specs = {}
for attr, name in re.findall(r"#\[tensor_op\((.*?)\)\]\s*pub fn (\w+)", text, re.S):
    specs[name] = [
        " ".join(f"{k}{v}" for k, v in re.findall(r"(\w+)\s*=\s*(\d+)", s))
        for s in re.findall(r"specialize\((.*?)\)", attr)
    ]
for name, shapes in specs.items():
    path = f"{cache}/{name}.toml"
    if (only and name not in only.split()) or not os.path.exists(path):
        continue
    for e in tomllib.load(open(path, "rb")).get("entry", []):
        if not e["target"].endswith("/" + isa) or str(e.get("threads")) != threads:
            continue
        shape = e["workload"].split("[", 1)[1].rstrip("]")
        if shape not in shapes:
            continue
        config = e["config"]
        # The stage with a reduction: the one whose knobs split an axis.
        stages = {k.split(".")[0] for k in config if ".split." in k}
        lines = []
        for st in sorted(stages):
            axes = [a for a in re.split("[-/]", config[f"{st}.order"]) if a]
            for at in range(len(axes)):
                c = dict(config)
                c[f"{st}.order"] = "-".join(axes[:at]) + "/" + "-".join(axes[at:])
                lines.append(" ".join(f"{k}={v}" for k, v in sorted(c.items())))
        if lines:
            with open(f"{out}/{name}.{shapes.index(shape)}", "w") as f:
                f.write("\n".join(lines) + "\n")
PY
    for start in "$WORK/$threads"/*; do
        [ -e "$start" ] || continue
        op=$(basename "$start" | cut -d. -f1)
        spec=$(basename "$start" | cut -d. -f2)
        echo "== $op spec $spec, $threads thread(s) $(date -Is)"
        $AT tune --file "$FILE" --op "$op" --spec "$spec" --threads "$threads" \
            --trials "$TRIALS" --save --cache "$CACHE" --start "$start" \
            --log "$WORK/$op.$spec.$threads.jsonl" --history "$CACHE/records" \
            --dir /tmp/autotune-tune-orders | grep -E "^(best|config|confirmed)"
        cat "$WORK/$op.$spec.$threads.jsonl" >>"$CACHE/records/$op.jsonl"
    done
done
