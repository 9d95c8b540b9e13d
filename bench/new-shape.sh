#!/usr/bin/env bash
# A user's new GEMM shape, tuned as a default `cargo build` tunes it (issue 16):
# few-shot over the shipped pre-trained model at the build's default budget (48
# trials, 120 s) and thread count, then the winner and OpenBLAS (the best GEMM
# peer of bench/peers.sh on this machine) timed at the same threads in the same
# run, beside the FMA peak. SHAPES are MxNxK shapes no corpus or example has (default 600x700x800
# 96x1500x640). Needs libopenblas-dev; writes bench/results/new-shape-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
SHAPES=${SHAPES:-"600x700x800 96x1500x640"}
OUT="$ROOT/bench/results/new-shape-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-new-shape.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
THREADS=$(nproc)
gcc -O3 -march=native -fopenmp "$PEERS/c/gemm_bench.c" -o "$WORK/gemm_bench" -lopenblas -lm
build_peak "$WORK/peak"
export AUTOTUNE_HISTORY=""
exec > >(tee "$OUT") 2>&1
echo "# new shapes $(date -Is): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $THREADS vCPUs; threads $THREADS"
"$WORK/peak" "$THREADS" | sed 's/^/peak: /'
for shape in $SHAPES; do
    IFS=x read -r m n k <<<"$shape"
    cat >"$WORK/ops.rs" <<RS
use autotune::tensor_op;
#[tensor_op(specialize(M = $m, N = $n, K = $k))]
pub fn gemm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
    compute(|i, j| sum(|k| a[i][k] * b[k][j]))
}
RS
    json=$($AT tune --file "$WORK/ops.rs" --op gemm --tuner few-shot --trials 48 --seconds 120 \
        --no-transfer --log "$WORK/$shape.jsonl" --dir "$WORK/tune" --cache "$WORK/cache" --json)
    config=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(" ".join(f"{k}={v}" for k,v in r["best_config"].items())); print("# few-shot: %d trials in %.1f s, %.1f GFLOP/s while tuning" % (r["trials"], r["seconds"], r["best_gflops"]), file=sys.stderr)' "$json")
    for round in 1 2 3; do
        $AT bench --file "$WORK/ops.rs" --op gemm --config "$config" --threads "$THREADS" \
            --dir "$WORK/bench" | grep -i "gflop" | sed "s/^/autotune $shape: /"
        OPENBLAS_NUM_THREADS=$THREADS "$WORK/gemm_bench" openblas "$THREADS" "$shape" | grep -v '^#' | sed "s/^/openblas $shape: /"
    done
done
