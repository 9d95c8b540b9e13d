//! Transfer learning: the history store reads back what tuning wrote, a run
//! with history completes and starts from the history's best configs, and
//! transfer never breaks tuning (empty history, another target, another
//! operator).

use std::path::{Path, PathBuf};

use autotune_codegen::Space;
use autotune_codegen::Workload;
use autotune_lang::Operator;
use autotune_tune::features::{FeatureSet, FeatureSource};
use autotune_tune::history::History;
use autotune_tune::record;
use autotune_tune::session::{self as tune, TuneOptions};
use autotune_tune::Record;

mod common;

/// A target with this triple but another ISA level than the tests measure at.
fn other_isa() -> autotune_codegen::Target {
    let mut t = common::target();
    t.isa = if t.isa == autotune_codegen::Isa::Baseline {
        autotune_codegen::Isa::Avx2
    } else {
        autotune_codegen::Isa::Baseline
    };
    t
}

use common::{gemm, workload};

/// Another operator type: a matrix-vector product.
fn gemv(m: i64, k: i64) -> Workload {
    workload(
        &format!("specialize(M = {m}, K = {k})"),
        "pub fn mv(a: Tensor<f32, (M, K)>, x: Tensor<f32, K>) -> Tensor<f32, M> {
            compute(|i| sum(|k| a[i][k] * x[k]))
        }",
    )
}

fn scratch(name: &str) -> PathBuf {
    common::scratch(&format!("transfer-{name}"))
}

fn options(dir: &Path, log: &str, trials: usize) -> TuneOptions {
    TuneOptions {
        trials,
        batch: 6,
        log: Some(dir.join(log)),
        ..common::options(dir)
    }
}

/// Tunes `w` briefly (genetic) into `dir/<log>`.
fn tune_into(w: &Workload, dir: &Path, log: &str, trials: usize) -> Vec<Record> {
    let mut t = common::tuner("genetic", 5, w, None);
    tune::tune(w, t.as_mut(), &options(dir, log, trials), &mut |_, _| {}).unwrap();
    record::load_log(&dir.join(log)).unwrap()
}

fn ops(ws: &[&Workload]) -> Vec<Operator> {
    ws.iter().map(|w| w.op.clone()).collect()
}

#[test]
fn history_round_trips_and_filters() {
    let dir = scratch("store");
    let past = gemm(16, 32, 24);
    let records = tune_into(&past, &dir, "history/mm.jsonl", 8);
    let here = common::target();
    let sources = [dir.join("history")];
    // The tuned workload comes back with every trial described.
    let (h, problems) = curve_history(&sources, &ops(&[&past]), &here, None);
    assert!(problems.is_empty());
    assert_eq!(h.workloads.len(), 1);
    let p = &h.workloads[0];
    assert_eq!(p.id, past.id());
    assert_eq!(p.workload.shapes(), past.shapes());
    assert_eq!(p.trials.len(), records.len());
    let best = records.iter().filter_map(|r| r.gflops).fold(0.0, f64::max);
    assert_eq!(p.best(), best);
    let data = h.training_set();
    assert_eq!(data.x.rows(), records.len());
    assert_eq!(data.groups, vec![records.len() as u32]);
    assert!(data.y.iter().all(|y| (0.0..=1.0).contains(y)));
    assert!(data.y.contains(&1.0));
    // What it reached is a prior for another shape of the operator, at the
    // thread count it was timed at only, and for no other operator.
    let threads = common::options(&dir).timing.threads;
    let reached = h.reached(&gemm(32, 32, 32), threads).unwrap();
    assert_eq!((reached.workload, reached.gflops), (past.key(), best));
    assert!(h.reached(&gemm(32, 32, 32), threads + 1).is_none());
    assert!(h.reached(&gemv(8, 8), threads).is_none());
    // The workload being tuned, other targets and unknown operators are left out.
    let (h, _) = curve_history(&sources, &ops(&[&past]), &here, Some(&p.id));
    assert!(h.is_empty());
    let (h, _) = curve_history(&sources, &ops(&[&past]), &other_isa(), None);
    assert!(h.is_empty());
    let (h, _) = curve_history(&sources, &ops(&[&gemv(8, 8)]), &here, None);
    assert!(h.is_empty());
    // A corrupt log is reported and skipped, never fatal.
    std::fs::write(dir.join("history/bad.jsonl"), "{ not json\n").unwrap();
    let (h, problems) = curve_history(&sources, &ops(&[&past]), &here, None);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].to_string().contains("bad.jsonl:1"),
        "{}",
        problems[0]
    );
    assert_eq!(h.workloads.len(), 1);
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn a_transfer_run_completes_and_starts_from_the_history() {
    let dir = scratch("run");
    let past = gemm(16, 32, 24);
    tune_into(&past, &dir, "history/mm.jsonl", 12);
    let w = gemm(24, 32, 16);
    let (h, _) = curve_history(
        &[dir.join("history")],
        &ops(&[&past]),
        &common::target(),
        None,
    );
    let space = Space::new(&w.op, w.shapes());
    let seeds = h.seeds(&w, &space, 2, 8);
    assert!(!seeds.is_empty(), "the past best configs fit the new shape");
    let mut t = common::tuner("xgb-rank", 1, &w, Some(&h));
    assert_eq!(t.name(), "xgb-rank-transfer");
    let s = tune::tune(
        &w,
        t.as_mut(),
        &options(&dir, "new.jsonl", 12),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(s.trials, 12);
    assert!(s.best.is_some() && s.errors.is_empty(), "{:?}", s.errors);
    let log = record::load_log(&dir.join("new.jsonl")).unwrap();
    // The first batch: the history's best, then the default config.
    assert!(log[..6].iter().any(|r| r.config == seeds[0]));
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn transfer_never_breaks_tuning() {
    let dir = scratch("robust");
    let other_op = gemv(32, 48);
    tune_into(&other_op, &dir, "history/mv.jsonl", 8);
    let w = gemm(20, 24, 12);
    let here = common::target();
    // Empty history: the plain model-guided tuner.
    let empty = History::default();
    let t = common::tuner("xgb-rank", 1, &w, Some(&empty));
    assert_eq!(t.name(), "xgb-rank");
    // History of another ISA level only: nothing loads, plain tuner.
    let (h, _) = curve_history(
        &[dir.join("history")],
        &ops(&[&other_op]),
        &other_isa(),
        None,
    );
    assert!(h.is_empty());
    // History of another operator type: transfer on, and the run completes.
    let (h, _) = curve_history(&[dir.join("history")], &ops(&[&other_op, &w]), &here, None);
    assert_eq!(h.workloads.len(), 1);
    for name in ["xgb-rank", "xgb-reg"] {
        let mut t = common::tuner(name, 2, &w, Some(&h));
        assert_eq!(t.name(), format!("{name}-transfer"));
        let log = format!("{name}.jsonl");
        let s = tune::tune(&w, t.as_mut(), &options(&dir, &log, 10), &mut |_, _| {}).unwrap();
        assert_eq!(s.trials, 10, "{name}");
        assert!(
            s.best.is_some() && s.errors.is_empty(),
            "{name}: {:?}",
            s.errors
        );
    }
}

/// The history at `sources`, described with the curve features transfer uses.
fn curve_history(
    sources: &[std::path::PathBuf],
    ops: &[autotune_lang::Operator],
    target: &autotune_codegen::Target,
    exclude: Option<&autotune_codegen::WorkloadId>,
) -> (History, Vec<autotune_tune::LogError>) {
    History::load(
        sources,
        ops,
        target,
        exclude,
        FeatureSet::Curve,
        FeatureSource::Plan,
    )
}
