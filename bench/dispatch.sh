#!/usr/bin/env bash
# How well the generic kernel's dispatcher chooses among its tiled kernels (issue 18):
# each tiled kernel of bench/ops.rs's `gemm` (one per specialisation's cached config),
# its default schedule and its dispatcher, timed alone at seeded GEMM shapes, 1 thread.
# Writes bench/results/dispatch-<time>.log.
#   bash bench/dispatch.sh                      # this tree's dispatcher
#   BEFORE=<cargo-autotune binary> bash bench/dispatch.sh   # and another build's, same run
# - Shapes: M, N, K log-uniform in 1–2048 (a third moved by ±1), work 512 to 1e9
#   multiply-adds: 50 from seed 7 (the list the dispatcher's weights were chosen on) and
#   40 from seed 11 (held out: not looked at until they were chosen).
# - Per shape: GFLOP/s of t0 … t<n-1>, the default schedule ("naive"), the dispatcher
#   (and BEFORE's). "oracle" is the best of the tiled kernels and the default schedule;
#   the report gives the geometric mean of dispatcher / oracle per list, and the shapes
#   where the dispatcher ran below 0.9× the default schedule.
# - Last, the dispatcher's own cost at 64³ (issue 18: under 1% of the call): the
#   dispatcher's time against the kernel it runs (the tiled kernel whose time is
#   nearest), each the best of 1 s of samples.
# - The kernels are the C that `cargo autotune bench --generic --cached` builds (what a
#   build of bench/ops.rs ships), compiled with the kernels' flags, with bench/dispatch.c.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
BUILD=/tmp/autotune-dispatch
OUT="${OUT:-$ROOT/bench/results/dispatch-$(date +%Y%m%d-%H%M%S).log}"
rm -rf "$BUILD"
mkdir -p "$BUILD" "$(dirname "$OUT")"
autotune_cli
CFLAGS="-O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -Wno-unused-variable"

shapes() {
    python3 - "$1" "$2" <<'EOF'
import math, random, sys
r = random.Random(int(sys.argv[1]))
def size(lo, hi):
    x = int(round(math.exp(r.uniform(math.log(lo), math.log(hi)))))
    if r.random() < 1 / 3:
        x = max(lo, x + r.choice([-1, 1]))
    return x
shapes = []
while len(shapes) < int(sys.argv[2]):
    m, n, k = size(1, 2048), size(1, 2048), size(1, 2048)
    if 512 <= m * n * k <= 1e9:
        shapes.append((m, n, k))
for s in shapes:
    print(*s)
EOF
}
shapes 7 50 >"$BUILD/design.txt"
shapes 11 40 >"$BUILD/heldout.txt"

# The generic kernel's C as the CLI `cli` builds it, compiled into a timing program.
program() {
    local cli="$1" dir="$BUILD/$2"
    "$cli" autotune bench --file "$ROOT/bench/ops.rs" --op gemm --generic --cached \
        --cache "$ROOT/bench/tuning-cache" --shape M=64,N=64,K=64 --samples 3 --dir "$dir" |
        tail -1 >&2
    local c sym buckets
    c="$(ls "$dir"/k*.c)"
    sym="$(grep -o '^int32_t k[0-9a-f]*__generic(' "$c" | sed 's/^int32_t //; s/($//')"
    buckets="$(grep -c "^int32_t ${sym}__t[0-9]*(" "$c")"
    ((buckets <= 8)) || { echo "bench/dispatch.c times 8 tiled kernels at most, $c has $buckets" >&2; exit 1; }
    for f in "$c" "$dir/pool.c" "$dir/isa.c"; do gcc $CFLAGS -c "$f" -o "$f.o"; done
    # Stubs for the kernels a generic kernel with fewer buckets lacks (never called).
    for ((i = buckets; i < 8; i++)); do
        echo "#include <stdint.h>
int32_t ${sym}__t$i(const float *a, const float *b, float *c, int64_t m, int64_t k, int64_t n) { return 1; }"
    done >"$dir/stubs.c"
    gcc $CFLAGS -DSYM="$sym" -DBUCKETS="$buckets" "$ROOT/bench/dispatch.c" "$dir/stubs.c" \
        "$c.o" "$dir/pool.c.o" "$dir/isa.c.o" -o "$dir/time" -lpthread -lm
    echo "$dir/time"
}

exec > >(tee "$OUT") 2>&1
echo "# generic dispatcher $(date -Is) at $(git -C "$ROOT" rev-parse --short HEAD), 1 thread"
lscpu | grep -E 'Model name'
echo "gcc: $(gcc --version | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
NOW="$(program "$CARGO_AUTOTUNE" now)"
[ -n "${BEFORE:-}" ] && THEN="$(program "$BEFORE" before)"
for list in design heldout; do
    echo "## $list: M N K, GFLOP/s of t0..t<n-1>, naive, dispatcher${BEFORE:+, before}"
    taskset -c 1 "$NOW" <"$BUILD/$list.txt" >"$BUILD/$list.now"
    if [ -n "${BEFORE:-}" ]; then
        # Only the dispatcher's column of the other build: its tiled kernels are the same.
        taskset -c 1 "$THEN" <"$BUILD/$list.txt" | awk '{print $NF}' >"$BUILD/$list.then"
        paste -d' ' "$BUILD/$list.now" "$BUILD/$list.then"
    else
        cat "$BUILD/$list.now"
    fi
done | tee "$BUILD/table.txt"
echo "## overhead: 64 64 64, GFLOP/s of t0..t<n-1>, naive, dispatcher (1 s of samples each)"
echo "64 64 64" | taskset -c 1 "$NOW" 1 | tee "$BUILD/overhead.txt"
echo "## report"
python3 - "$BUILD/table.txt" "${BEFORE:+before}" <<'EOF'
import math, sys
before = bool(sys.argv[2])
lists, cur = {}, None
for line in open(sys.argv[1]):
    if line.startswith("## "):
        cur = line.split()[1].rstrip(":")
        lists[cur] = []
    elif line.strip():
        lists[cur].append([float(x) for x in line.split()])
for name, rows in lists.items():
    for col, label in ((-2, "dispatcher"), (-1, "before")) if before else ((-1, "dispatcher"),):
        logs, slow = [], []
        for r in rows:
            naive_at = -3 if before else -2
            oracle = max(r[3:naive_at + 1])
            logs.append(math.log(r[col] / oracle))
            if r[col] < 0.9 * r[naive_at]:
                slow.append("%dx%dx%d %.2f vs %.2f" % (r[0], r[1], r[2], r[col], r[naive_at]))
        print(f"{name} ({len(rows)} shapes), {label}: geomean {math.exp(sum(logs) / len(logs)):.3f}x "
              f"the oracle; below 0.9x the default schedule: {len(slow)} {'; '.join(slow)}")
EOF
python3 - "$BUILD/overhead.txt" <<'EOF'
import sys
r = [float(x) for x in open(sys.argv[1]).read().split()]
flop = 2 * r[0] * r[1] * r[2]
us = [flop / g * 1e-3 for g in r[3:]]  # µs per call
disp, kernels = us[-1], us[:-2]
ran = min(kernels, key=lambda t: abs(t - disp))
print(f"64^3: dispatcher {disp:.3f} us, the kernel it runs alone {ran:.3f} us: "
      f"{(disp - ran) * 1e3:.0f} ns, {100 * (disp - ran) / ran:.1f}% of the call")
EOF
