//! Every committed cache entry's kernel is correct, at its own ISA level and on
//! the AVX2 and baseline fallbacks (which a build with a run-time cap, or a CPU
//! without AVX-512, dispatches to): compiled as the build compiles it and
//! checked against the reference, where this CPU can run that level.
#![cfg(feature = "tune")]

mod common;

use autotune_codegen::Isa;
use autotune_tune::measure::{build_batch, TimingOptions};

#[test]
#[ignore = "compiles every committed kernel at up to three ISA levels (minutes); .ci/run runs it"]
fn every_committed_kernel_is_correct_at_every_isa_level() {
    let best = Isa::detect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("committed");
    let mut checked = 0;
    for (cache, w, e) in common::current_entries() {
        let levels: std::collections::BTreeSet<Isa> = [e.target.isa, Isa::Avx2, Isa::Baseline]
            .into_iter()
            .filter(|isa| *isa <= best)
            .collect();
        for isa in levels {
            let batch = build_batch(&w, std::slice::from_ref(&e.config), isa, &dir, 1)
                .unwrap_or_else(|err| panic!("{cache}: {} at {isa}: {err}", w.key()));
            batch
                .check(0, &TimingOptions::default())
                .unwrap_or_else(|err| panic!("{cache}: {} at {isa}: {err}", w.key()));
            checked += 1;
        }
    }
    println!("{checked} committed kernels checked");
    assert!(checked > 0);
}
