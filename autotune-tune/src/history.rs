//! The tuning history that transfer learning draws on: the measured trials of
//! earlier workloads, read from record logs (the crate's
//! `tuning-cache/records/`, and the per-user store [`user_store`]) and described
//! with features that keep their meaning across workloads.
//!
//! A record names its workload by operator fingerprint and shape values
//! ([`WorkloadId`]), so the trials of any operator whose definition is at
//! hand can be lowered again and described at their own shapes, including
//! shapes the source no longer specialises. Records of other targets (another
//! architecture or ISA level) are left out: their timings say nothing about
//! this one. Records of other CPUs of the target are kept (older records do not
//! say their CPU), unlike a resumed run's (`session::tune`).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use autotune_codegen::{Config, Space, Target, Workload, WorkloadId};
use autotune_lang::ir::Operator;

use crate::features::{FeatureSet, FeatureSource, Featurizer};
use crate::model::{Matrix, TrainingSet};
use crate::record::{load_log, Known, LogError, Record};

/// Trials kept per past workload: its best and a spread of the rest, so that
/// loading stays quick where features are computed in an unoptimised build
/// script.
pub const MAX_TRIALS_PER_WORKLOAD: usize = 160;

/// Features already computed in this process, by feature set, workload id and
/// config: a build that tunes several workloads loads the history once per
/// workload, and describing a config is the expensive part (more so in an
/// unoptimised build script).
type Described = Mutex<HashMap<(FeatureSet, FeatureSource, WorkloadId, Config), Vec<f32>>>;

fn described() -> &'static Described {
    static CACHE: OnceLock<Described> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// One earlier workload and its trials on this target.
#[derive(Clone, Debug)]
pub struct Past {
    pub workload: Workload,
    pub id: WorkloadId,
    /// Config, throughput (`None`: failed) and features.
    pub trials: Vec<(Config, Option<f64>, Vec<f32>)>,
    /// The best throughput measured at each kernel thread count (records that
    /// do not say theirs are left out).
    pub best_by_threads: BTreeMap<usize, f64>,
}

impl Past {
    pub fn best(&self) -> f64 {
        self.trials.iter().filter_map(|t| t.1).fold(0.0, f64::max)
    }

    /// Whether this is a workload of the operator `id` names (same name and
    /// definition, any shapes).
    fn of_operator(&self, id: &WorkloadId) -> bool {
        (&self.id.op, self.id.fingerprint) == (&id.op, id.fingerprint)
    }
}

/// What a past workload of the same operator reached at a thread count: a
/// prior for how fast the workload being tuned can be.
#[derive(Clone, Debug, PartialEq)]
pub struct Reached {
    pub workload: String,
    pub gflops: f64,
}

#[derive(Clone, Debug, Default)]
pub struct History {
    pub workloads: Vec<Past>,
    pub set: Option<FeatureSet>,
}

/// The per-user store of record logs shared by every crate on this machine,
/// from the values of `AUTOTUNE_HISTORY`, `XDG_CACHE_HOME` and `HOME` (the
/// caller reads them): `$AUTOTUNE_HISTORY` if set (empty: none), else
/// `$XDG_CACHE_HOME/autotune/records` or `~/.cache/autotune/records`. Deleting
/// the directory clears it.
pub fn user_store(
    history: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    match history {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => xdg_cache_home
            .map(PathBuf::from)
            .or_else(|| home.map(|h| Path::new(&h).join(".cache")))
            .map(|c| c.join("autotune").join("records")),
    }
}

/// Record logs at `p`: the file itself, or the `*.jsonl` files of a directory.
fn logs_at(p: &Path) -> Vec<PathBuf> {
    if p.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.extension().is_some_and(|x| x == "jsonl"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    } else if p.is_file() {
        vec![p.to_path_buf()]
    } else {
        Vec::new()
    }
}

