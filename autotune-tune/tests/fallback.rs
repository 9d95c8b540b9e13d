//! Fallbacks are announced: a cost model that fails to fit leaves the search
//! random, and the tuner says so.

use autotune_tune::model::{CostModel, Matrix, ModelError, TrainingSet};
use autotune_tune::search::{ModelTuner, SearchOptions};
use autotune_tune::session::tune;
use autotune_tune::Tuner;

mod common;

/// A model whose every fit fails (as XGBoost may on degenerate data).
struct Failing;

impl CostModel for Failing {
    fn name(&self) -> String {
        "failing".into()
    }
    fn fit(&mut self, _: &TrainingSet) -> Result<(), ModelError> {
        Err(ModelError::Xgboost("injected failure".into()))
    }
    fn predict(&self, _: &Matrix, _: Option<&[f32]>) -> Result<Vec<f32>, ModelError> {
        Err(ModelError::NotFitted)
    }
    fn save(&self) -> Result<Vec<u8>, ModelError> {
        Err(ModelError::NotFitted)
    }
    fn load(&mut self, _: &[u8]) -> Result<(), ModelError> {
        Err(ModelError::NotFitted)
    }
}

#[test]
fn a_failing_cost_model_is_reported() {
    let w = common::gemm(16, 16, 16);
    let dir = common::scratch("fallback-model");
    let opts = autotune_tune::TuneOptions {
        trials: 24,
        ..common::options(&dir)
    };
    let search = SearchOptions {
        min_train: 4,
        ..SearchOptions::default()
    };
    let mut t = ModelTuner::new(&w, Some(Box::new(Failing)), search, 1);
    let s = tune(&w, &mut t, &opts, &mut |_, _| {}).unwrap();
    assert_eq!(s.trials, 24, "the search goes on, at random");
    let failures = t
        .stats()
        .into_iter()
        .find(|(name, _)| *name == "model_failures")
        .map(|(_, v)| v);
    assert!(
        failures.is_some_and(|f| f >= 1.0),
        "the tuner did not report its failed fits: {:?}",
        t.stats()
    );
}
