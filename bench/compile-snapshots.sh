#!/usr/bin/env bash
# What a change of the generated C costs a build's compiler: the codegen snapshots'
# C (autotune-build/tests/snapshots/codegen__*_c.snap: the fixture operators'
# whole C file, as a build writes it) at each of REVS, compiled with the build's
# compiler and flags (autotune-codegen/src/runtime.rs: -O3 and C_FLAGS), 5 times
# each on one core. Writes bench/results/compile-snapshots-<time>.log.
#   REVS="cdb4360~1 e594648 HEAD" bash bench/compile-snapshots.sh
# Time nothing else beside it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REVS="${REVS:-HEAD~1 HEAD}"
OUT="${OUT:-$ROOT/bench/results/compile-snapshots-$(date +%Y%m%d-%H%M%S).log}"
WORK=$(mktemp -d /tmp/autotune-compile-snapshots.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FLAGS="-O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -Wno-unused-variable"
exec > >(tee "$OUT") 2>&1
echo "# the codegen snapshots' C compiled at $REVS, $(date -Is), $(cc --version | head -1), one core"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# snapshot rev lines seconds(5 runs)"
for snap in $(cd "$ROOT" && git ls-files 'autotune-build/tests/snapshots/codegen__*_c.snap'); do
    for rev in $REVS; do
        c="$WORK/$(basename "$snap" .snap)-$(echo "$rev" | tr '~^' '__').c"
        # The C follows the second `---` of insta's header.
        git -C "$ROOT" show "$rev:$snap" | awk 'n >= 2 { print } /^---$/ { n++ }' > "$c"
        times=""
        for _ in 1 2 3 4 5; do
            times+=" $( { /usr/bin/time -f %e taskset -c 1 cc $FLAGS -c "$c" -o "$WORK/x.o"; } 2>&1 | tail -1)"
        done
        echo "$(basename "$snap" .snap) $rev $(wc -l < "$c")$times"
    done
done
