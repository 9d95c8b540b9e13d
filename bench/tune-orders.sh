#!/usr/bin/env bash
# Re-tunes this CPU's cache entries of an example from starts the search's
# model has not learned to propose: for every entry of this CPU (its ISA level,
# THREADS), variants of its config are measured first (`cargo autotune tune
# --start`), then TRIALS more trials of the search; the entry changes only
# where the winner's re-timing beats it. START says which variants:
#   orders (generator 6): the `/` at each position of the reducing stage's order;
#   merge (generator 7): each order that merges two spatial axes (`h*w`) off
#     the vector axis, with a register tile of pixels as long as the register
#     file allows beside the entry's vectors (and one shorter).
#   ahead (generator 7): each operand under the reduction read with `pack` 4
#     (copied whole, and its next slice prefetched: Read::PackAhead), one
#     variant per load site.
#   bash bench/tune-orders.sh                       # examples/resnet18, 1 and 2 threads
#   START=merge OPS="conv3x3_relu" THREADS=1 bash bench/tune-orders.sh
#   FILE=bench/ops.rs CACHE=bench/tuning-cache OPS=gemm START=ahead bash bench/tune-orders.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
autotune_cli
EXAMPLE=${EXAMPLE:-$ROOT/examples/resnet18}
FILE=${FILE:-$EXAMPLE/src/ops.rs}
CACHE=${CACHE:-$ROOT/tuning-cache}
TRIALS=${TRIALS:-32}
ISA=$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)
START=${START:-orders}
WORK=$(mktemp -d /tmp/autotune-orders.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for threads in ${THREADS:-1 2}; do
    # One start file per entry: op, spec index and file, from the cache and the source.
    python3 - "$FILE" "$CACHE" "$ISA" "$threads" "$WORK/$threads" "${OPS:-}" "$START" "$AT" "$ROOT/bench" <<'PY'
import os, re, sys, tomllib
src, cache, isa, threads, out, only, start, at, bench = sys.argv[1:10]
sys.path.insert(0, bench)
from merge_starts import ahead_starts, line, merge_starts, reducing_stages, space_knobs

os.makedirs(out, exist_ok=True)
text = open(src).read()
specs = {}
for attr, name in re.findall(r"#\[tensor_op\((.*?)\)\]\s*pub fn (\w+)", text, re.S):
    specs[name] = [
        sorted(f"{k}{v}" for k, v in re.findall(r"(\w+)\s*=\s*(\d+)", s))
        for s in re.findall(r"specialize\((.*?)\)", attr)
    ]
for name, shapes in specs.items():
    path = f"{cache}/{name}.toml"
    if (only and name not in only.split()) or not os.path.exists(path):
        continue
    for e in tomllib.load(open(path, "rb")).get("entry", []):
        if not e["target"].endswith("/" + isa) or str(e.get("threads")) != threads:
            continue
        # (The workload names its sizes in another order than the source may.)
        shape = sorted(e["workload"].split("[", 1)[1].rstrip("]").split())
        if shape not in shapes:
            continue
        config = e["config"]
        lines = []
        for st in reducing_stages(config):
            if start == "merge":
                knobs = space_knobs(at, src, name, e["workload"])
                configs = merge_starts(knobs, config, st, isa)
            elif start == "ahead":
                knobs = space_knobs(at, src, name, e["workload"])
                configs = ahead_starts(knobs, config, st)
            else:
                # (A merged pair, `h*w`, stays one item.)
                axes = [a for a in re.split("[-/]", config[f"{st}.order"]) if a]
                configs = []
                for i in range(len(axes)):
                    c = dict(config)
                    c[f"{st}.order"] = "-".join(axes[:i]) + "/" + "-".join(axes[i:])
                    configs.append(c)
            lines += [line(c) for c in configs]
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
