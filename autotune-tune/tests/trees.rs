//! Saved XGBoost models scored in Rust: a hand-written model gives the values
//! its trees say, a broken one is an error naming what is wrong, and (with the
//! `xgboost` feature) a fitted model scores every row as XGBoost does.

use autotune_tune::model::{CostModel, Matrix, ModelError};
use autotune_tune::trees::Forest;

/// Two stumps on features shifted by 256 (as the model's features reach
/// XGBoost): feature 0 below 1 gives +1, else -1; feature 1 below 2 gives
/// +0.25 (a missing value goes right), else -0.25; base score 0.5.
const MODEL: &str = r#"{"learner": {
  "learner_model_param": {"base_score": "5E-1", "num_feature": "2"},
  "gradient_booster": {"name": "gbtree", "model": {"trees": [
    {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [0, 0, 0],
     "split_conditions": [257.0, 1.0, -1.0], "default_left": [0, 0, 0]},
    {"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [1, 0, 0],
     "split_conditions": [258.0, 0.25, -0.25], "default_left": [false, false, false]}
  ]}}}}"#;

#[test]
fn a_saved_forest_scores_what_its_trees_say() {
    let f = Forest::from_json(MODEL.as_bytes()).unwrap();
    let mut x = Matrix::new(2);
    for row in [[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [5.0, f32::NAN]] {
        x.push(&row);
    }
    assert_eq!(f.predict(&x, None).unwrap(), vec![1.75, -0.25, 1.25, -0.75]);
    // A base margin replaces the base score.
    let m = [0.0, 1.0, 0.0, 0.0];
    assert_eq!(
        f.predict(&x, Some(&m)).unwrap(),
        vec![1.25, 0.25, 0.75, -1.25]
    );
    assert!(matches!(f.predict(&Matrix::new(3), None), Ok(v) if v.is_empty()));
    let mut wide = Matrix::new(3);
    wide.push(&[0.0; 3]);
    assert!(matches!(
        f.predict(&wide, None),
        Err(ModelError::Width {
            cols: 3,
            expected: 2
        })
    ));
    let mut f2 = f.clone();
    assert!(matches!(
        f2.fit(&Default::default()),
        Err(ModelError::ReadOnly)
    ));
    assert_eq!(f.save().unwrap(), MODEL.as_bytes());
}

#[test]
fn a_broken_model_is_an_error_that_says_where() {
    let cases = [
        ("{", "not JSON"),
        (&MODEL.replace("gbtree", "gblinear"), "only gbtree"),
        (
            &MODEL.replace(
                "[1, -1, -1], \"right_children\": [2, -1, -1], \"split_indices\": [0, 0, 0]",
                "[1, -1, -1], \"right_children\": [7, -1, -1], \"split_indices\": [0, 0, 0]",
            ),
            "tree 0: node 0 has a child outside the tree",
        ),
        (
            &MODEL.replace("[258.0, 0.25, -0.25]", "[258.0, 0.25]"),
            "tree 1: node arrays of different lengths",
        ),
        (
            &MODEL.replace("\"base_score\": \"5E-1\", ", ""),
            "base_score",
        ),
    ];
    for (json, want) in cases {
        match Forest::from_json(json.as_bytes()) {
            Err(ModelError::Format(msg)) => assert!(msg.contains(want), "{msg:?} lacks {want:?}"),
            other => panic!("{want}: {other:?}"),
        }
    }
}

/// The forest read back from a fitted XGBoost model scores as XGBoost does.
#[test]
#[cfg_attr(
    not(feature = "xgboost"),
    ignore = "needs the xgboost feature to fit a model"
)]
fn a_fitted_model_scores_the_same_in_rust() {
    #[cfg(feature = "xgboost")]
    {
        use autotune_tune::model::{self, Objective, TrainingSet};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut data = TrainingSet {
            x: Matrix::new(4),
            ..TrainingSet::default()
        };
        for _ in 0..300 {
            let row: Vec<f32> = (0..4)
                .map(|_| rng.gen_range(-8i32..8) as f32 / 2.0)
                .collect();
            let y = 1.0 / (1.0 + (row[0] - 1.0).abs() + (row[2] + 2.0).abs());
            data.x.push(&row);
            data.y.push(y);
        }
        for objective in [Objective::Rank, Objective::Regression] {
            let mut m = model::default_model(objective, 1).unwrap();
            m.fit(&data).unwrap();
            let f = Forest::from_json(&m.save().unwrap()).unwrap();
            let (want, got) = (
                m.predict(&data.x, None).unwrap(),
                f.predict(&data.x, None).unwrap(),
            );
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(
                    (w - g).abs() <= 1e-5 * w.abs().max(1.0),
                    "{objective:?} row {i}: {w} vs {g}"
                );
            }
        }
    }
}
