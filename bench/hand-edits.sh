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
# SET=kernels instead times the micro-kernels and border tiles (each run at 1 thread pinned
# to the second core, 2 threads on both):
#   - GEMM 1024³'s 1-thread entry with its register tile as inline assembly;
#   - ResNet-18's C2 (conv3x3_relu C64 56²): its 1-thread entry; a tile of 4 channel vectors
#     × 6 pixels (oneDNN's shape) as generated and as inline assembly; the entry's config
#     reading its input in place (`pack.0=2`), its border tiles as generated, reading a
#     padded copy of their window, and skipped (a bound);
#   - the stem's 1-thread entry with the output prefetched a line ahead, warm and with every
#     cache evicted before each call (as the stem starts a network's pass).
# Writes bench/results/hand-edits-<time>.log (SET=kernels: hand-edits-kernels-<time>.log).
#   ROUNDS=3 [SET=kernels] bash bench/hand-edits.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
ROUNDS="${ROUNDS:-3}"
SET="${SET:-stores}"
case "$SET" in
  stores) OUT="${OUT:-$ROOT/bench/results/hand-edits-$(date +%Y%m%d-%H%M%S).log}" ;;
  kernels) OUT="${OUT:-$ROOT/bench/results/hand-edits-kernels-$(date +%Y%m%d-%H%M%S).log}" ;;
  *) echo "SET is stores or kernels" >&2; exit 2 ;;
esac
BUILD=/tmp/autotune-hand-edits
rm -rf "$BUILD" && mkdir -p "$BUILD"
# The kernels' flags (autotune-codegen/src/runtime.rs, at OPT_LEVEL).
FLAGS="-O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -Wno-unused-variable"
autotune_cli
build_peak "$BUILD/peak"

# prepare NAME THREADS ARGS...: the entry's measurement program in $BUILD/NAME (ARGS
# with --config: that config's).
prepare() {
  local name=$1 threads=$2
  shift 2
  case " $* " in *" --config "*) ;; *) set -- "$@" --cached ;; esac
  $AT bench "$@" --threads "$threads" --dir "$BUILD/$name" | tail -2
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

# time NAME EDIT THREADS FLUSH: one timing of a variant (1 thread on the second core).
time_one() {
  local pin="taskset -c 1"
  [ "$3" = 2 ] && pin="taskset -c 0,1"
  echo "$1 threads=$3 $2$([ "$4" = 1 ] && echo ' cold') $($pin "$BUILD/$1/m-$2" 0 "$BUILD/$1" time 0.2 15 "$3" "$4")"
}

kernels() {
  local ops="$ROOT/examples/resnet18/src/ops.rs" c2
  c2="output.block.h=1 output.block.k=1 output.block.v=1 output.order=k-h-v output.parallel=0"
  c2="$c2 output.tile.h=1 output.tile.k=1 output.tile.v=1 output.vector=none y.fuse=1 y.pack.1=4"
  c2="$c2 y.split.c=64 y.split.r=3 y.split.s=3 y.tile.h=1 y.vector=k16"
  prepare gemm 1 --file "$ROOT/bench/ops.rs" --op gemm --spec 0 --cache "$ROOT/bench/tuning-cache"
  prepare c2 1 --file "$ops" --op conv3x3_relu --spec 0 --cache "$ROOT/tuning-cache"
  prepare c2-4x6 1 --file "$ops" --op conv3x3_relu --spec 0 --config "$c2 y.order=k-h-v y.parallel=2 \
    y.block.h=2 y.block.k=1 y.block.v=4 y.pack.0=0 y.tile.k=4 y.tile.v=6 y.unroll=1"
  # The entry's config (the cache's, at 1 thread) with its input read in place.
  prepare c2-guard 1 --file "$ops" --op conv3x3_relu --spec 0 --config "$c2 y.order=k-h-v y.parallel=2 \
    y.block.h=2 y.block.k=1 y.block.v=32 y.pack.0=2 y.tile.k=1 y.tile.v=14 y.unroll=4"
  prepare stem 1 --file "$ops" --op conv7x7s2_relu --spec 0 --cache "$ROOT/tuning-cache"
  for e in asis gemm-asm; do variant gemm $e; done
  variant c2 asis
  for e in asis conv-asm; do variant c2-4x6 $e; done
  for e in asis guard-buffered guard-no-border; do variant c2-guard $e; done
  for e in asis prefetch-out; do variant stem $e; done
  same gemm 1 gemm-asm
  same c2-4x6 1 conv-asm
  same c2-guard 1 guard-buffered
  same stem 1 prefetch-out
  "$BUILD/c2/m-asis" 0 "$BUILD/c2" check "$BUILD/c2/asis.bin" 1
  for d in c2-4x6 c2-guard; do
    cmp -s "$BUILD/c2/asis.bin" "$BUILD/$d/asis.bin" && echo "$d: output identical to the entry's" \
      || { echo "$d: OUTPUT DIFFERS FROM THE ENTRY'S"; exit 1; }
  done
  "$BUILD/peak" 1 | grep fma
  "$BUILD/peak" 2 | grep fma
  for r in $(seq "$ROUNDS"); do
    echo "## round $r"
    for e in asis gemm-asm; do time_one gemm $e 1 0; done
    time_one c2 asis 1 0
    for e in asis conv-asm; do time_one c2-4x6 $e 1 0; done
    for t in 1 2; do
      [ $t = 2 ] && time_one c2 asis 2 0
      for e in asis guard-buffered guard-no-border; do time_one c2-guard $e $t 0; done
    done
    for t in 1 2; do for f in 0 1; do for e in asis prefetch-out; do time_one stem $e $t $f; done; done; done
  done
  "$BUILD/peak" 1 | grep fma
  "$BUILD/peak" 2 | grep fma
}

{
  echo "# hand-edits SET=$SET $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD)"
  grep -m1 'model name' /proc/cpuinfo
  echo "cpu: $(cpu_id); gcc: $(gcc --version | head -1)"
  if [ "$SET" = stores ]; then
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
  else
    kernels
  fi
} 2>&1 | tee "$OUT"
echo "written to $OUT"
