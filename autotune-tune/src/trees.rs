//! A saved XGBoost model evaluated in Rust: the boosted trees as XGBoost's JSON
//! model format stores them, scored without XGBoost, and so without the C++
//! toolchain that building XGBoost needs. Training stays with XGBoost (the
//! `xgboost` feature); using a trained model, such as one shipped with the
//! project, needs only this.

use serde_json::Value;

use crate::model::{CostModel, Matrix, ModelError, TrainingSet, SHIFT};

/// One regression tree, its nodes in XGBoost's order (node 0 the root).
#[derive(Clone, Debug)]
struct Tree {
    /// Children of a split node; -1 marks a leaf.
    left: Vec<i32>,
    right: Vec<i32>,
    feature: Vec<u32>,
    /// A split's threshold (go left when the feature is below it), or a leaf's value.
    value: Vec<f32>,
    /// Where a missing (NaN) feature goes.
    default_left: Vec<bool>,
}

impl Tree {
    fn score(&self, row: &[f32]) -> f32 {
        let mut n = 0usize;
        loop {
            let left = self.left[n];
            if left < 0 {
                return self.value[n];
            }
            let x = row
                .get(self.feature[n] as usize)
                .copied()
                .unwrap_or(f32::NAN);
            let go_left = if x.is_nan() {
                self.default_left[n]
            } else {
                x < self.value[n]
            };
            n = if go_left { left } else { self.right[n] } as usize;
        }
    }
}

/// A gradient-boosted forest read from XGBoost's JSON model.
#[derive(Clone, Debug)]
pub struct Forest {
    base_score: f32,
    trees: Vec<Tree>,
    /// Features per row the model was trained on.
    pub features: usize,
    json: Vec<u8>,
}

fn format_error(what: impl Into<String>) -> ModelError {
    ModelError::Format(what.into())
}

impl Forest {
    /// Reads a model saved by XGBoost as JSON ([`CostModel::save`] of
    /// [`crate::model::XgbModel`]), checking that every node refers to a node
    /// of its tree.
    pub fn from_json(bytes: &[u8]) -> Result<Forest, ModelError> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format_error(format!("not JSON: {e}")))?;
        let learner = &v["learner"];
        let base_score: f32 = learner["learner_model_param"]["base_score"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format_error("no learner_model_param.base_score"))?;
        let features: usize = learner["learner_model_param"]["num_feature"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format_error("no learner_model_param.num_feature"))?;
        let booster = &learner["gradient_booster"];
        if booster["name"].as_str() != Some("gbtree") {
            return Err(format_error(format!(
                "booster {} (only gbtree is read)",
                booster["name"]
            )));
        }
        let trees = booster["model"]["trees"]
            .as_array()
            .ok_or_else(|| format_error("no gradient_booster.model.trees"))?
            .iter()
            .enumerate()
            .map(|(i, t)| tree(t).map_err(|e| format_error(format!("tree {i}: {e}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Forest {
            base_score,
            trees,
            features,
            json: bytes.to_vec(),
        })
    }

    /// The model's margin for one row of features (as given to
    /// [`CostModel::predict`], before the shift XGBoost saw them with), from
    /// `base` instead of the model's base score if given.
    pub fn score(&self, row: &[f32], base: Option<f32>) -> f32 {
        let shifted: Vec<f32> = row.iter().map(|v| v + SHIFT).collect();
        self.trees
            .iter()
            .fold(base.unwrap_or(self.base_score), |acc, t| {
                acc + t.score(&shifted)
            })
    }
}

/// One tree's arrays, checked.
fn tree(t: &Value) -> Result<Tree, String> {
    let ints = |key: &str| -> Result<Vec<i64>, String> {
        t[key]
            .as_array()
            .ok_or(format!("no {key}"))?
            .iter()
            .map(|x| x.as_i64().ok_or(format!("{key} holds a non-integer")))
            .collect()
    };
    let left = ints("left_children")?;
    let right = ints("right_children")?;
    let feature = ints("split_indices")?;
    let value: Vec<f32> = t["split_conditions"]
        .as_array()
        .ok_or("no split_conditions")?
        .iter()
        .map(|x| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or("split_conditions holds a non-number")
        })
        .collect::<Result<_, _>>()?;
    // XGBoost writes booleans as 0/1 in some versions.
    let default_left: Vec<bool> = t["default_left"]
        .as_array()
        .ok_or("no default_left")?
        .iter()
        .map(|x| {
            x.as_bool()
                .or_else(|| x.as_i64().map(|i| i != 0))
                .ok_or("default_left holds a non-boolean")
        })
        .collect::<Result<_, _>>()?;
    let n = left.len();
    if n == 0 || [right.len(), feature.len(), value.len(), default_left.len()] != [n; 4] {
        return Err("node arrays of different lengths".into());
    }
    // Children come after their parent, so every walk ends at a leaf.
    for i in 0..n {
        let inside = |c: i64| (i as i64 + 1..n as i64).contains(&c);
        if left[i] >= 0 && !(inside(left[i]) && inside(right[i])) {
            return Err(format!("node {i} has a child outside the tree"));
        }
        if left[i] >= 0 && !(0..=u32::MAX as i64).contains(&feature[i]) {
            return Err(format!("node {i} splits on feature {}", feature[i]));
        }
    }
    Ok(Tree {
        left: left.iter().map(|&x| x.max(-1) as i32).collect(),
        right: right.iter().map(|&x| x.max(-1) as i32).collect(),
        feature: feature.iter().map(|&x| x.max(0) as u32).collect(),
        value,
        default_left,
    })
}

/// A trained model used as it is: it predicts, and is never refitted.
impl CostModel for Forest {
    fn name(&self) -> String {
        "trees".into()
    }

    fn fit(&mut self, _: &TrainingSet) -> Result<(), ModelError> {
        Err(ModelError::ReadOnly)
    }

    fn predict(&self, x: &Matrix, base_margin: Option<&[f32]>) -> Result<Vec<f32>, ModelError> {
        if x.rows() > 0 && x.cols != self.features {
            return Err(ModelError::Width {
                cols: x.cols,
                expected: self.features,
            });
        }
        if let Some(m) = base_margin.filter(|m| m.len() != x.rows()) {
            return Err(ModelError::Shape {
                rows: x.rows(),
                cols: x.cols,
                labels: m.len(),
            });
        }
        Ok((0..x.rows())
            .map(|i| self.score(x.row(i), base_margin.map(|m| m[i])))
            .collect())
    }

    fn save(&self) -> Result<Vec<u8>, ModelError> {
        Ok(self.json.clone())
    }

    fn load(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        *self = Forest::from_json(bytes)?;
        Ok(())
    }
}
