//! The tuning loop: fault injection (every failure class recorded while the run
//! goes on), resuming from a record log, and small runs of each tuner.

use std::time::Duration;

use autotune_codegen::{Config, Space, Workload};
use autotune_tune::measure::{Candidate, ErrorClass};
use autotune_tune::session as tune;
use autotune_tune::{record, tuner, TuneOptions};

mod common;

use common::{options, scratch};

fn workload(m: i64, n: i64, k: i64) -> Workload {
    common::gemm(m, n, k)
}

const SIG: &str = "int32_t CANDIDATE(const float *restrict in_a, const float *restrict in_b, float *restrict out)";

/// Each candidate measured once: its record and failure class (none: it ran).
fn measured_classes(
    w: &Workload,
    candidates: &[Candidate],
    opts: &autotune_tune::TuneOptions,
) -> (Vec<record::Record>, Vec<Option<ErrorClass>>) {
    let records = tune::measure_candidates(w, candidates, opts).unwrap();
    let classes = records
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.class))
        .collect();
    (records, classes)
}

/// How many candidate sources (`k<hash>.c`) a batch wrote into `dir`.
fn candidate_sources(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with('k') && n.ends_with(".c"))
        .count()
}

#[test]
fn every_fault_is_recorded_with_its_class() {
    let w = workload(8, 8, 8);
    let dir = scratch("tune-faults");
    let mut opts = options(&dir);
    // Checked before compiling; the default config's C is well under it.
    opts.max_source_bytes = 64 << 10;
    let space = Space::new(&w.op, w.shapes());
    let good = space.default_config(&w.op, w.shapes());
    let candidates = vec![
        Candidate::Config(good.clone()),
        Candidate::Source(format!("{SIG} {{ this is not C; }}")),
        Candidate::Source(format!(
            "{SIG} {{ (void)in_a; (void)in_b; (void)out; *(volatile int *)0 = 1; return 0; }}"
        )),
        Candidate::Source(format!(
            "{SIG} {{ (void)in_a; (void)in_b; (void)out; for (;;) {{ __asm__ volatile(\"\"); }} }}"
        )),
        Candidate::Source(format!(
            "{SIG} {{ (void)in_a; (void)in_b; for (int i = 0; i < 64; ++i) out[i] = 1.0f; return 0; }}"
        )),
        Candidate::Source(format!("{SIG} {{ (void)in_a; (void)in_b; (void)out; return 1; }}")),
        Candidate::Source(format!("{SIG} {{ /* {} */ return 0; }}", "x".repeat(70 << 10))),
    ];
    let (records, classes) = measured_classes(&w, &candidates, &opts);
    assert_eq!(
        classes,
        vec![
            None,
            Some(ErrorClass::CompileError),
            Some(ErrorClass::RuntimeCrash),
            Some(ErrorClass::RunTimeout),
            Some(ErrorClass::WrongResult),
            Some(ErrorClass::AllocFailed),
            Some(ErrorClass::SourceTooLarge),
        ]
    );
    assert!(records[0].gflops.unwrap() > 0.0);
    assert!(
        records[1].error.as_ref().unwrap().message.contains("error"),
        "{:?}",
        records[1]
    );
    assert!(
        records[2]
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("signal 11"),
        "{:?}",
        records[2]
    );
    let large = &records[6].error.as_ref().unwrap().message;
    assert!(large.contains("over the 65536-byte limit"), "{large}");
    // The batch's files are here, but for the one too large: not written,
    // not compiled.
    assert_eq!(candidate_sources(&opts.dir), 6);
    // Every trial is in the log, in order.
    let logged = record::load_log(opts.log.as_ref().unwrap()).unwrap();
    assert_eq!(logged, records);
}

