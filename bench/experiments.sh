#!/usr/bin/env bash
# The cost-model experiments (issue 5; AutoTVM paper, RQ1/RQ3/RQ4): tuning runs
# of every tuner on GEMM 512³ and 1024³ and the ResNet-18 conv layers C2, C6,
# C9, single-threaded, several seeds; then TVM MetaSchedule on some of them in
# the same session; then bench/experiments.py writes the CSV, the plots and the
# summary. Run on an otherwise idle machine (it takes about 1.5 h by default).
#
#   TRIALS=96 SEEDS="1 2 3" bash bench/experiments.sh
#   TVM_WORKLOADS="" bash bench/experiments.sh        # without TVM
#   REPORT_ONLY=bench/results/experiments-<stamp> bash bench/experiments.sh
#   OUT=bench/results/experiments-<stamp> SEEDS="2 3" bash bench/experiments.sh  # continue
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
if [ -n "${REPORT_ONLY:-}" ]; then
  exec python3 "$ROOT/bench/experiments.py" "$REPORT_ONLY"
fi
STAMP=$(date +%Y%m%d-%H%M%S)
# OUT=<an earlier run's directory> continues it: runs resume from their logs.
OUT="${OUT:-$ROOT/bench/results/experiments-$STAMP}"
mkdir -p "$OUT"
# A packed run (bench/results/README.md) continues from its unpacked record logs.
if [ -f "$OUT/raw.tar.xz" ]; then tar -xJf "$OUT/raw.tar.xz" -C "$OUT" --skip-old-files; fi
autotune_cli
TUNERS="${TUNERS:-xgb-rank random genetic xgb-reg xgb-rank-nodiv}"
# name, operator, specialisation index in bench/ops.rs
WORKLOADS="${WORKLOADS:-gemm512:gemm:5 conv-c9:conv3x3:1 conv-c6:conv3x3:2 conv-c2:conv3x3:0 gemm1024:gemm:0}"
exec > >(tee -a "$OUT/run.log") 2>&1
echo "# experiments $(date -Is); $(lscpu | grep 'Model name'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# trials ${TRIALS:-96}, seeds ${SEEDS:-1 2 3}, tuners $TUNERS"
# Seeds outermost: a run cut short still has every tuner on every workload.
for seed in ${SEEDS:-1 2 3}; do
  for wl in $WORKLOADS; do
    IFS=: read -r name op spec <<<"$wl"
    for tuner in $TUNERS; do
      echo "$(date +%T) $name $tuner seed $seed (load $(cut -d' ' -f1 /proc/loadavg))"
      $AT tune --file "$ROOT/bench/ops.rs" --op "$op" --spec "$spec" --tuner "$tuner" \
        --seed "$seed" --trials "${TRIALS:-96}" --batch 16 --threads 1 \
        --log "$OUT/$name.$tuner.$seed.jsonl" --dir /tmp/autotune-experiments --json --no-transfer \
        >"$OUT/$name.$tuner.$seed.json"
    done
  done
done

# TVM MetaSchedule (XGBoost cost model + evolutionary search), one core, the
# peer script's setup (a venv under /tmp). Its tuning database keeps every
# measurement in order, which experiments.py turns into a curve.
TVM="$ROOT/../shared/peers/tuners/tvm_tune.py"
if [ -n "${TVM_WORKLOADS-matmul512 conv64}" ] && [ -f "$TVM" ]; then
  if [ ! -x /tmp/peers-venv-tvm/bin/python ]; then
    python3 -m venv /tmp/peers-venv-tvm
    /tmp/peers-venv-tvm/bin/pip install -q "apache-tvm==0.27.0.post1" \
      "apache-tvm-ffi==0.1.14.post0" xgboost-cpu cloudpickle psutil tornado numpy
  fi
  for wl in ${TVM_WORKLOADS-matmul512 conv64}; do
    wd="$OUT/tvm-$wl"
    echo "$(date +%T) tvm $wl trials ${TVM_TRIALS:-256}"
    TVM_NUM_THREADS=1 taskset -c 1 /tmp/peers-venv-tvm/bin/python "$TVM" --workload "$wl" \
      --trials "${TVM_TRIALS:-256}" --cores 1 --work-dir "$wd" >"$OUT/tvm-$wl.log" 2>&1 ||
      echo "tvm $wl failed (see $OUT/tvm-$wl.log)"
    grep '^RESULT' "$OUT/tvm-$wl.log" || true
    # Keep only what the report reads (the database), not TVM's logs and artefacts.
    find "$wd" -type f ! -name 'database_*.json' -delete 2>/dev/null || true
  done
fi
echo "$(date +%T) done"
python3 "$ROOT/bench/experiments.py" "$OUT"
# The raw data, packed for the commit (bench/results/README.md).
bash "$ROOT/bench/pack-results.sh" "$OUT"
