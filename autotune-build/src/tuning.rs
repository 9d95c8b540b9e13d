//! Tuning a cache miss in the build (feature `tune`): one [`TuningSession`]
//! with the build's budget, cargo's jobserver tokens held while timing, the
//! winner written to the cache when the package is local. The search is
//! few-shot, ranked by the pre-trained model for the target (the shipped one,
//! or `AUTOTUNE_MODEL`'s), where there is one.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use autotune_codegen::{Config, KernelFingerprint, Workload};
use autotune_lang::Operator;
use autotune_tune::measure::compiler_version;
use autotune_tune::pretrained::{self, Loaded, Pretrained};
use autotune_tune::{TuneOptions, TunerSpec, TuningSession};

use crate::cache::{self, Entry};
use crate::error::Error;
use crate::report::warn;
use crate::settings::{ModelChoice, Settings};

/// The pre-trained model of this build, read once: `AUTOTUNE_MODEL`'s file (an
/// error if it cannot be used), else the shipped one for the target (if it
/// cannot be used, that is said and tuning goes on without it).
fn model(settings: &Settings) -> Result<Option<&'static Loaded>, Error> {
    static MODEL: OnceLock<Option<Loaded>> = OnceLock::new();
    if let Some(m) = MODEL.get() {
        return Ok(m.as_ref());
    }
    let m = match &settings.model {
        ModelChoice::Off => None,
        ModelChoice::File(path) => Some(Pretrained::load(path).map_err(Error::Model)?),
        ModelChoice::Shipped => match pretrained::shipped(&settings.target).transpose() {
            Ok(m) => m,
            Err(e) => {
                warn(&format!("the shipped pre-trained model is not used: {e}"));
                None
            }
        },
    };
    Ok(MODEL.get_or_init(|| m).as_ref())
}

/// Job tokens of cargo's jobserver held while measuring, so that no other
/// compile job runs on the cores being timed. Released when dropped.
struct HeldCores {
    _tokens: Vec<jobserver::Acquired>,
    /// Whether every core of the build is ours.
    all: bool,
}

/// Takes the other `jobs - 1` tokens (this build script holds one), waiting
/// up to 30 s for running jobs to finish; with fewer, measurement goes on and
/// the warning says its figures may be noisy.
fn hold_cores(jobs: usize) -> HeldCores {
    let want = jobs.saturating_sub(1);
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

/// Tunes one workload within the build's budget (every trial is checked
/// against the reference before it counts) and writes the winner to the cache
/// when the package is local. Re-tuning measures the whole budget anew (the
/// record log's trials still count for the best).
pub(crate) fn tune_one(
    w: &Workload,
    all_ops: &[Operator],
    seeds: &crate::cache::Seeds,
    cache_dir: &Path,
    settings: &Settings,
    retune: bool,
) -> Result<Config, Error> {
    let records = cache_dir.join("records");
    let defaults = TuneOptions::default();
    let pretrained = model(settings)?;
    let session = TuningSession {
        workload: w,
        operators: all_ops,
        // Few-shot unless the model is turned off; without a model for the
        // target the session falls back to xgb-rank (or genetic) and says so.
        tuner: if settings.model == ModelChoice::Off {
            TunerSpec::MODEL
        } else {
            TunerSpec::FewShot {
                refit: autotune_tune::model::AVAILABLE,
            }
        },
        options: TuneOptions {
            trials: settings.budget.trials,
            count_resumed: !retune,
            time: Some(Duration::from_secs_f64(settings.budget.seconds)),
            dir: settings.out_dir.join("autotune-tune").join(&w.op.name),
            log: Some(records.join(format!("{}.jsonl", w.op.name))).filter(|_| settings.local),
            incumbents: seeds.incumbents.clone(),
            target: settings.target.clone(),
            // Time with the threads the shipped kernel will use, so a serial
            // schedule cannot win on a multi-core machine.
            timing: autotune_tune::measure::TimingOptions {
                threads: settings.threads,
                ..defaults.timing
            },
            ..defaults
        },
        // Transfer learning from the crate's records and the per-user store.
        history: settings.transfer.then(|| {
            let mut sources = vec![records.clone()];
            sources.extend(settings.user_store.clone());
            sources
        }),
        seeds: seeds.others.clone(),
        mirror: settings
            .user_store
            .as_ref()
            .map(|d| d.join(format!("{}.jsonl", w.op.name))),
        pretrained,
    };
    let cores = hold_cores(settings.jobs);
    let report = session.run(&mut |_, _| {}).map_err(|source| Error::Tune {
        workload: w.key(),
        source,
    })?;
    let all_cores = cores.all;
    drop(cores);
    for note in &report.notes {
        warn(note);
    }
    let summary = &report.summary;
    let Some((config, gflops)) = summary.best.clone() else {
        return Err(Error::NothingRan {
            workload: w.key(),
            errors: format!("{:?}", summary.errors),
        });
    };
    warn(&format!(
        "tuned {} in {:.1} s with {}: {} trials, {:.2} GFLOP/s (default schedule {:.2}){}{}",
        w.key(),
        summary.elapsed.as_secs_f64(),
        report.tuner,
        summary.trials,
        gflops,
        summary.default_gflops.unwrap_or(0.0),
        summary
            .confirmation
            .as_ref()
            .map_or(String::new(), |c| format!("; {c}")),
        if all_cores {
            ""
        } else {
            "; other compile jobs shared the cores while timing, so these figures may be noisy"
        }
    ));
    if settings.local {
        let entry = Entry {
            workload: w.key(),
            workload_id: w.id(),
            target: settings.target.clone(),
            generator: cache::GENERATOR_VERSION,
            gflops,
            trials: summary.trials,
            tuner: report.tuner.clone(),
            cpu: settings.cpu.name.clone(),
            cpu_id: settings.cpu.id.clone(),
            compiler: compiler_version(),
            threads: Some(settings.threads),
            date: cache::today(),
            config: config.clone(),
            kernel: KernelFingerprint::of(w, &config, settings.target.isa).ok(),
        };
        cache::store(cache_dir, &w.op.name, entry)?;
    } else {
        warn(&format!(
            "{}: not a local package, so the tuning cache is not written",
            w.key()
        ));
    }
    Ok(config)
}
