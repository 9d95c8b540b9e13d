//! `cargo autotune`: the command-line face of autotune.
//!
//! - `cargo autotune space --file src/ops.rs [--op NAME]`: each workload's
//!   schedule space (knobs, choices, size) and its default config;
//! - `cargo autotune bench --file src/ops.rs --op NAME [--spec I] [--config
//!   "knob=value ..."]`: compiles one config exactly as the build would, checks it
//!   against the reference and prints its speed;
//! - `cargo autotune sweep`: a list of configs measured in one batch, ranked;
//! - `cargo autotune tune --file src/ops.rs --op NAME [--spec I] [--tuner
//!   xgb-rank|few-shot|genetic|random|...] [--trials N] [--seconds S] [--log FILE] [--json]`: a
//!   tuning run with a live progress bar, resumable from its record log
//!   (`--save` writes the best config to the tuning cache);
//! - `cargo autotune show|verify|prune --cache tuning-cache`: list the cache,
//!   re-measure and check its kernels here, drop entries the source lost;
//!   `cargo autotune stamp [--log FILE]`: record the kernel fingerprint of
//!   entries and records written before they carried one;
//! - `cargo autotune plot --log records.jsonl --out curve.svg`: tuning curves;
//! - `cargo autotune train --file OPS --log DIR --out model.json`: a
//!   pre-trained cost model from record logs (`bench/corpus.sh` makes the
//!   shipped ones), and `cargo autotune rank --model model.json --file OPS
//!   --log DIR`: how well it orders the trials of other logs.

mod plot;
mod replay;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use autotune_build::cache;
use autotune_codegen::{Config, Isa, KernelFingerprint, Space, Target, Workload};
use autotune_tune::measure::{self, TimingOptions};
use autotune_tune::{TuneOptions, TunerSpec, TuningSession};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

/// What measurements here stand for: this machine's triple and best ISA level,
/// capped by `AUTOTUNE_TUNE_ISA` as a build caps it.
fn host_target() -> Result<Target> {
    let cap = std::env::var("AUTOTUNE_TUNE_ISA").ok();
    let isa = autotune_build::settings::tune_isa(Isa::detect(), cap.as_deref())?;
    Ok(Target {
        triple: autotune_tune::HOST_TRIPLE.to_string(),
        isa,
    })
}

/// The thread count the kernels ship with here (`AUTOTUNE_NUM_THREADS`, else
/// the CPUs this process may use): what `tune` and `verify` time with by default.
fn shipped_threads() -> usize {
    autotune_build::settings::shipped_threads(std::env::var("AUTOTUNE_NUM_THREADS").ok().as_deref())
}

