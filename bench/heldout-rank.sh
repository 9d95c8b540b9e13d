#!/usr/bin/env bash
# How well the pre-trained cost model ranks configs of operator families it
# never saw (issue 16): for each operator of a committed corpus
# (bench/corpus/<arch>-<isa>/), a model is trained on the other operators'
# records (`cargo autotune train`, rank objective, as shipped) and ranks the
# held-out operator's records (`cargo autotune rank`): pairwise accuracy and
# recall of the 8 best, per family and their mean. No tuning: the corpus is
# replayed, so it runs in a minute and is deterministic. Appends to
# $OUT (default bench/results/heldout-rank-<time>.log): run it before and after a
# change with the same OUT to get both in one file.
#   bash bench/heldout-rank.sh
#   CARGO_AUTOTUNE=/path/to/other/cargo-autotune LABEL=before bash bench/heldout-rank.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT=${OUT:-$ROOT/bench/results/heldout-rank-$(date +%Y%m%d-%H%M%S).log}
autotune_cli
LABEL=${LABEL:-$(cd "$ROOT" && git rev-parse --short HEAD)}
WORK=$(mktemp -d /tmp/autotune-heldout.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
{
    echo "# held-out ranking $(date -Is), $LABEL ($CARGO_AUTOTUNE): leave one operator family out, k=8"
    for isa in ${ISAS:-avx512 avx2}; do
        corpus="$WORK/$isa"
        mkdir -p "$corpus"
        tar xJf "$ROOT/bench/corpus/x86_64-$isa/raw.tar.xz" -C "$corpus"
        echo "## x86_64-$isa"
        printf '%-24s %8s %9s %9s\n' family trials pairwise recall@8
        for log in "$corpus"/*.jsonl; do
            family=$(basename "$log" .jsonl)
            train="$WORK/train-$isa-$family"
            mkdir -p "$train"
            for other in "$corpus"/*.jsonl; do
                [ "$other" = "$log" ] || ln -s "$other" "$train/"
            done
            $AT train --file "$ROOT/bench/corpus.rs" --log "$train" --cpu corpus \
                --target "x86_64-unknown-linux-gnu/$isa" --out "$train.json" >/dev/null
            # A family none of whose records is current (its kernels re-made
            # by a later generator) has nothing to rank: said, and left out.
            if ! $AT rank --model "$train.json" --file "$ROOT/bench/corpus.rs" --log "$log" \
                >"$train.rank" 2>/dev/null; then
                echo "# $family: no current records" >&2
                continue
            fi
            awk -v f="$family" '$1 == "mean" { printf "%-24s %8d %9.3f %9.3f\n", f, $2, $3, $4 }' "$train.rank"
        done | tee "$WORK/$isa.txt"
        awk '{ p += $3; r += $4; n++ } END { printf "%-24s %8s %9.3f %9.3f\n", "mean of families", n, p / n, r / n }' "$WORK/$isa.txt"
    done
} | tee -a "$OUT"
echo "written to $OUT"
