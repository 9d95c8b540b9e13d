#!/usr/bin/env bash
# GEMV with its reduction split into vector lanes by hand (bench/rfactor_ops.rs), against
# GEMV as written (whose space offers lanes along its reduction itself since a4fbe50) and
# the peers' GEMM with N = 1, 1 thread, in one run. Writes
# bench/results/rfactor-<time>.log.
#   bash bench/rfactor.sh        (TRIALS=48 by default)
# - Each specialisation of both operators is tuned (xgb-rank, TRIALS trials, 1 thread, no
#   transfer, not saved), then its best config timed by `cargo autotune bench`.
# - Also a fixed config of gemv_rf (8 rows a tile, one vector of the 16 lanes, A and x
#   read in place, the lanes summed by a second scalar stage): what it reaches untuned.
# - Peers: OpenBLAS and the `gemm` crate at M × 1 × K (GEMM calls, as bench/generic.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
BUILD=/tmp/autotune-rfactor
TRIALS="${TRIALS:-48}"
OUT="${OUT:-$ROOT/bench/results/rfactor-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$BUILD" "$(dirname "$OUT")"
# Each run tunes afresh (a record log left by an earlier run would be resumed).
rm -f "$BUILD"/*.jsonl
install_packages libopenblas-dev
build_peers
autotune_cli
OPS="--file $ROOT/bench/rfactor_ops.rs"
FIXED="output.block.i=4 output.order=i output.pack.0=0 output.parallel=0 output.split.l=16 output.tile.i=8 output.unroll=1 output.vector=none p.block.i=8 p.block.l=1 p.order=i-l p.pack.0=0 p.pack.1=0 p.parallel=0 p.split.ko=35 p.tile.i=8 p.tile.l=1 p.unroll=4 p.vector=l16"
PIN="taskset -c 1"
rate() { tail -1 | awk '{print $1}'; }
exec > >(tee "$OUT") 2>&1
openblas_env
echo "# rfactor GEMV $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), 1 thread, $TRIALS trials"
lscpu | grep -E 'Model name'
echo "gcc: $(gcc --version | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
$PIN "$BUILD/peak" 1 | grep fma
SHAPES="472:560 1024:1024 256:4096"
declare -A TUNED  # the best config of each "<op>-<spec>"
i=0
for s in $SHAPES; do
    m=${s%%:*}; k=${s#*:}
    for op in gemv gemv_rf; do
        echo "## $op spec $i (M=$m K=$k)"
        found="$($PIN $AT tune $OPS --op $op --spec $i --threads 1 --trials "$TRIALS" --no-transfer \
            --log "$BUILD/$op-$i.jsonl" --dir "$BUILD/tune" 2>&1 | grep -E '^(best|config):')"
        echo "$found"
        TUNED[$op-$i]="$(sed -n 's/^config: //p' <<<"$found")"
    done
    i=$((i + 1))
done
echo "# GFLOP/s: M K gemv(default) gemv(tuned) gemv_rf(fixed) gemv_rf(tuned)"
i=0
for s in $SHAPES; do
    m=${s%%:*}; k=${s#*:}
    fixed="${FIXED/p.split.ko=35/p.split.ko=$(( k / 16 < 256 ? k / 16 : 256 ))}"
    d=$($PIN $AT bench $OPS --op gemv --spec $i --dir "$BUILD/b" | rate)
    t=$($PIN $AT bench $OPS --op gemv --spec $i --config "${TUNED[gemv-$i]}" --dir "$BUILD/b" | rate)
    f=$($PIN $AT bench $OPS --op gemv_rf --spec $i --config "$fixed" --dir "$BUILD/b" | rate)
    r=$($PIN $AT bench $OPS --op gemv_rf --spec $i --config "${TUNED[gemv_rf-$i]}" --dir "$BUILD/b" | rate)
    echo "autotune $m $k $d $t $f $r"
    i=$((i + 1))
done
echo "# peers (GEMM M x 1 x K)"
PEER_SHAPES=$(for s in $SHAPES; do echo -n "${s%%:*}x1x${s#*:} "; done)
$BLASENV OPENBLAS_NUM_THREADS=1 $PIN "$BUILD/gemm_bench" openblas 1 $PEER_SHAPES
$PIN "$RUSTGEMM" gemm 1 $PEER_SHAPES
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
