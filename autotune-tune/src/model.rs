//! The cost model: learns from measured trials which configs run fast, so the
//! search can rank configs it has not measured.
//!
//! Models sit behind [`CostModel`] (fit, predict, serialise), so another one
//! can be measured against XGBoost later. [`XgbModel`] (feature `xgboost`) is
//! gradient-boosted trees with a pairwise ranking or a squared-error objective,
//! as in AutoTVM.

use std::fmt;

/// Row-major feature rows of equal length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matrix {
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn new(cols: usize) -> Matrix {
        Matrix {
            cols,
            data: Vec::new(),
        }
    }

    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.cols).unwrap_or(0)
    }

    pub fn push(&mut self, row: &[f32]) {
        assert_eq!(row.len(), self.cols, "feature rows have one length");
        self.data.extend_from_slice(row);
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

/// What a model is fitted on.
#[derive(Clone, Debug, Default)]
pub struct TrainingSet {
    pub x: Matrix,
    /// Normalised throughput in `[0, 1]` (failed trials: 0).
    pub y: Vec<f32>,
    /// Sizes of consecutive groups of rows; a ranking objective only compares
    /// rows of one group (one workload). Empty: one group.
    pub groups: Vec<u32>,
    /// A prior prediction per row that the model learns a correction to
    /// (transfer learning); `None`: no prior.
    pub base_margin: Option<Vec<f32>>,
}

/// Which loss the model is trained with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Objective {
    /// Pairwise ranking (`rank:pairwise`): only the order of configs matters.
    Rank,
    /// Squared error on normalised throughput (`reg:squarederror`).
    Regression,
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Objective::Rank => "rank",
            Objective::Regression => "reg",
        })
    }
}

impl std::str::FromStr for Objective {
    type Err = String;

    fn from_str(s: &str) -> Result<Objective, String> {
        match s {
            "rank" => Ok(Objective::Rank),
            "reg" => Ok(Objective::Regression),
            _ => Err(format!("unknown objective `{s}` (expected rank or reg)")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the cost model has not been fitted")]
    NotFitted,
    #[error("the few-shot tuner needs a pre-trained model, and none was given")]
    NoPretrained,
    #[error("no training data")]
    Empty,
    #[error("{rows} rows of {cols} features do not match {labels} labels")]
    Shape {
        rows: usize,
        cols: usize,
        labels: usize,
    },
    #[error("XGBoost: {0}")]
    Xgboost(String),
    #[error("autotune-tune was built without its `xgboost` feature, so it has no cost model")]
    Unavailable,
    #[error("rows of {cols} features for a model of {expected}")]
    Width { cols: usize, expected: usize },
    #[error("the saved model cannot be read: {0}")]
    Format(String),
    #[error("a trained model that is read as it is cannot be refitted")]
    ReadOnly,
}

/// A model of relative throughput.
pub trait CostModel: Send {
    fn name(&self) -> String;
    /// Fits the model from scratch.
    fn fit(&mut self, data: &TrainingSet) -> Result<(), ModelError>;
    /// Scores rows; higher is faster. Scores order configs of one workload and
    /// have no unit.
    fn predict(&self, x: &Matrix, base_margin: Option<&[f32]>) -> Result<Vec<f32>, ModelError>;
    /// The fitted model as bytes ([`CostModel::load`] reads them back).
    fn save(&self) -> Result<Vec<u8>, ModelError>;
    fn load(&mut self, bytes: &[u8]) -> Result<(), ModelError>;
}

/// Share of the pairs of rows of different `truth` that `score` puts in the
/// same order (a tie in `score` counts half).
pub fn pairwise_accuracy(truth: &[f32], score: &[f32]) -> f64 {
    let (mut right, mut pairs) = (0.0f64, 0.0f64);
    for i in 0..truth.len() {
        for j in i + 1..truth.len() {
            if truth[i] == truth[j] {
                continue;
            }
            pairs += 1.0;
            let d = (score[i] - score[j]) * (truth[i] - truth[j]);
            right += if d > 0.0 {
                1.0
            } else if d == 0.0 {
                0.5
            } else {
                0.0
            };
        }
    }
    right / pairs.max(1.0)
}

/// Fraction of the `k` best rows by `truth` that are among the `k` best by `score`.
pub fn recall_at(truth: &[f32], score: &[f32], k: usize) -> f64 {
    let k = k.min(truth.len());
    if k == 0 {
        return 1.0;
    }
    let top = |v: &[f32]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*b].total_cmp(&v[*a]).then(a.cmp(b)));
        idx.truncate(k);
        idx
    };
    let want = top(truth);
    let got = top(score);
    want.iter().filter(|i| got.contains(i)).count() as f64 / k as f64
}

/// `xgboost-rs`'s `DMatrix::from_dense` takes every 0.0 for a missing value,
/// so features reach XGBoost shifted by this constant (trees split on
/// thresholds, so a shift loses nothing, and a real zero stays a value); a
/// saved model's thresholds are in shifted units.
pub(crate) const SHIFT: f32 = 256.0;

/// Whether this build has a cost model (the `xgboost` feature).
pub const AVAILABLE: bool = cfg!(feature = "xgboost");

