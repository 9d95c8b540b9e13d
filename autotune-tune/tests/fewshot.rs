//! The few-shot search: a pre-trained model's picks are measured a batch at a
//! time, and the search stops once the measured best is what the model
//! expects; where the model's scores do not track the measurements, it runs
//! until two batches gain little, or its budget, and says it cannot judge.
//! Measurements here are synthetic (a known function of the config), so
//! nothing is compiled.

use std::collections::HashSet;

use autotune_codegen::Space;
use autotune_tune::features::FeatureSet;
use autotune_tune::history::Reached;
use autotune_tune::model::{CostModel, Matrix, ModelError, TrainingSet};
use autotune_tune::search::{self, ModelTuner, SearchOptions, FEW_SHOT_WITHIN};
use autotune_tune::Tuner;

mod common;

/// A "pre-trained" model that scores a row by the sum of its features.
struct SumOfFeatures;

impl CostModel for SumOfFeatures {
    fn name(&self) -> String {
        "sum".into()
    }
    fn fit(&mut self, _: &TrainingSet) -> Result<(), ModelError> {
        Err(ModelError::ReadOnly)
    }
    fn predict(&self, x: &Matrix, base: Option<&[f32]>) -> Result<Vec<f32>, ModelError> {
        Ok((0..x.rows())
            .map(|i| x.row(i).iter().sum::<f32>() + base.map_or(0.0, |b| b[i]))
            .collect())
    }
    fn save(&self) -> Result<Vec<u8>, ModelError> {
        Err(ModelError::ReadOnly)
    }
    fn load(&mut self, _: &[u8]) -> Result<(), ModelError> {
        Err(ModelError::ReadOnly)
    }
}

/// A few-shot tuner of `w` without refits over [`SumOfFeatures`].
fn sum_tuner(w: &autotune_codegen::Workload, opts: SearchOptions) -> ModelTuner {
    sum_tuner_from(w, opts, &[], &[])
}

/// The same, given register-tile starts and configs carried from a corpus.
fn sum_tuner_from(
    w: &autotune_codegen::Workload,
    opts: SearchOptions,
    starts: &[autotune_codegen::Config],
    corpus: &[(autotune_codegen::Config, String)],
) -> ModelTuner {
    let model = Box::new(SumOfFeatures);
    search::few_shot(
        w,
        model,
        FeatureSet::Curve,
        false,
        opts,
        1,
        None,
        &[],
        starts,
        corpus,
    )
    .unwrap()
}

/// Runs a few-shot search without refits on a GEMM whose "throughput" is
/// `truth(score)` of the model's own score, for at most `budget` trials;
/// returns the trials measured and the tuner.
fn run(truth: impl Fn(f32) -> f64, budget: usize) -> (usize, ModelTuner) {
    let (trials, _, t) = run_with(truth, budget, None);
    (trials, t)
}

/// [`run`], with what a past workload of the operator reached as a prior;
/// also returns the best throughput measured.
fn run_with(
    truth: impl Fn(f32) -> f64,
    budget: usize,
    prior: Option<Reached>,
) -> (usize, f64, ModelTuner) {
    let w = common::gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let mut t = sum_tuner(&w, stopping()).with_prior(prior);
    let featurizer = autotune_tune::features::Featurizer::new(&w, FeatureSet::Curve);
    let (measured, best) = search(&mut t, &space, budget, |i| {
        let f = featurizer.features(&space.config_at(i)).unwrap();
        truth(f.iter().sum())
    });
    (measured.len(), best, t)
}

/// A GEMM 64³, its space, and its register-tile starts for AVX-512.
fn gemm_and_its_starts() -> (
    autotune_codegen::Workload,
    Space,
    Vec<autotune_codegen::Config>,
) {
    let w = common::gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let isa = autotune_codegen::Isa::Avx512;
    let starts =
        space.register_tile_starts(&space.default_config_for(&w.op, w.shapes(), isa), isa, 1);
    (w, space, starts)
}

/// Few-shot options that stop early, without random picks.
fn stopping() -> SearchOptions {
    SearchOptions {
        epsilon: 0.0,
        stop_within: Some(FEW_SHOT_WITHIN),
        ..SearchOptions::default()
    }
}

