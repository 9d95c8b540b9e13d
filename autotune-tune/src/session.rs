//! The tuning loop: a tuner proposes configs, a batch program measures them
//! (checked against the reference, then timed), and every trial is appended to a
//! record log (JSON lines) that a later run resumes from.
//!
//! The default config is always measured, in the first batch (last, where its
//! slow calls are cut short), so a tuned result is never slower than the
//! untuned one. [`TuningSession`] is a whole run as `cargo
//! build` and `cargo autotune tune` both do it: the tuner from a
//! [`TunerSpec`] (with a fallback to a black-box tuner, announced, where the
//! cost model is not built in), the history to learn from, and the loop.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use autotune_codegen::{Config, CpuId, Space, Target, Workload};
use autotune_lang::Operator;

use crate::history::History;
use crate::measure::{self, Candidate, ErrorClass, Harness, MeasureError, TimingOptions};
use crate::model::ModelError;
use crate::pretrained::Loaded;
use crate::record::{append, load_log, LogError, Record};
use crate::spec::TunerSpec;
use crate::tuner::Tuner;

/// Why a tuning run stopped.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Measure(#[from] MeasureError),
    #[error("the cost model could not be set up")]
    Model(#[from] ModelError),
}

/// Budgets and settings of a tuning run.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Trials in total, including those resumed from the log (unless
    /// `count_resumed` is off: then trials measured by this run).
    pub trials: usize,
    /// Whether resumed trials count toward `trials` (off: re-tuning measures its
    /// whole budget again).
    pub count_resumed: bool,
    /// Wall-clock budget of this run.
    pub time: Option<Duration>,
    /// Stop after this many trials without a better config.
    pub early_stop: Option<usize>,
    /// Configs compiled into one program.
    pub batch: usize,
    /// Limit for compiling one candidate: one past it is recorded as a compile
    /// timeout and skipped (a kernel that takes longer would slow every build
    /// that ships it; well-sized tiles compile in a second or two).
    pub compile_timeout: Duration,
    /// Limit on a candidate's C: one over it is recorded as too large and
    /// not compiled (deterministic, unlike the time limit).
    pub max_source_bytes: usize,
    pub timing: TimingOptions,
    /// Most configs the winner is re-timed against before it is reported
    /// ([`confirm`], after the trial and time budgets); below 2, the best
    /// single measurement wins.
    pub confirm: usize,
    /// The workload's own cached configs (other CPUs' or thread counts', or
    /// the one being re-tuned), and any a user starts the run from: a session
    /// measures them first, those its budget did not reach after it, and the
    /// run re-times them beside its best, so that neither a short budget nor
    /// one measurement in a noisy moment can drop what the cache holds.
    pub incumbents: Vec<Config>,
    /// Where batch programs are built.
    pub dir: PathBuf,
    /// Record log to resume from and append to.
    pub log: Option<PathBuf>,
    pub seed: u64,
    /// What the trials stand for; candidates are generated for its ISA level.
    pub target: Target,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 64,
            count_resumed: true,
            time: None,
            early_stop: None,
            batch: 16,
            compile_timeout: Duration::from_secs(20),
            max_source_bytes: crate::measure::MAX_SOURCE_BYTES,
            // Short samples: the tuner ranks many configs; final figures use longer ones.
            timing: TimingOptions {
                min_sample_secs: 0.02,
                samples: 5,
                ..TimingOptions::default()
            },
            confirm: 4,
            incumbents: Vec::new(),
            dir: PathBuf::from("target/autotune/tune"),
            log: None,
            seed: 1,
            target: Target {
                triple: measure::HOST_TRIPLE.to_string(),
                isa: autotune_codegen::Isa::detect(),
            },
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
    pub errors: BTreeMap<ErrorClass, usize>,
    pub elapsed: Duration,
    /// Time spent compiling batches, and in the tuner.
    pub compile: Duration,
    pub tuner: Duration,
    /// Best throughput after each trial, in order (for tuning curves).
    pub curve: Vec<f64>,
    /// How the winner was re-timed against its closest rivals, if it was.
    pub confirmation: Option<Confirmation>,
}

