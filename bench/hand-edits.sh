#!/usr/bin/env bash
# What a change to the generated C would be worth, measured on the committed entries'
# own kernels before anyone builds it into the generator (bench/hand_edits.py has the
# edits): `cargo autotune bench --cached` writes the measurement program of an entry, each
# variant's kernel is compiled with the kernels' flags and linked into that program in
# place of the original, the variants that must compute the same are checked against the
# original's output, and all are timed in alternating rounds, the FMA peak before and after.
#   - conv3x3_add_relu C64 56² (ResNet-18's C2 with the shortcut), its 2-thread entry, at
#     1 and 2 threads: its 14 lane-strided stores transposed as rows; the contiguous bound.
#   - GEMM 1024³ (bench/ops.rs), its 1-thread entry: B packed rows first; the no-pack bound;
#     the packing alone, as generated and rows first.
# Writes bench/results/hand-edits-<time>.log.
#   ROUNDS=3 bash bench/hand-edits.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-$ROOT/bench/results/hand-edits-$(date +%Y%m%d-%H%M%S).log}"
BUILD=/tmp/autotune-hand-edits
rm -rf "$BUILD" && mkdir -p "$BUILD"
# The kernels' flags (autotune-codegen/src/runtime.rs, at OPT_LEVEL).
FLAGS="-O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -Wno-unused-variable"
autotune_cli
build_peak "$BUILD/peak"

# prepare NAME THREADS ARGS...: the entry's measurement program in $BUILD/NAME.
prepare() {
  local name=$1 threads=$2
  shift 2
  $AT bench "$@" --cached --threads "$threads" --dir "$BUILD/$name" | tail -2
}

# variant NAME EDIT: $BUILD/NAME/m-EDIT, the program with the kernel edited (`asis`: as
# generated, compiled here like the others).
variant() {
  local dir="$BUILD/$1" edit=$2 k
  k=$(ls "$dir"/k*.c)
  if [ "$edit" = asis ]; then cp "$k" "$dir/v-$edit.c"; else python3 "$ROOT/bench/hand_edits.py" "$edit" "$k" "$dir/v-$edit.c"; fi
  gcc $FLAGS -c "$dir/v-$edit.c" -o "$dir/v-$edit.o"
  gcc "$dir"/driver.o "$dir"/isa.o "$dir"/pool.o "$dir"/reference.o "$dir"/measure-table.o "$dir/v-$edit.o" \
    -o "$dir/m-$edit" -lm -pthread
}

# same NAME THREADS EDIT: the edited kernel's output is the original's, bit for bit.
same() {
  local dir="$BUILD/$1"
  "$dir/m-asis" 0 "$dir" check "$dir/asis.bin" "$2"
  "$dir/m-$3" 0 "$dir" check "$dir/$3.bin" "$2"
  cmp -s "$dir/asis.bin" "$dir/$3.bin" && echo "$1 $3: output identical to the generated kernel's" \
    || { echo "$1 $3: OUTPUT DIFFERS"; exit 1; }
}

{
  echo "# hand-edits $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD)"
  grep -m1 'model name' /proc/cpuinfo
  echo "cpu: $(cpu_id); gcc: $(gcc --version | head -1)"
  prepare c2 2 --file "$ROOT/examples/resnet18/src/ops.rs" --op conv3x3_add_relu --spec 0 --cache "$ROOT/tuning-cache"
  prepare gemm 1 --file "$ROOT/bench/ops.rs" --op gemm --spec 0 --cache "$ROOT/bench/tuning-cache"
  for e in asis rows contiguous; do variant c2 $e; done
  for e in asis rows-first no-pack pack-only rows-first-pack-only; do variant gemm $e; done
  same c2 2 rows
  same gemm 1 rows-first
  "$BUILD/peak" 1 | grep fma
  "$BUILD/peak" 2 | grep fma
  for r in $(seq "$ROUNDS"); do
    for t in 1 2; do
      for e in asis rows contiguous; do
        echo "round $r c2 threads=$t $e $("$BUILD/c2/m-$e" 0 "$BUILD/c2" time 0.2 15 "$t" 0)"
      done
    done
    for e in asis rows-first no-pack pack-only rows-first-pack-only; do
      echo "round $r gemm threads=1 $e $("$BUILD/gemm/m-$e" 0 "$BUILD/gemm" time 0.3 9 1 0)"
    done
  done
  "$BUILD/peak" 1 | grep fma
  "$BUILD/peak" 2 | grep fma
} 2>&1 | tee "$OUT"
echo "written to $OUT"
