#!/usr/bin/env bash
# Cold first build of examples/resnet18 as a new user gets it (issue 16): a
# clone of the committed tree with the example's cache entries and records
# removed, no per-user history, the dependencies built first (by the replay of
# the committed cache, which is also the fully tuned network compared against),
# then `cargo build --release -p resnet18` timed with autotune-build's default
# features (`tune`: the few-shot search over the shipped pre-trained model,
# without XGBoost) at the default budget. MODEL_SEEN=<file> adds a second cold
# build with that model (e.g. one trained with the ResNet-18 records too);
# BEFORE=<commit> adds one with the code (tuner, build helper, model) of that
# commit, built untimed first so that the timed build compiles no more than the
# others do. Then the networks' latency, alternating, in the same run.
# Writes bench/results/resnet18-cold-<time>.log, and beside it -records/<variant>/ with
# each cold build's full output and its record logs (packed into raw.tar.xz), so a slow
# or poor search can be read afterwards; run on an idle machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/bench/results/resnet18-cold-$(date +%Y%m%d-%H%M%S).log"
RECORDS="${OUT%.log}-records"
WORK=$(mktemp -d /var/tmp/autotune-cold18.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export CARGO_TARGET_DIR="$WORK/target" AUTOTUNE_HISTORY=""
unset AUTOTUNE AUTOTUNE_MODEL AUTOTUNE_TRIALS AUTOTUNE_SECONDS
git clone -q "$ROOT" "$WORK/src"
cd "$WORK/src"
exec > >(tee "$OUT") 2>&1
echo "# resnet18 cold build $(date -Is): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $(nproc) vCPUs; commit $(git rev-parse --short HEAD)"
AUTOTUNE=locked cargo build --release --locked -q -p resnet18 --features autotune-build/tune
cp "$CARGO_TARGET_DIR/release/resnet18" "$WORK/resnet18-committed"
ops=$(grep -o 'pub fn [a-z0-9_]*' examples/resnet18/src/ops.rs | cut -d' ' -f3)
variants="shipped"
[ -n "${MODEL_SEEN:-}" ] && variants="$variants seen"
[ -n "${BEFORE:-}" ] && variants="$variants before"
head=$(git rev-parse HEAD)
for v in $variants; do
    git checkout -q -- tuning-cache
    if [ "$v" = before ]; then
        git checkout -q "$BEFORE"
        echo "# before: commit $(git rev-parse --short HEAD)"
        AUTOTUNE=locked cargo build --release --locked -q -p resnet18 --features autotune-build/tune
    fi
    for op in $ops; do rm -f "tuning-cache/$op.toml" "tuning-cache/records/$op.jsonl"; done
    model=""
    [ "$v" = seen ] && model=$MODEL_SEEN
    start=$(date +%s.%N)
    AUTOTUNE_MODEL=$model cargo build --release --locked -p resnet18 --features autotune-build/tune \
        >"$WORK/build-$v.log" 2>&1
    end=$(date +%s.%N)
    grep -E 'warning: resnet18@.*(tuned|few-shot)' "$WORK/build-$v.log" | sed 's/^warning: resnet18@[^:]*: /  /' || true
    printf '# cold build (%s model): %.1f s, %d workloads tuned, %d trials\n' "$v" "$(echo "$end - $start" | bc)" \
        "$(grep -c 'tuned ' "$WORK/build-$v.log")" \
        "$(grep -o 'few-shot[^:]*: [0-9]* trials' "$WORK/build-$v.log" | grep -o '[0-9]* trials' | awk '{s+=$1} END {print s+0}')"
    cp "$CARGO_TARGET_DIR/release/resnet18" "$WORK/resnet18-$v"
    mkdir -p "$RECORDS/$v"
    cp "$WORK/build-$v.log" "$RECORDS/$v/build.log"
    for op in $ops; do cp "tuning-cache/records/$op.jsonl" "$RECORDS/$v/" 2>/dev/null || true; done
    git checkout -q -- tuning-cache
    git checkout -q "$head"
done
# Latency, alternating so that drift hits every binary alike.
for round in 1 2 3; do
    for b in committed $variants; do
        echo "## $b (round $round)"
        "$WORK/resnet18-$b" --threads "1,$(nproc)" | grep '^network' || true
    done
done
bash "$ROOT/bench/pack-results.sh" "$RECORDS" >/dev/null
