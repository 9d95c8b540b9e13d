#!/usr/bin/env bash
# Compile time and speed of the same configs under several variants (issue 15):
# for the configs an xgb-rank run measured (GEMM 512³ and 1024³, conv C2 and C9;
# from the records in bench/results), the compile time of each candidate file,
# one at a time, and the kernels' GFLOP/s (`cargo autotune sweep`).
# A variant is LABEL:CARGO_AUTOTUNE:CC. The default compares gcc against clang at
# the shipping flags (needs clang: apt-get install clang); to compare two
# generators, build the other one and pass e.g.
#   VARIANTS="v1:/var/tmp/cargo-autotune-v1:gcc v2:target/release/cargo-autotune:gcc"
# Writes bench/results/compilers-<time>.log.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
OUT="$ROOT/bench/results/compilers-$(date +%Y%m%d-%H%M%S).log"
N=${N:-24}
WORK=$(mktemp -d /tmp/autotune-compilers.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
tar xJf "$ROOT/bench/results/experiments-20261129-125603/raw.tar.xz" -C "$WORK"
autotune_cli
VARIANTS=${VARIANTS:-"gcc:$CARGO_AUTOTUNE:gcc clang:$CARGO_AUTOTUNE:clang"}
FLAGS="-O3 -ffunction-sections -fdata-sections -fPIC -m64 -std=gnu99 -fno-math-errno -ffp-contract=fast -Wno-unused-variable"
{
    echo "# compilers $(date -Is): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) vCPUs"
    echo "# variants: $VARIANTS; $N configs each, one compile at a time"
    for v in $VARIANTS; do cc=${v##*:}; echo "# $cc: $($cc --version | head -1)"; done
    printf '%-12s %-8s %12s %12s %14s %14s\n' workload variant compile_s max_compile_s median_gflops best_gflops
} | tee "$OUT"
for case in "gemm512 gemm 5" "gemm1024 gemm 0" "conv-c2 conv3x3 0" "conv-c9 conv3x3 1"; do
    set -- $case
    python3 - "$WORK/$1.xgb-rank.1.jsonl" "$N" >"$WORK/$1.configs" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][: int(sys.argv[2])]
for r in rows:
    print(" ".join(f"{k}={v}" for k, v in r["config"].items()))
PY
    for v in $VARIANTS; do
        label=${v%%:*} rest=${v#*:}
        at=${rest%:*} cc=${rest##*:}
        d="$WORK/$1-$label"
        CC=$cc $at autotune sweep --file "$ROOT/bench/ops.rs" --op "$2" --spec "$3" \
            --configs "$WORK/$1.configs" --dir "$d" >"$d.txt" 2>&1
        times=$(for f in "$d"/cand*.c; do
            /usr/bin/time -f %e $cc $FLAGS -c "$f" -o "$WORK/x.o" 2>&1 | tail -1
        done)
        python3 - "$1" "$label" "$d.txt" "$times" <<'PY' | tee -a "$OUT"
import re, statistics, sys
name, label, sweep, times = sys.argv[1:5]
t = [float(x) for x in times.split()]
g = [float(m.group(1)) for m in re.finditer(r"^\s*([0-9.]+) GFLOP/s", open(sweep).read(), re.M)]
print("%-12s %-8s %12.2f %12.2f %14.1f %14.1f" % (name, label, sum(t), max(t),
      statistics.median(g) if g else float("nan"), max(g) if g else float("nan")))
PY
    done
done
