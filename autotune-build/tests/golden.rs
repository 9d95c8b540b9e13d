//! The safety net of the crate split (issue #13): every entry of the committed
//! tuning caches still hits, and generates the same C as before.
//!
//! The snapshot lists, per entry: operator IR fingerprint, workload id, target,
//! and a hash of the C of its kernel (every ISA clone, under a fixed package
//! name). It was recorded before the split; a change to it is a change to what
//! ships, and must come with a generator version bump.

use std::path::{Path, PathBuf};

use autotune_build::cache::{self, Lookup};
use autotune_codegen::{Isa, Workload};
use autotune_lang::mangle::{self, Package, Variant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// FNV-1a, 64 bits: stable across Rust versions (unlike `DefaultHasher`).
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every entry of `cache` whose operator is defined in `sources`, as snapshot lines.
fn entries(cache: &str, sources: &[&str]) -> String {
    let root = root();
    let files: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
    let ops = autotune_build::load_operators(&root, &files).unwrap();
    let dir = root.join(cache);
    let pkg = Package {
        name: "golden".into(),
        version: "0.0.0".into(),
    };
    let mut out = String::new();
    for name in cache::operators(&dir).unwrap() {
        let op = &ops
            .iter()
            .find(|s| s.op.name == name)
            .unwrap_or_else(|| panic!("{cache}/{name}.toml has no operator in {sources:?}"))
            .op;
        let entries = cache::load(&dir, &name).unwrap();
        for e in &entries {
            let spec = (0..op.specializations.len())
                .find(|&spec| {
                    Workload {
                        op: op.clone(),
                        spec,
                    }
                    .id()
                        == e.workload_id
                })
                .unwrap_or_else(|| {
                    panic!(
                        "{}: no specialisation of `{name}` has this id",
                        e.workload_id
                    )
                });
            assert!(
                matches!(
                    cache::lookup(&entries, &e.workload_id, &e.target),
                    Lookup::Hit(_)
                ),
                "{} {} does not hit",
                e.workload_id,
                e.target
            );
            let c = autotune_codegen::variant_c(
                &pkg,
                op,
                Variant::Specialized(spec),
                Some(&e.config),
                &Isa::levels("x86_64"),
            )
            .unwrap();
            out.push_str(&format!(
                "{cache}/{name}: fingerprint {:016x} id {} target {} c {:016x}\n",
                mangle::fingerprint(op),
                e.workload_id,
                e.target,
                fnv(&c)
            ));
        }
    }
    out
}

#[test]
fn committed_caches_hit_and_generate_the_same_c() {
    let mut all = entries(
        "tuning-cache",
        &["examples/matmul/src/ops.rs", "examples/resnet18/src/ops.rs"],
    );
    all.push_str(&entries("bench/tuning-cache", &["bench/ops.rs"]));
    insta::assert_snapshot!(all);
}