/// A config an earlier batch of the harness compiled is linked from that
/// batch's object, not compiled again, and still checks and times.
#[test]
fn a_candidate_built_before_is_not_compiled_again() {
    let w = workload(16, 16, 16);
    let dir = scratch("tune-kept-objects");
    let opts = options(&dir);
    let harness = tune::prepare(&w, &opts, &dir.join("harness")).unwrap();
    let space = Space::new(&w.op, w.shapes());
    let a = space.default_config(&w.op, w.shapes());
    let b = space.config_at(1);
    assert_ne!(a, b);
    harness
        .build(&[Candidate::Config(a.clone())], &dir.join("first"))
        .unwrap();
    assert_eq!(candidate_sources(&dir.join("first")), 1);
    let batch = harness
        .build(
            &[
                Candidate::Config(b),
                Candidate::Config(a.clone()),
                Candidate::Config(a),
            ],
            &dir.join("second"),
        )
        .unwrap();
    assert_eq!(
        candidate_sources(&dir.join("second")),
        1,
        "only the new config is compiled"
    );
    for i in 0..3 {
        batch.check(i, &opts.timing).unwrap();
        batch.time(i, &opts.timing).unwrap();
    }
}

/// The default closes the first batch, so that the configs measured before it
/// set the best its slow calls are compared with (two samples where it is far
/// behind), and the next batch does not measure it again.
#[test]
fn the_default_closes_the_first_batch() {
    let w = workload(16, 24, 8);
    let dir = scratch("tune-default-last");
    let mut opts = options(&dir);
    opts.trials = 8;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(5), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(s.trials, 8);
    let default =
        Space::new(&w.op, w.shapes()).default_config_for(&w.op, w.shapes(), opts.target.isa);
    let log = record::load_log(&dir.join("records.jsonl")).unwrap();
    let at: Vec<usize> = (0..log.len())
        .filter(|&i| log[i].config == default)
        .collect();
    assert_eq!(at, [opts.batch - 1], "once, last of the first batch");
    assert!(s.default_gflops.is_some());
}

#[test]
fn a_run_resumes_from_its_log() {
    let w = workload(16, 24, 8);
    let dir = scratch("tune-resume");
    let mut opts = options(&dir);
    opts.trials = 5;
    let first = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    assert_eq!((first.trials, first.resumed), (5, 0));
    assert!(
        first.default_gflops.is_some(),
        "the default config is measured in the first batch"
    );
    opts.trials = 9;
    let mut seen = 0;
    let second = tune::tune(&w, &mut tuner::RandomTuner::new(4), &opts, &mut |_, _| {
        seen += 1
    })
    .unwrap();
    assert_eq!((second.trials, second.resumed, seen), (9, 5, 4));
    let log = record::load_log(opts.log.as_ref().unwrap()).unwrap();
    assert_eq!(log.len(), 9);
    let mut configs: Vec<_> = log.iter().map(|r| r.config.to_string()).collect();
    configs.sort();
    configs.dedup();
    assert_eq!(configs.len(), 9, "no config is measured twice");
    assert!(second.best.unwrap().1 >= first.best.unwrap().1);
}

/// Distinct configs of `w`, one per figure of `claimed`, each with a trial
/// claiming it appended to the run's log ([`claim`]).
fn claim_each(w: &Workload, opts: &TuneOptions, claimed: &[f64]) -> Vec<Config> {
    let space = Space::new(&w.op, w.shapes());
    let configs: Vec<Config> = (0..claimed.len() as u128)
        .map(|i| space.config_at(space.size() / 5 * i))
        .collect();
    for (config, gflops) in configs.iter().zip(claimed) {
        claim(w, opts, config, *gflops);
    }
    configs
}

/// Appends to the run's log a trial of `config` that claims `gflops` (a
/// measurement in a lucky or unlucky moment).
fn claim(w: &Workload, opts: &TuneOptions, config: &Config, gflops: f64) {
    let seconds = w.flops() / gflops / 1e9;
    let timing = autotune_tune::measure::Timing {
        median: seconds,
        min: seconds,
        max: seconds,
    };
    let r = record::Record::new(
        w,
        &opts.target,
        opts.timing.threads,
        "lucky",
        config.clone(),
        Ok(timing),
    );
    record::append(opts.log.as_ref().unwrap(), &r).unwrap();
}

