#!/usr/bin/env bash
# A user's new GEMM or conv shape, tuned as a default `cargo build` tunes it (issue
# 16): few-shot over the shipped pre-trained model at the build's default budget (48
# trials, 120 s) and thread count, then the winner and the best peer of
# bench/peers.sh on this machine (OpenBLAS for GEMM, oneDNN's direct conv for the
# conv) timed at the same threads in the same run, beside the FMA peak, three
# alternating rounds. SHAPES are MxNxK GEMM shapes and CONVS C,H,K 3x3 convs (stride
# 1, zero padding 1, H = W) that no corpus or example has (default 600x700x800
# 96x1500x640, and 80,48,144). Needs libopenblas-dev and libdnnl-dev; writes
# bench/results/new-shape-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
SHAPES=${SHAPES-"600x700x800 96x1500x640"}
CONVS=${CONVS-"80,48,144"}
OUT="$ROOT/bench/results/new-shape-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-new-shape.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
THREADS=$(nproc)
gcc -O3 -march=native -fopenmp "$PEERS/c/gemm_bench.c" -o "$WORK/gemm_bench" -lopenblas -lm
g++ -O3 -march=native -fopenmp "$PEERS/c/dnnl_conv.cpp" -o "$WORK/dnnl_conv" -ldnnl
build_peak "$WORK/peak"
export AUTOTUNE_HISTORY=""
exec > >(tee "$OUT") 2>&1
echo "# new shapes $(date -Is): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $THREADS vCPUs; threads $THREADS"
"$WORK/peak" "$THREADS" | sed 's/^/peak: /'
# Tunes operator $2 of file $1 as a default build does; sets CONFIG to the winner.
tune_new() {
    local json
    json=$($AT tune --file "$1" --op "$2" --tuner few-shot --trials 48 --seconds 120 \
        --no-transfer --log "$1.jsonl" --dir "$WORK/tune" --cache "$WORK/cache" --json)
    CONFIG=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(" ".join(f"{k}={v}" for k,v in r["best_config"].items())); print("# few-shot: %d trials in %.1f s, %.1f GFLOP/s while tuning" % (r["trials"], r["seconds"], r["best_gflops"]), file=sys.stderr)' "$json")
}
# Times CONFIG of operator $2 of file $1; its lines start with $3.
bench_new() {
    $AT bench --file "$1" --op "$2" --config "$CONFIG" --threads "$THREADS" \
        --dir "$WORK/bench" | grep -i "gflop" | sed "s/^/autotune $3: /"
}
for shape in $SHAPES; do
    IFS=x read -r m n k <<<"$shape"
    gemm_op_file "$WORK/gemm-$shape.rs" "$m" "$n" "$k"
    tune_new "$WORK/gemm-$shape.rs" gemm
    for round in 1 2 3; do
        bench_new "$WORK/gemm-$shape.rs" gemm "$shape"
        OPENBLAS_NUM_THREADS=$THREADS "$WORK/gemm_bench" openblas "$THREADS" "$shape" | grep -v '^#' | sed "s/^/openblas $shape: /"
    done
done
for conv in $CONVS; do
    IFS=, read -r c h k <<<"$conv"
    write_conv3x3 "$WORK/conv-$conv.rs" "$c" "$h" "$k"
    tune_new "$WORK/conv-$conv.rs" conv3x3
    for round in 1 2 3; do
        bench_new "$WORK/conv-$conv.rs" conv3x3 "conv $conv"
        # The primitive alone (its own blocked layouts), and with the reorders from
        # and to NCHW that a caller with our kernel's layout would add.
        OMP_NUM_THREADS=$THREADS "$WORK/dnnl_conv" direct "$c,$h,$k,3,1,1" | grep '^RESULT' |
            sed -E "s/.* gflops_med=([0-9.]+).* e2e_gflops_med=([0-9.]+).* impl=(.*)/onednn conv $conv: \1 GFLOP\/s, \2 with NCHW reorders (\3)/"
    done
done
