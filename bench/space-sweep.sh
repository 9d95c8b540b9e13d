#!/usr/bin/env bash
# The long form of the space invariant: every config of a space lowers to a
# correct kernel. Runs the random-configs test (release) ROUNDS times with fresh
# seeds and CASES configs per workload each, and writes every round's seed and
# count to bench/results/space-sweep-<date>.log (a failing seed reproduces with
# AUTOTUNE_PROPTEST_SEED=<seed> AUTOTUNE_PROPTEST_CASES=<cases>).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
CASES=${CASES:-10}
OUT=bench/results/space-sweep-$(date +%Y%m%d-%H%M%S).log
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
    echo "rounds: $ROUNDS, configs per workload per round: $CASES (+ the default config)"
} | tee "$OUT"
total=0
for round in $(seq 1 "$ROUNDS"); do
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    log=$(AUTOTUNE_PROPTEST_SEED=$seed AUTOTUNE_PROPTEST_CASES=$CASES \
        cargo test --locked --release -p autotune-tune --test space random_configs -- --nocapture 2>&1) ||
        { echo "$log" | tail -30 | tee -a "$OUT"; echo "round $round: FAILED, seed $seed" | tee -a "$OUT"; exit 1; }
    n=$(grep -o 'random configs: [0-9]* configs checked' <<<"$log" | grep -o '[0-9]*' | head -1)
    skipped=$(grep -o '[0-9]* skipped at tuning' <<<"$log" | grep -o '[0-9]*' | head -1)
    total=$((total + n))
    echo "round $round: seed $seed, $n kernels checked, all correct, $skipped skipped at tuning's limits (total $total)" | tee -a "$OUT"
done
echo "all rounds: $total kernels checked against the reference, none wrong" | tee -a "$OUT"