#[test]
fn a_lucky_measurement_is_timed_again_before_it_wins() {
    let w = workload(16, 24, 8);
    let dir = scratch("tune-confirm");
    let mut opts = options(&dir);
    opts.confirm = 4;
    // Two configs whose one measurement each claimed 1000 and 950 GFLOP/s,
    // and a third far behind them: only the first two are contenders. The
    // third claims less than any CPU runs this product at: were the
    // contenders re-timed below its figure (10 GFLOP/s was, on a Zen 1), it
    // would be timed again beside them as a rival, and might win.
    let configs = claim_each(&w, &opts, &[1000.0, 950.0, 0.01]);
    let log = opts.log.clone().unwrap();
    opts.trials = 3;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    assert_eq!((s.trials, s.resumed), (3, 3), "nothing left to measure");
    let c = s.confirmation.expect("the two close configs are re-timed");
    assert_eq!((c.contenders, c.searched), (2, 1000.0));
    let (config, gflops) = s.best.unwrap();
    assert!(configs[..2].contains(&config), "the winner is a contender");
    assert_eq!(gflops, c.confirmed, "the best holds the re-timed figure");
    assert!(
        gflops < 500.0,
        "a real figure, not the claimed one: {gflops}"
    );
    assert_eq!(
        record::load_log(&log).unwrap().len(),
        3,
        "re-timing logs no trials"
    );
}

/// Contenders re-timed far below what other configs measured in the search
/// (resumed figures of another day, a burst of host noise) are timed once
/// more beside those: re-tuning a 512-channel conv from its committed log
/// kept a config that re-timed at 110 GFLOP/s over others the log had at
/// 150-190, never re-timed.
#[test]
fn contenders_re_timed_far_below_the_others_are_timed_again_beside_them() {
    let w = workload(16, 24, 8);
    let dir = scratch("tune-confirm-widen");
    let mut opts = options(&dir);
    opts.confirm = 4;
    // Two near the best, two well behind them but far above anything real.
    let configs = claim_each(&w, &opts, &[1000.0, 950.0, 600.0, 500.0]);
    opts.trials = 4;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let c = s.confirmation.expect("the two close configs are re-timed");
    assert_eq!((c.contenders, c.widened), (2, 2), "{c}");
    let (config, gflops) = s.best.unwrap();
    assert!(configs.contains(&config), "the winner is one of them");
    assert_eq!(
        gflops, c.confirmed,
        "the best holds the last re-timed figure"
    );
}

/// A run whose budget ends before it reaches an incumbent (a cached config of
/// the workload) still measures it, and re-times it beside its best: with
/// `cargo autotune tune --trials 1 --save`, the default schedule took the one
/// trial, and the save replaced a 200 GFLOP/s entry with the default's 42.
#[test]
fn an_incumbent_is_measured_whatever_the_budget() {
    let w = workload(64, 64, 64);
    let dir = scratch("tune-incumbent-budget");
    let mut opts = options(&dir);
    opts.confirm = 4;
    opts.trials = 1;
    let space = Space::new(&w.op, w.shapes());
    let default = space.default_config_for(&w.op, w.shapes(), opts.target.isa);
    let tiled = space
        .register_tile_starts(&default, opts.target.isa, 1)
        .into_iter()
        .next()
        .expect("a register-tile start");
    opts.incumbents = vec![tiled.clone()];
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let log = record::load_log(opts.log.as_ref().unwrap()).unwrap();
    assert!(
        log.iter().any(|r| r.config == tiled && r.gflops.is_some()),
        "the incumbent is measured and logged"
    );
    assert_eq!(s.trials, 2, "the budget's trial and the incumbent");
    assert_eq!(
        s.best.unwrap().0,
        tiled,
        "vectorised, it wins over the default schedule"
    );
}

