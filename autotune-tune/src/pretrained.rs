//! A cost model trained ahead of time on many workloads' records, as a file
//! that can ship: the trees (XGBoost's JSON model, scored in Rust by
//! [`crate::trees`], so using it needs no XGBoost), what its features mean
//! (their version and [`probe`](crate::features::probe)), and what it was
//! trained on. A file whose features differ is reported, never applied: its
//! features would mean something else. A generator change that leaves the
//! features alone (only the C a plan is written as) keeps it: its trials
//! measured that C, but the search measures what it proposes and refits.
//! The file also keeps the corpus workloads' best configs ([`Seeds`]), which a
//! few-shot search measures first where a new workload is like one of them.
//!
//! Models for x86-64 at AVX-512 and AVX2 ship with this crate
//! (`models/<arch>-<isa>.json`, made by `bench/corpus.sh`); [`shipped`] finds
//! the one for a target.

use std::path::{Path, PathBuf};

use crate::features::probe;
use autotune_codegen::{Config, Isa, Space, Target, GENERATOR_VERSION};
use serde::{Deserialize, Serialize};

use crate::features::{FeatureSet, FEATURES_VERSION};
use crate::history::{size_distance, History};
use crate::model::{self, pairwise_accuracy, recall_at, CostModel, Matrix, ModelError, Objective};
use crate::trees::Forest;

/// Version of the file's layout: 2 added `features_probe`.
pub const FORMAT: u32 = 2;

/// What a pre-trained model was trained on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainedOn {
    /// The CPU the records were measured on.
    pub cpu: String,
    /// The workloads (readable keys) and their trials, in all.
    pub workloads: Vec<String>,
    pub trials: usize,
    /// Unix time of the training, in seconds.
    pub date: u64,
}

/// A pre-trained cost model and what it needs to be applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pretrained {
    pub format: u32,
    /// The feature set its rows are (by name).
    pub features: String,
    pub features_version: u32,
    /// [`probe`] of the features it was trained on.
    pub features_probe: u64,
    /// The generator version its trials were lowered by (what they timed;
    /// not checked: [`Pretrained::features_probe`] is what must match).
    pub generator: u32,
    /// Architecture and ISA level the trials ran with.
    pub target: Target,
    pub trained_on: TrainedOn,
    /// XGBoost's JSON model.
    pub model: String,
    /// The best configs of the corpus's workloads: the few-shot search's first
    /// picks for a similar workload, carried to its space ([`Loaded::seeds_for`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<Seeds>,
}

/// Configs a pre-trained model keeps per corpus workload, best first.
pub const SEEDS_PER_WORKLOAD: usize = 4;

/// A corpus workload's best configs, as it was tuned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seeds {
    /// The workload (readable key).
    pub workload: String,
    /// Its reducing stage's extents ([`autotune_codegen::Reducing`]).
    pub extents: Vec<i64>,
    /// Its best configs, best first.
    pub configs: Vec<Config>,
}

#[derive(Debug, thiserror::Error)]
pub enum PretrainedError {
    #[error("cannot read the pre-trained model {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the pre-trained model {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a pre-trained model", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{}: made for {what} {found}, this build has {want}; retrain it with `cargo autotune train`",
        path.display()
    )]
    Stale {
        path: PathBuf,
        what: &'static str,
        found: String,
        want: String,
    },
    #[error("{}: its trees cannot be read", path.display())]
    Model {
        path: PathBuf,
        #[source]
        source: ModelError,
    },
    #[error("{}: trained for {found}, not for {want}", path.display())]
    Target {
        path: PathBuf,
        found: Target,
        want: Target,
    },
}

/// A model read and checked, ready to score.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub file: Pretrained,
    pub forest: Forest,
    /// Where it came from (a path, or the shipped file's name in this crate).
    pub origin: PathBuf,
}

impl Loaded {
    /// The feature set its rows are (checked when read).
    pub fn set(&self) -> FeatureSet {
        self.file.feature_set().expect("checked when read")
    }

