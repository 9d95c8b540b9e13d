//! The tuning loop: a tuner proposes configs, a batch program measures them
//! (checked against the reference, then timed), and every trial is appended to a
//! record log (JSON lines) that a later run resumes from.
//!
//! The default config is always measured first, so a tuned result is never
//! slower than the untuned one. Tuners sit behind [`Tuner`]: random, grid (for
//! small spaces) and a genetic algorithm here; the model-guided tuner plugs in
//! the same way.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::history::History;
use crate::measure::{self, Candidate, ErrorClass, MeasureError, TimingOptions, Workload};
use crate::model::Objective;
use crate::search::{self, SearchOptions};
use crate::space::{Config, Space};

/// One measured (or failed) trial, as a line of the record log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Readable workload, e.g. `matmul[M1024 K1024 N1024]`.
    pub workload: String,
    /// Exact identity: operator IR fingerprint and shape values.
    pub workload_id: String,
    /// Architecture and ISA level the trial ran with.
    pub target: String,
    pub tuner: String,
    pub config: Config,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Median seconds per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TrialError>,
    /// Unix time of the measurement, in seconds.
    pub time: u64,
}

impl Record {
    /// The record of one trial of `w` on this machine, now.
    pub fn new(
        w: &Workload,
        tuner: &str,
        config: Config,
        outcome: Result<measure::Timing, MeasureError>,
    ) -> Record {
        let (gflops, seconds, error) = match outcome {
            Ok(t) => (Some(w.flops() / t.median / 1e9), Some(t.median), None),
            Err(e) => (
                None,
                None,
                Some(TrialError {
                    class: e.class(),
                    message: e.to_string(),
                }),
            ),
        };
        Record {
            workload: w.key(),
            workload_id: workload_id(w),
            target: target(),
            tuner: tuner.to_string(),
            config,
            gflops,
            seconds,
            error,
            time: now(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialError {
    pub class: ErrorClass,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("cannot read the record log {}: {source}", path.display())]
    ReadLog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: not a tuning record: {message}", path.display())]
    CorruptLog {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot append to the record log {}: {source}", path.display())]
    WriteLog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Measure(#[from] MeasureError),
}

/// Exact identity of a workload: operator (without its list of specialisations)
/// and shape values.
pub fn workload_id(w: &Workload) -> String {
    let mut op = w.op.clone();
    op.specializations.clear();
    let shapes: Vec<String> = w.shapes().iter().map(|v| v.to_string()).collect();
    format!(
        "{}:{:016x}:{}",
        w.op.name,
        autotune_lang::mangle::fingerprint(&op),
        shapes.join(",")
    )
}

/// The target a measurement on this machine stands for: `<triple>/<isa level>`.
pub fn target() -> String {
    format!(
        "{}/{}",
        env!("AUTOTUNE_HOST_TARGET"),
        measure::host_isa().name()
    )
}

/// Reads a record log; a line that does not parse is an error naming it.
pub fn load_log(path: &Path) -> Result<Vec<Record>, TuneError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TuneError::ReadLog {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| TuneError::CorruptLog {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

pub(crate) fn append(path: &Path, r: &Record) -> Result<(), TuneError> {
    let err = |source| TuneError::WriteLog {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let line = serde_json::to_string(r).expect("records serialise");
    // One write per line, so concurrent appenders interleave whole lines.
    f.write_all(format!("{line}\n").as_bytes()).map_err(err)
}

/// Proposes configs (as space indices) to measure.
pub trait Tuner {
    fn name(&self) -> &str;
    /// Up to `n` indices not in `measured`; fewer (or none) when the space is spent.
    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128>;
    /// Measured results: throughput, or `None` for a failed trial.
    fn observe(&mut self, _space: &Space, _results: &[(u128, Option<f64>)]) {}
    /// Figures about the tuner's own work (name, value), for reports.
    fn stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Uniformly random configs.
pub struct RandomTuner {
    rng: StdRng,
}

impl RandomTuner {
    pub fn new(seed: u64) -> RandomTuner {
        RandomTuner {
            rng: StdRng::seed_from_u64(seed),
        }
    }
}

/// Random unmeasured indices of sensible code size, giving up after a bounded
/// number of draws.
pub(crate) fn random_fresh(
    rng: &mut StdRng,
    space: &Space,
    n: usize,
    measured: &HashSet<u128>,
) -> Vec<u128> {
    let mut out = Vec::new();
    let mut tries = 0;
    while out.len() < n && tries < 100 * n.max(1) {
        tries += 1;
        let i = space.canonical(rng.gen_range(0..space.size()));
        if space.sensible(&space.config_at(i)) && !measured.contains(&i) && !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

impl Tuner for RandomTuner {
    fn name(&self) -> &str {
        "random"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        random_fresh(&mut self.rng, space, n, measured)
    }
}

/// Every config in index order (for small spaces).
#[derive(Default)]
pub struct GridTuner {
    next: u128,
}

impl Tuner for GridTuner {
    fn name(&self) -> &str {
        "grid"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        let mut out = Vec::new();
        while out.len() < n && self.next < space.size() {
            if !measured.contains(&self.next) {
                out.push(self.next);
            }
            self.next += 1;
        }
        out
    }
}

/// A genetic algorithm over knob choices: tournament selection among the
/// measured configs, uniform crossover, per-knob mutation.
pub struct GeneticTuner {
    rng: StdRng,
    population: Vec<(u128, f64)>,
    /// Probability that a knob takes a random choice.
    pub mutation: f64,
    /// Size of the population kept (the best so far).
    pub elite: usize,
}

impl GeneticTuner {
    pub fn new(seed: u64) -> GeneticTuner {
        GeneticTuner {
            rng: StdRng::seed_from_u64(seed),
            population: Vec::new(),
            mutation: 0.1,
            elite: 16,
        }
    }

    fn pick(&mut self) -> u128 {
        let a = self.rng.gen_range(0..self.population.len());
        let b = self.rng.gen_range(0..self.population.len());
        if self.population[a].1 >= self.population[b].1 {
            self.population[a].0
        } else {
            self.population[b].0
        }
    }
}

impl Tuner for GeneticTuner {
    fn name(&self) -> &str {
        "genetic"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        if self.population.len() < 2 {
            return random_fresh(&mut self.rng, space, n, measured);
        }
        let mut out = Vec::new();
        let mut tries = 0;
        while out.len() < n && tries < 100 * n.max(1) {
            tries += 1;
            let (a, b) = (space.digits(self.pick()), space.digits(self.pick()));
            let child: Vec<usize> = a
                .iter()
                .zip(&b)
                .zip(&space.knobs)
                .map(|((x, y), k)| {
                    if self.rng.gen_bool(self.mutation) {
                        self.rng.gen_range(0..k.choices.len())
                    } else if self.rng.gen_bool(0.5) {
                        *x
                    } else {
                        *y
                    }
                })
                .collect();
            let i = space.canonical(space.from_digits(&child));
            if space.sensible(&space.config_at(i)) && !measured.contains(&i) && !out.contains(&i) {
                out.push(i);
            }
        }
        if out.len() < n {
            let mut seen = measured.clone();
            seen.extend(out.iter().copied());
            out.extend(random_fresh(&mut self.rng, space, n - out.len(), &seen));
        }
        out
    }

    fn observe(&mut self, _space: &Space, results: &[(u128, Option<f64>)]) {
        for &(i, g) in results {
            self.population.push((i, g.unwrap_or(0.0)));
        }
        self.population.sort_by(|a, b| b.1.total_cmp(&a.1));
        self.population.truncate(self.elite);
    }
}

/// Budgets and settings of a tuning run.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Trials in total, including those resumed from the log.
    pub trials: usize,
    /// Wall-clock budget of this run.
    pub time: Option<Duration>,
    /// Stop after this many trials without a better config.
    pub early_stop: Option<usize>,
    /// Configs compiled into one program.
    pub batch: usize,
    pub timing: TimingOptions,
    /// Where batch programs are built.
    pub dir: PathBuf,
    /// Record log to resume from and append to.
    pub log: Option<PathBuf>,
    pub seed: u64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 64,
            time: None,
            early_stop: None,
            batch: 16,
            // Short samples: the tuner ranks many configs; final figures use longer ones.
            timing: TimingOptions {
                min_sample_secs: 0.02,
                samples: 5,
                ..TimingOptions::default()
            },
            dir: PathBuf::from("target/autotune/tune"),
            log: None,
            seed: 1,
        }
    }
}

/// Where a run stands (given to the progress callback after every trial).
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub workload: String,
    pub trials: usize,
    /// Trials loaded from the log rather than measured in this run.
    pub resumed: usize,
    pub best: Option<(Config, f64)>,
    /// Throughput of the space's default config.
    pub default_gflops: Option<f64>,
    pub errors: BTreeMap<String, usize>,
    pub elapsed: Duration,
    /// Time spent compiling batches, and in the tuner.
    pub compile: Duration,
    pub tuner: Duration,
    /// Best throughput after each trial, in order (for tuning curves).
    pub curve: Vec<f64>,
}

impl Summary {
    fn add(&mut self, r: &Record) {
        self.trials += 1;
        match (&r.error, r.gflops) {
            (Some(e), _) => *self.errors.entry(format!("{:?}", e.class)).or_default() += 1,
            (None, Some(g)) if self.best.as_ref().is_none_or(|(_, b)| g > *b) => {
                self.best = Some((r.config.clone(), g));
            }
            _ => {}
        }
        self.curve.push(self.best.as_ref().map_or(0.0, |b| b.1));
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Tunes one workload. `on_trial` sees each record and the summary so far.
pub fn tune(
    w: &Workload,
    tuner: &mut dyn Tuner,
    opts: &TuneOptions,
    on_trial: &mut dyn FnMut(&Record, &Summary),
) -> Result<Summary, TuneError> {
    let start = Instant::now();
    let space = Space::new(&w.op, w.shapes());
    let id = workload_id(w);
    let target = target();
    let mut summary = Summary {
        workload: w.key(),
        ..Summary::default()
    };
    let mut measured: HashSet<u128> = HashSet::new();
    let default = space.default_config(&w.op, w.shapes());
    // Resume: earlier trials of this workload on this target count.
    if let Some(log) = &opts.log {
        let mut observed = Vec::new();
        for r in load_log(log)?
            .into_iter()
            .filter(|r| r.workload_id == id && r.target == target)
        {
            if let Ok(i) = space.index_of(&r.config) {
                measured.insert(i);
                observed.push((i, r.gflops));
                if r.config == default {
                    summary.default_gflops = r.gflops;
                }
                summary.add(&r);
                summary.resumed += 1;
            }
        }
        tuner.observe(&space, &observed);
    }
    let mut since_best = 0usize;
    let mut batch_no = 0;
    loop {
        let left = opts.trials.saturating_sub(summary.trials);
        let out_of_time = opts.time.is_some_and(|t| start.elapsed() >= t);
        let stalled = opts.early_stop.is_some_and(|n| since_best >= n);
        if left == 0 || out_of_time || stalled {
            break;
        }
        let t0 = Instant::now();
        let mut proposal = Vec::new();
        let default_index = space
            .index_of(&default)
            .expect("the default is in the space");
        if !measured.contains(&default_index) {
            proposal.push(default_index);
        }
        let mut seen = measured.clone();
        seen.extend(proposal.iter().copied());
        let want = opts.batch.max(1).min(left).saturating_sub(proposal.len());
        proposal.extend(tuner.propose(&space, want, &seen));
        summary.tuner += t0.elapsed();
        if proposal.is_empty() {
            break; // the space is spent
        }
        let configs: Vec<Config> = proposal.iter().map(|i| space.config_at(*i)).collect();
        let t1 = Instant::now();
        let candidates: Vec<Candidate> = configs.iter().cloned().map(Candidate::Config).collect();
        let batch = measure::build_candidates(
            w,
            &candidates,
            &opts.dir.join(format!("batch{batch_no}")),
            opts.seed,
        )?;
        batch_no += 1;
        summary.compile += t1.elapsed();
        let mut results = Vec::new();
        for (k, (i, config)) in proposal.iter().zip(configs).enumerate() {
            if opts.time.is_some_and(|t| start.elapsed() >= t) {
                break;
            }
            let outcome = batch
                .check(k, opts.timing.timeout)
                .and_then(|_| batch.time(k, &opts.timing));
            if matches!(&outcome, Err(e) if e.class() == ErrorClass::Harness) {
                return Err(outcome.expect_err("matched above").into());
            }
            let r = Record::new(w, tuner.name(), config, outcome);
            let before = summary.best.as_ref().map(|b| b.1);
            summary.add(&r);
            if *i == default_index {
                summary.default_gflops = r.gflops;
            }
            since_best = if summary.best.as_ref().map(|b| b.1) > before {
                0
            } else {
                since_best + 1
            };
            measured.insert(*i);
            results.push((*i, r.gflops));
            if let Some(log) = &opts.log {
                append(log, &r)?;
            }
            summary.elapsed = start.elapsed();
            on_trial(&r, &summary);
        }
        let t2 = Instant::now();
        tuner.observe(&space, &results);
        summary.tuner += t2.elapsed();
        let _ = std::fs::remove_dir_all(&batch.dir);
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}

/// Names of the tuners [`tuner_by_name`] knows.
pub const TUNERS: &[&str] = &[
    "xgb-rank",
    "xgb-reg",
    "xgb-rank-nodiv",
    "xgb-reg-nodiv",
    "xgb-rank-knobs",
    "xgb-rank-curve",
    "genetic",
    "random",
    "grid",
];

/// The tuner the build and `cargo autotune tune` use unless told otherwise.
pub const DEFAULT_TUNER: &str = "xgb-rank";

/// A tuner by name (see [`TUNERS`]) for workload `w`. The `xgb-*` tuners are
/// the model-guided search: objective, then `-nodiv` without the diversity-aware
/// pick, `-knobs` or `-curve` for another feature set; given a `history` of
/// other workloads, they learn from it (transfer learning).
pub fn tuner_by_name(
    name: &str,
    seed: u64,
    w: &Workload,
    history: Option<&History>,
) -> Result<Box<dyn Tuner>, String> {
    match name {
        "random" => return Ok(Box::new(RandomTuner::new(seed))),
        "grid" => return Ok(Box::new(GridTuner::default())),
        "genetic" | "ga" => return Ok(Box::new(GeneticTuner::new(seed))),
        _ => {}
    }
    let unknown = || {
        format!(
            "unknown tuner `{name}` (expected one of {})",
            TUNERS.join(", ")
        )
    };
    let mut parts = name.split('-');
    if parts.next() != Some("xgb") {
        return Err(unknown());
    }
    let objective = match parts.next() {
        Some("rank") => Objective::Rank,
        Some("reg") => Objective::Regression,
        _ => return Err(unknown()),
    };
    let mut opts = SearchOptions::default();
    for p in parts {
        match p {
            "nodiv" => opts.diversity = false,
            set => opts.features = set.parse().map_err(|_| unknown())?,
        }
    }
    let t = search::xgb_tuner(w, objective, opts, seed, history, &[]).map_err(|e| e.to_string())?;
    Ok(Box::new(t))
}

/// Runs `on_trial`-free tuning of a hand-written candidate list, for fault
/// injection: every candidate is checked and timed, and a record is returned
/// per candidate (config records use the given configs, sources an empty one).
#[doc(hidden)]
pub fn measure_candidates(
    w: &Workload,
    candidates: &[Candidate],
    opts: &TuneOptions,
) -> Result<Vec<Record>, TuneError> {
    let batch = measure::build_candidates(w, candidates, &opts.dir, opts.seed)?;
    let mut out = Vec::new();
    for (k, c) in candidates.iter().enumerate() {
        let outcome = batch
            .check(k, opts.timing.timeout)
            .and_then(|_| batch.time(k, &opts.timing));
        let config = match c {
            Candidate::Config(c) => c.clone(),
            Candidate::Source(_) => Config::default(),
        };
        let r = Record::new(w, "manual", config, outcome);
        if let Some(log) = &opts.log {
            append(log, &r)?;
        }
        out.push(r);
    }
    Ok(out)
}
