#!/usr/bin/env bash
# The pre-trained cost model's corpus and its training (issue 16): every
# workload of bench/corpus.rs tuned with xgb-rank (no transfer; TRIALS trials or
# TUNE_SECONDS s each, whichever ends first; timed with the threads kernels ship with
# here), then MERGE_TRIALS more from the variants of its best config that merge
# two spatial axes (bench/merge_starts.py: a search guided by a model that has
# not seen merged configs rarely proposes one, so the corpus would hold few),
# then AHEAD_TRIALS more from the variants of its AHEAD_OF best configs that
# prefetch a copy ahead (`pack` 4; merge_starts.py's ahead_starts: the same
# reason), then STARTS_TRIALS more, the first two of them register-tile starts
# (`Space::register_tile_starts`, which a search measures first where it has
# not), the records kept one log per operator, then `cargo autotune train` on
# all of them. Rerun it to make a model for another machine or ISA level:
#   bash bench/corpus.sh                          # this CPU's best level
#   AUTOTUNE_TUNE_ISA=avx2 bash bench/corpus.sh   # capped at AVX2
#   OPS="max_pool3x3s2 row_max" bash bench/corpus.sh  # these operators only
# A resumed workload counts only this CPU's trials, so resuming another CPU's
# corpus here measures every workload again beside that CPU's records.
# Writes the logs to $LOGS (default bench/corpus/<arch>-<isa>/), resuming what
# is there, and the model to $MODEL (default
# autotune-tune/models/<arch>-<isa>.json, the file builds use). Set MODEL=- to
# only tune.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
TRIALS=${TRIALS:-48}
MERGE_TRIALS=${MERGE_TRIALS:-16}
AHEAD_TRIALS=${AHEAD_TRIALS:-8}
STARTS_TRIALS=${STARTS_TRIALS:-4}
SECONDS_EACH=${TUNE_SECONDS:-30}
# CARGO_AUTOTUNE=<binary> uses that build of cargo-autotune instead.
autotune_cli
ISA=${AUTOTUNE_TUNE_ISA:-$(grep -qw avx512f /proc/cpuinfo && echo avx512 || (grep -qw avx2 /proc/cpuinfo && echo avx2 || echo baseline))}
NAME="$(uname -m)-$ISA"
LOGS=${LOGS:-$ROOT/bench/corpus/$NAME}
MODEL=${MODEL:-$ROOT/autotune-tune/models/$NAME.json}
mkdir -p "$LOGS"
# A packed corpus resumes from its unpacked logs.
if [ -f "$LOGS/raw.tar.xz" ]; then tar -xJf "$LOGS/raw.tar.xz" -C "$LOGS" --skip-old-files; fi
# Each operator and its number of specialisations, from the source.
python3 - "$ROOT/bench/corpus.rs" >"$LOGS/workloads.txt" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
for attr, name in re.findall(r"#\[tensor_op\((.*?)\)\]\s*pub fn (\w+)", src, re.S):
    print(name, attr.count("specialize("))
PY
starts=$(mktemp)
trap 'rm -f "$starts"' EXIT
tune() {
    $AT tune --file "$ROOT/bench/corpus.rs" --op "$op" \
        --spec "$spec" --tuner xgb-rank --no-transfer --seconds "$SECONDS_EACH" \
        --log "$LOGS/$op.jsonl" --dir /tmp/autotune-corpus --json "$@"
}
report() {
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-40s %4d trials %8.1f GFLOP/s %6.1f s" % (r["workload"], r["trials"], r["best_gflops"] or 0, r["seconds"]))'
}
while read -r op n; do
    # OPS="a b": only these operators (those a generator change re-made).
    if [ -n "${OPS:-}" ] && ! grep -qw "$op" <<<"$OPS"; then continue; fi
    for ((spec = 0; spec < n; spec++)); do
        summary=$(tune --trials "$TRIALS")
        report <<<"$summary"
        # The passes from starts, each topping the workload up by its trials
        # (so that a rerun resumes rather than adds).
        total=$TRIALS
        for pass in merge ahead starts; do
            extra=$MERGE_TRIALS mode=""
            if [ "$pass" = ahead ]; then extra=$AHEAD_TRIALS mode=ahead; fi
            if [ "$pass" = starts ]; then extra=$STARTS_TRIALS; fi
            ((extra > 0)) || continue
            total=$((total + extra))
            start=()
            if [ "$pass" != starts ]; then
                python3 "$ROOT/bench/merge_starts.py" "$AT" "$ROOT/bench/corpus.rs" "$op" "$ISA" \
                    $mode <<<"$summary" >"$starts"
                if [ -s "$starts" ]; then start=(--start "$starts"); fi
            fi
            summary=$(tune --trials "$total" "${start[@]}")
            report <<<"$summary"
        done
    done
done <"$LOGS/workloads.txt"
# The logs, packed for the commit (bench/results/README.md describes the format).
rm -f "$LOGS/raw.tar.xz"
bash "$ROOT/bench/pack-results.sh" "$LOGS"
if [ "$MODEL" != "-" ]; then
    mkdir -p "$(dirname "$MODEL")"
    $AT train --file "$ROOT/bench/corpus.rs" --log "$LOGS" --out "$MODEL"
fi