/// The per-user store of record logs, as the build finds it.
fn user_store() -> Option<PathBuf> {
    autotune_tune::history::user_store(
        std::env::var_os("AUTOTUNE_HISTORY"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

#[derive(Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// Schedule spaces and measurements of #[tensor_op] kernels.
    Autotune(Cli),
}

#[derive(Args)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct OpArgs {
    /// Source file holding the #[tensor_op] operators.
    #[arg(long, default_value = "src/ops.rs")]
    file: PathBuf,
    /// Operator name (all operators when omitted, where that makes sense).
    #[arg(long)]
    op: Option<String>,
    /// Index of the specialisation (`specialize(...)` in source order).
    #[arg(long, default_value_t = 0)]
    spec: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Print each workload's schedule space and default config.
    Space {
        #[command(flatten)]
        target: OpArgs,
        /// Also list every knob with its choices.
        #[arg(long)]
        knobs: bool,
        /// Also list the register-tile starts, in the order a search takes them.
        #[arg(long)]
        starts: bool,
        /// The kernel thread count the starts are ranked for.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Compile one config, check it against the reference and time it.
    Bench {
        #[command(flatten)]
        target: OpArgs,
        /// Time at these sizes (`M=1000,N=1000,K=1000`: every input size
        /// variable) instead of a specialisation's.
        #[arg(long, value_name = "VAR=SIZE,...")]
        shape: Option<String>,
        /// Time the generic kernel as a build ships it (a tiled kernel per
        /// specialisation's config, the cached ones with --cached, dispatched
        /// on the call's sizes), called at the shapes.
        #[arg(long, conflicts_with = "config")]
        generic: bool,
        /// Time the generic kernel with the default schedule (plain loops).
        #[arg(long, conflicts_with_all = ["config", "generic", "cached"])]
        naive: bool,
        /// The config (`knob=value` pairs); the space's default when omitted.
        #[arg(long, conflicts_with = "cached")]
        config: Option<String>,
        /// Time the config the tuning cache holds for this workload and target
        /// (what a build ships).
        #[arg(long)]
        cached: bool,
        /// The tuning cache directory (with --cached).
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
        /// Threads of the kernel's thread pool.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Evict the caches before every call.
        #[arg(long)]
        flush: bool,
        /// Samples (the median is reported).
        #[arg(long, default_value_t = 9)]
        samples: usize,
        /// Where to build the measurement program.
        #[arg(long, default_value = "target/autotune/bench")]
        dir: PathBuf,
    },
    /// Tune one workload: propose, compile, check, time, log; print the best.
    Tune {
        #[command(flatten)]
        target: OpArgs,
        /// xgb-rank (the model-guided search, the default with the cost
        /// model), xgb-reg, xgb-rank-nodiv, xgb-rank-knobs, xgb-rank-curve,
        /// few-shot (ranked by a pre-trained model, as builds tune),
        /// few-shot-refit (and refitted locally), genetic (the default without
        /// the cost model), random or grid.
        #[arg(long)]
        tuner: Option<TunerSpec>,
        /// Trials in total (those resumed from the log included).
        #[arg(long, default_value_t = 64)]
        trials: usize,
        /// Wall-clock budget in seconds.
        #[arg(long)]
        seconds: Option<f64>,
        /// Stop after this many trials without improvement.
        #[arg(long)]
        early_stop: Option<usize>,
        /// Configs compiled into one measurement program.
        #[arg(long, default_value_t = 16)]
        batch: usize,
        /// Threads of the kernel's pool (default: what the kernels ship with,
        /// as the build tunes).
        #[arg(long)]
        threads: Option<usize>,
        /// Record log (JSON lines) to resume from and append to.
        #[arg(long, default_value = "target/autotune/records.jsonl")]
        log: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print a machine-readable summary instead of text.
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "target/autotune/tune")]
        dir: PathBuf,
        /// Write the best config to the tuning cache.
        #[arg(long)]
        save: bool,
        /// The tuning cache directory.
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
        /// Record logs (files or directories) of earlier workloads to learn from
        /// (transfer learning, `xgb-*` tuners); by default the cache's
        /// `records/`, the --log file and the per-user store.
        #[arg(long)]
        history: Vec<PathBuf>,
        /// Tune without transfer learning.
        #[arg(long)]
        no_transfer: bool,
        /// The pre-trained model few-shot tuners rank with (`cargo autotune
        /// train`); by default the one shipped for this machine's target.
        #[arg(long)]
        model: Option<PathBuf>,
        /// Configs to start the search from, measured first and whatever
        /// `--trials` (a file as `sweep --configs` reads it), then re-timed
        /// beside the best as the cache's are: a hand-written or swept config
        /// joins the search, and the cache where it wins.
        #[arg(long)]
        start: Option<PathBuf>,
    },
    /// List the tuning cache: operator, shape, target, GFLOP/s, trials, date, stale?
    Show {
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
        /// The source of the operators (default: src/ops.rs where it exists):
        /// entries of an older generator whose kernel it still makes show as
        /// current, as a build applies them (without a source, every entry of
        /// an older generator shows as stale).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Record the kernel fingerprint of the current cache entries and records
    /// that lack one (written before it existed), so a later generator version
    /// keeps them where it makes the same kernel.
    Stamp {
        #[command(flatten)]
        target: OpArgs,
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
        /// Record logs to stamp too (their records of the file's operators).
        #[arg(long)]
        log: Vec<PathBuf>,
    },
    /// Tuning curves (best GFLOP/s after each trial) from a record log, as SVG.
    Plot {
        /// Record log(s) (JSON lines) to read.
        #[arg(long, required = true)]
        log: Vec<PathBuf>,
        /// Only this workload (e.g. `matmul[M1024 K1024 N1024]`).
        #[arg(long)]
        workload: Option<String>,
        #[arg(long, default_value = "tuning-curve.svg")]
        out: PathBuf,
    },
    /// Re-measure the cached kernels on this machine: correctness and drift.
    Verify {
        #[command(flatten)]
        target: OpArgs,
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
        /// Threads of the kernel's pool (default: what the kernels ship with).
        #[arg(long)]
        threads: Option<usize>,
        /// Instead, time each workload's entries of other CPUs (of any ISA
        /// level, compiled at this CPU's) and its default config beside this
        /// CPU's own: what replaying them here, or a miss, would cost.
        #[arg(long)]
        other_cpus: bool,
        /// Rounds of alternating timings (with --other-cpus); the median counts.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Drop cache entries of shapes the source's operators no longer specialise
    /// (the files of operators it does not define, as a cache shared by
    /// several crates holds, only where --op names them).
    Prune {
        #[command(flatten)]
        target: OpArgs,
        #[arg(long, default_value = "tuning-cache")]
        cache: PathBuf,
    },
    /// Measure a list of configs (one per line of a file, or the lines'
    /// cartesian product of `knob=v1|v2|...` alternatives) in one batch.
    Sweep {
        #[command(flatten)]
        target: OpArgs,
        /// File with one config per line; `knob=a|b` expands to every choice.
        #[arg(long)]
        configs: PathBuf,
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long, default_value_t = 5)]
        samples: usize,
        #[arg(long, default_value = "target/autotune/sweep")]
        dir: PathBuf,
    },
    /// Train a cost model on record logs (every workload of the operator
    /// files found there, this target's trials) and write it as a
    /// pre-trained model file.
    Train {
        /// Source files holding the operators the records are of.
        #[arg(long = "file", required = true)]
        files: Vec<PathBuf>,
        /// Record logs, or directories of them.
        #[arg(long = "log", required = true)]
        logs: Vec<PathBuf>,
        /// Whose trials to learn from (default: this machine's, as tuned here).
        #[arg(long)]
        target: Option<Target>,
        /// The CPU the records were measured on, as the file records it
        /// (default: this machine's model name).
        #[arg(long)]
        cpu: Option<String>,
        /// The loss: rank (pairwise ranking, what builds ship) or reg.
        #[arg(long, default_value = "rank")]
        objective: autotune_tune::model::Objective,
        #[arg(long)]
        out: PathBuf,
    },
    /// How well a pre-trained model orders the trials of record logs, per
    /// workload: pairwise accuracy and recall of the best few.
    Rank {
        /// The model file (`cargo autotune train`).
        #[arg(long)]
        model: PathBuf,
        /// Source files holding the operators the records are of.
        #[arg(long = "file", required = true)]
        files: Vec<PathBuf>,
        /// Record logs, or directories of them.
        #[arg(long = "log", required = true)]
        logs: Vec<PathBuf>,
        /// Recall of the k best.
        #[arg(long, default_value_t = 8)]
        k: usize,
    },
}

