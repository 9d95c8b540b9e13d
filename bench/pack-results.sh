#!/usr/bin/env bash
# Packs the raw data of a benchmark run (record logs, --json run summaries, tuning
# databases) into one reproducible .tar.xz, as bench/results/README.md describes. The
# packed files stay where they are; bench/results/.gitignore keeps them out of git.
#   bash bench/pack-results.sh bench/results/<run>     # every *.jsonl, *.json under it -> <run>/raw.tar.xz
#   bash bench/pack-results.sh DIR ARCHIVE FILE...     # DIR/ARCHIVE: these FILEs (relative to DIR)
# Unpack: tar -xJf DIR/ARCHIVE -C DIR
set -euo pipefail
dir=${1:?usage: bash bench/pack-results.sh DIR [ARCHIVE FILE...]}
cd "$dir"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
if [ $# -ge 2 ]; then
  archive=$2
  shift 2
  [ $# -gt 0 ] || { echo "pack-results: no files to pack into $dir/$archive" >&2; exit 1; }
  printf '%s\n' "$@" | LC_ALL=C sort -u >"$list"
else
  archive=raw.tar.xz
  find . -type f \( -name '*.jsonl' -o -name '*.json' \) -printf '%P\n' | LC_ALL=C sort >"$list"
  [ -s "$list" ] || { echo "pack-results: no *.jsonl or *.json under $dir" >&2; exit 1; }
fi
# Reproducible: sorted names, fixed owner, mode and time, single-threaded xz.
tar --no-recursion --owner=0 --group=0 --numeric-owner --mode=a=r,u+w --mtime=@0 \
  -cf - -T "$list" | xz -9e -T1 >"$archive.tmp"
mv "$archive.tmp" "$archive"
echo "packed $(wc -l <"$list") files into $dir/$archive ($(wc -c <"$archive") bytes)"