/// Measures the batches `t` proposes as `truth` of each config, until it
/// proposes none or `budget` trials ran; returns the configs measured, in
/// order, and the best throughput.
fn search(
    t: &mut ModelTuner,
    space: &Space,
    budget: usize,
    truth: impl Fn(u128) -> f64,
) -> (Vec<u128>, f64) {
    let mut order = Vec::new();
    let mut measured = HashSet::new();
    let mut best = 0.0f64;
    while order.len() < budget {
        let batch = t.propose(space, 8.min(budget - order.len()), &measured);
        if batch.is_empty() {
            break;
        }
        let results: Vec<(u128, Option<f64>)> =
            batch.iter().map(|&i| (i, Some(truth(i)))).collect();
        order.extend(batch.iter().copied());
        measured.extend(batch);
        best = results.iter().filter_map(|r| r.1).fold(best, f64::max);
        t.observe(space, &results);
    }
    (order, best)
}

#[test]
fn a_model_that_knows_the_workload_stops_the_search_early() {
    let (trials, t) = run(|s| f64::from(s).max(0.01), 64);
    let outlook = t.outlook().expect("the search judged its progress");
    assert!(outlook.stopped, "{outlook:?}");
    assert!(trials < 64, "stopped after {trials} trials");
    let notes = t.notes().join("\n");
    assert!(notes.contains("stopped after"), "{notes}");
    assert_eq!(t.name(), "few-shot");
}

/// The search of the test above, where a past workload of the same operator
/// reached far more than anything measured here: the model's calibration on
/// its own picks is not trusted, and the search runs its budget and says why.
/// A past workload that reached what this one did does not hold it back.
#[test]
fn a_search_far_below_what_a_past_workload_reached_does_not_stop() {
    let truth = |s: f32| f64::from(s).max(0.01);
    let (_, best, _) = run_with(truth, 64, None);
    let past = |gflops| {
        Some(Reached {
            workload: "gemm[M32 K32 N32]".into(),
            gflops,
        })
    };
    let (trials, _, t) = run_with(truth, 64, past(best * 1.2));
    assert!(t.outlook().unwrap().stopped, "{:?}", t.outlook());
    assert!(trials < 64);

    let (trials, _, t) = run_with(truth, 64, past(best * 10.0));
    assert_eq!(trials, 64);
    let outlook = t.outlook().expect("the search judged its progress");
    assert!(!outlook.stopped, "{outlook:?}");
    let notes = t.notes().join("\n");
    assert!(
        notes.contains("under 60% of the") && notes.contains("gemm[M32 K32 N32]"),
        "{notes}"
    );
}

#[test]
fn a_model_whose_scores_do_not_track_the_measurements_runs_its_budget() {
    let (trials, t) = run(|s| 1.0 / (1.0 + f64::from(s).max(0.0)), 32);
    assert_eq!(trials, 32);
    let outlook = t.outlook().expect("the search judged its progress");
    assert!(
        !outlook.stopped && outlook.expected.is_none(),
        "{outlook:?}"
    );
    let notes = t.notes().join("\n");
    assert!(notes.contains("do not track"), "{notes}");
    // The note counts every trial, not those before the last judgement.
    assert!(notes.contains("after 32 trials"), "{notes}");
}

/// Where the model cannot judge and the measurements stop improving, the
/// search stops on them alone: two batches past the first that gained nothing
/// end it after three (24 trials), and the note says how far it is from
/// converged is unknown.
#[test]
fn a_search_the_model_cannot_judge_stops_when_two_batches_gain_little() {
    let (trials, t) = run(|_| 1.0, 64);
    assert_eq!(trials, 24);
    let outlook = t.outlook().expect("the search judged its progress");
    assert!(outlook.stopped && outlook.expected.is_none(), "{outlook:?}");
    let notes = t.notes().join("\n");
    assert!(
        notes.contains("stopped after 24 trials") && notes.contains("do not track"),
        "{notes}"
    );
}

