#!/usr/bin/env bash
# What constant inputs (issue 19) gain: the ResNet-18 3x3 conv + bias + ReLU at the shapes
# of C9 (C256 14x14 K256) and C12 (C512 7x7 K512), as three operators, each tuned the same
# way (xgb-rank, TRIALS per workload, no transfer, THREADS kernel threads) and then timed
# by the harness, alternating, in one run:
#   plain    weights as the user has them (K, C, R, S); a pack of them runs on every call;
#   constant the same operator with `constant(w, b)`: a pack is made once per handle;
#   blocked  the example's hand-blocked `conv3x3_relu_kb` (weights given in (KB, C, R, S, 16)).
# Then the same config as `plain` and as `constant` (each of the two winners): the same
# kernel, whose copies of the weights run on every call or once per handle.
# Writes bench/results/constants-<time>.log.
#   bash bench/constants.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
TRIALS="${TRIALS:-64}"
THREADS="${THREADS:-1}"
OUT="$ROOT/bench/results/constants-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-constants.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
build_peak "$WORK/peak"
cat >"$WORK/ops.rs" <<'RS'
use autotune::tensor_op;

#[tensor_op(R = 3, S = 3, specialize(C = 256, H = 14, W = 14, K = 256), specialize(C = 512, H = 7, W = 7, K = 512))]
pub fn plain(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> = compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

#[tensor_op(R = 3, S = 3, constant(w, b), specialize(C = 256, H = 14, W = 14, K = 256), specialize(C = 512, H = 7, W = 7, K = 512))]
pub fn constant(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> = compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

#[tensor_op(R = 3, S = 3, L = 16, specialize(C = 256, H = 14, W = 14, KB = 16), specialize(C = 512, H = 7, W = 7, KB = 32))]
pub fn blocked(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (KB, C, R, S, L)>, b: Tensor<f32, (KB, L)>) -> Tensor<f32, (KB, L, H, W)> {
    let y: Tensor<f32, (KB, L, H, W)> = compute(|kb, l, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[kb][c][r][s][l]));
    compute(|kb, l, h, v| max(y[kb][l][h][v] + b[kb][l], 0.0))
}
RS
OPS="plain constant blocked"
if [ "$THREADS" = 1 ]; then PIN="taskset -c 1"; else PIN="taskset -c 0,1"; fi
exec > >(tee "$OUT") 2>&1
echo "# constants $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs); $TRIALS trials, $THREADS thread(s)"
export AUTOTUNE_HISTORY=""
for spec in 0 1; do
  for op in $OPS; do
    json=$($AT tune --file "$WORK/ops.rs" --op "$op" --spec "$spec" --tuner xgb-rank --trials "$TRIALS" \
      --threads "$THREADS" --no-transfer --save --cache "$WORK/cache" --log "$WORK/$op.jsonl" \
      --dir "$WORK/tune" --json)
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(" ".join(f"{k}={v}" for k,v in r["best_config"].items()))' \
      "$json" > "$WORK/config-$op-$spec"
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%d trials in %.1f s, best %.2f GFLOP/s" % (r["trials"], r["seconds"], r["best_gflops"]))' \
      "$json" | sed "s/^/tune $op spec $spec: /"
    # Compiled now, outside the timed part.
    $AT bench --file "$WORK/ops.rs" --op "$op" --spec "$spec" --cached --cache "$WORK/cache" \
      --threads "$THREADS" --samples 1 --dir "$WORK/bench-$op-$spec" > /dev/null
  done
done
$PIN "$WORK/peak" "$THREADS" | grep fma
for round in 1 2 3; do
  for spec in 0 1; do
    for op in $OPS; do
      $PIN $AT bench --file "$WORK/ops.rs" --op "$op" --spec "$spec" --cached --cache "$WORK/cache" \
        --threads "$THREADS" --samples 9 --dir "$WORK/bench-$op-$spec" | tail -1 | sed "s/^/round $round $op spec $spec: /"
    done
  done
done
echo "# the same config as plain and as constant (each of the two winners)"
for round in 1 2 3; do
  for spec in 0 1; do
    for winner in plain constant; do
      for op in plain constant; do
        $PIN $AT bench --file "$WORK/ops.rs" --op "$op" --spec "$spec" --config "$(cat "$WORK/config-$winner-$spec")" \
          --threads "$THREADS" --samples 9 --dir "$WORK/same-$op-$winner-$spec" | tail -1 \
          | sed "s/^/round $round $winner's config as $op spec $spec: /"
      done
    done
  done
done
$PIN "$WORK/peak" "$THREADS" | grep fma
echo "# what each winner packs (load sites: 0 x, 1 w)"
for f in "$WORK"/cache/*.toml; do grep -E '^workload =|pack' "$f"; done
echo "written to $OUT"