/// An incumbent whose canonical twin (the same kernel, dead knobs at their
/// first choice) was measured is not measured again, and is re-timed beside
/// the best as that twin.
#[test]
fn an_incumbent_measured_as_its_canonical_twin_is_re_timed_as_it() {
    // A fused ReLU: while `y.fuse` is on, the output stage's knobs are dead.
    let w = common::workload(
        "specialize(M = 16, N = 24, K = 8)",
        "pub fn mm_relu(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            let y: Tensor<f32, (M, N)> = compute(|i, j| sum(|k| a[i][k] * b[k][j]));
            compute(|i, j| max(y[i][j], 0.0))
        }",
    );
    let dir = scratch("tune-incumbent-twin");
    let mut opts = options(&dir);
    opts.confirm = 4;
    let space = Space::new(&w.op, w.shapes());
    let default = space.default_config_for(&w.op, w.shapes(), opts.target.isa);
    let at = (0..4096u128)
        .map(|k| k * (space.size() / 4096).max(1) % space.size())
        .find(|&i| space.canonical(i) != i && space.config_at(space.canonical(i)) != default)
        .expect("a config with a dead knob off its first choice");
    let (incumbent, twin) = (space.config_at(at), space.config_at(space.canonical(at)));
    let best = (0..space.size())
        .map(|i| space.config_at(i))
        .find(|c| ![&default, &incumbent, &twin].contains(&c))
        .unwrap();
    // Resumed from the log: a best far ahead of the twin, which is far ahead
    // of the default; only the kept configs join the best in the re-timing.
    claim(&w, &opts, &best, 1000.0);
    claim(&w, &opts, &twin, 100.0);
    claim(&w, &opts, &default, 1.0);
    opts.incumbents = vec![incumbent.clone()];
    opts.trials = 3;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let log = record::load_log(opts.log.as_ref().unwrap()).unwrap();
    assert!(
        !log.iter().any(|r| r.config == incumbent),
        "not measured again"
    );
    let c = s.confirmation.expect("re-timed");
    assert_eq!(c.contenders, 3, "the best, the twin and the default: {c}");
}

/// The default schedule is re-timed beside the search's best however far
/// behind its one measurement was: a tuned entry that one lucky trial put
/// ahead of it must beat it again in the same rounds.
#[test]
fn the_default_schedule_is_timed_again_beside_the_best() {
    let w = workload(16, 24, 8);
    let dir = scratch("tune-confirm-default");
    let mut opts = options(&dir);
    opts.confirm = 4;
    let space = Space::new(&w.op, w.shapes());
    // The default of the level tuned at (this CPU's best).
    let default = space.default_config_for(&w.op, w.shapes(), opts.target.isa);
    let lucky = (1..space.size())
        .map(|i| space.config_at(i))
        .find(|c| *c != default)
        .unwrap();
    claim(&w, &opts, &lucky, 1000.0);
    claim(&w, &opts, &default, 10.0);
    opts.trials = 2;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let c = s
        .confirmation
        .expect("the best and the default are re-timed");
    assert_eq!((c.contenders, c.searched), (2, 1000.0));
    assert!(s.best.unwrap().1 < 500.0, "the re-timed figure wins");
}

#[test]
fn grid_and_genetic_runs_complete() {
    let w = workload(12, 32, 16);
    for (name, seed) in [("grid", 1), ("genetic", 2)] {
        let dir = scratch(&format!("tune-{name}"));
        let mut opts = options(&dir);
        opts.trials = 8;
        opts.early_stop = Some(100);
        let mut t = common::tuner(name, seed, &w, None);
        let s = tune::tune(&w, t.as_mut(), &opts, &mut |_, _| {}).unwrap();
        assert_eq!(s.trials, 8, "{name}");
        assert_eq!(s.curve.len(), 8);
        assert!(
            s.curve.windows(2).all(|p| p[1] >= p[0]),
            "the best only improves"
        );
        assert!(s.best.is_some(), "{name}: {:?}", s.errors);
    }
}

