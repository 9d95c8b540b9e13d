#!/usr/bin/env bash
# Publishable as a registry user gets it: every library crate passes `cargo
# package` (its verification build included), and a user crate that depends on
# the packaged crates by version builds, replays a committed tuning cache that
# ships inside a dependency's package, and never writes into that package's
# source (as cargo unpacks a registry crate).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
LIBS=(autotune-lang autotune-macros autotune-codegen autotune-tune autotune-build autotune)

echo "== cargo package: ${LIBS[*]}"
# Cargo verifies each package against the others through a local registry,
# and takes a registry crate of a version it has unpacked or built before as
# unchanged: an earlier run's copy (same version, older source) would be used
# instead of this one. Drop both.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/autotune*-0.1.0 "$TARGET"/debug/.fingerprint/autotune*
cargo package --locked --allow-dirty $(printf -- '-p %s ' "${LIBS[@]}")
PKG=$TARGET/package

W=$(mktemp -d /tmp/autotune-registry-user.XXXXXX)
trap 'rm -rf "$W"' EXIT
cp -r .ci/registry-user/ops-lib .ci/registry-user/app "$W/"
export CARGO_TARGET_DIR=$W/target

# crates-io patched to the packaged sources: what `cargo publish` would upload.
patch() {
    echo "[patch.crates-io]"
    for c in "${LIBS[@]}"; do
        echo "$c = { path = \"$PKG/$c-0.1.0\" }"
    done
    for extra in "$@"; do echo "$extra"; done
}
patch >>"$W/ops-lib/Cargo.toml"

echo "== the library's author tunes its operator (a local package: the cache is written)"
(cd "$W/ops-lib" && AUTOTUNE=tune AUTOTUNE_TRIALS=3 AUTOTUNE_SECONDS=30 AUTOTUNE_HISTORY= cargo build)
test -s "$W/ops-lib/tuning-cache/gemm.toml" || { echo "the tuning cache was not written"; exit 1; }

echo "== ... and packages it, cache included"
# The files `cargo package` would ship, unpacked as cargo unpacks a registry
# crate (with the original manifest kept as Cargo.toml.orig). (`cargo package`
# itself would look the unpublished autotune crates up on crates.io.)
LIB=$W/registry/ops-lib-0.1.0
mkdir -p "$LIB"
(cd "$W/ops-lib" && cargo package --list --allow-dirty) | while read -r f; do
    case "$f" in Cargo.toml.orig | Cargo.lock) continue ;; esac
    mkdir -p "$LIB/$(dirname "$f")"
    cp "$W/ops-lib/$f" "$LIB/$f"
done
cp "$ROOT/.ci/registry-user/ops-lib/Cargo.toml" "$LIB/Cargo.toml"
cp "$ROOT/.ci/registry-user/ops-lib/Cargo.toml" "$LIB/Cargo.toml.orig"
test -s "$LIB/tuning-cache/gemm.toml" || { echo "the package lacks its tuning cache"; exit 1; }

patch "ops-lib = { path = \"$LIB\" }" >>"$W/app/Cargo.toml"
snapshot() { (cd "$LIB" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(snapshot)

echo "== a user builds on the packaged crates: the dependency's cache replays (locked)"
(cd "$W/app" && AUTOTUNE=locked cargo run)

echo "== ... and retuning in the user's build never writes into the dependency"
out=$(cd "$W/app" && AUTOTUNE=retune AUTOTUNE_TRIALS=2 AUTOTUNE_SECONDS=20 AUTOTUNE_HISTORY= \
    cargo build -vv 2>&1) || { echo "$out"; exit 1; }
grep -q "not a local package, so the tuning cache is not written" <<<"$out" ||
    { echo "$out"; echo "the build did not say it left the dependency's cache alone"; exit 1; }
[ "$before" = "$(snapshot)" ] || { echo "the build wrote into the packaged dependency"; exit 1; }
echo "packaging: ok"