impl History {
    /// Trials of `target` from the record logs at `sources`, for workloads of
    /// `ops` (matched by definition, at any shapes) other than `exclude`,
    /// described with `set` from `source`. Unreadable logs are returned beside the history:
    /// a history only speeds tuning up, so it never stops it.
    pub fn load(
        sources: &[PathBuf],
        ops: &[Operator],
        target: &Target,
        exclude: Option<&WorkloadId>,
        set: FeatureSet,
        source: FeatureSource,
    ) -> (History, Vec<LogError>) {
        let mut errors = Vec::new();
        let mut by_id: BTreeMap<WorkloadId, Vec<Record>> = BTreeMap::new();
        let mut files: Vec<PathBuf> = sources.iter().flat_map(|s| logs_at(s)).collect();
        files.dedup();
        for f in files {
            match load_log(&f) {
                Ok(records) => {
                    for r in records {
                        if r.target == *target && Some(&r.workload_id) != exclude {
                            by_id.entry(r.workload_id.clone()).or_default().push(r);
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        let known = Known::new(ops);
        let mut workloads = Vec::new();
        for (id, mut records) in by_id {
            let Some(workload) = known.workload(&id) else {
                continue;
            };
            // What cannot be current goes first (cheap); whether an older
            // generator's record still times today's kernel costs a lowering,
            // so that is asked after thinning.
            records.retain(|r| r.of_this_generator() || r.kernel.is_some());
            // The same config measured twice (resumed runs, several logs)
            // counts once: this generator's record where there is one.
            records.sort_by_key(|r| (r.config.clone(), !r.of_this_generator()));
            records.dedup_by(|a, b| a.config == b.config);
            records.sort_by(|a, b| {
                b.gflops
                    .unwrap_or(0.0)
                    .total_cmp(&a.gflops.unwrap_or(0.0))
                    .then(a.config.cmp(&b.config))
            });
            thin(&mut records, MAX_TRIALS_PER_WORKLOAD);
            records.retain(|r| r.is_current(&workload));
            let mut best_by_threads = BTreeMap::new();
            for r in &records {
                if let (Some(t), Some(g)) = (r.threads, r.gflops) {
                    let b = best_by_threads.entry(t).or_insert(g);
                    *b = f64::max(*b, g);
                }
            }
            let featurizer = Featurizer::with_source(&workload, set, source);
            let mut cache = described().lock().unwrap_or_else(|e| e.into_inner());
            let trials: Vec<(Config, Option<f64>, Vec<f32>)> = records
                .into_iter()
                .filter_map(|r| {
                    let key = (set, source, id.clone(), r.config);
                    let f = match cache.get(&key) {
                        Some(f) => f.clone(),
                        None => {
                            let f = featurizer.features(&key.3).ok()?;
                            cache.insert(key.clone(), f.clone());
                            f
                        }
                    };
                    Some((key.3, r.gflops, f))
                })
                .collect();
            drop(cache);
            if trials.iter().any(|t| t.1.is_some()) {
                workloads.push(Past {
                    workload,
                    id,
                    trials,
                    best_by_threads,
                });
            }
        }
        (
            History {
                workloads,
                set: Some(set),
            },
            errors,
        )
    }

    /// The history for tuning `w` on `target`: trials of that target at
    /// `sources`, of `ops`, other than `w`'s own, described with curve features.
    pub fn for_tuning(
        w: &Workload,
        target: &Target,
        sources: &[PathBuf],
        ops: &[Operator],
    ) -> (History, Vec<LogError>) {
        History::load(
            sources,
            ops,
            target,
            Some(&w.id()),
            FeatureSet::Curve,
            FeatureSource::Plan,
        )
    }

    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty()
    }

    pub fn trials(&self) -> usize {
        self.workloads.iter().map(|p| p.trials.len()).sum()
    }

    /// Rows for the global model: one group per workload, labels its trials'
    /// throughput relative to its best (failed trials 0).
    pub fn training_set(&self) -> TrainingSet {
        let cols = self
            .workloads
            .first()
            .and_then(|p| p.trials.first())
            .map_or(0, |t| t.2.len());
        let mut data = TrainingSet {
            x: Matrix::new(cols),
            ..TrainingSet::default()
        };
        for p in &self.workloads {
            let best = p.best();
            for (_, g, f) in &p.trials {
                data.x.push(f);
                data.y.push((g.unwrap_or(0.0) / best) as f32);
            }
            data.groups.push(p.trials.len() as u32);
        }
        data
    }

    /// The best throughput that the nearest past workload of `w`'s operator
    /// (by [`size_distance`]) reached at `threads`; `None` where no past
    /// workload of that operator was timed at that thread count.
    pub fn reached(&self, w: &Workload, threads: usize) -> Option<Reached> {
        let id = w.id();
        self.workloads
            .iter()
            .filter(|p| p.of_operator(&id))
            .filter_map(|p| {
                let g = *p.best_by_threads.get(&threads)?;
                Some((size_distance(p.workload.shapes(), w.shapes()), p, g))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, p, gflops)| Reached {
                workload: p.workload.key(),
                gflops,
            })
    }

    /// Configs to start tuning `w` from: the best configs of the most similar
    /// past workloads (same operator first, nearest shapes first) that are
    /// sensible points of `space`, up to `per_workload` each and `max` in all.
    pub fn seeds(
        &self,
        w: &Workload,
        space: &Space,
        per_workload: usize,
        max: usize,
    ) -> Vec<Config> {
        let id = w.id();
        let mut pasts: Vec<(f64, &Past)> = self
            .workloads
            .iter()
            .map(|p| {
                let distance = size_distance(p.workload.shapes(), w.shapes());
                (
                    if p.of_operator(&id) {
                        distance
                    } else {
                        1e9 + distance
                    },
                    p,
                )
            })
            .collect();
        pasts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<Config> = Vec::new();
        for (_, p) in pasts {
            let mut best: Vec<&(Config, Option<f64>, Vec<f32>)> =
                p.trials.iter().filter(|t| t.1.is_some()).collect();
            best.sort_by(|a, b| b.1.unwrap_or(0.0).total_cmp(&a.1.unwrap_or(0.0)));
            let mut taken = 0;
            for (c, _, _) in best {
                if taken == per_workload || out.len() == max {
                    break;
                }
                if space.index_of(c).is_ok() && space.sensible(c) && !out.contains(c) {
                    out.push(c.clone());
                    taken += 1;
                }
            }
        }
        out
    }
}

/// How far apart two lists of sizes are: the sum of the log ratios of
/// their pairs (sizes below 1 count as 1).
pub fn size_distance(a: &[i64], b: &[i64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| ((*a.max(&1) as f64) / (*b.max(&1) as f64)).ln().abs())
        .sum()
}

/// Keeps the first half of `n` (the best, as sorted) and an even spread of the rest.
fn thin<T>(v: &mut Vec<T>, n: usize) {
    if v.len() <= n {
        return;
    }
    let head = n / 2;
    let rest = v.split_off(head);
    let step = rest.len() as f64 / (n - head) as f64;
    let mut picked: Vec<T> = Vec::with_capacity(n - head);
    for (i, x) in rest.into_iter().enumerate() {
        if picked.len() < n - head && (i as f64) >= picked.len() as f64 * step {
            picked.push(x);
        }
    }
    v.extend(picked);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_best_and_a_spread() {
        let mut v: Vec<usize> = (0..100).collect();
        thin(&mut v, 10);
        assert_eq!(v.len(), 10);
        assert_eq!(&v[..5], &[0, 1, 2, 3, 4]);
        assert!(v[5..].windows(2).all(|p| p[1] > p[0]) && v[9] > 80);
    }
}
