#!/usr/bin/env bash
# Cold build time of the README's first command, `cargo build --release -p matmul`,
# for each feature set of autotune-build, each in an empty target directory
# (crates already downloaded). Writes bench/results/cold-build-<date>.log.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=bench/results/cold-build-$(date +%Y%m%d-%H%M%S).log
cargo fetch --locked >/dev/null
{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
    echo "rustc: $(rustc --version)"
    for features in "" "autotune-build/tune" "autotune-build/xgboost"; do
        dir=$(mktemp -d /var/tmp/autotune-cold.XXXXXX)
        start=$(date +%s.%N)
        CARGO_TARGET_DIR=$dir AUTOTUNE=cached cargo build --locked --release -p matmul \
            ${features:+--features "$features"} >"$dir.log" 2>&1
        end=$(date +%s.%N)
        crates=$(grep -c '^ *Compiling' "$dir.log" || true)
        printf 'features %-24s %6.1f s  (%s crates compiled)\n' "${features:-(none: replay only)}" \
            "$(echo "$end - $start" | bc)" "$crates"
        rm -rf "$dir" "$dir.log"
    done
} | tee "$OUT"
