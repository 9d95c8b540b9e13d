//! Which config each specialisation is built with: the build mode, the tuning
//! cache, and tuning on a miss (`AUTOTUNE=tune`, the default, with the `tune`
//! feature).

use std::path::Path;

use autotune_codegen::{Choice, Config, Workload};
use autotune_lang::Operator;

use crate::cache::{self, Lookup};
use crate::error::Error;
use crate::report::warn;
use crate::settings::Mode;
use crate::settings::Settings;

/// The configs of each specialisation of `op`: the one this build chose
/// (`None`: the space's default config), and the current entries of other
/// CPUs and thread counts, which the kernel picks at run time
/// ([`cache::variants`]). In locked mode, workloads without an entry are
/// added to `missing`.
pub(crate) fn for_operator(
    op: &Operator,
    all_ops: &[Operator],
    mode: Mode,
    cache_dir: &Path,
    settings: &Settings,
    missing: &mut Vec<String>,
) -> Result<Vec<Choice>, Error> {
    if mode == Mode::Off || op.specializations.is_empty() {
        return Ok(vec![Choice::default(); op.specializations.len()]);
    }
    let entries = cache::load_for(cache_dir, op)?;
    let target = &settings.target;
    let mut out = Vec::new();
    for (spec, served) in op.served_blocked().into_iter().enumerate() {
        // Its blocked variant, an operator of its own, is tuned instead.
        if served {
            out.push(Choice::default());
            continue;
        }
        let w = Workload {
            op: op.clone(),
            spec,
        };
        let id = w.id();
        let cpu = &settings.cpu;
        // Cross-compiling: the target triple's entries, best first, stand for it.
        let look_target = if settings.native {
            target.clone()
        } else {
            entries
                .iter()
                .filter(|e| e.workload_id == id && e.target.triple == target.triple)
                .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
                .map_or(target.clone(), |e| e.target.clone())
        };
        let found = cache::lookup(&entries, &id, &look_target, cpu, settings.threads);
        // The CPU the chosen config was tuned on (this one's, unless replayed).
        let (default_cpu, own_stale) = match &found {
            Lookup::Foreign(e, s) if mode != Mode::Retune => (e.tuned_on(), s.clone()),
            _ => (cpu.clone(), None),
        };
        let config = match (found, mode) {
            (Lookup::Hit(e) | Lookup::Foreign(e, _), m) if m != Mode::Retune => {
                if !cpu.same(&e.tuned_on()) {
                    let why = match own_stale {
                        Some(s) => format!(
                            "this CPU's entry ({cpu}) is stale (generator {} ≠ {})",
                            s.generator,
                            cache::GENERATOR_VERSION
                        ),
                        None => format!("the tuning cache has no entry for this CPU, {cpu}"),
                    };
                    warn(&format!(
                        "{}: replaying the config tuned on {}; {why}. AUTOTUNE=retune tunes one \
                         here, beside it",
                        w.key(),
                        e.tuned_on(),
                    ));
                }
                if let Some(t) = e.threads.filter(|t| *t != settings.threads) {
                    warn(&format!(
                        "{}: the cached config was tuned with {t} kernel threads; the kernels \
                         here start with {} (AUTOTUNE_NUM_THREADS, else the CPUs this build may \
                         use), so it may not be the fastest here. Re-tune with AUTOTUNE=retune",
                        w.key(),
                        settings.threads
                    ));
                }
                Some(e.config)
            }
            (Lookup::Stale(e), _) if !matches!(mode, Mode::Tune | Mode::Retune) => {
                warn(&format!(
                    "{}: the cached config is stale (generator {} ≠ {}); using the default \
                     schedule. Re-tune with AUTOTUNE=tune",
                    w.key(),
                    e.generator,
                    cache::GENERATOR_VERSION
                ));
                if mode == Mode::Locked {
                    missing.push(format!("{} (stale)", w.key()));
                }
                None
            }
            (_, Mode::Locked) => {
                missing.push(w.key());
                None
            }
            (_, Mode::Cached) => {
                warn(&format!(
                    "{} is not in the tuning cache ({}); using the default schedule \
                     (AUTOTUNE=cached). Tune it with AUTOTUNE=tune cargo build",
                    w.key(),
                    cache::file_of(cache_dir, &op.name).display()
                ));
                None
            }
            _ if !settings.native => {
                warn(&format!(
                    "{}: cross-compiling, so nothing can be measured; using the default schedule",
                    w.key()
                ));
                None
            }
            _ => {
                // Tuning for minutes deserves a word on why, when the cache has
                // this workload for other machines only.
                let others: std::collections::BTreeSet<String> = entries
                    .iter()
                    .filter(|e| e.workload_id == id && e.target != *target)
                    .map(|e| e.target.to_string())
                    .collect();
                if !others.is_empty() {
                    warn(&format!(
                        "{}: the tuning cache has entries only for {}, not for this machine's {}; \
                         tuning it here (up to {} trials / {} s)",
                        w.key(),
                        Vec::from_iter(others).join(", "),
                        target,
                        settings.budget.trials,
                        settings.budget.seconds
                    ));
                }
                tune_miss(
                    &w,
                    all_ops,
                    &cache::seeds(&entries, &id, target, cpu),
                    cache_dir,
                    settings,
                    mode == Mode::Retune,
                )?
            }
        };
        let variants = cache::variants(
            &entries,
            &id,
            &look_target,
            &default_cpu,
            settings.threads,
            config.as_ref(),
        );
        out.push(Choice { config, variants });
    }
    Ok(out)
}