    /// Whether it was trained for `target`: a model of another ISA level or
    /// architecture is not applied (its trials ran other code).
    pub fn check_target(&self, target: &Target) -> Result<(), PretrainedError> {
        if self.file.target == *target {
            Ok(())
        } else {
            Err(PretrainedError::Target {
                path: self.origin.clone(),
                found: self.file.target.clone(),
                want: target.clone(),
            })
        }
    }

    /// Up to `n` configs to measure first for a workload of `space`: the best
    /// configs of the corpus workloads whose reducing stage is like its own,
    /// nearest extents first (by the sum of log ratios), two per workload,
    /// each carried onto `base` ([`Space::carry`]), with the workload it came
    /// from.
    pub fn seeds_for(&self, space: &Space, base: &Config, n: usize) -> Vec<(Config, &str)> {
        let Some(me) = space.reducing() else {
            return Vec::new();
        };
        let mut near: Vec<(f64, &Seeds)> = self
            .file
            .seeds
            .iter()
            .filter(|s| s.extents.len() == me.extents.len())
            .map(|s| (size_distance(&s.extents, &me.extents), s))
            .collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<(Config, &str)> = Vec::new();
        for (_, s) in near {
            if out.len() == n {
                break;
            }
            let carried = s.configs.iter().filter_map(|c| space.carry(c, base));
            for c in carried.take(2) {
                if out.len() < n && !out.iter().any(|o| o.0 == c) {
                    out.push((c, s.workload.as_str()));
                }
            }
        }
        out
    }
}

/// A past workload's best configs, where its space has a reducing stage.
fn seeds_of(p: &crate::history::Past) -> Option<Seeds> {
    let space = Space::new(&p.workload.op, p.workload.shapes());
    let extents = space.reducing()?.extents;
    let mut ok: Vec<(&Config, f64)> = p
        .trials
        .iter()
        .filter_map(|(c, g, _)| g.map(|g| (c, g)))
        .collect();
    ok.sort_by(|a, b| b.1.total_cmp(&a.1));
    Some(Seeds {
        workload: p.workload.key(),
        extents,
        configs: ok
            .into_iter()
            .take(SEEDS_PER_WORKLOAD)
            .map(|(c, _)| c.clone())
            .collect(),
    })
}

/// How well a model orders the measured trials of one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    pub workload: String,
    pub trials: usize,
    /// Pairwise accuracy, and recall of the `k` best among the model's `k` best.
    pub pairwise: f64,
    pub recall: f64,
}

impl Loaded {
    /// Its ranking quality on each workload of `history` (loaded with its
    /// feature set), failed trials counting as the slowest.
    pub fn ranking(&self, history: &History, k: usize) -> Result<Vec<Ranking>, ModelError> {
        history
            .workloads
            .iter()
            .filter(|p| !p.trials.is_empty())
            .map(|p| {
                let mut x = Matrix::new(p.trials[0].2.len());
                for t in &p.trials {
                    x.push(&t.2);
                }
                let score = self.forest.predict(&x, None)?;
                let truth: Vec<f32> = p.trials.iter().map(|t| t.1.unwrap_or(0.0) as f32).collect();
                Ok(Ranking {
                    workload: p.workload.key(),
                    trials: p.trials.len(),
                    pairwise: pairwise_accuracy(&truth, &score),
                    recall: recall_at(&truth, &score, k),
                })
            })
            .collect()
    }
}

/// The models that ship with this crate: architecture, ISA level, file.
const SHIPPED: &[(&str, Isa, &str, &str)] = &[
    (
        "x86_64",
        Isa::Avx512,
        "autotune-tune/models/x86_64-avx512.json",
        include_str!("../models/x86_64-avx512.json"),
    ),
    (
        "x86_64",
        Isa::Avx2,
        "autotune-tune/models/x86_64-avx2.json",
        include_str!("../models/x86_64-avx2.json"),
    ),
];

