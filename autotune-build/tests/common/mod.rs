//! The committed tuning caches of the workspace and the operators they tune.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};

use autotune_build::cache::{self, Entry};
use autotune_codegen::Workload;

/// Each committed cache directory with the sources defining its operators.
pub const CACHES: &[(&str, &[&str])] = &[
    (
        "tuning-cache",
        &["examples/matmul/src/ops.rs", "examples/resnet18/src/ops.rs"],
    ),
    ("bench/tuning-cache", &["bench/ops.rs"]),
];

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every entry of the committed caches, with its cache directory and its
/// workload (the specialisation whose id it carries).
pub fn committed_entries() -> Vec<(&'static str, Workload, Entry)> {
    let root = root();
    let mut out = Vec::new();
    for (cache_dir, sources) in CACHES {
        let files: Vec<PathBuf> = sources.iter().map(PathBuf::from).collect();
        let ops = autotune_build::load_operators(&root, &files).unwrap();
        let dir = root.join(cache_dir);
        for name in cache::operators(&dir).unwrap() {
            let op = &ops
                .iter()
                .find(|s| s.op.name == name)
                .unwrap_or_else(|| panic!("{cache_dir}/{name}.toml has no operator in {sources:?}"))
                .op;
            for e in cache::load_for(&dir, op).unwrap() {
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
                let w = Workload {
                    op: op.clone(),
                    spec,
                };
                out.push((*cache_dir, w, e));
            }
        }
    }
    out
}

/// The committed entries of the current generator (or carried over to it by
/// an unchanged kernel): what builds apply.
pub fn current_entries() -> Vec<(&'static str, Workload, Entry)> {
    let mut all = committed_entries();
    all.retain(|(_, _, e)| e.generator == cache::GENERATOR_VERSION);
    all
}
