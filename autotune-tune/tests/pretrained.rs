//! Pre-trained model files: written and read back whole, and a file made for
//! other features (by version or by probe) or another layout is an error
//! naming the file and the versions, never applied; one of another generator
//! version with the same features is applied.

use autotune_codegen::GENERATOR_VERSION;
use autotune_codegen::{Config, Isa, Space, Value};
use autotune_tune::features::{probe, FeatureSet, FEATURES_VERSION};
use autotune_tune::model::{CostModel, Matrix};
use autotune_tune::pretrained::{Loaded, Pretrained, PretrainedError, Seeds, TrainedOn};

mod common;

/// One stump: feature 0 (shifted by 256) below 1 scores 1, else -1.
const TREES: &str = r#"{"learner": {
  "learner_model_param": {"base_score": "0", "num_feature": "1"},
  "gradient_booster": {"name": "gbtree", "model": {"trees": [
    {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [0, 0, 0],
     "split_conditions": [257.0, 1.0, -1.0], "default_left": [0, 0, 0]}]}}}}"#;

fn model() -> Pretrained {
    Pretrained {
        format: autotune_tune::pretrained::FORMAT,
        features: "curve".into(),
        features_version: FEATURES_VERSION,
        features_probe: probe(FeatureSet::Curve),
        generator: GENERATOR_VERSION,
        target: common::target(),
        trained_on: TrainedOn {
            cpu: "test CPU".into(),
            workloads: vec!["gemm[M8 K8 N8]".into()],
            trials: 3,
            date: 0,
        },
        model: TREES.into(),
        seeds: vec![],
    }
}

#[test]
fn a_model_file_reads_back_whole_and_scores() {
    let dir = common::scratch("pretrained-roundtrip");
    let path = dir.join("model.json");
    model().save(&path).unwrap();
    let loaded = Pretrained::load(&path).unwrap();
    assert_eq!(loaded.file, model());
    assert_eq!(loaded.origin, path);
    let forest = loaded.forest;
    let mut x = Matrix::new(1);
    x.push(&[0.0]);
    x.push(&[3.0]);
    assert_eq!(forest.predict(&x, None).unwrap(), vec![1.0, -1.0]);
}

#[test]
fn a_stale_or_broken_model_file_is_reported() {
    let dir = common::scratch("pretrained-stale");
    let path = dir.join("model.json");
    let stale = [
        (
            Pretrained {
                features_version: FEATURES_VERSION + 1,
                ..model()
            },
            "features",
        ),
        (
            Pretrained {
                features_probe: probe(FeatureSet::Curve) ^ 1,
                ..model()
            },
            "features probe",
        ),
        (
            Pretrained {
                format: 99,
                ..model()
            },
            "file format",
        ),
    ];
    for (m, what) in stale {
        m.save(&path).unwrap();
        match Pretrained::load(&path) {
            Err(e @ PretrainedError::Stale { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(what) && msg.contains("model.json"), "{msg}");
                assert!(msg.contains("cargo autotune train"), "{msg}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // Another generator whose features are these: applied.
    Pretrained {
        generator: GENERATOR_VERSION + 1,
        ..model()
    }
    .save(&path)
    .unwrap();
    assert!(Pretrained::load(&path).is_ok());
    std::fs::write(&path, "{ not a model").unwrap();
    assert!(matches!(
        Pretrained::load(&path),
        Err(PretrainedError::Parse { .. })
    ));
    Pretrained {
        model: "{}".into(),
        ..model()
    }
    .save(&path)
    .unwrap();
    assert!(matches!(
        Pretrained::load(&path),
        Err(PretrainedError::Model { .. })
    ));
    assert!(matches!(
        Pretrained::load(&dir.join("missing.json")),
        Err(PretrainedError::Read { .. })
    ));
}

/// Trained on a history, saved and read back, the model ranks what it learned.
#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "training needs the xgboost feature"
)]
fn a_model_trained_on_a_history_ranks_its_trials() {
    #[cfg(feature = "xgboost")]
    {
        use autotune_codegen::Space;
        use autotune_tune::features::{FeatureSet, Featurizer};
        use autotune_tune::history::{History, Past};
        use autotune_tune::model::Objective;
        use rand::{Rng, SeedableRng};
        let mut workloads = Vec::new();
        for (m, n, k) in [(32, 32, 32), (48, 16, 64)] {
            let w = common::gemm(m, n, k);
            let space = Space::new(&w.op, w.shapes());
            let f = Featurizer::new(&w, FeatureSet::Curve);
            let mut rng = rand::rngs::StdRng::seed_from_u64(m as u64);
            let mut trials = Vec::new();
            while trials.len() < 60 {
                let c = space.config_at(rng.gen_range(0..space.size()));
                if space.sensible(&c) {
                    let x = f.features(&c).unwrap();
                    // A throughput the features determine: the model can learn it.
                    let g = 1.0 + (x[3] as f64 - 4.0).abs().recip().min(8.0) + x[20] as f64;
                    trials.push((c, Some(g), x));
                }
            }
            workloads.push(Past {
                id: w.id(),
                workload: w,
                trials,
                best_by_threads: Default::default(),
            });
        }
        let history = History {
            workloads,
            set: Some(FeatureSet::Curve),
        };
        let trained =
            Pretrained::train(&history, &common::target(), "test CPU", Objective::Rank).unwrap();
        assert_eq!(trained.trained_on.trials, 120);
        let dir = common::scratch("pretrained-train");
        trained.save(&dir.join("m.json")).unwrap();
        let loaded = Pretrained::load(&dir.join("m.json")).unwrap();
        let ranking = loaded.ranking(&history, 8).unwrap();
        assert_eq!(ranking[0].workload, history.workloads[0].workload.key());
        let accuracy = ranking[0].pairwise;
        assert!(accuracy > 0.8, "pairwise accuracy {accuracy}");
    }
}

/// Fails when a shipped model is stale (another feature set or generator
/// version than this build's): rerun `bench/corpus.sh` for its ISA level.
#[test]
fn every_shipped_model_is_current_and_for_its_target() {
    let shipped = autotune_tune::pretrained::check_shipped();
    assert!(shipped.len() >= 2, "the AVX-512 and AVX2 models");
    for (name, loaded) in shipped {
        let loaded = loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        let t = &loaded.file.target;
        assert!(
            name.ends_with(&format!(
                "{}-{}.json",
                t.triple.split('-').next().unwrap(),
                t.isa
            )),
            "{name} holds a model for {t}"
        );
        assert_eq!(shipped_for(t).file, loaded.file, "{name}");
        assert!(loaded.file.trained_on.trials > 0 && !loaded.file.trained_on.workloads.is_empty());
        loaded.check_target(t).unwrap();
    }
}

fn shipped_for(t: &autotune_codegen::Target) -> autotune_tune::pretrained::Loaded {
    autotune_tune::pretrained::shipped(t).unwrap().unwrap()
}

#[test]
fn a_model_of_another_target_is_not_applied() {
    let loaded = Pretrained::parse(
        serde_json::to_string(&model()).unwrap().as_bytes(),
        std::path::Path::new("m.json"),
    )
    .unwrap();
    let mut other = model().target;
    other.isa = match other.isa {
        autotune_codegen::Isa::Avx2 => autotune_codegen::Isa::Avx512,
        _ => autotune_codegen::Isa::Avx2,
    };
    let e = loaded.check_target(&other).unwrap_err();
    assert!(matches!(e, PretrainedError::Target { .. }), "{e}");
    assert!(e.to_string().contains("m.json"), "{e}");
    loaded.check_target(&model().target).unwrap();
}

/// A conv 3×3 (its reducing stage is its output) and a conv 3×3 + bias + ReLU
/// (reducing stage `y`, the epilogue fusible) at `c` channels and `h`² pixels.
fn convs(c: i64, h: i64) -> (autotune_codegen::Workload, autotune_codegen::Workload) {
    let plain = common::workload(
        &format!("R = 3, S = 3, specialize(C = {c}, H = {h}, W = {h}, K = {c})"),
        "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
            compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
        }",
    );
    let relu = common::workload(
        &format!("R = 3, S = 3, specialize(C = {c}, H = {h}, W = {h}, K = {c})"),
        "pub fn conv_relu(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
            let y: Tensor<f32, (K, H, W)> =
                compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
            compute(|k, h, v| max(y[k][h][v], 0.0))
        }",
    );
    (plain, relu)
}

