//! The safety net of the crate split (issue #13): every entry of the committed
//! tuning caches still hits, and generates the same C as before.
//!
//! The snapshot lists, per entry of the current generator (stale entries, of
//! CPUs this machine cannot re-tune, are never applied): operator IR fingerprint, workload id, target,
//! and a hash of the C of its kernel (every ISA clone, under a fixed package
//! name). It was recorded before the split; a change to it is a change to what
//! ships, and must come with a generator version bump. Each entry also records
//! the fingerprint of the kernel it timed, and it must still match: that is what
//! keeps an entry current across a later generator version.

mod common;

use autotune_build::cache::{self, Lookup};
use autotune_codegen::{Isa, KernelFingerprint};
use autotune_lang::mangle::{self, Package, Variant};

#[test]
fn committed_caches_hit_and_generate_the_same_c() {
    let pkg = Package {
        name: "golden".into(),
        version: "0.0.0".into(),
    };
    let all = common::current_entries();
    let mut out = String::new();
    for (dir, w, e) in &all {
        let same_op: Vec<_> = all
            .iter()
            .filter(|(d, o, _)| d == dir && o.op.name == w.op.name)
            .map(|x| x.2.clone())
            .collect();
        assert!(
            matches!(
                cache::lookup(
                    &same_op,
                    &e.workload_id,
                    &e.target,
                    &e.tuned_on(),
                    e.threads.unwrap_or(1)
                ),
                Lookup::Hit(hit) if hit == *e
            ),
            "{} {} on {} does not hit",
            e.workload_id,
            e.target,
            e.tuned_on()
        );
        assert_eq!(
            e.kernel,
            Some(KernelFingerprint::of(w, &e.config, e.target.isa).unwrap()),
            "{} {} on {}: the kernel it timed is not the kernel it ships (`cargo autotune \
             stamp` records a missing one)",
            e.workload_id,
            e.target,
            e.tuned_on()
        );
        // A declared bucket ships as a schedule of the generic kernel.
        let c = match w.bucket() {
            None => autotune_codegen::variant_c(
                &pkg,
                &w.op,
                Variant::Specialized(w.spec),
                Some(&e.config),
                &Isa::levels("x86_64"),
            ),
            Some(_) => autotune_codegen::generic_c(
                &w.op,
                &[autotune_codegen::GenericSchedule {
                    at: w.op.specializations[w.spec].clone(),
                    config: e.config.clone(),
                }],
                &Isa::levels("x86_64"),
                e.target.isa,
                mangle::kernel_symbol(&pkg, &w.op, Variant::Generic),
                mangle::runtime_prefix(&pkg),
            ),
        }
        .unwrap();
        out.push_str(&format!(
            "{dir}/{}: fingerprint {:016x} id {} target {} c {:016x}\n",
            w.op.name,
            mangle::fingerprint(&w.op),
            e.workload_id,
            e.target,
            mangle::fnv1a(c.as_bytes())
        ));
    }
    insta::assert_snapshot!(out);
}

/// `.ci/run` builds the examples with `AUTOTUNE=locked` on whichever CPU it
/// gets, with AVX-512 or with AVX2 only: every workload they build needs a
/// current entry at both levels (a build replays another CPU's entry of its
/// level, never a stale one, and never one of another level). And at the 2
/// threads those builds start kernels with (one per CPU): a 1-thread config
/// replayed on 2 threads ran a ResNet-18 layer at half the speed of its own.
#[test]
fn the_examples_cache_has_a_current_2_thread_entry_for_every_workload_at_avx512_and_avx2() {
    let root = common::root();
    let (dir, sources) = common::CACHES
        .iter()
        .find(|(dir, _)| *dir == "tuning-cache")
        .unwrap();
    let files: Vec<_> = sources.iter().map(std::path::PathBuf::from).collect();
    let mut missing = Vec::new();
    for s in autotune_build::load_operators(&root, &files).unwrap() {
        let entries = cache::load_for(&root.join(dir), &s.op).unwrap();
        for (spec, served) in s.op.served_blocked().into_iter().enumerate() {
            // Served by its blocked variant, which has entries of its own.
            if served {
                continue;
            }
            let id = autotune_codegen::Workload {
                op: s.op.clone(),
                spec,
            }
            .id();
            for isa in [Isa::Avx512, Isa::Avx2] {
                let current = entries.iter().any(|e| {
                    e.workload_id == id
                        && e.target.isa == isa
                        && e.threads == Some(2)
                        && e.generator == cache::GENERATOR_VERSION
                });
                if !current {
                    missing.push(format!("{id} at {isa} on 2 threads"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{dir} has no current entry for {missing:?}: tune them on a CPU of that level \
         (`cargo autotune tune --save`)"
    );
}
