#!/usr/bin/env bash
# Tunes the blocked variants (`blocked(...)`: operators `<op>__b16_...`) of the
# operators of FILE (which declare `blocked(...)`) for this CPU, each workload started from the plain operator's entry of
# this CPU at the same shapes carried onto the split axes (bench/blocked_starts.py),
# then TRIALS trials of the search, saved to the cache; its records go to the
# cache's records/ (the history later searches learn from).
# The ResNet-18 example on blocked activations, as measured on 2026-12-05, is kept in
# bench/results/blocked-resnet18-xeon-20261205/: `git apply` its example.patch (the
# example's sources on blocked activations) and copy its .toml files (the entries this
# script tuned) into tuning-cache/ to run it.
#   FILE=examples/resnet18/src/ops.rs bash bench/tune-blocked.sh     # 1 and 2 threads
#   OPS="conv3x3_relu" THREADS=1 TRIALS=32 bash bench/tune-blocked.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
autotune_cli
EXAMPLE=${EXAMPLE:-$ROOT/examples/resnet18}
FILE=${FILE:-$EXAMPLE/src/ops.rs}
CACHE=${CACHE:-$ROOT/tuning-cache}
TRIALS=${TRIALS:-64}
ISA=$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)
CPU_ID=$(cpu_id)
WORK=$(mktemp -d /tmp/autotune-blocked.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ops=$($AT space --file "$FILE" | sed -nE 's/^([a-z0-9_]+__b16[a-z0-9_]*)\[.*/\1/p' | sort -u)
for variant in $ops; do
    base=${variant%%__b16*}
    [ -n "${OPS:-}" ] && [[ " $OPS " != *" $base "* ]] && continue
    mapfile -t vw < <($AT space --file "$FILE" --op "$variant" | sed -nE 's/^(\S.*\]): [0-9]+ configs.*/\1/p')
    mapfile -t bw < <($AT space --file "$FILE" --op "$base" | sed -nE 's/^(\S.*\]): [0-9]+ configs.*/\1/p')
    for threads in ${THREADS:-1 2}; do
        for i in "${!vw[@]}"; do
            plain=$(python3 - "$CACHE/$base.toml" "${bw[$i]}" "$ISA" "$threads" "$CPU_ID" <<'PY'
import json, sys, tomllib
path, workload, isa, threads, cpu = sys.argv[1:6]
try:
    entries = tomllib.load(open(path, "rb")).get("entry", [])
except FileNotFoundError:
    entries = []
found = [e for e in entries if e["workload"] == workload and e["target"].endswith("/" + isa)
         and str(e.get("threads")) == threads and e.get("cpu_id") == cpu]
print(json.dumps(found[0]["config"] if found else {}))
PY
)
            start="$WORK/$variant.$i.$threads"
            if [ "$plain" != "{}" ]; then
                python3 "$ROOT/bench/blocked_starts.py" "$AT" "$FILE" "$variant" "${vw[$i]}" "$plain" >"$start"
            else
                : >"$start"
            fi
            echo "== ${vw[$i]} (from ${bw[$i]}: $(wc -l <"$start") starts), $threads thread(s) $(date -Is)"
            $AT tune --file "$FILE" --op "$variant" --spec "$i" --threads "$threads" \
                --trials "$TRIALS" --save --cache "$CACHE" $( [ -s "$start" ] && echo --start "$start" ) \
                --log "$WORK/$variant.$i.$threads.jsonl" --history "$CACHE/records" \
                --dir /tmp/autotune-tune-blocked | grep -E "^(best|confirmed)"
            cat "$WORK/$variant.$i.$threads.jsonl" >>"$CACHE/records/$variant.jsonl"
        done
    done
done
