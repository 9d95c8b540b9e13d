#!/usr/bin/env bash
# The GEMM register-tile start, before and after it took GotoBLAS's shape (issue
# 16): on each GEMM shape, at 1 and 2 threads, in one sweep per shape and thread
# count (the configs alternate within it), the start as it was (the vector along
# C's rows, B copied whole with its next slice prefetched, `pack.1=4`, two loops
# parallel) with one and two vectors, and as it is (B copied one block at a time,
# `pack.1=3`, inside the reduction's blocks, `order=/j-i`, the columns' tiles
# parallel); the unroll depths of each; beside the FMA peak. Writes
# bench/results/gemm-starts-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/gemm-starts-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-gemm-starts.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
build_peak "$WORK/peak"
# MxNxK, and the rows of a one-vector and a two-vector tile (the starts' own).
SHAPES=${SHAPES-"256x256x256:16:8 512x512x512:16:8 127x255x511:16:8 600x700x800:12:12 96x1500x640:16:12"}
exec > >(tee "$OUT") 2>&1
echo "# GEMM starts $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $(nproc) vCPUs"
for threads in 1 2; do
    "$WORK/peak" "$threads" | grep fma | sed 's/^/peak: /'
    for spec in $SHAPES; do
        IFS=: read -r shape one two <<<"$spec"
        IFS=x read -r m n k <<<"$shape"
        gemm_op_file "$WORK/gemm.rs" "$m" "$n" "$k"
        common="output.block.i=1 output.block.j=1 output.pack.0=0 output.split.k=$k output.unroll=2|4|8 output.vector=j16"
        {
            for tile in "output.tile.i=$one output.tile.j=1" "output.tile.i=$two output.tile.j=2"; do
                echo "$common $tile output.order=j-i output.pack.1=4 output.parallel=2"
                echo "$common $tile output.order=/j-i output.pack.1=3 output.parallel=1"
            done
        } >"$WORK/configs.txt"
        $AT sweep --file "$WORK/gemm.rs" --op gemm --threads "$threads" --samples 7 \
            --configs "$WORK/configs.txt" --dir "$WORK/sweep"
    done
done
