#!/usr/bin/env bash
# What a channel-blocked activation layout (issue 19, deliverables 3 and 4) would buy
# with today's schedule space: three ResNet-18 layers timed as the example ships them
# (NCHW, the committed cache's config for this CPU at 1 thread) and as hand-blocked
# operators (bench/blocked_ops.rs, nChw16c) with hand-picked configs (vectors along
# the output channels of a block, the input read in place as broadcasts; C9 twice: with
# cache blocks that keep its weights near, and with the 1x1 layers' blocks), alternating,
# ROUNDS rounds, beside the FMA peak and oneDNN's direct convolution (its own blocked
# layouts; `gflops_med` is the convolution alone) of each round. Writes
# bench/results/blocked-<time>.log.
#   bash bench/blocked.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
ROUNDS="${ROUNDS:-3}"
OUT="$ROOT/bench/results/blocked-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-blocked.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
install_packages libdnnl-dev
build_peak "$WORK/peak"
g++ -O3 -march=native -fopenmp "$PEERS/c/dnnl_conv.cpp" -o "$WORK/dnnl_conv" -ldnnl
# The epilogue stage is fused into the convolution's store, so its knobs are dead.
OUT_KNOBS="output.block.h=1,output.block.kb=1,output.block.ki=1,output.block.v=1,output.order=kb-h-v-ki,output.parallel=0,output.tile.h=1,output.tile.kb=1,output.tile.ki=1,output.tile.v=1,output.vector=none"
# Vectors of 16 output channels, the channel within an input block innermost and
# unrolled by 4, weights packed; tiles and cache blocks per layer below.
TILE="y.block.ki=1,y.block.v=1,y.fuse=1,y.pack.1=1,y.parallel=1,y.split.ci=16,y.tile.h=1,y.tile.ki=1,y.unroll=4,y.vector=ki16"
{
    echo "# blocked activations vs NCHW: $(date -u +%FT%TZ), $(lscpu | sed -n 's/^Model name: *//p'), commit $(git -C "$ROOT" rev-parse --short HEAD), 1 thread"
    for round in $(seq "$ROUNDS"); do
        echo "## round $round, load $(cut -d' ' -f1 /proc/loadavg)"
        "$WORK/peak" 1 | grep fma
        # layer, the example's operator and specialisation, the blocked one and its config
        while read -r layer op spec bop bspec cfg; do
            nchw=$(cd "$ROOT/examples/resnet18" && $AT bench --op "$op" --spec "$spec" --cached \
                --cache ../../tuning-cache --threads 1 --dir "$WORK/p" 2>&1 | tail -1)
            blocked=$($AT bench --file "$ROOT/bench/blocked_ops.rs" --op "$bop" --spec "$bspec" \
                --config "$OUT_KNOBS,$TILE,$cfg" --threads 1 --dir "$WORK/b" 2>&1 | tail -1)
            echo "$layer nchw (cached): $nchw"
            echo "$layer blocked ($cfg): $blocked"
        done <<'LAYERS'
C5 conv1x1s2_bias 0 conv1x1s2_blocked 0 y.order=kb-h-v-ki,y.tile.kb=2,y.tile.v=7,y.block.kb=8,y.block.h=1,y.pack.0=0,y.split.cb=4
C11 conv1x1s2_bias 2 conv1x1s2_blocked 1 y.order=kb-h-v-ki,y.tile.kb=2,y.tile.v=7,y.block.kb=32,y.block.h=1,y.pack.0=0,y.split.cb=16
C9 conv3x3_relu 2 conv3x3_blocked 0 y.order=h-v-ki-kb,y.tile.kb=1,y.tile.v=14,y.block.kb=4,y.block.h=4,y.pack.0=2,y.split.cb=16,y.split.r=3,y.split.s=3
C9 conv3x3_relu 2 conv3x3_blocked 0 y.order=kb-h-v-ki,y.tile.kb=2,y.tile.v=7,y.block.kb=16,y.block.h=1,y.pack.0=2,y.split.cb=16,y.split.r=3,y.split.s=3
LAYERS
        OMP_NUM_THREADS=1 OMP_PROC_BIND=true "$WORK/dnnl_conv" direct 64,56,128,1,2,0 256,14,512,1,2,0 \
            256,14,256,3,1,1 | grep RESULT | sed 's/ e2e_.*impl=/ impl=/'
    done
} | tee "$OUT"
echo "wrote $OUT"
