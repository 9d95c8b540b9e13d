//! Which tuner to run: [`TunerSpec`], written as the names `cargo autotune
//! tune --tuner` takes (`few-shot`, `xgb-rank`, `xgb-reg-nodiv`,
//! `xgb-rank-curve`, `genetic`, `random`, `grid`).

use std::fmt;
use std::str::FromStr;

use autotune_codegen::{Config, Isa, Space, Workload};

use crate::features::FeatureSet;
use crate::history::History;
use crate::model::{ModelError, Objective};
use crate::pretrained::Loaded;
use crate::search::{self, SearchOptions, FEW_SHOT_BATCH, FEW_SHOT_WITHIN};
use crate::tuner::{GeneticTuner, GridTuner, RandomTuner, Tuner};

/// A tuner and its settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunerSpec {
    Random,
    Grid,
    Genetic,
    /// The model-guided search: an XGBoost model with this objective, over this
    /// feature set, with or without the diversity-aware pick.
    Model {
        objective: Objective,
        features: FeatureSet,
        diversity: bool,
    },
    /// A pre-trained model ranks the space; a few of its picks are measured at
    /// a time until the measured best is what it expects. With `refit`, a local
    /// XGBoost model learns a correction from the measurements; without, it
    /// needs no XGBoost.
    FewShot {
        refit: bool,
    },
}

impl TunerSpec {
    /// The tuner the build and `cargo autotune tune` use: `xgb-rank`, the
    /// model-guided search ([`crate::TuningSession`] falls back to
    /// [`TunerSpec::BLACK_BOX`], and says so, where the model is not built in).
    pub const MODEL: TunerSpec = TunerSpec::Model {
        objective: Objective::Rank,
        features: FeatureSet::Itervar,
        diversity: true,
    };

    /// The black-box tuner used where the cost model is not built in.
    pub const BLACK_BOX: TunerSpec = TunerSpec::Genetic;

    /// The names `FromStr` accepts, for help texts.
    pub const NAMES: &'static [&'static str] = &[
        "few-shot",
        "few-shot-refit",
        "xgb-rank",
        "xgb-reg",
        "xgb-rank-nodiv",
        "xgb-reg-nodiv",
        "xgb-rank-knobs",
        "xgb-rank-curve",
        "genetic",
        "random",
        "grid",
    ];

    /// Whether this tuner needs the cost model (XGBoost).
    pub fn needs_model(self) -> bool {
        matches!(
            self,
            TunerSpec::Model { .. } | TunerSpec::FewShot { refit: true }
        )
    }

    /// Whether this tuner uses a history of other workloads.
    pub fn learns(self) -> bool {
        matches!(self, TunerSpec::Model { .. } | TunerSpec::FewShot { .. })
    }

    /// Builds the tuner for `w`. A model-guided tuner starts from `seeds`
    /// (measured first) and, given a `history` of other workloads, learns from
    /// it (transfer learning) and also starts from the best configs of the most
    /// similar ones. The few-shot tuner needs `pretrained` (the session falls
    /// back, and says so, where there is none), and does not stop early far
    /// below what the history's nearest workload of the operator reached at
    /// `threads`, the kernel thread count it is timed at. The model-guided
    /// tuners measure candidates whose C at `isa`, the level they are compiled
    /// at, is far larger than the measured configs' after the others.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        self,
        w: &Workload,
        seed: u64,
        history: Option<&History>,
        seeds: &[Config],
        pretrained: Option<&Loaded>,
        threads: usize,
        isa: Isa,
    ) -> Result<Box<dyn Tuner>, ModelError> {
        Ok(match self {
            TunerSpec::FewShot { refit } => {
                let p = pretrained.ok_or(ModelError::NoPretrained)?;
                let opts = SearchOptions {
                    // Few trials: each goes to the model's picks, none at random.
                    epsilon: 0.0,
                    tile_diverse: true,
                    stop_within: Some(FEW_SHOT_WITHIN),
                    ..SearchOptions::default()
                };
                let global = Box::new(p.forest.clone());
                let space = Space::new(&w.op, w.shapes());
                let base = space.default_config_for(&w.op, w.shapes(), p.file.target.isa);
                let starts = register_tile_starts(&space, w, isa, threads);
                let corpus: Vec<(Config, String)> = p
                    .seeds_for(&space, &base, FEW_SHOT_BATCH / 2)
                    .into_iter()
                    .map(|(c, from)| (c, from.to_string()))
                    .collect();
                Box::new(
                    search::few_shot(
                        w,
                        global,
                        p.set(),
                        refit,
                        opts,
                        seed,
                        history,
                        seeds,
                        &starts,
                        &corpus,
                    )?
                    .with_prior(history.and_then(|h| h.reached(w, threads)))
                    .compiled_at(w, isa),
                )
            }
            TunerSpec::Random => Box::new(RandomTuner::new(seed)),
            TunerSpec::Grid => Box::new(GridTuner::default()),
            TunerSpec::Genetic => Box::new(GeneticTuner::new(seed)),
            TunerSpec::Model {
                objective,
                features,
                diversity,
            } => {
                let opts = SearchOptions {
                    features,
                    diversity,
                    ..SearchOptions::default()
                };
                Box::new(
                    search::xgb_tuner(
                        w,
                        objective,
                        opts,
                        seed,
                        history,
                        seeds,
                        &register_tile_starts(&Space::new(&w.op, w.shapes()), w, isa, threads),
                    )?
                    .compiled_at(w, isa),
                )
            }
        })
    }
}

