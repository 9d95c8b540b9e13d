#!/usr/bin/env bash
# The transfer-learning experiment (issue 7; AutoTVM paper §6.3): a history of
# ResNet-18 conv layers C1–C6 tuned first, then C7, C8, C9 and a 1024³ GEMM (a
# cross-operator target) tuned with and without it, single-threaded, several
# seeds; bench/transfer.py writes the CSV, plots and summary. Run on an
# otherwise idle machine (about 30 min by default).
#
#   HISTORY_TRIALS=96 TRIALS=64 SEEDS="1 2 3" bash bench/transfer.sh
#   REPORT_ONLY=bench/results/transfer-<stamp> bash bench/transfer.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
if [ -n "${REPORT_ONLY:-}" ]; then
  exec python3 "$ROOT/bench/transfer.py" "$REPORT_ONLY"
fi
STAMP=$(date +%Y%m%d-%H%M%S)
OUT="$ROOT/bench/results/transfer-$STAMP"
mkdir -p "$OUT/history"
autotune_cli
# No per-user store: the history is exactly what this script tunes.
export AUTOTUNE_HISTORY=""
exec > >(tee "$OUT/run.log") 2>&1
echo "# transfer $(date -Is); $(lscpu | grep 'Model name'); load $(cut -d' ' -f1-3 /proc/loadavg)"
tune() { # name op spec seed log [flags...]
  local name=$1 op=$2 spec=$3 seed=$4 log=$5
  shift 5
  echo "$(date +%T) $name seed $seed $* (load $(cut -d' ' -f1 /proc/loadavg))"
  $AT tune --file "$ROOT/bench/ops.rs" --op "$op" --spec "$spec" --tuner xgb-rank \
    --seed "$seed" --batch 16 --threads 1 --dir /tmp/autotune-transfer --log "$log" \
    --json "$@" >"${log%.jsonl}.json"
}
# History: C1–C6, one run each, without transfer.
for wl in c1:conv7x7s2:0 c2:conv3x3:0 c3:conv1x1:0 c4:conv3x3s2:0 c5:conv1x1s2:0 c6:conv3x3:2; do
  IFS=: read -r name op spec <<<"$wl"
  tune "$name" "$op" "$spec" 1 "$OUT/history/$name.jsonl" --trials "${HISTORY_TRIALS:-96}" --no-transfer
done
# Targets, with and without the history.
for seed in ${SEEDS:-1 2 3}; do
  for wl in c7:conv3x3s2:1 c8:conv1x1s2:1 c9:conv3x3:1 gemm1024:gemm:0; do
    IFS=: read -r name op spec <<<"$wl"
    tune "$name" "$op" "$spec" "$seed" "$OUT/$name.plain.$seed.jsonl" --trials "${TRIALS:-64}" --no-transfer
    tune "$name" "$op" "$spec" "$seed" "$OUT/$name.transfer.$seed.jsonl" --trials "${TRIALS:-64}" \
      --history "$OUT/history"
  done
done
echo "$(date +%T) done"
python3 "$ROOT/bench/transfer.py" "$OUT"
# The raw data, packed for the commit (bench/results/README.md).
bash "$ROOT/bench/pack-results.sh" "$OUT"
