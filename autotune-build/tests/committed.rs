//! Every committed cache entry's kernel is correct, at its own ISA level and on
//! the AVX2 and baseline fallbacks (which a build with a run-time cap, or a CPU
//! without AVX-512, dispatches to): compiled as the build compiles it and
//! checked against the reference, where this CPU can run that level.
#![cfg(feature = "tune")]

mod common;

use std::collections::BTreeMap;

use autotune_codegen::{Config, Isa, Workload};
use autotune_tune::measure::{build_batch, TimingOptions};

#[test]
#[ignore = "compiles every committed kernel at up to three ISA levels (minutes); .ci/run runs it"]
fn every_committed_kernel_is_correct_at_every_isa_level() {
    let best = Isa::detect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("committed");
    // One batch per workload and level: its entries (CPUs, thread counts) share
    // the harness and are compiled side by side.
    let mut batches: BTreeMap<(String, Isa), (&str, Workload, Vec<Config>)> = BTreeMap::new();
    for (cache, w, e) in common::current_entries() {
        for isa in [e.target.isa, Isa::Avx2, Isa::Baseline] {
            if isa > best {
                continue;
            }
            let key = (format!("{cache}/{}", w.id()), isa);
            let batch = batches
                .entry(key)
                .or_insert_with(|| (cache, w.clone(), Vec::new()));
            if !batch.2.contains(&e.config) {
                batch.2.push(e.config.clone());
            }
        }
    }
    let mut checked = 0;
    for ((_, isa), (cache, w, configs)) in batches {
        let batch = build_batch(&w, &configs, isa, &dir, 1)
            .unwrap_or_else(|err| panic!("{cache}: {} at {isa}: {err}", w.key()));
        for (i, config) in configs.iter().enumerate() {
            batch
                .check(i, &TimingOptions::default())
                .unwrap_or_else(|err| {
                    panic!("{cache}: {} at {isa}, config {config}: {err}", w.key())
                });
            checked += 1;
        }
    }
    println!("{checked} committed kernels checked");
    assert!(checked > 0);
}