/// The same search where a register-tile start is the best config: before
/// it stops it measures the start's next unroll depths (the start took its
/// unroll from the default schedule), and then nothing more.
#[test]
fn a_search_whose_best_is_a_start_looks_at_its_unroll_before_it_stops() {
    let (w, space, starts) = gemm_and_its_starts();
    let index = |c: &autotune_codegen::Config| space.canonical(space.index_of(c).unwrap());
    let mut t = sum_tuner_from(&w, stopping(), &starts, &[]);
    // Every start runs at 2, everything else at 1.
    let starts: HashSet<u128> = starts.iter().map(index).collect();
    let (order, _) = search(&mut t, &space, 64, |i| {
        if starts.contains(&i) {
            2.0
        } else {
            1.0
        }
    });
    let unroll = |i: u128| space.config_at(i).get("output.unroll").cloned();
    let (searched, looked) = order.split_at(24);
    assert!((1..=2).contains(&looked.len()), "{} trials", order.len());
    let best = *searched.iter().rev().find(|i| starts.contains(i)).unwrap();
    // Every knob but the unroll, as text.
    let rest = |i: u128| -> Vec<String> {
        let c = space.config_at(i);
        c.0.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .filter(|kv| !kv.starts_with("output.unroll="))
            .collect()
    };
    for &i in looked {
        assert_ne!(unroll(i), unroll(best));
        assert_eq!(
            rest(i),
            rest(best),
            "the last look changed more than the unroll"
        );
    }
}

/// Configs carried from a model's corpus are measured in the first batch and
/// named in the notes; one that is not a point of the space is dropped and not
/// counted.
#[test]
fn the_first_batch_measures_the_corpus_configs_it_was_given() {
    let w = common::gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let good = space.default_config_for(&w.op, w.shapes(), autotune_codegen::Isa::Avx2);
    let foreign: autotune_codegen::Config = "y.tile.q=1".parse().unwrap();
    let corpus = [
        (foreign, "conv[C1]".to_string()),
        (good.clone(), "gemm[M7 K7 N7]".to_string()),
    ];
    let mut t = sum_tuner_from(&w, SearchOptions::default(), &[], &corpus);
    let batch = t.propose(&space, 8, &HashSet::new());
    let want = space.canonical(space.index_of(&good).unwrap());
    assert!(batch.contains(&want), "{batch:?}");
    let notes = t.notes().join("\n");
    assert!(
        notes.contains("measured 1 config(s) carried from the model's corpus (gemm[M7 K7 N7])"),
        "{notes}"
    );
}

/// A batch never measures two configs the model sees alike: they score the
/// same, so a second one spends a measurement on a difference the model
/// cannot rank while configs it ranks differently wait (`pack.N=4` was such a
/// difference until features version 3 described its prefetches).
#[test]
fn a_batch_measures_one_of_the_configs_the_model_sees_alike() {
    let w = common::gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let mut t = sum_tuner(&w, SearchOptions::default());
    let featurizer = autotune_tune::features::Featurizer::new(&w, FeatureSet::Curve);
    let batch = t.propose(&space, 16, &HashSet::new());
    assert_eq!(batch.len(), 16);
    let seen: HashSet<Vec<u32>> = batch
        .iter()
        .map(|&i| {
            let f = featurizer.features(&space.config_at(i)).unwrap();
            f.iter().map(|x| x.to_bits()).collect()
        })
        .collect();
    assert_eq!(
        seen.len(),
        batch.len(),
        "configs the model sees alike in one batch"
    );
}

/// Past the first batch, a few-shot search without refits breeds its batches
/// and its fixed model only judges whether to stop: it scores the configs it
/// bred, not a new walk over the landscape it scored for the first batch.
#[test]
fn bred_batches_score_only_what_was_bred() {
    let w = common::gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let opts = SearchOptions {
        epsilon: 0.0,
        ..SearchOptions::default()
    };
    let pool = opts.pool;
    let mut t = sum_tuner(&w, opts);
    let scored = |t: &ModelTuner| {
        t.stats()
            .into_iter()
            .find(|s| s.0 == "configs_scored")
            .map(|s| s.1)
            .unwrap()
    };
    let first = t.propose(&space, 8, &HashSet::new());
    let results: Vec<(u128, Option<f64>)> = first.iter().map(|&i| (i, Some(1.0))).collect();
    t.observe(&space, &results);
    let before = scored(&t);
    let measured: HashSet<u128> = first.into_iter().collect();
    let second = t.propose(&space, 8, &measured);
    assert_eq!(second.len(), 8);
    // At most what it bred and the measured configs (to judge the model).
    let most = 8 * pool + measured.len();
    let more = scored(&t) - before;
    assert!(
        more <= most as f64,
        "the second batch scored {more} configs, over the {most} bred and measured"
    );
}