/// The best configs of a run timed again, round-robin ([`confirm`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmation {
    /// Configs re-timed, the search's best among them.
    pub contenders: usize,
    /// Of them, those re-timed for measuring within [`CONFIRM_WITHIN`] of the
    /// best; the others were kept (the default schedule, the cache's configs).
    pub near: usize,
    /// The search's best, as measured in the search.
    pub searched: f64,
    /// The winner's median over the rounds (the figure `best` now holds).
    pub confirmed: f64,
    /// Whether a config other than the search's best won.
    pub changed: bool,
    /// Configs re-timed in a second round with the first round's winner, for
    /// having measured in the search well above what it re-timed at
    /// ([`rivals_above`]); not counted in `contenders`.
    pub widened: usize,
    /// What the re-timing took (compiling the contenders included).
    pub seconds: f64,
}

impl std::fmt::Display for Confirmation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.contenders - self.near {
            0 => write!(f, "the {} best configs", self.near)?,
            kept => write!(
                f,
                "the {} best config{} and {kept} kept (the default schedule, the cache's)",
                self.near,
                if self.near == 1 { "" } else { "s" }
            )?,
        }
        write!(
            f,
            " re-timed {CONFIRM_ROUNDS} times each in {:.1} s: {} at {:.2} GFLOP/s (median); the search's best had measured {:.2} in its best trial",
            self.seconds,
            if self.changed {
                "a runner-up won"
            } else {
                "the search's best won"
            },
            self.confirmed,
            self.searched
        )?;
        if self.widened > 0 {
            write!(
                f,
                "; re-timed far below the search's figures, so again with the next {} best",
                self.widened
            )?;
        }
        Ok(())
    }
}

/// A trial whose first two samples each took this many times the best
/// trial's seconds a call stops timing there (`Batch::time_unless_behind`).
/// Such a config is outside [`CONFIRM_WITHIN`] of the best, so it is never
/// re-timed as a rival of the winner and its exact figure decides nothing;
/// the margin over that window is for noise (both samples must be behind).
/// At 2.0 a quarter of a cold ResNet-18 build's trials stopped early, at 1.25
/// over half (`resnet18-cold-20261205-233927` records).
pub const GIVE_UP_BEHIND: f64 = 1.25;
const _: () = assert!(GIVE_UP_BEHIND * (1.0 - CONFIRM_WITHIN) > 1.0);

/// The seconds a call of `w` past which a config is [`GIVE_UP_BEHIND`] one
/// measured at `gflops` (`Batch::time_unless_behind`'s limit).
fn give_up_above(w: &Workload, gflops: f64) -> f64 {
    GIVE_UP_BEHIND * w.flops() / (gflops * 1e9)
}

/// Configs measured within this share of the best are re-timed with it.
pub const CONFIRM_WITHIN: f64 = 0.10;

/// Rounds of the re-timing; each times every contender once.
pub const CONFIRM_ROUNDS: usize = 3;

