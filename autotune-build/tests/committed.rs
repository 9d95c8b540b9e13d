//! Every committed cache entry's kernel is correct, at its own ISA level and on
//! the AVX2 and baseline fallbacks (which a build with a run-time cap, or a CPU
//! without AVX-512, dispatches to): compiled as the build compiles it and
//! checked against the reference, where this CPU can run that level.
#![cfg(feature = "tune")]

mod common;

use std::collections::BTreeMap;

use autotune_codegen::{Config, Isa, Workload};
use autotune_tune::measure::{Candidate, Harness, TimingOptions};
use autotune_tune::parallel::on_every_core;

/// A committed cache's workload with its entries' distinct configs per ISA level.
type Checks<'a> = (&'a str, Workload, BTreeMap<Isa, Vec<Config>>);

#[test]
#[ignore = "compiles every committed kernel at up to three ISA levels (minutes); .ci/run runs it"]
fn every_committed_kernel_is_correct_at_every_isa_level() {
    let best = Isa::detect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("committed");
    // Per workload, the distinct configs of its entries (CPUs, thread counts)
    // at each level: one harness (inputs, reference, runtime) serves them all.
    // Keyed by the workload's exact identity, so a workload that two caches
    // commit (bench/ops.rs repeats an example's operator) is checked once.
    let mut workloads: BTreeMap<String, Checks> = BTreeMap::new();
    for (cache, w, e) in common::current_entries() {
        let key = w.id().to_string();
        let (_, _, levels) = workloads
            .entry(key)
            .or_insert_with(|| (cache, w.clone(), BTreeMap::new()));
        for isa in [e.target.isa, Isa::Avx2, Isa::Baseline] {
            if isa > best {
                continue;
            }
            let configs = levels.entry(isa).or_default();
            if !configs.contains(&e.config) {
                configs.push(e.config.clone());
            }
        }
    }
    // Workloads are checked on every core: a workload's few candidates alone
    // would leave cores idle while its harness and driver build.
    let workloads: Vec<_> = workloads.into_values().enumerate().collect();
    let checked: usize = on_every_core(&workloads, |(i, w)| {
        check_workload(w, &dir.join(format!("w{i}")))
    })
    .into_iter()
    .sum();
    println!("{checked} committed kernels checked");
    assert!(checked > 0);
}

/// Checks a workload's configs at each level (with one harness); returns how
/// many kernels it checked.
fn check_workload((cache, w, levels): &Checks, dir: &std::path::Path) -> usize {
    // The objects kept across runs: every run checks the same kernels.
    let store = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("objects");
    let harness = Harness::sharing_objects(w, Isa::Baseline, dir, 1, &store)
        .unwrap_or_else(|err| panic!("{cache}: {}: {err}", w.key()));
    let mut checked = 0;
    for (isa, configs) in levels {
        let candidates: Vec<Candidate> = configs.iter().cloned().map(Candidate::Config).collect();
        let batch = harness
            .build_at(&candidates, *isa, &dir.join(isa.to_string()))
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
    checked
}