#[test]
fn a_corpus_config_carries_to_a_similar_workload_and_not_to_another_kind() {
    // A config of the plain conv at 32 channels, 16² (as a corpus holds it).
    let (plain, _) = convs(32, 16);
    let from_space = Space::new(&plain.op, plain.shapes());
    let tuned: Config = "output.block.h=2 output.block.k=2 output.block.v=1 output.order=k/h-v \
        output.pack.0=2 output.pack.1=1 output.parallel=1 output.split.c=16 output.split.r=3 \
        output.split.s=3 output.tile.h=2 output.tile.k=2 output.tile.v=4 output.unroll=4 \
        output.vector=k8"
        .parse()
        .unwrap();
    from_space
        .index_of(&tuned)
        .expect("the corpus config is a point of its space");
    let mut file = model();
    file.seeds = vec![Seeds {
        workload: plain.key(),
        extents: from_space.reducing().unwrap().extents,
        configs: vec![tuned.clone()],
    }];
    let loaded = Loaded {
        forest: Pretrained::parse(
            serde_json::to_string(&file).unwrap().as_bytes(),
            std::path::Path::new("m"),
        )
        .unwrap()
        .forest,
        file,
        origin: "m".into(),
    };

    // To the conv + ReLU at 64 channels, 28²: the reducing stage `y` takes the
    // corpus config's schedule (sizes the space offers, the nearest where it
    // does not: a split of 16 of 64 channels stays 16); the epilogue stays fused.
    let (_, relu) = convs(64, 28);
    let space = Space::new(&relu.op, relu.shapes());
    let base = space.default_config_for(&relu.op, relu.shapes(), Isa::Avx2);
    let seeds = loaded.seeds_for(&space, &base, 4);
    assert_eq!(seeds.len(), 1, "{seeds:?}");
    let (carried, from) = &seeds[0];
    assert_eq!(*from, plain.key());
    space
        .index_of(carried)
        .expect("a point of the target space");
    assert!(space.sensible(carried));
    for knob in [
        "order", "vector", "tile.k", "tile.v", "split.c", "pack.0", "unroll",
    ] {
        assert_eq!(
            carried.get(&format!("y.{knob}")),
            tuned.get(&format!("output.{knob}")),
            "y.{knob}"
        );
    }
    assert_eq!(carried.get("y.fuse"), Some(&Value::Int(1)));

    // A GEMM's reducing stage has other axes: nothing carries to it.
    let gemm = common::gemm(64, 64, 64);
    let gspace = Space::new(&gemm.op, gemm.shapes());
    let gbase = gspace.default_config_for(&gemm.op, gemm.shapes(), Isa::Avx2);
    assert!(loaded.seeds_for(&gspace, &gbase, 4).is_empty());
}