#[cfg(feature = "tune")]
fn tune_miss(
    w: &Workload,
    all_ops: &[Operator],
    seeds: &cache::Seeds,
    cache_dir: &Path,
    settings: &Settings,
    retune: bool,
) -> Result<Option<Config>, Error> {
    crate::tuning::tune_one(w, all_ops, seeds, cache_dir, settings, retune).map(Some)
}

/// Without the tuner, a miss builds the default schedule and says so.
#[cfg(not(feature = "tune"))]
fn tune_miss(
    w: &Workload,
    _: &[Operator],
    _: &cache::Seeds,
    cache_dir: &Path,
    _: &Settings,
    _: bool,
) -> Result<Option<Config>, Error> {
    warn(&format!(
        "{} is not in the tuning cache ({}), and this build of autotune-build cannot tune \
         (its `tune` feature is off); using the default schedule. Turn the feature on to tune it, \
         or commit a cache entry",
        w.key(),
        cache::file_of(cache_dir, &w.op.name).display()
    ));
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Entry;
    use autotune_codegen::{Isa, Space, Target};

    pub(crate) fn matmul() -> Operator {
        let item: syn::ItemFn = syn::parse_str(
            "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
                compute(|i, j| sum(|k| a[i][k] * b[k][j]))
            }",
        )
        .unwrap();
        let attr = "specialize(M = 4, N = 16, K = 8)".parse().unwrap();
        autotune_lang::parse_operator(attr, &item).unwrap()
    }

    pub(crate) fn settings(dir: &Path, triple: &str, host: &str) -> Settings {
        let vars = [
            ("OUT_DIR", dir.to_str().unwrap()),
            ("CARGO_MANIFEST_DIR", dir.to_str().unwrap()),
            ("TARGET", triple),
            ("HOST", host),
            ("CARGO_CFG_TARGET_ARCH", triple.split('-').next().unwrap()),
        ];
        Settings::read(&|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| std::ffi::OsString::from(v))
        })
        .unwrap()
    }

    /// Cross-compiling (TARGET ≠ HOST) never measures: a miss builds the default
    /// schedule even in tune mode, and an entry for the target triple is replayed.
    #[test]
    fn cross_compiling_replays_or_uses_defaults() {
        let op = matmul();
        let dir = std::env::temp_dir().join(format!("autotune-cross-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = settings(
            &dir,
            "aarch64-unknown-linux-gnu",
            "x86_64-unknown-linux-gnu",
        );
        assert!(!s.native);
        let mut missing = Vec::new();
        let miss = for_operator(&op, &[], Mode::Tune, &dir, &s, &mut missing).unwrap();
        assert_eq!(miss, vec![Choice::default()]);
        let w = Workload {
            op: op.clone(),
            spec: 0,
        };
        let space = Space::new(&op, w.shapes());
        let config = space.config_at(
            space
                .index_of(&space.default_config(&op, w.shapes()))
                .unwrap()
                + 1,
        );
        cache::store(
            &dir,
            "mm",
            Entry {
                workload: w.key(),
                workload_id: w.id(),
                target: Target {
                    triple: "aarch64-unknown-linux-gnu".into(),
                    isa: Isa::Baseline,
                },
                generator: cache::GENERATOR_VERSION,
                gflops: 1.0,
                trials: 1,
                tuner: "test".into(),
                cpu: "test".into(),
                cpu_id: None,
                compiler: "test".into(),
                threads: None,
                date: "2026-11-29".into(),
                config: config.clone(),
                kernel: None,
            },
        )
        .unwrap();
        let hit = for_operator(&op, &[], Mode::Locked, &dir, &s, &mut missing).unwrap();
        assert_eq!(hit, vec![Some(config).into()]);
        assert!(missing.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Built without the tuner (`--no-default-features`), a miss in tune mode
    /// builds the default schedule instead of failing.
    #[cfg(not(feature = "tune"))]
    #[test]
    fn without_the_tuner_a_miss_uses_the_default() {
        let dir = std::env::temp_dir().join(format!("autotune-notune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let host = "x86_64-unknown-linux-gnu";
        let s = settings(&dir, host, host);
        let mut missing = Vec::new();
        let got = for_operator(&matmul(), &[], Mode::Tune, &dir, &s, &mut missing).unwrap();
        assert_eq!(got, vec![Choice::default()]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
