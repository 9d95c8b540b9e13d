#!/usr/bin/env bash
# Few-shot tuning with a pre-trained model, on workloads the model never saw
# (issue 16). For each held-out case (a workload of bench/corpus.rs), a model
# is trained on the corpus without the case's whole operator family
# (leave-one-family-out), its ranking quality on the family's corpus records
# is measured (`cargo autotune rank`, beside a regression-trained alternative
# and the shipped model that saw them),
# and then, several seeds each: few-shot with that model (stops on its own, at
# most FEW_TRIALS), xgb-rank from scratch, genetic and random (TRIALS each),
# and one xgb-rank run of REF_TRIALS as the reference best. bench/fewshot.py
# writes the summary. Timed with the threads kernels ship with, as builds tune.
#
#   bash bench/fewshot.sh                    # after bench/corpus.sh
#   CASES="gemm:gemm:6" SEEDS="1" bash bench/fewshot.sh
#   REPORT_ONLY=bench/results/fewshot-<stamp> bash bench/fewshot.sh
#   OUT=bench/results/fewshot-<stamp> TUNERS="" bash bench/fewshot.sh  # continue a run
#     (a finished run, its --json summary written, is not run again; one cut short
#     resumes from its log; delete a tuner's logs to run it again)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
if [ -n "${REPORT_ONLY:-}" ]; then
    exec python3 "$ROOT/bench/fewshot.py" "$REPORT_ONLY"
fi
ISA=${AUTOTUNE_TUNE_ISA:-$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)}
CORPUS=${CORPUS:-$ROOT/bench/corpus/$(uname -m)-$ISA}
SHIPPED=${SHIPPED:-$ROOT/autotune-tune/models/$(uname -m)-$ISA.json}
# name:operator:specialisation in bench/corpus.rs
CASES=${CASES:-"gemm-200x300x400:gemm:6 conv3x3-c96:conv3x3:1 conv1x1s2-c48:conv1x1s2:0"}
TRIALS=${TRIALS:-48}
FEW_TRIALS=${FEW_TRIALS:-64}
REF_TRIALS=${REF_TRIALS:-128}
SEEDS=${SEEDS:-"1 2 3"}
TUNERS=${TUNERS-"xgb-rank genetic random"}
OUT=${OUT:-$ROOT/bench/results/fewshot-$(date +%Y%m%d-%H%M%S)}
autotune_cli
export AUTOTUNE_HISTORY=""
# A packed corpus (its raw.tar.xz, as committed) is read from a scratch copy.
if [ -f "$CORPUS/raw.tar.xz" ]; then
    unpacked=$(mktemp -d /tmp/autotune-fewshot-corpus.XXXXXX)
    trap 'rm -rf "$unpacked"' EXIT
    tar -xJf "$CORPUS/raw.tar.xz" -C "$unpacked"
    CORPUS=$unpacked
fi
mkdir -p "$OUT/models"
exec > >(tee -a "$OUT/run.log") 2>&1
echo "# fewshot $(date -Is); $(lscpu | grep 'Model name' | xargs), $(nproc) vCPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# corpus $CORPUS; trials $TRIALS, few-shot at most $FEW_TRIALS, reference $REF_TRIALS; seeds $SEEDS"
tune() { # name tuner seed trials [flags...]
    local name=$1 tuner=$2 seed=$3 trials=$4
    shift 4
    # Resumed, a few-shot run that stopped on its own would search on past its stop.
    [ -s "$OUT/$name.$tuner.$seed.json" ] && return
    echo "$(date +%T) $name $tuner seed $seed (load $(cut -d' ' -f1 /proc/loadavg))"
    $AT tune --file "$ROOT/bench/corpus.rs" --tuner "$tuner" --seed "$seed" --trials "$trials" \
        --no-transfer --cache "$OUT/no-cache" --dir /tmp/autotune-fewshot \
        --log "$OUT/$name.$tuner.$seed.jsonl" --json "$@" >"$OUT/$name.$tuner.$seed.json"
}
for case in $CASES; do
    IFS=: read -r name op spec <<<"$case"
    model="$OUT/models/without-$op.json"
    logs=()
    for f in "$CORPUS"/*.jsonl; do [ "$(basename "$f")" = "$op.jsonl" ] || logs+=(--log "$f"); done
    [ -f "$model" ] || $AT train --file "$ROOT/bench/corpus.rs" "${logs[@]}" --out "$model"
    # The alternative: the same trees fitted by regression on relative throughput.
    [ -f "${model%.json}-reg.json" ] || $AT train --file "$ROOT/bench/corpus.rs" "${logs[@]}" \
        --objective reg --out "${model%.json}-reg.json"
    $AT rank --model "$model" --file "$ROOT/bench/corpus.rs" --log "$CORPUS/$op.jsonl" >"$OUT/$name.rank-heldout.txt"
    $AT rank --model "${model%.json}-reg.json" --file "$ROOT/bench/corpus.rs" --log "$CORPUS/$op.jsonl" \
        >"$OUT/$name.rank-heldout-reg.txt"
    $AT rank --model "$SHIPPED" --file "$ROOT/bench/corpus.rs" --log "$CORPUS/$op.jsonl" >"$OUT/$name.rank-seen.txt"
    if [ ! -f "$OUT/$name.reference.0.jsonl" ]; then
        tune "$name" xgb-rank 0 "$REF_TRIALS" --op "$op" --spec "$spec"
        mv "$OUT/$name.xgb-rank.0.jsonl" "$OUT/$name.reference.0.jsonl"
        mv "$OUT/$name.xgb-rank.0.json" "$OUT/$name.reference.0.json"
    fi
done
# Seeds outermost: a run cut short still has every tuner on every case.
for seed in $SEEDS; do
    for case in $CASES; do
        IFS=: read -r name op spec <<<"$case"
        tune "$name" few-shot "$seed" "$FEW_TRIALS" --op "$op" --spec "$spec" --model "$OUT/models/without-$op.json"
        for tuner in $TUNERS; do
            tune "$name" "$tuner" "$seed" "$TRIALS" --op "$op" --spec "$spec"
        done
    done
done
echo "$(date +%T) done"
python3 "$ROOT/bench/fewshot.py" "$OUT"
bash "$ROOT/bench/pack-results.sh" "$OUT"