/// The trials of `target` in `logs` of the operators of `files`, with `set`
/// features (skipped records are warned about).
fn history_of(
    files: &[PathBuf],
    logs: &[PathBuf],
    target: &Target,
    set: autotune_tune::features::FeatureSet,
) -> Result<autotune_tune::history::History> {
    let mut ops = Vec::new();
    for f in files {
        ops.extend(load(&OpArgs {
            file: f.clone(),
            op: None,
            spec: 0,
        })?);
    }
    let (history, problems) = autotune_tune::history::History::load(
        logs,
        &ops,
        target,
        None,
        set,
        autotune_tune::features::FeatureSource::Plan,
    );
    for p in problems {
        eprintln!("warning: skipped: {p}");
    }
    if history.is_empty() {
        bail!("no trials of {target} for these operators in the logs");
    }
    Ok(history)
}

/// The configs of a file of one config per line (`#` comments; `knob=a|b`
/// expands to every choice), each checked to be a point of `space`.
fn read_configs(path: &Path, space: &Space) -> Result<Vec<Config>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut list = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        for c in expand(line) {
            let at = || format!("{}:{}: config `{}`", path.display(), n + 1, c.trim());
            let c = c
                .parse::<Config>()
                .map_err(anyhow::Error::msg)
                .with_context(at)?;
            space.index_of(&c).with_context(at)?;
            list.push(c);
        }
    }
    Ok(list)
}

