//! Which config each specialisation is built with: the build mode, the tuning
//! cache, and tuning on a miss (`AUTOTUNE=tune`, the default).

use std::path::Path;
use std::time::Duration;

use autotune_lang::Operator;

use crate::cache::{self, Entry, Lookup};
use crate::history::{self, History};
use crate::measure::{TimingOptions, Workload};
use crate::model::Objective;
use crate::search::{self, SearchOptions};
use crate::space::Config;
use crate::tune::{self, TuneOptions, Tuner};
use crate::{Error, Mode};

fn warn(msg: &str) {
    println!("cargo:warning=autotune: {msg}");
}

/// A package from a registry, a git dependency or `cargo package`'s
/// verification build never has its source directory written.
fn is_local(manifest_dir: &Path) -> bool {
    let p = manifest_dir.to_string_lossy().replace('\\', "/");
    !(p.contains("/.cargo/registry/")
        || p.contains("/.cargo/git/")
        || p.contains("/target/package/"))
}

/// Whether this build can run the code it builds (tuning measures on the host).
fn host_runs_target() -> bool {
    std::env::var("TARGET").ok() == std::env::var("HOST").ok()
}

/// `[package.metadata.autotune] <key> = <number>` of the package's manifest.
fn metadata_number(manifest_dir: &Path, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(manifest_dir.join("Cargo.toml")).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    let v = value
        .get("package")?
        .get("metadata")?
        .get("autotune")?
        .get(key)?;
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

/// A budget from the environment, else the manifest's metadata, else `default`.
fn budget(var: &'static str, key: &str, manifest_dir: &Path, default: f64) -> Result<f64, Error> {
    env_number(var, metadata_number(manifest_dir, key).unwrap_or(default))
}

fn env_number(var: &'static str, default: f64) -> Result<f64, Error> {
    match std::env::var(var) {
        Err(_) => Ok(default),
        Ok(v) => v.parse().map_err(|_| Error::BadEnv {
            var,
            value: v,
            expected: "a number",
        }),
    }
}

/// One config per specialisation of `op` (`None`: the space's default config).
/// In locked mode, workloads without an entry are added to `missing`.
pub(crate) fn for_operator(
    op: &Operator,
    all_ops: &[Operator],
    mode: Mode,
    cache_dir: &Path,
    out_dir: &Path,
    manifest_dir: &Path,
    missing: &mut Vec<String>,
) -> Result<Vec<Option<Config>>, Error> {
    if mode == Mode::Off || op.specializations.is_empty() {
        return Ok(vec![None; op.specializations.len()]);
    }
    let entries = cache::load(cache_dir, &op.name)?;
    let can_tune = host_runs_target();
    let mut out = Vec::new();
    for spec in 0..op.specializations.len() {
        let w = Workload {
            op: op.clone(),
            spec,
        };
        let id = tune::workload_id(&w);
        let target = tune::target();
        let found = if can_tune {
            cache::lookup(&entries, &id, &target)
        } else {
            // Cross-compiling: any entry for the target triple, best first.
            let triple = std::env::var("TARGET").unwrap_or_default();
            let mut m: Vec<&Entry> = entries
                .iter()
                .filter(|e| e.workload_id == id && e.target.starts_with(&format!("{triple}/")))
                .collect();
            m.sort_by(|a, b| b.gflops.total_cmp(&a.gflops));
            m.first()
                .map_or(Lookup::Miss, |e| cache::lookup(&entries, &id, &e.target))
        };
        let config = match (found, mode) {
            (Lookup::Hit(e), m) if m != Mode::Retune => Some(e.config),
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
            _ if !can_tune => {
                warn(&format!(
                    "{}: cross-compiling, so nothing can be measured; using the default schedule",
                    w.key()
                ));
                None
            }
            _ => {
                // Winners of the operator's other workloads on this target start the search.
                let seeds: Vec<Config> = entries
                    .iter()
                    .filter(|e| e.workload_id != id && e.target == target)
                    .map(|e| e.config.clone())
                    .collect();
                Some(tune_one(
                    &w,
                    all_ops,
                    &seeds,
                    cache_dir,
                    out_dir,
                    manifest_dir,
                )?)
            }
        };
        out.push(config);
    }
    Ok(out)
}

/// Job tokens of cargo's jobserver held while measuring, so that no other
/// compile job runs on the cores being timed. Released when dropped.
struct HeldCores {
    _tokens: Vec<jobserver::Acquired>,
    /// Whether every core of the build is ours.
    all: bool,
}

/// Takes the other `NUM_JOBS - 1` tokens (this build script holds one), waiting
/// up to 30 s for running jobs to finish; with fewer, measurement goes on and
/// the warning says its figures may be noisy.
fn hold_cores() -> HeldCores {
    let want = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .saturating_sub(1);
    static CLIENT: std::sync::OnceLock<Option<jobserver::Client>> = std::sync::OnceLock::new();
    // SAFETY: connects once per process, to the descriptors cargo passed to this
    // build script in CARGO_MAKEFLAGS.
    let client = CLIENT.get_or_init(|| unsafe { jobserver::Client::from_env() });
    let Some(client) = client else {
        return HeldCores {
            _tokens: Vec::new(),
            all: want == 0,
        };
    };
    let mut tokens = Vec::new();
    let start = std::time::Instant::now();
    while tokens.len() < want && start.elapsed() < Duration::from_secs(30) {
        match client.try_acquire() {
            Ok(Some(t)) => tokens.push(t),
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => break,
        }
    }
    let all = tokens.len() == want;
    HeldCores {
        _tokens: tokens,
        all,
    }
}

/// The thread count the kernels' pool starts with: `AUTOTUNE_NUM_THREADS` if it is a
/// positive integer, else the online CPUs (as `pool.c` decides).
fn default_threads() -> usize {
    std::env::var("AUTOTUNE_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(256)
}

/// Tunes one workload within the environment's budget, checks the winner
/// (every trial is checked against the reference before it counts) and writes
/// it to the cache when the package is local.
fn tune_one(
    w: &Workload,
    all_ops: &[Operator],
    seeds: &[Config],
    cache_dir: &Path,
    out_dir: &Path,
    manifest_dir: &Path,
) -> Result<Config, Error> {
    let trials = budget("AUTOTUNE_TRIALS", "trials", manifest_dir, 48.0)? as usize;
    let seconds = budget("AUTOTUNE_SECONDS", "seconds", manifest_dir, 120.0)?;
    let opts = TuneOptions {
        trials,
        time: Some(Duration::from_secs_f64(seconds)),
        dir: out_dir.join("autotune-tune").join(&w.op.name),
        log: Some(
            cache_dir
                .join("records")
                .join(format!("{}.jsonl", w.op.name)),
        )
        .filter(|_| is_local(manifest_dir)),
        ..TuneOptions::default()
    };
    // Time with the threads the shipped kernel will use (the pool's default), so a
    // serial schedule cannot win on a multi-core machine.
    let opts = TuneOptions {
        timing: TimingOptions {
            threads: default_threads(),
            ..opts.timing
        },
        ..opts
    };
    if cfg!(not(feature = "xgboost")) {
        // Say so before reading any history for a search that cannot run.
        return Err(Error::NoCostModel { workload: w.key() });
    }
    // Transfer learning from the crate's records and the per-user store, unless
    // AUTOTUNE_TRANSFER=off.
    let user_store = history::user_store();
    let transfer = !matches!(
        std::env::var("AUTOTUNE_TRANSFER").as_deref(),
        Ok("off" | "0" | "false")
    );
    let past = transfer.then(|| {
        let mut sources = vec![cache_dir.join("records")];
        sources.extend(user_store.clone());
        let (past, problems) = History::for_tuning(w, &sources, all_ops);
        for p in problems {
            warn(&format!("tuning history skipped: {p}"));
        }
        past
    });
    let mut tuner = search::xgb_tuner(
        w,
        Objective::Rank,
        SearchOptions::default(),
        1,
        past.as_ref(),
        seeds,
    )
    .map_err(|e| Error::Tune {
        workload: w.key(),
        message: e.to_string(),
    })?;
    let user_log = user_store.map(|d| d.join(format!("{}.jsonl", w.op.name)));
    let cores = hold_cores();
    let summary = tune::tune(w, &mut tuner, &opts, &mut |r, _| {
        // The per-user store is a convenience: a failed write loses nothing here.
        if let Some(log) = &user_log {
            let _ = tune::append(log, r);
        }
    })
    .map_err(|e| Error::Tune {
        workload: w.key(),
        message: e.to_string(),
    })?;
    let all_cores = cores.all;
    drop(cores);
    let Some((config, gflops)) = summary.best.clone() else {
        return Err(Error::Tune {
            workload: w.key(),
            message: format!("no config ran correctly ({:?})", summary.errors),
        });
    };
    warn(&format!(
        "tuned {} in {:.1} s: {} trials, {:.2} GFLOP/s (default schedule {:.2}){}",
        w.key(),
        summary.elapsed.as_secs_f64(),
        summary.trials,
        gflops,
        summary.default_gflops.unwrap_or(0.0),
        if all_cores {
            ""
        } else {
            "; other compile jobs shared the cores while timing, so these figures may be noisy"
        }
    ));
    if is_local(manifest_dir) {
        let entry = Entry::measured(w, config.clone(), gflops, summary.trials, tuner.name());
        cache::store(cache_dir, &w.op.name, entry)?;
    } else {
        warn(&format!(
            "{}: not a local package, so the tuning cache is not written",
            w.key()
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul() -> Operator {
        let item: syn::ItemFn = syn::parse_str(
            "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
                compute(|i, j| sum(|k| a[i][k] * b[k][j]))
            }",
        )
        .unwrap();
        let attr = "specialize(M = 4, N = 16, K = 8)".parse().unwrap();
        autotune_lang::parse_operator(attr, &item).unwrap()
    }

    /// Built without the cost model (`--no-default-features`), a build refuses
    /// to tune and says how to go on.
    #[cfg(not(feature = "xgboost"))]
    #[test]
    fn without_the_cost_model_tuning_is_refused() {
        let w = Workload {
            op: matmul(),
            spec: 0,
        };
        let dir = std::env::temp_dir().join(format!("autotune-nomodel-{}", std::process::id()));
        let e = tune_one(&w, &[], &[], &dir, &dir, &dir).unwrap_err();
        assert!(matches!(e, Error::NoCostModel { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("`xgboost` feature") && msg.contains("AUTOTUNE=cached"),
            "{msg}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Cross-compiling (TARGET ≠ HOST) never measures: a miss builds the default
    /// schedule even in tune mode, and an entry for the target triple is replayed.
    #[test]
    fn cross_compiling_replays_or_uses_defaults() {
        let op = matmul();
        let dir = std::env::temp_dir().join(format!("autotune-cross-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // SAFETY: this is the only test of the crate that reads or writes these variables.
        unsafe {
            std::env::set_var("TARGET", "aarch64-unknown-linux-gnu");
            std::env::set_var("HOST", "x86_64-unknown-linux-gnu");
        }
        let mut missing = Vec::new();
        let miss = for_operator(&op, &[], Mode::Tune, &dir, &dir, &dir, &mut missing).unwrap();
        assert_eq!(miss, vec![None]);
        let w = Workload {
            op: op.clone(),
            spec: 0,
        };
        let space = crate::space::Space::new(&op, w.shapes());
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
                workload_id: tune::workload_id(&w),
                target: "aarch64-unknown-linux-gnu/baseline".into(),
                generator: cache::GENERATOR_VERSION,
                gflops: 1.0,
                trials: 1,
                tuner: "test".into(),
                cpu: "test".into(),
                compiler: "test".into(),
                date: "2026-11-29".into(),
                config: config.clone(),
            },
        )
        .unwrap();
        let hit = for_operator(&op, &[], Mode::Locked, &dir, &dir, &dir, &mut missing).unwrap();
        assert_eq!(hit, vec![Some(config)]);
        assert!(missing.is_empty());
        unsafe {
            std::env::remove_var("TARGET");
            std::env::remove_var("HOST");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