/// The shipped model for `target` (by architecture and ISA level), read and
/// checked; `None` where none ships.
pub fn shipped(target: &Target) -> Option<Result<Loaded, PretrainedError>> {
    let arch = target.triple.split('-').next().unwrap_or("");
    SHIPPED
        .iter()
        .find(|(a, isa, _, _)| *a == arch && *isa == target.isa)
        .map(|(_, _, name, text)| Pretrained::parse(text.as_bytes(), Path::new(name)))
}

/// Every shipped model's name and whether it reads as current (for the test
/// that fails when one is stale).
pub fn check_shipped() -> Vec<(&'static str, Result<Loaded, PretrainedError>)> {
    SHIPPED
        .iter()
        .map(|(_, _, name, text)| (*name, Pretrained::parse(text.as_bytes(), Path::new(name))))
        .collect()
}

impl Pretrained {
    /// Fits a model with `objective` on every workload of `history` (one
    /// group each, throughput relative to the workload's best) for `target`;
    /// `cpu` names the machine the records came from. Needs the `xgboost`
    /// feature. The rounds stop as the search's own model's do (when top-k
    /// recall on the training set stops rising: about 20 trees on the
    /// corpus); 200 or 500 fixed rounds ranked held-out families no better.
    pub fn train(
        history: &History,
        target: &Target,
        cpu: &str,
        objective: Objective,
    ) -> Result<Pretrained, ModelError> {
        let set = history.set.ok_or(ModelError::Empty)?;
        let data = history.training_set();
        let mut m = model::default_model(objective, 1)?;
        m.fit(&data)?;
        let model = String::from_utf8(m.save()?)
            .map_err(|e| ModelError::Format(format!("XGBoost saved non-UTF-8 JSON: {e}")))?;
        Ok(Pretrained {
            format: FORMAT,
            features: set.name().to_string(),
            features_version: FEATURES_VERSION,
            features_probe: probe(set),
            generator: GENERATOR_VERSION,
            target: target.clone(),
            trained_on: TrainedOn {
                cpu: cpu.to_string(),
                workloads: history.workloads.iter().map(|p| p.workload.key()).collect(),
                trials: history.trials(),
                date: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            },
            model,
            seeds: history.workloads.iter().filter_map(seeds_of).collect(),
        })
    }

    pub fn save(&self, path: &Path) -> Result<(), PretrainedError> {
        let text = serde_json::to_string_pretty(self).expect("a model serialises");
        std::fs::write(path, text + "\n").map_err(|source| PretrainedError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a model file, checking that this build's features are the ones it
    /// was trained with (version and probe), and that its trees read.
    pub fn load(path: &Path) -> Result<Loaded, PretrainedError> {
        let bytes = std::fs::read(path).map_err(|source| PretrainedError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Pretrained::parse(&bytes, path)
    }

    /// [`Pretrained::load`] of a file's bytes; `path` names it in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Loaded, PretrainedError> {
        let p: Pretrained =
            serde_json::from_slice(bytes).map_err(|source| PretrainedError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        let stale = |what, found: String, want: String| PretrainedError::Stale {
            path: path.to_path_buf(),
            what,
            found,
            want,
        };
        if p.format != FORMAT {
            return Err(stale(
                "file format",
                p.format.to_string(),
                FORMAT.to_string(),
            ));
        }
        let set = match p.features.parse::<FeatureSet>() {
            Ok(set) if p.features_version == FEATURES_VERSION => set,
            _ => {
                return Err(stale(
                    "features",
                    format!("{} v{}", p.features, p.features_version),
                    format!("v{FEATURES_VERSION}"),
                ))
            }
        };
        let now = probe(set);
        if p.features_probe != now {
            return Err(stale(
                "features probe",
                format!("{:016x}", p.features_probe),
                format!("{now:016x} (the space, the plans or the features changed)"),
            ));
        }
        let forest =
            Forest::from_json(p.model.as_bytes()).map_err(|source| PretrainedError::Model {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Loaded {
            file: p,
            forest,
            origin: path.to_path_buf(),
        })
    }

    /// The feature set its rows are.
    pub fn feature_set(&self) -> Option<FeatureSet> {
        self.features.parse().ok()
    }
}