/// Expands `knob=a|b` alternatives of a config line into every combination.
fn expand(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for pair in line.split_whitespace() {
        let (k, vs) = pair.split_once('=').unwrap_or((pair, ""));
        out = out
            .iter()
            .flat_map(|prefix| vs.split('|').map(move |v| format!("{prefix} {k}={v}")))
            .collect();
    }
    out
}

fn load(target: &OpArgs) -> Result<Vec<autotune_lang::Operator>> {
    let dir = target.file.parent().unwrap_or(std::path::Path::new("."));
    let name = target.file.file_name().context("--file names a file")?;
    let ops = autotune_build::load_operators(dir, &[PathBuf::from(name)])?;
    let ops: Vec<_> = ops
        .into_iter()
        .map(|s| s.op)
        .filter(|op| target.op.as_deref().is_none_or(|n| n == op.name))
        .collect();
    if ops.is_empty() {
        bail!(
            "no operator {}in {}",
            target
                .op
                .as_deref()
                .map(|n| format!("`{n}` "))
                .unwrap_or_default(),
            target.file.display()
        );
    }
    Ok(ops)
}

/// The workload `--op` / `--spec` names.
/// `op` with one more specialisation, at `text` (`M=1000,N=1000,K=1000`:
/// every input size variable), as a workload.
fn at_shape(mut op: autotune_lang::Operator, text: &str) -> Result<Workload> {
    let mut given = Vec::new();
    for part in text.split(',') {
        let (name, value) = part
            .split_once('=')
            .with_context(|| format!("`{part}` in --shape is not VAR=SIZE"))?;
        let Some((v, _)) = op.input_shape_vars().find(|(_, s)| s.name == name.trim()) else {
            bail!("`{}` has no input size variable `{}`", op.name, name.trim());
        };
        let value: i64 = value
            .trim()
            .parse()
            .with_context(|| format!("`{part}` in --shape: not a size"))?;
        given.push((v, value));
    }
    let missing: Vec<&str> = op
        .input_shape_vars()
        .filter(|(v, _)| !given.iter().any(|(g, _)| g == v))
        .map(|(_, s)| s.name.as_str())
        .collect();
    if !missing.is_empty() {
        bail!("--shape does not give {}", missing.join(", "));
    }
    let values = op.resolve_shapes(&given).with_context(|| {
        format!(
            "`{text}` gives `{}` a negative or overflowing size",
            op.name
        )
    })?;
    op.specializations
        .push(autotune_lang::ir::Specialization::exact(values));
    let spec = op.specializations.len() - 1;
    Ok(Workload { op, spec })
}

fn workload(target: &OpArgs) -> Result<Workload> {
    let op = load(target)?.remove(0);
    if target.spec >= op.specializations.len() {
        bail!(
            "`{}` has {} specialisation(s); --spec {} is out of range",
            op.name,
            op.specializations.len(),
            target.spec
        );
    }
    Ok(Workload {
        op,
        spec: target.spec,
    })
}

