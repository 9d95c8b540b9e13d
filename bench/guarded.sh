#!/usr/bin/env bash
# What guarded border tiles (issue 19, deliverable 2) change: each ResNet-18 workload
# with a padded input, timed with the config the committed cache holds for this CPU and
# thread count, once as cached (the padded input read from a pad-copy made on every
# call) and once with that read guarded in place (`pack.N=2`, no copy), everything
# else the same; alternating, ROUNDS rounds, at 1 and 2 threads, beside the FMA peak of
# the same run. Writes bench/results/guarded-<time>.log.
#   bash bench/guarded.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/bench/lib.sh"
PEERS="${PEERS:-$ROOT/../shared/peers}"
ROUNDS="${ROUNDS:-2}"
OUT="$ROOT/bench/results/guarded-$(date +%Y%m%d-%H%M%S).log"
WORK=$(mktemp -d /tmp/autotune-guarded.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
autotune_cli
build_peak "$WORK/peak"
CACHE="$ROOT/tuning-cache"
# The cached config of a workload for this CPU and thread count, with `knob` set to
# `value` (a comma-separated knob=value list), or nothing where there is none.
config() { # file spec threads knob value
    python3 - "$CACHE/$1.toml" "$2" "$3" "$4" "$5" <<'PY'
import sys, tomllib, re
path, spec, threads, knob, value = sys.argv[1:]
entries = tomllib.load(open(path, "rb"))["entry"]
cpu = open("/proc/cpuinfo").read()
vendor = re.search(r"vendor_id\s*:\s*(\S+)", cpu).group(1)
family = re.search(r"cpu family\s*:\s*(\d+)", cpu).group(1)
model = re.search(r"model\s*:\s*(\d+)", cpu).group(1)
me = f"{vendor}-{family}-{model}"
mine = [e for e in entries if e.get("cpu_id") == me and e.get("threads") == int(threads)
        and e["workload"].replace(" ", "_") == spec]
if mine:
    c = dict(max(mine, key=lambda e: e["generator"])["config"])
    if value != "-":
        c[knob] = int(value)
    print(",".join(f"{k}={v}" for k, v in sorted(c.items())))
PY
}
{
    echo "# guarded border tiles vs pad-copies: $(date -u +%FT%TZ), $(lscpu | sed -n 's/^Model name: *//p'), commit $(git -C "$ROOT" rev-parse --short HEAD)"
    "$WORK/peak" 1 | grep fma
    "$WORK/peak" 2 | grep fma
    # operator, specialisation index, the workload as the cache names it (spaces as
    # underscores), the padded read's knob
    while read -r op spec name knob; do
        for threads in 1 2; do
            for round in $(seq "$ROUNDS"); do
                for value in - 2; do
                    cfg=$(config "$op" "$name" "$threads" "$knob" "$value")
                    if [ -z "$cfg" ]; then
                        echo "$name threads=$threads: no entry of this CPU"
                        continue 2
                    fi
                    what=$([ "$value" = - ] && echo cached || echo guarded)
                    line=$(cd "$ROOT/examples/resnet18" && $AT bench --op "$op" --spec "$spec" \
                        --config "$cfg" --threads "$threads" --dir "$WORK/b" 2>&1 | tail -1)
                    echo "$name threads=$threads round=$round $what ($knob=$(sed -n "s/.*$knob=\([0-9]*\).*/\1/p" <<<"$cfg")): $line"
                done
            done
        done
    done <<'EOF'
conv7x7s2_relu 0 conv7x7s2_relu[C3_H224_W224_K64] y.pack.0
max_pool3x3s2 0 max_pool3x3s2[C64_H112_W112] output.pack.0
conv3x3_relu 0 conv3x3_relu[C64_H56_W56_K64] y.pack.0
conv3x3_relu 1 conv3x3_relu[C128_H28_W28_K128] y.pack.0
conv3x3_relu 2 conv3x3_relu[C256_H14_W14_K256] y.pack.0
conv3x3s2_relu 0 conv3x3s2_relu[C64_H56_W56_K128] y.pack.0
EOF
} | tee "$OUT"
echo "wrote $OUT"