#[test]
fn time_budget_and_early_stop_end_a_run() {
    let w = workload(8, 16, 8);
    let dir = scratch("tune-budget");
    let mut opts = options(&dir);
    opts.trials = 1000;
    opts.early_stop = Some(3);
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(9), &opts, &mut |_, _| {}).unwrap();
    assert!(
        s.trials < 1000,
        "early stopping ended the run after {} trials",
        s.trials
    );
    opts.early_stop = None;
    opts.log = None;
    opts.time = Some(Duration::from_millis(1));
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(9), &opts, &mut |_, _| {}).unwrap();
    assert!(
        s.trials <= 4,
        "the time budget ends the run: {} trials",
        s.trials
    );
}

#[test]
fn a_corrupt_log_is_reported_with_its_line() {
    let dir = scratch("tune-corrupt");
    let path = dir.join("records.jsonl");
    std::fs::write(&path, "\n{\"workload\": 3}\n").unwrap();
    let err = record::load_log(&path).unwrap_err().to_string();
    assert!(
        err.contains("records.jsonl:2: not a tuning record"),
        "{err}"
    );
}

/// Rewrites each record of the log at `path` (as JSON, with its position) to
/// stand for a log that another version wrote.
fn rewrite_log(path: &std::path::Path, edit: impl Fn(usize, &mut serde_json::Value)) {
    let lines: Vec<String> = record::load_log(path)
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = serde_json::to_value(r).unwrap();
            edit(i, &mut v);
            v.to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A log written by a newer autotune, with a failure class this one does not
/// know, still loads: the trial reads as a failure of an unknown class.
#[test]
fn a_failure_class_from_a_newer_version_still_loads() {
    let w = workload(12, 32, 16);
    let dir = scratch("tune-newer-class");
    let mut opts = options(&dir);
    opts.trials = 2;
    tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let log = opts.log.clone().unwrap();
    rewrite_log(&log, |i, v| {
        if i == 0 {
            let o = v.as_object_mut().unwrap();
            o.remove("gflops");
            o.remove("seconds");
            o.insert(
                "error".into(),
                serde_json::json!({"class": "a_class_from_the_future", "message": "m"}),
            );
        }
    });
    let records = record::load_log(&log).unwrap();
    let e = records[0].error.as_ref().unwrap();
    assert_eq!(e.class, ErrorClass::Unknown);
    assert_eq!(records[0].gflops, None);
    // Resuming from it counts it as a failed trial, not as a measurement.
    opts.trials = 3;
    let s = tune::tune(&w, &mut tuner::RandomTuner::new(4), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(
        s.errors.get(&ErrorClass::Unknown),
        Some(&1),
        "{:?}",
        s.errors
    );
}

/// An edit of a record, as JSON.
type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);

/// A 4-trial run's record log, and a function that restores it, edits every
/// record with its argument and says how many records a second run resumes.
fn resumable_log(name: &str) -> (std::path::PathBuf, impl Fn(Edit) -> usize) {
    let w = workload(12, 32, 16);
    let mut opts = options(&scratch(name));
    opts.trials = 4;
    let first = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(first.trials, 4);
    let log = opts.log.clone().unwrap();
    let original = std::fs::read_to_string(&log).unwrap();
    let path = log.clone();
    let resumed = move |edit: Edit| {
        std::fs::write(&path, &original).unwrap();
        rewrite_log(&path, |_, v| edit(v));
        let s = tune::tune(&w, &mut tuner::RandomTuner::new(4), &opts, &mut |_, _| {}).unwrap();
        s.resumed
    };
    (log, resumed)
}

/// Records of another generator version (their configs may mean other code)
/// are resumed only where they record the kernel they timed and it is still
/// the kernel; otherwise the run measures its whole budget.
#[test]
fn records_of_another_generator_are_resumed_only_with_an_unchanged_kernel() {
    let (log, resumed) = resumable_log("tune-generator");
    assert!(record::load_log(&log)
        .unwrap()
        .iter()
        .all(|r| r.kernel.is_some()));
    // As an older generator wrote them, with the kernel it timed: the same.
    assert_eq!(resumed(&|v| v["generator"] = serde_json::json!(0)), 4);
    // ... with another kernel than this generator makes of the config.
    let changed = |v: &mut serde_json::Value| {
        v["generator"] = serde_json::json!(0);
        v["kernel"] = serde_json::json!("0123456789abcdef");
    };
    assert_eq!(
        resumed(&changed),
        0,
        "records of a changed kernel were resumed"
    );
    // ... from before records said their kernel.
    let unsaid = |v: &mut serde_json::Value| {
        v["generator"] = serde_json::json!(0);
        v.as_object_mut().unwrap().remove("kernel");
    };
    assert_eq!(resumed(&unsaid), 0, "records of generator 0 were resumed");
}

/// The history learns from an older generator's records only while they
/// record the kernel they timed and it is still the kernel.
#[test]
fn the_history_learns_from_an_older_generators_records_only_with_an_unchanged_kernel() {
    use autotune_tune::features::{FeatureSet, FeatureSource};
    use autotune_tune::history::History;
    let w = workload(12, 32, 16);
    let dir = scratch("tune-history-generator");
    let mut opts = options(&dir);
    opts.trials = 4;
    tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let log = opts.log.clone().unwrap();
    let learned = || {
        let (h, errors) = History::load(
            std::slice::from_ref(&log),
            std::slice::from_ref(&w.op),
            &opts.target,
            None,
            FeatureSet::Curve,
            FeatureSource::Plan,
        );
        assert!(errors.is_empty(), "{errors:?}");
        h.trials()
    };
    assert_eq!(learned(), 4);
    rewrite_log(&log, |_, v| v["generator"] = serde_json::json!(0));
    assert_eq!(
        learned(),
        4,
        "an unchanged kernel's records were not learned from"
    );
    rewrite_log(&log, |i, v| {
        if i < 2 {
            v["kernel"] = serde_json::json!("0123456789abcdef");
        } else {
            v.as_object_mut().unwrap().remove("kernel");
        }
    });
    assert_eq!(
        learned(),
        0,
        "records of changed or unrecorded kernels were learned from"
    );
}

/// Stamping a log written before records said their kernel records the
/// kernel a trial records today, for records of this generator only.
#[test]
fn stamping_a_log_records_the_kernel_a_trial_records() {
    let w = workload(12, 32, 16);
    let dir = scratch("tune-stamp");
    let mut opts = options(&dir);
    opts.trials = 3;
    tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    let log = opts.log.clone().unwrap();
    let written = record::load_log(&log).unwrap();
    assert!(written.iter().all(|r| r.kernel.is_some()), "{written:?}");
    rewrite_log(&log, |i, v| {
        v.as_object_mut().unwrap().remove("kernel");
        if i == 0 {
            v["generator"] = serde_json::json!(0);
        }
    });
    let stamped = record::stamp_log(&log, std::slice::from_ref(&w.op)).unwrap();
    assert_eq!(stamped, written.len() - 1);
    let kernels: Vec<_> = record::load_log(&log)
        .unwrap()
        .iter()
        .map(|r| r.kernel)
        .collect();
    let mut want: Vec<_> = written.iter().map(|r| r.kernel).collect();
    want[0] = None;
    assert_eq!(kernels, want);
}

/// Records of another kernel thread count were timed at another pool size: a
/// run at this count does not resume them (its best would be another count's),
/// nor records that do not say their count.
#[test]
fn records_of_another_thread_count_are_not_resumed() {
    let w = workload(12, 32, 16);
    let dir = scratch("tune-threads");
    let mut opts = options(&dir);
    opts.trials = 4;
    opts.timing.threads = 2;
    let first = tune::tune(&w, &mut tuner::RandomTuner::new(3), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(first.trials, 4);
    let log = record::load_log(opts.log.as_ref().unwrap()).unwrap();
    assert!(log.iter().all(|r| r.threads == Some(2)), "{log:?}");
    opts.timing.threads = 1;
    let second = tune::tune(&w, &mut tuner::RandomTuner::new(4), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(
        second.resumed, 0,
        "2-thread records were resumed at 1 thread"
    );
    assert_eq!(second.trials, 4);
    opts.timing.threads = 2;
    opts.trials = 6;
    let third = tune::tune(&w, &mut tuner::RandomTuner::new(5), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(third.resumed, 4, "this count's records are resumed");
    // Records that do not say their count (older logs) are not resumed.
    let log = opts.log.clone().unwrap();
    let unsaid: Vec<String> = record::load_log(&log)
        .unwrap()
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap();
            v.as_object_mut().unwrap().remove("threads");
            v.to_string()
        })
        .collect();
    std::fs::write(&log, unsaid.join("\n") + "\n").unwrap();
    let fourth = tune::tune(&w, &mut tuner::RandomTuner::new(6), &opts, &mut |_, _| {}).unwrap();
    assert_eq!(
        fourth.resumed, 0,
        "records without a thread count were resumed"
    );
}

/// A GEMM whose `b` is constant: the measurement program passes a handle's
/// slot for it, and checks the second call, which reads the copies the first
/// one kept.
#[test]
fn constant_inputs_are_checked_through_their_kept_copies() {
    let w = common::workload(
        "constant(b), specialize(M = 8, N = 32, K = 16)",
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    );
    let dir = scratch("tune-constants");
    let opts = options(&dir);
    let space = Space::new(&w.op, w.shapes());
    let mut packs_b = space.default_config(&w.op, w.shapes());
    packs_b.0.insert(
        "output.pack.1".parse().unwrap(),
        autotune_codegen::Value::Int(1),
    );
    space.index_of(&packs_b).unwrap();
    let sig = "int32_t CANDIDATE(const float *restrict in_a, const float *restrict in_b, \
               float *restrict out, void *slot)";
    // Right on the first call through a handle only: as a kernel whose kept
    // copies were wrong would be.
    let body = "static int calls; (void)slot; \
                for (int i = 0; i < 8; ++i) for (int j = 0; j < 32; ++j) { \
                  float s = 0; for (int k = 0; k < 16; ++k) s += in_a[i * 16 + k] * in_b[k * 32 + j]; \
                  out[i * 32 + j] = calls ? 0.0f : s; } \
                calls++; return 0;";
    let candidates = vec![
        Candidate::Config(packs_b),
        Candidate::Source(format!("{sig} {{ {body} }}")),
    ];
    let (records, classes) = measured_classes(&w, &candidates, &opts);
    assert_eq!(
        classes,
        vec![None, Some(ErrorClass::WrongResult)],
        "{records:?}"
    );
}

/// Records say the CPU that timed them: a run resumes only this CPU's (another
/// CPU's best, saved as this one's, would claim its figure here), and not
/// records that do not say their CPU.
#[test]
fn records_of_another_cpu_are_not_resumed() {
    let (log, resumed) = resumable_log("tune-cpu");
    let here = autotune_codegen::CpuId::detect();
    assert!(
        record::load_log(&log)
            .unwrap()
            .iter()
            .all(|r| r.cpu == here),
        "records do not name this CPU"
    );
    assert_eq!(resumed(&|_| {}), 4, "this CPU's records are resumed");
    let other = |v: &mut serde_json::Value| v["cpu"] = serde_json::json!("OtherVendor-1-2");
    assert_eq!(resumed(&other), 0, "another CPU's records were resumed");
    let unsaid = |v: &mut serde_json::Value| {
        v.as_object_mut().unwrap().remove("cpu");
    };
    assert_eq!(resumed(&unsaid), 0, "records without a CPU were resumed");
}

proptest::proptest! {
    // A resumed run compares logged throughputs with fresh ones, so a
    // measurement must come back from the log bit for bit.
    #[test]
    fn measurements_survive_the_log_exactly(g in 1e-6f64..1e6, s in 1e-9f64..10.0) {
        let w = workload(4, 4, 4);
        let timing = autotune_tune::measure::Timing { median: s, min: s, max: s };
        let mut r = record::Record::new(&w, &common::target(), 1, "t", Default::default(), Ok(timing));
        r.gflops = Some(g);
        let line = serde_json::to_string(&r).unwrap();
        let back: record::Record = serde_json::from_str(&line).unwrap();
        proptest::prop_assert_eq!(back, r);
    }
}
