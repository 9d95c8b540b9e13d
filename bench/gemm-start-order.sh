#!/usr/bin/env bash
# The order of the GEMM register-tile starts (issue 16): on each GEMM shape, at 1
# and 2 threads, every start the generator proposes for that thread count
# (`cargo autotune space --starts --threads N`) measured in one sweep, listed in
# the generator's order with its GFLOP/s, beside the FMA peak. A search measures the generator's first start
# (and the model's pick) in its first batch, so the first should be at or near
# the best. Writes bench/results/gemm-start-order-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/gemm-start-order-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-gemm-start-order.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
build_peak "$WORK/peak"
SHAPES=${SHAPES-"200x300x400 96x1500x640 1000x1000x1000 64x200x300 333x333x333 150x520x300 300x100x700"}
exec > >(tee "$OUT") 2>&1
echo "# GEMM start order $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD): $(lscpu | grep 'Model name' | cut -d: -f2 | xargs), $(nproc) vCPUs"
for threads in 1 2; do
    "$WORK/peak" "$threads" | grep fma | sed 's/^/peak: /'
    for shape in $SHAPES; do
        IFS=x read -r m n k <<<"$shape"
        gemm_op_file "$WORK/gemm.rs" "$m" "$n" "$k"
        $AT space --file "$WORK/gemm.rs" --op gemm --starts --threads "$threads" | sed -n 's/^  start: //p' >"$WORK/starts.txt"
        $AT sweep --file "$WORK/gemm.rs" --op gemm --threads "$threads" --samples 9 \
            --configs "$WORK/starts.txt" --dir "$WORK/sweep" >"$WORK/sweep.txt"
        echo "## $shape, $threads thread(s): the starts in the generator's order"
        python3 - "$WORK/starts.txt" "$WORK/sweep.txt" <<'PY'
import re, sys
starts = [l.strip() for l in open(sys.argv[1]) if l.strip()]
measured = {}
for l in open(sys.argv[2]):
    m = re.match(r"\s*([\d.]+) GFLOP/s\s+(.*)", l)
    if m:
        measured[m.group(2).strip()] = float(m.group(1))
best = max(measured.values())
short = lambda c: " ".join(
    kv.replace("output.", "") for kv in c.split()
    if any(kv.startswith(f"output.{k}=") for k in ("vector", "tile.i", "tile.j")))
for i, c in enumerate(starts):
    g = measured.get(c)
    figure = f"{g:7.1f} GFLOP/s  {g / best:.2f} of the best start" if g else "    (not measured)"
    print(f"{i + 1:3}  {figure}  {short(c)}")
PY
    done
done