/// A cost model by objective: XGBoost when built with it.
pub fn default_model(objective: Objective, seed: u64) -> Result<Box<dyn CostModel>, ModelError> {
    #[cfg(feature = "xgboost")]
    {
        Ok(Box::new(xgb::XgbModel::new(objective, seed)))
    }
    #[cfg(not(feature = "xgboost"))]
    {
        let _ = (objective, seed);
        Err(ModelError::Unavailable)
    }
}

#[cfg(feature = "xgboost")]
pub use xgb::XgbModel;

#[cfg(feature = "xgboost")]
mod xgb {
    use std::collections::HashMap;

    use xgboost_rs::{Booster, DMatrix};

    use super::{recall_at, CostModel, Matrix, ModelError, Objective, TrainingSet, SHIFT};

    /// Gradient-boosted trees (XGBoost 1.6 through `xgboost-rs`), refitted from
    /// scratch on every call to `fit`. Rounds go on while top-k recall on the
    /// training set improves, and `patience` rounds beyond (AutoTVM's early
    /// stopping): the search needs the top of the order right, not a small
    /// loss overall.
    pub struct XgbModel {
        objective: Objective,
        seed: u64,
        booster: Option<Booster>,
        /// Rounds at most, and rounds without a better recall before stopping.
        pub max_rounds: usize,
        pub patience: usize,
        /// Rounds the last fit ran.
        pub rounds: usize,
    }

    impl XgbModel {
        pub fn new(objective: Objective, seed: u64) -> XgbModel {
            XgbModel {
                objective,
                seed,
                booster: None,
                max_rounds: 300,
                patience: 20,
                rounds: 0,
            }
        }

        fn params(&self) -> HashMap<String, String> {
            let objective = match self.objective {
                Objective::Rank => "rank:pairwise",
                Objective::Regression => "reg:squarederror",
            };
            [
                ("objective", objective),
                ("max_depth", "3"),
                ("eta", "0.3"),
                ("gamma", "0.0001"),
                ("min_child_weight", "1"),
                ("subsample", "1.0"),
                ("lambda", "1"),
                ("alpha", "0"),
                ("tree_method", "exact"),
                ("nthread", "1"),
                ("verbosity", "0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("seed".to_string(), self.seed.to_string())])
            .collect()
        }
    }

    fn matrix(x: &Matrix, base_margin: Option<&[f32]>) -> Result<DMatrix, ModelError> {
        let shifted: Vec<f32> = x.data.iter().map(|v| v + SHIFT).collect();
        let mut d = DMatrix::from_dense(&shifted, x.rows()).map_err(err)?;
        if let Some(m) = base_margin {
            d.set_base_margin(m).map_err(err)?;
        }
        Ok(d)
    }

    fn err(e: xgboost_rs::XGBError) -> ModelError {
        ModelError::Xgboost(e.to_string())
    }

    impl CostModel for XgbModel {
        fn name(&self) -> String {
            format!("xgb-{}", self.objective)
        }

        fn fit(&mut self, data: &TrainingSet) -> Result<(), ModelError> {
            let rows = data.x.rows();
            if rows == 0 {
                return Err(ModelError::Empty);
            }
            if rows != data.y.len() || data.x.data.len() != rows * data.x.cols {
                return Err(ModelError::Shape {
                    rows,
                    cols: data.x.cols,
                    labels: data.y.len(),
                });
            }
            let mut d = matrix(&data.x, data.base_margin.as_deref())?;
            d.set_labels(&data.y).map_err(err)?;
            if self.objective == Objective::Rank {
                let groups = if data.groups.is_empty() {
                    vec![rows as u32]
                } else {
                    data.groups.clone()
                };
                d.set_group(&groups).map_err(err)?;
            }
            let mut booster = Booster::new_with_json_config(&[&d], self.params()).map_err(err)?;
            let k = (rows / 8).clamp(1, 32);
            let (mut best, mut best_round) = (-1.0, 0);
            self.rounds = 0;
            for round in 0..self.max_rounds {
                booster.update(&d, round as i32).map_err(err)?;
                self.rounds = round + 1;
                let r = recall_at(&data.y, &booster.predict(&d).map_err(err)?, k);
                if r > best {
                    (best, best_round) = (r, round);
                } else if round - best_round >= self.patience {
                    break;
                }
            }
            self.booster = Some(booster);
            Ok(())
        }

        fn predict(&self, x: &Matrix, base_margin: Option<&[f32]>) -> Result<Vec<f32>, ModelError> {
            let booster = self.booster.as_ref().ok_or(ModelError::NotFitted)?;
            if x.rows() == 0 {
                return Ok(Vec::new());
            }
            booster.predict(&matrix(x, base_margin)?).map_err(err)
        }

        fn save(&self) -> Result<Vec<u8>, ModelError> {
            let booster = self.booster.as_ref().ok_or(ModelError::NotFitted)?;
            // Only JSON survives `save_to_buffer` (it converts to a String).
            Ok(booster
                .save_to_buffer("json".into())
                .map_err(err)?
                .into_bytes())
        }

        fn load(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
            self.booster = Some(Booster::load_buffer(bytes).map_err(err)?);
            Ok(())
        }
    }
}
