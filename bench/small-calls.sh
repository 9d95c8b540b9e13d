#!/usr/bin/env bash
# The small-call schedule beside the tiled kernels of the generic GEMM (issue 18), at a
# calibration list of small GEMMs kept apart from bench/generic.sh's sweep, on THREADS
# threads of the kernels' pool (default 1). Writes bench/results/small-calls-<time>.log.
#   [THREADS=2] [SHAPES="MxNxK ..."] bash bench/small-calls.sh
# - The shapes: M, N, K log-uniform in 1-1024 from seed 7 (generic.sh draws from seed
#   18), a size below 64 in each, 512 to 5e7 iterations; printed at the top of the log.
#   SHAPES times these instead.
# - The kernels: the generic kernel of bench/ops.rs `gemm` as a build ships it
#   (`cargo autotune bench --generic --cached` leaves its C), compiled beside a harness
#   that times at each shape the generic kernel (its dispatcher's choice), the
#   small-call schedule alone (`__generic__small`), every tiled kernel alone
#   (`__generic__t<i>`; the best of them is what a perfect choice among them would run)
#   and the default schedule (`__generic__naive`). The best of 5 samples of ~10 ms.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
BUILD=/tmp/autotune-small-calls
THREADS="${THREADS:-1}"
OUT="${OUT:-$ROOT/bench/results/small-calls-$(date +%Y%m%d-%H%M%S).log}"
rm -rf "$BUILD" && mkdir -p "$BUILD" "$(dirname "$OUT")"
autotune_cli
build_peak "$BUILD/peak"

if [ -z "${SHAPES:-}" ]; then
SHAPES="$(python3 - <<'EOF'
import math, random
r = random.Random(7)
def size(lo, hi):
    return int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))
out = []
while len(out) < 40:
    m, n, k = size(1, 1024), size(1, 1024), size(1, 1024)
    if min(m, n, k) < 64 and 512 <= m * n * k <= 5e7:
        out.append(f"{m}x{n}x{k}")
print(" ".join(out))
EOF
)"
fi

# The generic kernel's C (and the runtime's), as the bench command builds it.
$AT bench --file "$ROOT/bench/ops.rs" --op gemm --shape M=64,N=64,K=64 --generic \
    --cached --cache "$ROOT/bench/tuning-cache" --samples 1 --dir "$BUILD/g" > /dev/null
KERNEL="$(ls "$BUILD"/g/k*.c | head -1)"
SYM="$(basename "$KERNEL" .c)"
POOL="$(grep -o 'void [a-z0-9_]*_set_num_threads' "$BUILD/g/pool.c" | head -1 | cut -d' ' -f2)"
TILED="$(grep -o "^int32_t ${SYM}__generic__t[0-9]*(" "$KERNEL" | sed 's/^int32_t //; s/($//' | tr '\n' ' ')"
python3 - "$SYM" "$POOL" "$THREADS" $TILED > "$BUILD/harness.c" <<'EOF'
import sys
sym, pool, threads, tiled = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
kernels = [("generic", f"{sym}__generic"), ("small", f"{sym}__generic__small")]
kernels += [(t.rsplit("__", 1)[1], t) for t in tiled]
kernels += [("naive", f"{sym}__generic__naive")]
sig = "(const float *, const float *, float *, int64_t, int64_t, int64_t)"
print("#include <stdio.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <time.h>")
for _, f in kernels:
    print(f"int32_t {f}{sig};")
print(f"typedef int32_t (*kernel_t){sig};")
print(f"void {pool}(int32_t n);")
print("static const char *names[] = {" + ", ".join(f'"{n}"' for n, _ in kernels) + "};")
print("static kernel_t fs[] = {" + ", ".join(f for _, f in kernels) + "};")
print(f"#define SET_THREADS() {pool}({threads})")
print(r"""
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  SET_THREADS();
  for (int s = 1; s < argc; ++s) {
    long m, n, k;
    if (sscanf(argv[s], "%ldx%ldx%ld", &m, &n, &k) != 3) return 2;
    float *a = calloc(m * k, 4), *b = calloc(k * n, 4), *o = calloc(m * n, 4);
    printf("%ldx%ldx%ld", m, n, k);
    for (size_t v = 0; v < sizeof fs / sizeof fs[0]; ++v) {
      fs[v](a, b, o, m, k, n);
      double t0 = now();
      fs[v](a, b, o, m, k, n);
      double once = now() - t0, best = 1e9;
      long reps = (long)(0.01 / (once > 1e-8 ? once : 1e-8)) + 1;
      for (int j = 0; j < 5; ++j) {
        t0 = now();
        for (long r = 0; r < reps; ++r) fs[v](a, b, o, m, k, n);
        double t = (now() - t0) / reps;
        if (t < best) best = t;
      }
      printf(" %s=%.1f", names[v], 2.0 * m * n * k / best * 1e-9);
    }
    printf("\n");
    free(a); free(b); free(o);
  }
  return 0;
}""")
EOF
(cd "$BUILD/g" && gcc -O3 -std=gnu99 -fno-math-errno -ffp-contract=fast \
    "$KERNEL" pool.c isa.c ../harness.c -o ../harness -lm -pthread)

PIN="taskset -c $(((THREADS > 1)) && echo 0-1 || echo 1)"
exec > >(tee "$OUT") 2>&1
echo "# the small-call schedule at small GEMMs $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), $THREADS thread(s)"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
$PIN "$BUILD/peak" "$THREADS" | grep fma
echo "# shapes (MxNxK): $SHAPES"
echo "# GFLOP/s per kernel: generic (the dispatcher's choice), small, t<i> (each tiled kernel), naive"
$PIN "$BUILD/harness" $SHAPES
