#!/usr/bin/env bash
# The register tile alone (bench/microkernel.c): GCC's code for autotune's style of
# micro-kernel against the FMA peak, in one run, 1 thread pinned: tile shapes, B panel in
# L1 or streamed from L2, software prefetch distances, FMAs with embedded broadcasts
# (MR:NV:BSTREAM:PF:EMBEDDED per variant), the tile written with intrinsics, and the
# instructions each build's tile loop holds. On a CPU without AVX-512 the tiles are the AVX2
# clone's (8-float vectors, tiles that fit 16 registers; no embedded broadcasts).
# Writes bench/results/microkernel-<time>.log.
#   bash bench/microkernel.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
OUT="${OUT:-$ROOT/bench/results/microkernel-$(date +%Y%m%d-%H%M%S).log}"
BUILD=/tmp/autotune-microkernel
mkdir -p "$BUILD"
# The kernels' flags (autotune-codegen/src/runtime.rs).
FLAGS="-O3 -std=gnu99 -fno-math-errno -ffp-contract=fast"
build_peak "$BUILD/peak"
VARIANTS="6:3:0:0:0 8:3:0:0:0 12:2:0:0:0 8:2:0:0:0 6:4:0:0:0 4:4:0:0:0 12:2:0:0:1 6:3:1:0:0 6:3:1:8:0 6:3:1:16:0 8:3:1:0:0 8:3:1:8:0 12:2:1:0:0 12:2:1:8:0 6:3:0:0:2 8:3:0:0:2 12:2:0:0:2 6:4:0:0:2"
VL=16
if ! grep -qw avx512f /proc/cpuinfo; then
  VL=8
  VARIANTS="6:2:0:0:0 4:3:0:0:0 3:4:0:0:0 5:2:0:0:0 4:2:0:0:0 8:1:0:0:0 6:2:1:0:0 6:2:1:8:0 6:2:1:16:0 4:3:1:0:0 4:3:1:8:0"
fi
for v in $VARIANTS; do
  IFS=: read -r mr nv bs pf eb <<<"$v"
  gcc $FLAGS -DVL="$VL" -DMR="$mr" -DNV="$nv" -DBSTREAM="$bs" -DPF="$pf" -DEMBEDDED="$eb" "$ROOT/bench/microkernel.c" -o "$BUILD/mk-$v"
done
{
  echo "# microkernel $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD)"
  grep -m1 'model name' /proc/cpuinfo
  echo "gcc: $(gcc --version | head -1)"
  taskset -c 1 "$BUILD/peak" 1 | grep fma
  for v in $VARIANTS; do taskset -c 1 "$BUILD/mk-$v" 256 32; done
  taskset -c 1 "$BUILD/peak" 1 | grep fma
  echo "# instructions in each program (broadcasts, embedded broadcasts, FMAs, stack accesses)"
  for v in $VARIANTS; do
    d="$(objdump -d --no-show-raw-insn "$BUILD/mk-$v")"
    echo "$v: vbroadcastss $(grep -c vbroadcastss <<<"$d") {1to16} $(grep -c '1to16' <<<"$d") vfmadd $(grep -c vfmadd <<<"$d") rsp $(grep -c 'rsp)' <<<"$d")"
  done
} 2>&1 | tee "$OUT"
echo "written to $OUT"