/// A few-shot first batch measures two register-tile starts, the model's
/// pick and the generator's first, and says so.
#[test]
fn a_first_batch_measures_two_register_tile_starts() {
    // A GEMM, and a conv whose epilogue stage has a vector knob of its own.
    let conv = common::workload(
        "R = 3, S = 3, specialize(C = 16, H = 32, W = 32, K = 32)",
        common::CONV3X3_BIAS_RELU,
    );
    for (w, knob) in [
        (common::gemm(64, 64, 64), "output.vector"),
        (conv, "y.vector"),
    ] {
        let space = Space::new(&w.op, w.shapes());
        let isa = autotune_codegen::Isa::Avx512;
        let base = space.default_config_for(&w.op, w.shapes(), isa);
        let starts = space.register_tile_starts(&base, isa, 1);
        let index = |c: &autotune_codegen::Config| space.canonical(space.index_of(c).unwrap());
        let vector = |i: u128| space.config_at(i).get(knob).cloned();
        let vectors: HashSet<_> = starts.iter().map(|c| vector(index(c))).collect();
        assert!(vectors.len() >= 2, "{vectors:?}");
        let mut t = sum_tuner_from(&w, SearchOptions::default(), &starts, &[]);
        let batch = t.propose(&space, 8, &HashSet::new());
        let measured: Vec<u128> = starts
            .iter()
            .map(index)
            .filter(|i| batch.contains(i))
            .collect();
        assert_eq!(measured.len(), 2, "{batch:?}");
        assert!(measured.contains(&index(&starts[0])), "{}", w.key());
        let notes = t.notes().join("\n");
        assert!(
            notes.contains("measured 2 register-tile start(s)"),
            "{notes}"
        );
    }
}

/// A GEMM's starts are ranked by their estimated time per useful FMA, and
/// the first two held the best of them at 13 of 14 shapes and thread counts
/// swept (`gemm-start-order-20261206-154032.log`), where a model that had
/// seen no GEMM picked a vector down C's columns (0.73 of the best): its
/// first batch measures the generator's first two, whatever the model's
/// scores. (A conv's starts, grouped by vector axis, keep the model's pick.)
#[test]
fn a_gemms_first_batch_measures_the_generators_first_two_starts() {
    let w = common::gemm(200, 300, 400);
    let space = Space::new(&w.op, w.shapes());
    let isa = autotune_codegen::Isa::Avx512;
    let starts =
        space.register_tile_starts(&space.default_config_for(&w.op, w.shapes(), isa), isa, 2);
    let index = |c: &autotune_codegen::Config| space.canonical(space.index_of(c).unwrap());
    let mut t = sum_tuner_from(&w, SearchOptions::default(), &starts, &[]);
    let batch = t.propose(&space, 8, &HashSet::new());
    let measured: Vec<usize> = (0..starts.len())
        .filter(|&k| batch.contains(&index(&starts[k])))
        .collect();
    assert_eq!(measured, [0, 1], "{batch:?}");
}

/// A model-guided search measures two register-tile starts in its first
/// batch, before it has a model to rank them.
#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn a_model_guided_first_batch_measures_two_register_tile_starts() {
    let (w, space, starts) = gemm_and_its_starts();
    let index = |c: &autotune_codegen::Config| space.canonical(space.index_of(c).unwrap());
    let mut x = search::xgb_tuner(
        &w,
        autotune_tune::model::Objective::Rank,
        SearchOptions::default(),
        1,
        None,
        &[],
        &starts,
    )
    .unwrap();
    let batch = x.propose(&space, 8, &HashSet::new());
    let measured = starts
        .iter()
        .map(index)
        .filter(|i| batch.contains(i))
        .count();
    assert_eq!(measured, 2, "{batch:?}");
}