fn main() -> Result<()> {
    let Cargo::Autotune(cli) = Cargo::parse();
    match cli.command {
        Command::Space {
            target,
            knobs,
            starts,
            threads,
        } => {
            let isa = host_target()?.isa;
            for op in load(&target)? {
                for spec in 0..op.specializations.len() {
                    let w = Workload {
                        op: op.clone(),
                        spec,
                    };
                    let space = Space::new(&op, w.shapes());
                    println!(
                        "{}: {} configs ({} knobs)",
                        w.key(),
                        space.size(),
                        space.knobs.len()
                    );
                    if knobs {
                        for k in &space.knobs {
                            let choices: Vec<String> =
                                k.choices.iter().map(|c| c.to_string()).collect();
                            println!("  {:<28} {}", k.name, choices.join(" "));
                        }
                    }
                    let default = space.default_config_for(&op, w.shapes(), isa);
                    println!("  default ({isa}): {default}");
                    if starts {
                        for c in space.register_tile_starts(&default, isa, threads) {
                            println!("  start: {c}");
                        }
                    }
                }
                if op.specializations.is_empty() {
                    println!("{}: no specialisation (only the generic kernel)", op.name);
                }
            }
        }
        Command::Bench {
            target,
            shape,
            generic,
            naive,
            config,
            cached,
            cache,
            threads,
            flush,
            samples,
            dir,
        } => {
            let w = match &shape {
                Some(text) => at_shape(load(&target)?.remove(0), text)?,
                None => workload(&target)?,
            };
            let host = host_target()?;
            let cached_config = |w: &Workload| -> Result<Option<Config>> {
                let entries = cache::load_for(&cache, &w.op)?;
                let cpu = cache::Cpu::host();
                Ok(
                    match cache::lookup(&entries, &w.id(), &host, &cpu, threads) {
                        cache::Lookup::Hit(e) => Some(e.config),
                        cache::Lookup::Foreign(e, _) => {
                            eprintln!(
                                "{}: timing the config tuned on {}, not this CPU ({cpu})",
                                w.key(),
                                e.tuned_on()
                            );
                            Some(e.config)
                        }
                        _ => None,
                    },
                )
            };
            let (candidate, what) = if naive {
                (
                    measure::Candidate::Generic(Vec::new()),
                    "generic kernel, default schedule".to_string(),
                )
            } else if generic {
                // The operator's own specialisations, as the build sees them.
                let mut op = w.op.clone();
                if shape.is_some() {
                    op.specializations.pop();
                }
                let mut choices = Vec::new();
                for spec in 0..op.specializations.len() {
                    let s = Workload {
                        op: op.clone(),
                        spec,
                    };
                    let config = if cached { cached_config(&s)? } else { None };
                    choices.push(autotune_codegen::Choice::from(config));
                }
                let g = autotune_codegen::GenericSchedule::for_operator(&op, &choices, host.isa);
                let mut what = format!("generic kernel, {} bucket(s)", g.len());
                for b in &g {
                    what += &format!("\n  at {:?}: {}", b.at, b.config);
                }
                (measure::Candidate::Generic(g), what)
            } else {
                let space = Space::new(&w.op, w.shapes());
                let config = match config {
                    Some(text) => text.parse::<Config>().map_err(anyhow::Error::msg)?,
                    None if cached => cached_config(&w)?.with_context(|| {
                        format!(
                            "{} has no current entry for this target in {}",
                            w.key(),
                            cache.display()
                        )
                    })?,
                    None => space.default_config_for(&w.op, w.shapes(), host.isa),
                };
                space.index_of(&config).with_context(|| {
                    format!("the config does not belong to the space of {}", w.key())
                })?;
                let what = format!("config: {config}");
                (measure::Candidate::Config(config), what)
            };
            let opts = TimingOptions {
                threads,
                flush,
                samples,
                ..TimingOptions::default()
            };
            let isa = host.isa;
            let m = measure::bench_candidate(&w, &candidate, isa, &dir, &opts)?;
            println!("{} ({} threads, {isa})", w.key(), threads);
            println!("{what}");
            println!(
                "{:.2} GFLOP/s  (median {:.3} ms, min {:.3}, max {:.3})",
                m.gflops,
                m.timing.median * 1e3,
                m.timing.min * 1e3,
                m.timing.max * 1e3
            );
        }
        Command::Tune {
            target,
            tuner,
            trials,
            seconds,
            early_stop,
            batch,
            threads,
            log,
            seed,
            json,
            dir,
            save,
            cache,
            history,
            no_transfer,
            model,
            start,
        } => {
            let w = workload(&target)?;
            // Every operator of the file can be learned from, at any shapes.
            let ops = load(&OpArgs {
                op: None,
                ..target.clone()
            })?;
            let entries = cache::load_for(&cache, &w.op)?;
            let host = host_target()?;
            let cpu = cache::Cpu::host();
            let id = w.id();
            let defaults = TuneOptions::default();
            let user_store = user_store();
            let tuner = tuner.unwrap_or(TunerSpec::MODEL);
            let pretrained = match (tuner, &model) {
                (TunerSpec::FewShot { .. }, None) => {
                    autotune_tune::pretrained::shipped(&host).transpose()?
                }
                (_, Some(path)) => Some(autotune_tune::pretrained::Pretrained::load(path)?),
                _ => None,
            };
            let seeds = cache::seeds(&entries, &id, &host, &cpu);
            let start = match &start {
                Some(path) => read_configs(path, &Space::new(&w.op, w.shapes()))?,
                None => Vec::new(),
            };
            let session = TuningSession {
                workload: &w,
                operators: &ops,
                tuner,
                options: TuneOptions {
                    trials,
                    count_resumed: true,
                    time: seconds.map(std::time::Duration::from_secs_f64),
                    early_stop,
                    batch,
                    timing: TimingOptions {
                        threads: threads.unwrap_or_else(shipped_threads),
                        ..defaults.timing
                    },
                    dir,
                    log: Some(log.clone()),
                    seed,
                    target: host.clone(),
                    // The user's starts, then the cache's configs of the
                    // workload: measured whatever the budget, and re-timed
                    // beside the best.
                    incumbents: [start, seeds.incumbents].concat(),
                    ..defaults
                },
                history: (!no_transfer).then(|| {
                    if history.is_empty() {
                        let mut s = vec![cache.join("records"), log.clone()];
                        s.extend(user_store.clone());
                        s
                    } else {
                        history
                    }
                }),
                // Then, as the build: the operator's other winners.
                seeds: seeds.others,
                mirror: None,
                pretrained: pretrained.as_ref(),
            };
            let bar = if json {
                ProgressBar::hidden()
            } else {
                ProgressBar::new(trials as u64)
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} trials  {msg}  ({elapsed}, ETA {eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(w.key());
            let report = session.run(&mut |_, s| {
                bar.set_position(s.trials as u64);
                let errors: usize = s.errors.values().sum();
                bar.set_message(format!(
                    "best {:.1} GFLOP/s, {errors} errors",
                    s.best.as_ref().map_or(0.0, |b| b.1)
                ));
            })?;
            bar.finish_and_clear();
            for note in &report.notes {
                eprintln!("warning: {note}");
            }
            let summary = &report.summary;
            if json {
                let v = serde_json::json!({
                    "workload": summary.workload,
                    "tuner": report.tuner,
                    "trials": summary.trials,
                    "resumed": summary.resumed,
                    "best_gflops": summary.best.as_ref().map(|b| b.1),
                    "best_config": summary.best.as_ref().map(|b| &b.0),
                    "default_gflops": summary.default_gflops,
                    "confirmed": summary.confirmation.as_ref().map(|c| c.to_string()),
                    "errors": summary.errors,
                    "seconds": summary.elapsed.as_secs_f64(),
                    "compile_seconds": summary.compile.as_secs_f64(),
                    "tuner_seconds": summary.tuner.as_secs_f64(),
                    "tuner_stats": report.stats.iter().copied().collect::<std::collections::BTreeMap<_, _>>(),
                    "log": log,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "{}: {} trials ({} resumed) in {:.1} s with {} tuner, {:.2} trials/s",
                    summary.workload,
                    summary.trials,
                    summary.resumed,
                    summary.elapsed.as_secs_f64(),
                    report.tuner,
                    (summary.trials - summary.resumed) as f64
                        / summary.elapsed.as_secs_f64().max(1e-9)
                );
                if !summary.errors.is_empty() {
                    println!("errors: {:?}", summary.errors);
                }
                match (&summary.best, summary.default_gflops) {
                    (Some((c, g)), d) => {
                        println!(
                            "best: {g:.2} GFLOP/s (default config: {:.2})",
                            d.unwrap_or(0.0)
                        );
                        println!("config: {c}");
                        if let Some(c) = &summary.confirmation {
                            println!("confirmed: {c}");
                        }
                    }
                    (None, _) => println!("no config ran successfully"),
                }
                println!("records: {}", log.display());
            }
            if let (true, Some((config, gflops))) = (save, &summary.best) {
                let entry = cache::Entry {
                    workload: w.key(),
                    workload_id: w.id(),
                    target: host.clone(),
                    generator: cache::GENERATOR_VERSION,
                    gflops: *gflops,
                    trials: summary.trials,
                    tuner: report.tuner.clone(),
                    cpu: cpu.name.clone(),
                    cpu_id: cpu.id.clone(),
                    compiler: measure::compiler_version(),
                    threads: Some(session.options.timing.threads),
                    date: cache::today(),
                    config: config.clone(),
                    kernel: KernelFingerprint::of(&w, config, host.isa).ok(),
                };
                let file = cache::file_of(&cache, &w.op.name);
                match cache::store(&cache, &w.op.name, entry)? {
                    _ if json => {}
                    cache::Stored::Kept => println!(
                        "kept the entry in {}: its config and kernel won the re-timing",
                        file.display()
                    ),
                    _ => println!("saved to {}", file.display()),
                }
            }
        }
        Command::Show { cache, file } => {
            let host = cache::Cpu::host();
            let file = file.or_else(|| {
                let default = PathBuf::from("src/ops.rs");
                default.exists().then_some(default)
            });
            let ops = match &file {
                Some(file) => load(&OpArgs {
                    file: file.clone(),
                    op: None,
                    spec: 0,
                })?,
                None => Vec::new(),
            };
            println!("this CPU: {host}");
            match &file {
                Some(f) => println!("kernels checked against {}", f.display()),
                None => println!("no operator source given (--file): by generator version only"),
            }
            println!(
                "{:<40} {:<32} {:>10} {:>7} {:<10} {:<6} cpu",
                "workload", "target", "GFLOP/s", "trials", "date", "status"
            );
            for name in cache::operators(&cache)? {
                let entries = match ops.iter().find(|op| op.name == name) {
                    Some(op) => cache::load_for(&cache, op)?,
                    None => cache::load(&cache, &name)?,
                };
                for e in entries {
                    let status = if e.generator == cache::GENERATOR_VERSION {
                        "ok"
                    } else {
                        "stale"
                    };
                    let cpu = e.tuned_on();
                    println!(
                        "{:<40} {:<32} {:>10.2} {:>7} {:<10} {:<6} {}{cpu}",
                        e.workload,
                        e.target,
                        e.gflops,
                        e.trials,
                        e.date,
                        status,
                        if host.same(&cpu) { "this: " } else { "" }
                    );
                }
            }
        }
        Command::Stamp { target, cache, log } => {
            let ops = load(&target)?;
            for op in &ops {
                let stamped = cache::stamp(&cache, op)?;
                println!("{}: {stamped} entries stamped", op.name);
            }
            for path in log {
                let stamped = autotune_tune::record::stamp_log(&path, &ops)?;
                println!("{}: {stamped} records stamped", path.display());
            }
        }
        Command::Plot { log, workload, out } => {
            let mut records = Vec::new();
            for l in &log {
                records.extend(autotune_tune::record::load_log(l)?);
            }
            records.retain(|r| workload.as_ref().is_none_or(|w| &r.workload == w));
            if records.is_empty() {
                bail!("no records to plot");
            }
            let curves = plot::curves(&records);
            let title = workload.unwrap_or_else(|| "tuning curves".to_string());
            std::fs::write(&out, plot::svg(&title, &curves))
                .with_context(|| format!("cannot write {}", out.display()))?;
            println!("{} curve(s) written to {}", curves.len(), out.display());
        }
        Command::Verify {
            target,
            cache,
            threads,
            other_cpus,
            rounds,
        } => {
            let mut bad = 0;
            let host = host_target()?;
            let cpu = cache::Cpu::host();
            let threads = threads.unwrap_or_else(shipped_threads);
            if other_cpus {
                return replay::report(&load(&target)?, &cache, &host, &cpu, threads, rounds);
            }
            for op in load(&target)? {
                let entries = cache::load_for(&cache, &op)?;
                for spec in 0..op.specializations.len() {
                    let w = Workload {
                        op: op.clone(),
                        spec,
                    };
                    match cache::lookup(&entries, &w.id(), &host, &cpu, threads) {
                        cache::Lookup::Hit(e) | cache::Lookup::Foreign(e, _) => {
                            let tuned_on = e.tuned_on();
                            let foreign = if cpu.same(&tuned_on) {
                                String::new()
                            } else {
                                format!(" (tuned on {tuned_on})")
                            };
                            let opts = TimingOptions {
                                threads,
                                ..TimingOptions::default()
                            };
                            let dir = PathBuf::from("target/autotune/verify");
                            match measure::bench(&w, &e.config, host.isa, &dir, &opts) {
                                Ok(m) => println!(
                                    "{:<40} correct  {:>8.2} GFLOP/s now, {:>8.2} cached ({:+.1}%){foreign}",
                                    w.key(),
                                    m.gflops,
                                    e.gflops,
                                    100.0 * (m.gflops / e.gflops - 1.0)
                                ),
                                Err(err) => {
                                    bad += 1;
                                    println!("{:<40} FAILED: {err}", w.key());
                                }
                            }
                        }
                        cache::Lookup::Stale(_) => println!("{:<40} stale entry", w.key()),
                        cache::Lookup::Miss => {
                            println!("{:<40} not cached for {host}", w.key())
                        }
                    }
                }
            }
            if bad > 0 {
                bail!("{bad} cached kernel(s) failed verification");
            }
        }
        Command::Prune { target, cache } => {
            let only = target.op.clone();
            let ops = load(&OpArgs { op: None, ..target })?;
            let pruned = cache::prune(&cache, &ops, only.as_deref())?;
            for (name, dropped) in &pruned.dropped {
                println!(
                    "{name}: dropped {dropped} entr{}",
                    if *dropped == 1 { "y" } else { "ies" }
                );
            }
            if !pruned.not_defined.is_empty() {
                println!(
                    "left alone (not defined in this source; name one with --op to prune it): {}",
                    pruned.not_defined.join(", ")
                );
            }
        }
        Command::Train {
            files,
            logs,
            target,
            cpu,
            objective,
            out,
        } => {
            let target = match target {
                Some(t) => t,
                None => host_target()?,
            };
            let history = history_of(
                &files,
                &logs,
                &target,
                autotune_tune::features::FeatureSet::Curve,
            )?;
            let cpu = cpu.unwrap_or_else(|| cache::Cpu::host().to_string());
            let model =
                autotune_tune::pretrained::Pretrained::train(&history, &target, &cpu, objective)?;
            model.save(&out)?;
            println!(
                "{}: {} workloads, {} trials of {target} ({cpu})",
                out.display(),
                history.workloads.len(),
                history.trials()
            );
        }
        Command::Rank {
            model,
            files,
            logs,
            k,
        } => {
            let m = autotune_tune::pretrained::Pretrained::load(&model)?;
            let history = history_of(&files, &logs, &m.file.target, m.set())?;
            let rows = m.ranking(&history, k)?;
            println!(
                "{:<44} {:>6} {:>9} {:>10}",
                "workload",
                "trials",
                "pairwise",
                format!("recall@{k}")
            );
            for r in &rows {
                println!(
                    "{:<44} {:>6} {:>9.3} {:>10.3}",
                    r.workload, r.trials, r.pairwise, r.recall
                );
            }
            let n = rows.len().max(1) as f64;
            println!(
                "{:<44} {:>6} {:>9.3} {:>10.3}",
                "mean",
                rows.iter().map(|r| r.trials).sum::<usize>(),
                rows.iter().map(|r| r.pairwise).sum::<f64>() / n,
                rows.iter().map(|r| r.recall).sum::<f64>() / n
            );
        }
        Command::Sweep {
            target,
            configs,
            threads,
            samples,
            dir,
        } => {
            let w = workload(&target)?;
            let space = Space::new(&w.op, w.shapes());
            let list = read_configs(&configs, &space)?;
            let opts = TimingOptions {
                threads,
                samples,
                ..TimingOptions::default()
            };
            let isa = host_target()?.isa;
            let batch = measure::build_batch(&w, &list, isa, &dir, 1)?;
            let mut results = Vec::new();
            for (i, c) in list.iter().enumerate() {
                let r = batch.check(i, &opts).and_then(|_| batch.time(i, &opts));
                match r {
                    Ok(t) => results.push((w.flops() / t.median / 1e9, c.clone())),
                    Err(e) => println!("error: {e}: {c}"),
                }
            }
            results.sort_by(|a, b| b.0.total_cmp(&a.0));
            println!(
                "{} ({threads} threads, {isa}): {} configs",
                w.key(),
                list.len()
            );
            for (g, c) in results {
                println!("{g:8.2} GFLOP/s  {c}");
            }
        }
    }
    Ok(())
}