impl fmt::Display for TunerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunerSpec::Random => f.write_str("random"),
            TunerSpec::Grid => f.write_str("grid"),
            TunerSpec::Genetic => f.write_str("genetic"),
            TunerSpec::FewShot { refit: false } => f.write_str("few-shot"),
            TunerSpec::FewShot { refit: true } => f.write_str("few-shot-refit"),
            TunerSpec::Model {
                objective,
                features,
                diversity,
            } => {
                write!(f, "xgb-{objective}")?;
                if !diversity {
                    f.write_str("-nodiv")?;
                }
                if *features != FeatureSet::Itervar {
                    write!(f, "-{features}")?;
                }
                Ok(())
            }
        }
    }
}

/// A name that is no tuner.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown tuner `{0}` (expected one of {names})", names = TunerSpec::NAMES.join(", "))]
pub struct UnknownTuner(pub String);

impl FromStr for TunerSpec {
    type Err = UnknownTuner;

    fn from_str(name: &str) -> Result<TunerSpec, UnknownTuner> {
        let unknown = || UnknownTuner(name.to_string());
        match name {
            "random" => return Ok(TunerSpec::Random),
            "grid" => return Ok(TunerSpec::Grid),
            "genetic" | "ga" => return Ok(TunerSpec::Genetic),
            "few-shot" => return Ok(TunerSpec::FewShot { refit: false }),
            "few-shot-refit" => return Ok(TunerSpec::FewShot { refit: true }),
            _ => {}
        }
        let mut parts = name.split('-');
        if parts.next() != Some("xgb") {
            return Err(unknown());
        }
        let objective = match parts.next() {
            Some("rank") => Objective::Rank,
            Some("reg") => Objective::Regression,
            _ => return Err(unknown()),
        };
        let (mut features, mut diversity) = (FeatureSet::Itervar, true);
        for p in parts {
            match p {
                "nodiv" => diversity = false,
                set => features = set.parse().map_err(|_| unknown())?,
            }
        }
        Ok(TunerSpec::Model {
            objective,
            features,
            diversity,
        })
    }
}

/// The register-tile starts of `w` (of `space`, its space) at `isa` and
/// `threads`, over its default config there.
fn register_tile_starts(space: &Space, w: &Workload, isa: Isa, threads: usize) -> Vec<Config> {
    let base = space.default_config_for(&w.op, w.shapes(), isa);
    space.register_tile_starts(&base, isa, threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in TunerSpec::NAMES {
            let spec: TunerSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), *name);
        }
        assert_eq!("ga".parse::<TunerSpec>(), Ok(TunerSpec::Genetic));
        assert!("xgb".parse::<TunerSpec>().is_err());
        assert!("xgb-rank-bogus".parse::<TunerSpec>().is_err());
        assert!("annealing".parse::<TunerSpec>().is_err());
    }

    #[test]
    fn few_shot_without_a_model_says_so() {
        let item: syn::ItemFn = syn::parse_str(
            "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
                compute(|i, j| sum(|k| a[i][k] * b[k][j]))
            }",
        )
        .unwrap();
        let op = autotune_lang::parse_operator(
            "specialize(M = 4, N = 16, K = 8)".parse().unwrap(),
            &item,
        )
        .unwrap();
        let w = Workload { op, spec: 0 };
        let err = TunerSpec::FewShot { refit: false }
            .build(&w, 1, None, &[], None, 1, Isa::Baseline)
            .err()
            .expect("no model, no few-shot tuner");
        assert!(matches!(err, ModelError::NoPretrained), "{err}");
        assert!(err.to_string().contains("pre-trained model"), "{err}");
    }
}
