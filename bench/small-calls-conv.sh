#!/usr/bin/env bash
# Why a conv's generic kernel weighs its small-call schedule nowhere (issue 18): at a
# calibration list of 3×3 convs kept apart from bench/generic.sh's sweep (seed 7; four
# of them narrow: H = W in 7-15, K in 8-15), the generic kernel of bench/ops.rs
# `conv3x3_relu` as a build ships it (with its declared buckets) beside the same kernel
# with its dispatcher sent to the small-call schedule (`__generic__small`) at once; 1
# thread, the measuring program's median. Writes bench/results/small-calls-conv-<time>.log.
#   bash bench/small-calls-conv.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
BUILD=/tmp/autotune-small-calls-conv
OUT="${OUT:-$ROOT/bench/results/small-calls-conv-$(date +%Y%m%d-%H%M%S).log}"
rm -rf "$BUILD" && mkdir -p "$BUILD" "$(dirname "$OUT")"
autotune_cli
build_peak "$BUILD/peak"
CONVS="$(python3 - <<'PY'
import math, random
r = random.Random(7)
def size(lo, hi):
    return int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))
convs = []
while len(convs) < 6:
    c, h, k = size(8, 512), size(7, 64), size(8, 512)
    if c * h * h * k * 9 <= 1e9:
        convs.append(f"{c},{h},{k}")
while len(convs) < 10:
    convs.append(f"{size(8, 512)},{size(7, 15)},{size(8, 15)}")
print(" ".join(convs))
PY
)"
PIN="taskset -c 1"
exec > >(tee "$OUT") 2>&1
echo "# a conv's small-call schedule $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), 1 thread"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
$PIN "$BUILD/peak" 1 | grep fma
echo "# GFLOP/s: C,H=W,K generic small"
median() { $PIN "./$1" 0 . time 1.0 10 1 0 | sed 's/.*median_s=\([^ ]*\).*/\1/'; }
for conv in $CONVS; do
    IFS=, read -r c h k <<<"$conv"
    dir="$BUILD/$c-$h-$k"
    $AT bench --file "$ROOT/bench/ops.rs" --op conv3x3_relu --shape "C=$c,H=$h,W=$h,K=$k" \
        --generic --cached --cache "$ROOT/bench/tuning-cache" --samples 1 --dir "$dir" > /dev/null
    (
        cd "$dir"
        kernel="$(ls k*.c | head -1)"
        # The same C, its dispatcher returning the small-call schedule's call at once.
        python3 - "$kernel" "${kernel%.c}" <<'PY'
import sys
path, sym = sys.argv[1], sys.argv[2]
s = open(path).read()
i = s.index(f"int32_t {sym}__generic(")
proto = s[i:s.index(")", i) + 1]
args = ", ".join(a.split()[-1].lstrip("*") for a in proto[proto.index("(") + 1:-1].split(","))
j = s.index("\n", s.index("const int64_t work__", i)) + 1
open("forced.c", "w").write(s[:j] + f"  return {sym}__generic__small({args});\n" + s[j:])
PY
        gcc -O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -c forced.c -o forced.o
        gcc -O3 driver.o isa.o measure-table.o reference.o pool.o forced.o -o forced -lm -pthread
        flops=$((2 * c * h * h * k * 9))
        python3 -c "print('$conv %.1f %.1f' % ($flops / $(median measure) * 1e-9, $flops / $(median forced) * 1e-9))"
    )
done
