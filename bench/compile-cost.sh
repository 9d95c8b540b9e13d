#!/usr/bin/env bash
# Candidates with large C in the shipped model's corpus: for every logged trial
# of bench/corpus/<arch>-<isa>/ (the records are unpacked to a scratch
# directory), the size of its C at that level, then bench/compile_cost.py:
# how much compile time the candidates over a multiple of their workload's
# median size took, and whether any was a workload's best (the evidence for
# autotune_tune::compile_cost). No measurement: safe beside other work.
#   bash bench/compile-cost.sh              # this CPU's best level's corpus
#   ISA=avx2 bash bench/compile-cost.sh
# Writes bench/results/compile-cost-<isa>-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ISA=${ISA:-$(grep -qw avx512f /proc/cpuinfo && echo avx512 || echo avx2)}
CORPUS="$ROOT/bench/corpus/$(uname -m)-$ISA"
OUT="$ROOT/bench/results/compile-cost-$ISA-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-compile-cost.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
tar -xJf "$CORPUS/raw.tar.xz" -C "$WORK"
cd "$ROOT"
cargo run -q --release --locked -p cargo-autotune --example source_sizes -- \
    bench/corpus.rs "$(uname -m)-unknown-linux-gnu/$ISA" "$WORK"/*.jsonl >"$WORK/sizes.tsv"
{
    echo "# compile cost of large candidates $(date -Is): corpus $CORPUS, commit $(git rev-parse --short HEAD)"
    python3 bench/compile_cost.py "$WORK/sizes.tsv"
} | tee "$OUT"