impl Summary {
    fn add(&mut self, r: &Record) {
        self.trials += 1;
        match (&r.error, r.gflops) {
            (Some(e), _) => *self.errors.entry(e.class).or_default() += 1,
            (None, Some(g)) if self.best.as_ref().is_none_or(|(_, b)| g > *b) => {
                self.best = Some((r.config.clone(), g));
            }
            _ => {}
        }
        self.curve.push(self.best.as_ref().map_or(0.0, |b| b.1));
    }
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
    let id = w.id();
    let target = &opts.target;
    let mut summary = Summary {
        workload: w.key(),
        ..Summary::default()
    };
    let mut measured: HashSet<u128> = HashSet::new();
    // Every config that ran, with its figure: what the winner is confirmed among.
    let mut scored: Vec<(Config, f64)> = Vec::new();
    let default = space.default_config_for(&w.op, w.shapes(), target.isa);
    // Resume: earlier trials of this workload on this target, timed on this
    // CPU at this thread count, count. (Records that do not say their count or
    // CPU are not resumed: their best may be another's, and saved as this
    // CPU's it would claim another CPU's figure.)
    if let Some(log) = &opts.log {
        let mut observed = Vec::new();
        let threads = Some(opts.timing.threads);
        let cpu = CpuId::detect();
        for r in load_log(log)?.into_iter().filter(|r| {
            r.workload_id == id
                && r.target == *target
                && r.threads == threads
                && r.cpu.is_some()
                && r.cpu == cpu
                && r.is_current(w)
        }) {
            if let Ok(i) = space.index_of(&r.config) {
                measured.insert(i);
                observed.push((i, r.gflops));
                if r.config == default {
                    summary.default_gflops = r.gflops;
                }
                summary.add(&r);
                summary.resumed += 1;
                scored.extend(r.gflops.map(|g| (r.config.clone(), g)));
            }
        }
        tuner.observe(&space, &observed);
    }
    let mut harness = None;
    let mut since_best = 0usize;
    let mut batch_no = 0;
    let default_index = space
        .index_of(&default)
        .expect("the default is in the space");
    // The incumbents the budget did not reach are measured after it, in one
    // last batch: a run too short to measure what the cache holds (one trial,
    // which the default took) would otherwise replace it with a worse config.
    let mut incumbents_done = false;
    let mut tuner_done = false;
    loop {
        let budget = if opts.count_resumed {
            opts.trials
        } else {
            summary.resumed + opts.trials
        };
        let left = budget.saturating_sub(summary.trials);
        let out_of_time = opts.time.is_some_and(|t| start.elapsed() >= t);
        let stalled = opts.early_stop.is_some_and(|n| since_best >= n);
        let spent = left == 0 || out_of_time || stalled || tuner_done;
        let t0 = Instant::now();
        let proposal = if spent {
            if incumbents_done {
                break;
            }
            incumbents_done = true;
            // (A tuner measures a config as its canonical twin: the same kernel.)
            let mut done: HashSet<u128> = measured.iter().map(|&i| space.canonical(i)).collect();
            let mut missing: Vec<u128> = Vec::new();
            for i in opts
                .incumbents
                .iter()
                .filter_map(|c| space.index_of(c).ok())
            {
                if done.insert(space.canonical(i)) {
                    missing.push(i);
                }
            }
            missing
        } else {
            let default_due = !measured.contains(&default_index);
            let mut seen = measured.clone();
            seen.insert(default_index);
            let want = opts.batch.max(1).min(left) - usize::from(default_due);
            let mut proposal = tuner.propose(&space, want, &seen);
            // The default is timed last in its batch: where it is far behind the
            // batch's best, as it mostly is, two samples tell (`GIVE_UP_BEHIND`);
            // timed first, with no best to compare, its slow calls ran in full.
            if default_due {
                proposal.push(default_index);
            }
            proposal
        };
        summary.tuner += t0.elapsed();
        if proposal.is_empty() {
            if spent {
                break;
            }
            // The space is spent, or the tuner is done (its notes say why).
            tuner_done = true;
            continue;
        }
        let configs: Vec<Config> = proposal.iter().map(|i| space.config_at(*i)).collect();
        let t1 = Instant::now();
        let candidates: Vec<Candidate> = configs.iter().cloned().map(Candidate::Config).collect();
        let batch = harness_of(&mut harness, w, opts)?
            .build(&candidates, &opts.dir.join(format!("batch{batch_no}")))?;
        batch_no += 1;
        summary.compile += t1.elapsed();
        let mut results = Vec::new();
        for (k, (i, config)) in proposal.iter().zip(configs).enumerate() {
            // Out of time, the batch skips to its end: the default, if it
            // closes the batch, is still measured, and so are the incumbents.
            if *i != default_index && !spent && opts.time.is_some_and(|t| start.elapsed() >= t) {
                continue;
            }
            // Configs far behind the best so far are timed with fewer samples.
            let give_up = summary.best.as_ref().map(|(_, g)| give_up_above(w, *g));
            let outcome = batch
                .check(k, &opts.timing)
                .and_then(|_| batch.time_unless_behind(k, &opts.timing, give_up));
            if matches!(&outcome, Err(e) if e.class() == ErrorClass::Harness) {
                return Err(outcome.expect_err("matched above").into());
            }
            let r = Record::new(
                w,
                target,
                opts.timing.threads,
                tuner.name(),
                config,
                outcome,
            );
            let before = summary.best.as_ref().map(|b| b.1);
            summary.add(&r);
            scored.extend(r.gflops.map(|g| (r.config.clone(), g)));
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
    // Each incumbent as it was measured (a tuner measures a config's
    // canonical twin, whose dead knobs may differ).
    let canonical = |c: &Config| space.index_of(c).ok().map(|i| space.canonical(i));
    let mut keep: Vec<Config> = opts
        .incumbents
        .iter()
        .filter_map(|c| {
            let twin = canonical(c)?;
            let found = scored.iter().find(|(s, _)| canonical(s) == Some(twin));
            found.map(|(s, _)| s.clone())
        })
        .collect();
    // The default schedule is re-timed beside the best too, where it was
    // measured: a winner whose one lucky trial beat it must beat it again.
    if opts.confirm >= 2 {
        keep.push(default);
    }
    let (contenders, near) = contenders(&scored, opts.confirm, &keep);
    if contenders.len() > 1 {
        let harness = harness_of(&mut harness, w, opts)?;
        if let Some((mut config, mut gflops, mut c)) = confirm(w, harness, opts, &contenders, near)?
        {
            // Re-timed together, the contenders may all fall far below
            // figures other configs measured in the search (a burst of host
            // noise in the search, or resumed figures of another day): the
            // winner is timed once more beside those.
            let rivals = rivals_above(&scored, &contenders, gflops, opts.confirm);
            if !rivals.is_empty() {
                let mut again = vec![(config.clone(), gflops)];
                again.extend(rivals);
                if let Some((won, g, second)) = confirm(w, harness, opts, &again, again.len())? {
                    (config, gflops) = (won, g);
                    c.widened = again.len() - 1;
                    c.confirmed = g;
                    c.changed |= second.changed;
                    c.seconds += second.seconds;
                }
            }
            summary.best = Some((config, gflops));
            summary.confirmation = Some(c);
        }
    }
    if let Some(h) = harness {
        let _ = std::fs::remove_dir_all(&h.dir);
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}

/// The configs the winner is re-timed against: the best of each config
/// measured within [`CONFIRM_WITHIN`] of the best, at most `most`, best first,
/// then every one of `kept` (the incumbents, the default) that was measured,
/// however far behind; and how many are there for being near the best.
fn contenders(
    scored: &[(Config, f64)],
    most: usize,
    kept: &[Config],
) -> (Vec<(Config, f64)>, usize) {
    let out = best_of_each(scored);
    let top = out.first().map_or(0.0, |b| b.1);
    let (mut near, rest): (Vec<_>, Vec<_>) = out
        .into_iter()
        .partition(|(_, g)| *g >= top * (1.0 - CONFIRM_WITHIN));
    let beyond = near.split_off(most.min(near.len()));
    let count = near.len();
    near.extend(
        beyond
            .into_iter()
            .chain(rest)
            .filter(|(c, _)| kept.contains(c)),
    );
    (near, count)
}

/// Each config measured, at its best figure, best first.
fn best_of_each(scored: &[(Config, f64)]) -> Vec<(Config, f64)> {
    let mut best: BTreeMap<&Config, f64> = BTreeMap::new();
    for (c, g) in scored {
        let b = best.entry(c).or_insert(*g);
        *b = b.max(*g);
    }
    let mut out: Vec<(Config, f64)> = best.into_iter().map(|(c, g)| (c.clone(), g)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// The configs not among `contenders` whose search figure was more than
/// [`CONFIRM_WITHIN`] above `confirmed` (what the winner re-timed at), at
/// most `most`, best first: a re-timing that far below them says the
/// search's figures of the contenders were high, not that the rivals are slow.
fn rivals_above(
    scored: &[(Config, f64)],
    contenders: &[(Config, f64)],
    confirmed: f64,
    most: usize,
) -> Vec<(Config, f64)> {
    best_of_each(scored)
        .into_iter()
        .filter(|(c, g)| {
            g * (1.0 - CONFIRM_WITHIN) > confirmed && !contenders.iter().any(|(k, _)| k == c)
        })
        .take(most)
        .collect()
}

/// Times `contenders` (best first) again, round-robin, [`CONFIRM_ROUNDS`]
/// times each, and returns the one with the best median. On a shared host
/// the best of many single measurements is as often the config timed in a
/// calm moment as the fastest one (the winner's curse); interleaved rounds
/// give every contender the same moments. A contender [`GIVE_UP_BEHIND`] the
/// search's best figure is timed with two samples a round, as in the search:
/// a kept default schedule mostly is, 5-30 times, and timed in full it took
/// most of the re-timing (about 1.1 of 1.6 s on a 512-channel conv). A contender
/// that fails now is left out; `None` where none ran. The first `near` are
/// there for measuring near the best, the others were kept.
fn confirm(
    w: &Workload,
    harness: &Harness,
    opts: &TuneOptions,
    contenders: &[(Config, f64)],
    near: usize,
) -> Result<Option<(Config, f64, Confirmation)>, TuneError> {
    let start = Instant::now();
    let candidates: Vec<Candidate> = contenders
        .iter()
        .map(|(c, _)| Candidate::Config(c.clone()))
        .collect();
    let batch = harness.build(&candidates, &opts.dir.join("confirm"))?;
    let give_up = contenders.first().map(|(_, g)| give_up_above(w, *g));
    let mut seconds: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for _ in 0..CONFIRM_ROUNDS {
        for (k, times) in seconds.iter_mut().enumerate() {
            match batch.time_unless_behind(k, &opts.timing, give_up) {
                Ok(t) => times.push(t.median),
                Err(e) if e.class() == ErrorClass::Harness => return Err(e.into()),
                Err(_) => {}
            }
        }
    }
    let _ = std::fs::remove_dir_all(&batch.dir);
    let winner = seconds
        .iter_mut()
        .enumerate()
        .filter(|(_, t)| t.len() == CONFIRM_ROUNDS)
        .map(|(k, t)| {
            t.sort_by(f64::total_cmp);
            (k, t[t.len() / 2])
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Ok(winner.map(|(k, median)| {
        let gflops = w.flops() / median / 1e9;
        let c = Confirmation {
            contenders: contenders.len(),
            near,
            searched: contenders[0].1,
            confirmed: gflops,
            changed: k != 0,
            widened: 0,
            seconds: start.elapsed().as_secs_f64(),
        };
        (contenders[k].0.clone(), gflops, c)
    }))
}

/// The run's harness, prepared on first use (a run resumed in full may need
/// one only to re-time its winner).
fn harness_of<'h>(
    harness: &'h mut Option<Harness>,
    w: &Workload,
    opts: &TuneOptions,
) -> Result<&'h mut Harness, MeasureError> {
    match harness {
        Some(h) => Ok(h),
        None => Ok(harness.insert(prepare(w, opts, &opts.dir.join("harness"))?)),
    }
}

/// The measurement harness of a run in `dir`, for `opts`'s target and seed,
/// with its limits on a candidate's compile time and source size.
pub fn prepare(w: &Workload, opts: &TuneOptions, dir: &Path) -> Result<Harness, MeasureError> {
    Harness::new(w, opts.target.isa, dir, opts.seed).map(|h| with_limits(h, opts))
}

/// As [`prepare`], its objects also kept across runs in `store`
/// ([`Harness::sharing_objects`]): for tests that check the same configs
/// every run.
pub fn prepare_sharing(
    w: &Workload,
    opts: &TuneOptions,
    dir: &Path,
    store: &Path,
) -> Result<Harness, MeasureError> {
    Harness::sharing_objects(w, opts.target.isa, dir, opts.seed, store)
        .map(|h| with_limits(h, opts))
}

fn with_limits(mut h: Harness, opts: &TuneOptions) -> Harness {
    h.compile_timeout = opts.compile_timeout;
    h.max_source_bytes = opts.max_source_bytes;
    h
}

/// Runs `on_trial`-free tuning of a hand-written candidate list, for fault
/// injection: every candidate is checked and timed, and a record is returned
/// per candidate (config records use the given configs, sources an empty one).
#[cfg(feature = "testing")]
pub fn measure_candidates(
    w: &Workload,
    candidates: &[Candidate],
    opts: &TuneOptions,
) -> Result<Vec<Record>, TuneError> {
    let batch = prepare(w, opts, &opts.dir)?.build(candidates, &opts.dir)?;
    let mut out = Vec::new();
    for (k, c) in candidates.iter().enumerate() {
        let outcome = batch
            .check(k, &opts.timing)
            .and_then(|_| batch.time(k, &opts.timing));
        let config = match c {
            Candidate::Config(c) => c.clone(),
            Candidate::Generic(_) | Candidate::Source(_) => Config::default(),
        };
        let r = Record::new(
            w,
            &opts.target,
            opts.timing.threads,
            "manual",
            config,
            outcome,
        );
        if let Some(log) = &opts.log {
            append(log, &r)?;
        }
        out.push(r);
    }
    Ok(out)
}

/// One tuning run of a workload, as `cargo build` (on a cache miss) and `cargo
/// autotune tune` both do it: same tuner construction, seeds, history and
/// budget semantics; the caller sets thread count and budget.
pub struct TuningSession<'a> {
    pub workload: &'a Workload,
    /// The operators whose past trials may be learned from (the crate's).
    pub operators: &'a [Operator],
    pub tuner: TunerSpec,
    pub options: TuneOptions,
    /// Record logs (files or directories) to learn from; `None`: no transfer.
    pub history: Option<Vec<PathBuf>>,
    /// Configs to measure after `options.incumbents` (the cached winners of
    /// the operator's other workloads).
    pub seeds: Vec<Config>,
    /// A second log every record is appended to (the per-user store); a failed
    /// write there loses nothing and is ignored.
    pub mirror: Option<PathBuf>,
    /// The pre-trained model the few-shot tuner ranks with (checked for the
    /// run's target here).
    pub pretrained: Option<&'a Loaded>,
}

/// What a session did, beside its [`Summary`].
pub struct SessionReport {
    pub summary: Summary,
    /// The tuner's name as records store it (e.g. `xgb-rank-transfer`).
    pub tuner: String,
    /// The tuner's figures about its own work.
    pub stats: Vec<(&'static str, f64)>,
    /// What the caller should tell the user: fallbacks, skipped history.
    pub notes: Vec<String>,
}

impl TuningSession<'_> {
    /// Runs the session; `on_trial` sees each record and the summary so far.
    pub fn run(
        &self,
        on_trial: &mut dyn FnMut(&Record, &Summary),
    ) -> Result<SessionReport, TuneError> {
        let w = self.workload;
        let mut notes = Vec::new();
        let mut spec = self.tuner;
        let target = &self.options.target;
        let pretrained = match self.pretrained.map(|p| p.check_target(target).map(|_| p)) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) if matches!(spec, TunerSpec::FewShot { .. }) => {
                notes.push(format!("the pre-trained model is not applied: {e}"));
                None
            }
            _ => None,
        };
        if matches!(spec, TunerSpec::FewShot { .. }) && pretrained.is_none() {
            notes.push(format!(
                "no pre-trained model for {target}, so {} is tuned with {} instead of few-shot; \
                 make one with autotune's bench/corpus.sh or `cargo autotune train` and point \
                 AUTOTUNE_MODEL at it",
                w.key(),
                TunerSpec::MODEL
            ));
            spec = TunerSpec::MODEL;
        }
        if spec == (TunerSpec::FewShot { refit: true }) && !crate::model::AVAILABLE {
            notes.push(format!(
                "the cost model is off (autotune-tune built without its `xgboost` feature), \
                 so {} is tuned few-shot without refitting",
                w.key()
            ));
            spec = TunerSpec::FewShot { refit: false };
        }
        if spec.needs_model() && !crate::model::AVAILABLE {
            notes.push(format!(
                "the cost model is off (autotune-tune built without its `xgboost` feature), \
                 so {} is tuned with the {} tuner instead of {spec}; turn the model on with \
                 autotune-build's `xgboost` feature (needs cmake, a C++ compiler and libclang)",
                w.key(),
                TunerSpec::BLACK_BOX
            ));
            spec = TunerSpec::BLACK_BOX;
        }
        // Only the model-guided tuners learn from history.
        let past = match (&self.history, spec.learns()) {
            (Some(sources), true) => {
                let (past, problems) =
                    History::for_tuning(w, &self.options.target, sources, self.operators);
                notes.extend(
                    problems
                        .into_iter()
                        .map(|p| format!("tuning history skipped: {p}")),
                );
                Some(past)
            }
            _ => None,
        };
        let seeds = [&self.options.incumbents[..], &self.seeds[..]].concat();
        let mut tuner = spec.build(
            w,
            self.options.seed,
            past.as_ref(),
            &seeds,
            pretrained,
            self.options.timing.threads,
            self.options.target.isa,
        )?;
        let mirror = self.mirror.as_ref();
        let mut options = self.options.clone();
        if matches!(spec, TunerSpec::FewShot { .. }) {
            options.batch = options.batch.min(crate::search::FEW_SHOT_BATCH);
            // A few-shot run is a few dozen trials: re-timing four configs
            // would be a fifth of it, two (one compile per core) a tenth.
            options.confirm = options.confirm.min(2);
        }
        let summary = tune(w, tuner.as_mut(), &options, &mut |r, s| {
            if let Some(log) = mirror {
                let _ = append(log, r);
            }
            on_trial(r, s);
        })?;
        notes.extend(tuner.notes());
        Ok(SessionReport {
            summary,
            tuner: tuner.name().to_string(),
            stats: tuner.stats(),
            notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_codegen::space::Value;

    fn config(tile: i64) -> Config {
        let mut c = Config::default();
        c.0.insert("out.tile.i".parse().unwrap(), Value::Int(tile));
        c
    }

    #[test]
    fn contenders_are_the_distinct_configs_near_the_best() {
        let scored = [
            (config(1), 50.0),
            (config(2), 100.0),
            (config(3), 91.0),
            (config(2), 80.0), // measured again: its best figure counts
            (config(4), 89.9), // more than 10% behind
            (config(5), 95.0),
        ];
        let got: Vec<(i64, f64)> = contenders(&scored, 4, &[])
            .0
            .into_iter()
            .map(|(c, g)| {
                (
                    c.get("out.tile.i")
                        .map_or(0, |v| v.to_string().parse().unwrap()),
                    g,
                )
            })
            .collect();
        assert_eq!(got, [(2, 100.0), (5, 95.0), (3, 91.0)]);
        let (two, near) = contenders(&scored, 2, &[]);
        assert_eq!((two.len(), near), (2, 2), "at most `most`");
        assert!(contenders(&[], 4, &[]).0.is_empty());
        // An incumbent is re-timed however far behind its one measurement was.
        let (with, near) = contenders(&scored, 2, &[config(1), config(9)]);
        assert_eq!((with.len(), near), (3, 2), "{with:?}");
        assert_eq!(with[2], (config(1), 50.0));
        // Also one near the best but beyond `most`.
        let (with, near) = contenders(&scored, 1, &[config(5)]);
        assert_eq!((with.len(), near), (2, 1), "{with:?}");
        assert_eq!(with[1], (config(5), 95.0));
    }

    /// The warning counts the configs re-timed for being near the best apart
    /// from those kept (the default schedule), which may be far behind.
    #[test]
    fn a_confirmation_says_which_configs_were_kept() {
        let mut c = Confirmation {
            contenders: 3,
            near: 2,
            searched: 34.3,
            confirmed: 18.2,
            changed: false,
            widened: 0,
            seconds: 3.7,
        };
        let text = c.to_string();
        assert!(
            text.starts_with("the 2 best configs and 1 kept (the default schedule, the cache's) re-timed 3 times each"),
            "{text}"
        );
        c.contenders = 2;
        assert!(
            c.to_string().starts_with("the 2 best configs re-timed"),
            "{c}"
        );
        c.widened = 3;
        assert!(
            c.to_string().ends_with("so again with the next 3 best"),
            "{c}"
        );
    }

    #[test]
    fn rivals_are_those_the_search_measured_well_above_the_re_timed_winner() {
        let scored = [
            (config(1), 100.0),
            (config(2), 95.0),
            (config(3), 80.0),
            (config(3), 60.0),
            (config(4), 60.0),
            (config(5), 55.0), // within 10% of 50 re-timed: not a rival
        ];
        let near = &scored[..2];
        let got = rivals_above(&scored, near, 50.0, 4);
        assert_eq!(got, [(config(3), 80.0), (config(4), 60.0)]);
        assert_eq!(
            rivals_above(&scored, near, 50.0, 1).len(),
            1,
            "at most `most`"
        );
        assert!(
            rivals_above(&scored, near, 90.0, 4).is_empty(),
            "none above"
        );
    }
}
