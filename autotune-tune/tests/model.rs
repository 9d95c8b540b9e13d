//! Features, the XGBoost cost model and the model-guided tuner: features are
//! deterministic with one length per workload, the model learns a known order,
//! and a tiny model-guided run completes.

use autotune_codegen::Space;
use autotune_codegen::Workload;
use autotune_tune::features::{FeatureSet, Featurizer};
use autotune_tune::model::{self, Matrix, Objective, TrainingSet};
use autotune_tune::search::{self, SearchOptions};
use autotune_tune::session::{self as tune, TuneOptions};
use autotune_tune::{record, Tuner};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

use common::{gemm, workload};

fn conv() -> Workload {
    workload(
        "R = 3, S = 3, specialize(C = 16, H = 14, W = 14, K = 32)",
        "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
            compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
        }",
    )
}

#[test]
fn features_are_deterministic_with_one_length_per_workload() {
    let mut rng = StdRng::seed_from_u64(7);
    for w in [gemm(512, 512, 512), gemm(17, 33, 9), conv()] {
        let space = Space::new(&w.op, w.shapes());
        for set in [FeatureSet::Itervar, FeatureSet::Curve, FeatureSet::Knobs] {
            let f = Featurizer::new(&w, set);
            let t = std::time::Instant::now();
            let mut distinct = std::collections::HashSet::new();
            let mut n = 0;
            while n < 40 {
                let c = space.config_at(rng.gen_range(0..space.size()));
                if !space.sensible(&c) {
                    continue; // the tuners never describe the others
                }
                n += 1;
                let a = f.features(&c).unwrap();
                assert_eq!(a.len(), f.len(), "{} {set}", w.key());
                assert!(a.iter().all(|x| x.is_finite()), "{} {set}: {a:?}", w.key());
                assert_eq!(a, f.features(&c).unwrap(), "deterministic");
                assert_eq!(a, Featurizer::new(&w, set).features(&c).unwrap());
                distinct.insert(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
            eprintln!("{} {set}: {:?} per config", w.key(), t.elapsed() / 120);
            // Configs differ, and so must most of their descriptions.
            assert!(distinct.len() > 20, "{} {set}: {}", w.key(), distinct.len());
        }
    }
}

#[test]
fn itervar_features_see_the_loop_nest() {
    let w = gemm(64, 64, 64);
    let space = Space::new(&w.op, w.shapes());
    let f = Featurizer::new(&w, FeatureSet::Itervar);
    let default = space.default_config(&w.op, w.shapes());
    let a = f.features(&default).unwrap();
    // A different unroll depth changes the loop nest and so the features.
    let mut other = default.clone();
    let key = other
        .0
        .keys()
        .find(|k| k.kind == autotune_codegen::KnobKind::Unroll)
        .unwrap()
        .clone();
    let u = match &other.0[&key] {
        autotune_codegen::Value::Int(u) => *u,
        _ => unreachable!(),
    };
    other.0.insert(
        key,
        autotune_codegen::Value::Int(if u == 1 { 4 } else { 1 }),
    );
    assert_ne!(a, f.features(&other).unwrap());
    // The total arithmetic (a kernel-wide feature) is that of the operator: 2·64³
    // flops (the f32 log scale rounds it a little).
    let total = 2f64.powf(a[a.len() - 11] as f64) - 1.0;
    assert!(
        (1.99 * 64f64.powi(3)..=2.01 * 64f64.powi(3)).contains(&total),
        "{total}"
    );
}

/// The curve features end with the register tile and the work around it:
/// accumulators, lanes, arithmetic per load, executed over useful arithmetic,
/// the innermost loop, the unroll, the parallel tasks and the bytes copied per
/// flop ([`autotune_tune::features`]).
#[test]
fn curve_features_see_the_register_tile_and_the_overhang() {
    let w = gemm(64, 64, 64);
    let f = Featurizer::new(&w, FeatureSet::Curve);
    let kernel = |text: &str| {
        let v = f.features(&text.parse().unwrap()).unwrap();
        v[v.len() - 10..].to_vec()
    };
    let knobs = "output.block.i=16 output.block.j=4 output.order=j-i output.pack.0=1 \
                 output.pack.1=1 output.parallel=1 output.split.k=64 output.unroll=4 \
                 output.vector=j16";
    // 6 rows of 3 vectors: 18 accumulators of 16 lanes; 64 rows are 11 tiles
    // of 6 and 64 columns 2 tiles of 48, so 66×96 outputs are computed.
    let big = kernel(&format!("{knobs} output.tile.i=6 output.tile.j=3"));
    // 4 rows of 1 vector: 4 accumulators, tiles that divide 64.
    let small = kernel(&format!("{knobs} output.tile.i=4 output.tile.j=1"));
    let unlog = |x: f32| 2f64.powf(x as f64) - 1.0;
    assert_eq!(unlog(big[0]).round(), 18.0, "{big:?}");
    assert_eq!(unlog(small[0]).round(), 4.0, "{small:?}");
    assert_eq!(unlog(big[1]).round(), 16.0, "lanes: {big:?}");
    // More accumulators share each load: more arithmetic per load.
    assert!(big[2] > small[2], "{big:?} {small:?}");
    assert!(
        (big[3] - 66.0 * 96.0 / 4096.0).abs() < 1e-3,
        "overhang: {big:?}"
    );
    assert_eq!(small[3], 1.0, "no overhang: {small:?}");
}

/// A copy prefetched a slice ahead (`pack.N=4`) lowers to the same plan as
/// the copy alone (`pack.N=1`) but for its prefetches: the last two kernel
/// features tell them apart (features version 3), and stay zero where the
/// nest reads no copy ahead.
#[test]
fn curve_features_see_a_copy_prefetched_ahead() {
    let w = gemm(256, 256, 256);
    let f = Featurizer::new(&w, FeatureSet::Curve);
    let kernel = |pack: &str| {
        let text = format!(
            "output.block.i=4 output.block.j=4 output.order=j-i {pack} output.parallel=1 \
             output.split.k=256 output.tile.i=6 output.tile.j=2 output.unroll=4 output.vector=j16"
        );
        let v = f.features(&text.parse().unwrap()).unwrap();
        v[v.len() - 10..].to_vec()
    };
    let copy = kernel("output.pack.0=1 output.pack.1=1");
    let ahead = kernel("output.pack.0=1 output.pack.1=4");
    assert_eq!(copy[..8], ahead[..8], "the same plan otherwise");
    assert_eq!(copy[8..], [0.0, 0.0], "{copy:?}");
    let unlog = |x: f32| 2f64.powf(x as f64) - 1.0;
    // B's copy, 256×256 floats, prefetched: 256 KB, 256 KB per 33.6 Mflop.
    assert_eq!(unlog(ahead[9]).round(), 262_144.0, "{ahead:?}");
    assert!(ahead[8] > 0.0, "{ahead:?}");
}

/// Rows of a synthetic problem whose true order is known: throughput falls with
/// the distance of two features from a sweet spot, the third is noise.
fn synthetic(n: usize, seed: u64) -> TrainingSet {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = TrainingSet {
        x: Matrix::new(3),
        ..TrainingSet::default()
    };
    for _ in 0..n {
        // Whole numbers, zero included: a real 0.0 must not read as missing.
        let row = [
            rng.gen_range(0..16) as f32,
            rng.gen_range(0..16) as f32,
            rng.gen_range(0..16) as f32,
        ];
        let y = 1.0 / (1.0 + (row[0] - 0.0).abs() + 0.5 * (row[1] - 10.0).abs());
        t.x.push(&row);
        t.y.push(y);
    }
    t
}

/// Share of pairs with different truth that the scores order the same way.
fn concordance(truth: &[f32], score: &[f32]) -> f64 {
    let (mut agree, mut pairs) = (0usize, 0usize);
    for i in 0..truth.len() {
        for j in 0..i {
            if truth[i] != truth[j] {
                pairs += 1;
                if (truth[i] > truth[j]) == (score[i] > score[j]) {
                    agree += 1;
                }
            }
        }
    }
    agree as f64 / pairs as f64
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn the_model_learns_a_known_order() {
    let train = synthetic(300, 1);
    let test = synthetic(200, 2);
    for objective in [Objective::Rank, Objective::Regression] {
        let mut m = model::default_model(objective, 1).unwrap();
        m.fit(&train).unwrap();
        let p = m.predict(&test.x, None).unwrap();
        let c = concordance(&test.y, &p);
        assert!(c > 0.9, "{objective}: concordance {c}");
        assert!(model::recall_at(&test.y, &p, 10) >= 0.5, "{objective}");
        // Saved and loaded, it predicts the same.
        let bytes = m.save().unwrap();
        let mut n = model::default_model(objective, 1).unwrap();
        n.load(&bytes).unwrap();
        assert_eq!(p, n.predict(&test.x, None).unwrap());
    }
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn a_base_margin_shifts_predictions() {
    let train = synthetic(100, 3);
    let mut m = model::default_model(Objective::Regression, 1).unwrap();
    m.fit(&train).unwrap();
    // A base margin replaces the global bias: predictions move with it.
    let one = m
        .predict(&train.x, Some(&vec![1.0; train.y.len()]))
        .unwrap();
    let two = m
        .predict(&train.x, Some(&vec![2.0; train.y.len()]))
        .unwrap();
    for (a, b) in one.iter().zip(&two) {
        assert!((b - a - 1.0).abs() < 1e-4, "{a} {b}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn an_unfitted_model_says_so() {
    let m = model::default_model(Objective::Rank, 1).unwrap();
    assert!(matches!(
        m.predict(&Matrix::new(3), None),
        Err(model::ModelError::NotFitted)
    ));
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn a_tiny_model_guided_run_completes() {
    let w = gemm(24, 32, 16);
    let dir = common::scratch("model-run");
    let opts = TuneOptions {
        trials: 20,
        batch: 6,
        ..common::options(&dir)
    };
    let space = Space::new(&w.op, w.shapes());
    let seed_config = space.config_at(space.size() / 3);
    let mut t = search::xgb_tuner(
        &w,
        Objective::Rank,
        SearchOptions {
            min_train: 6,
            chains: 8,
            steps: 5,
            ..SearchOptions::default()
        },
        3,
        None,
        std::slice::from_ref(&seed_config),
        &[],
    )
    .unwrap();
    let s = tune::tune(&w, &mut t, &opts, &mut |_, _| {}).unwrap();
    assert_eq!(s.trials, 20);
    assert!(s.best.is_some() && s.errors.is_empty(), "{:?}", s.errors);
    assert!(
        t.overhead.fits >= 2,
        "refits after batches: {:?}",
        t.overhead
    );
    assert!(t.overhead.scored > 0);
    let log = record::load_log(&dir.join("records.jsonl")).unwrap();
    assert_eq!(t.name(), "xgb-rank");
    assert!(log.iter().all(|r| r.tuner == "xgb-rank"));
    // The seed is measured in the first batch (the default closes it).
    let seeded = space.sensible(&seed_config);
    assert_eq!(log[..6].iter().any(|r| r.config == seed_config), seeded);
}

#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the cost model: the xgboost feature (cargo test --workspace turns it on)"
)]
fn tuners_by_name() {
    let w = gemm(8, 8, 8);
    for name in autotune_tune::TunerSpec::NAMES {
        let t = common::tuner(name, 1, &w, None);
        assert_eq!(t.name(), *name);
    }
    let e = "xgb-best".parse::<autotune_tune::TunerSpec>().unwrap_err();
    assert!(e.to_string().contains("unknown tuner `xgb-best`"), "{e}");
}

/// The plan's description of the nest (what the search featurises every scored
/// config with) has the loops the lowering really emits: per loop slot the same
/// extent, depth and kind as the walk of the lowered nest, on random configs of
/// a GEMM, a padded conv and a conv with a fusible epilogue.
#[test]
fn plan_features_see_the_loops_of_the_lowered_nest() {
    let relu = workload(
        "specialize(C = 8, H = 10, W = 10, K = 16, R = 3, S = 3)",
        "pub fn cr(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>) -> Tensor<f32, (K, H, W)> {
            let y: Tensor<f32, (K, H, W)> =
                compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
            compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
        }",
    );
    use autotune_tune::features::{FeatureSource, LOOP_SLOTS};
    for w in [gemm(24, 40, 36), conv(), relu] {
        let space = Space::new(&w.op, w.shapes());
        let plan = Featurizer::with_source(&w, FeatureSet::Itervar, FeatureSource::Plan);
        let lowered = Featurizer::with_source(&w, FeatureSet::Itervar, FeatureSource::Lowered);
        let per_loop = (plan.len() - 11) / LOOP_SLOTS;
        let mut rng = StdRng::seed_from_u64(7);
        let mut checked = 0;
        while checked < 40 {
            let c = space.config_at(rng.gen_range(0..space.size()));
            if !space.sensible(&c) {
                continue;
            }
            let (p, l) = (plan.features(&c).unwrap(), lowered.features(&c).unwrap());
            for slot in 0..LOOP_SLOTS {
                for k in [0, 1, 4, 5, 6, 7] {
                    let i = slot * per_loop + k;
                    assert_eq!(p[i], l[i], "{}: {c}: loop slot {slot}, field {k}", w.key());
                }
            }
            checked += 1;
        }
    }
}
