//! The model-guided tuner (AutoTVM's): a cost model refitted on every batch of
//! measurements, simulated annealing over the space on the model's scores, and
//! a diverse pick of the best-scored configs to measure next.
//!
//! - Many annealing chains walk the space at once (a step changes one knob);
//!   they persist from batch to batch, so the search goes on where it stood.
//! - The next batch comes from the best unmeasured configs the chains visited,
//!   chosen greedily for score plus knob values not yet covered (diversity), with
//!   an ε share of uniformly random configs so a wrong model cannot trap the
//!   search.
//! - Seed configs (e.g. the cached winners of related workloads) are measured
//!   first and start chains.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::features::{FeatureSet, Featurizer};
use crate::measure::Workload;
use crate::model::{CostModel, Matrix, ModelError, Objective, TrainingSet};
use crate::space::{Config, Space};
use crate::tune::{random_fresh, Tuner};

/// Settings of the model-guided search.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    pub features: FeatureSet,
    /// Annealing chains, and steps per batch.
    pub chains: usize,
    pub steps: usize,
    /// Share of each batch picked uniformly at random.
    pub epsilon: f64,
    /// Pick for coverage of knob values as well as for score.
    pub diversity: bool,
    /// Candidates considered per config picked.
    pub pool: usize,
    /// Measured trials before the model is first used (random until then).
    pub min_train: usize,
    /// Wall-clock cap on one batch's annealing, so that the search stays small
    /// next to measurement even where this crate is built without optimisation
    /// (a build script in a debug profile).
    pub max_search: Duration,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            features: FeatureSet::Itervar,
            chains: 64,
            steps: 40,
            epsilon: 0.05,
            diversity: true,
            pool: 3,
            min_train: 16,
            max_search: Duration::from_secs(3),
        }
    }
}

/// Where the tuner's own time went.
#[derive(Clone, Debug, Default)]
pub struct Overhead {
    pub features: Duration,
    pub fit: Duration,
    pub predict: Duration,
    /// Configs scored by the model.
    pub scored: usize,
    pub fits: usize,
}

pub struct ModelTuner {
    name: String,
    model: Box<dyn CostModel>,
    featurizer: Featurizer,
    opts: SearchOptions,
    rng: StdRng,
    features: HashMap<u128, Vec<f32>>,
    observed: Vec<(u128, Option<f64>)>,
    /// Scores under the current fit, and their spread (the annealing scale).
    scores: HashMap<u128, f32>,
    scale: f32,
    fitted: bool,
    chains: Vec<u128>,
    seeds: Vec<u128>,
    pub overhead: Overhead,
}

impl ModelTuner {
    pub fn new(
        w: &Workload,
        model: Box<dyn CostModel>,
        opts: SearchOptions,
        seed: u64,
    ) -> ModelTuner {
        let mut name = model.name();
        if !opts.diversity {
            name.push_str("-nodiv");
        }
        if opts.features != FeatureSet::Itervar {
            name = format!("{name}-{}", opts.features);
        }
        ModelTuner {
            name,
            model,
            featurizer: Featurizer::new(w, opts.features),
            opts,
            rng: StdRng::seed_from_u64(seed),
            features: HashMap::new(),
            observed: Vec::new(),
            scores: HashMap::new(),
            scale: 1.0,
            fitted: false,
            chains: Vec::new(),
            seeds: Vec::new(),
            overhead: Overhead::default(),
        }
    }

    /// Configs to measure first and to start chains from; those not in the
    /// space (or not sensible there) are ignored.
    pub fn with_seeds(mut self, space: &Space, configs: &[Config]) -> ModelTuner {
        for c in configs {
            if let Ok(i) = space.index_of(c) {
                if space.sensible(c) && !self.seeds.contains(&i) {
                    self.seeds.push(i);
                }
            }
        }
        self
    }

    fn features_of(&mut self, space: &Space, i: u128) -> &[f32] {
        if !self.features.contains_key(&i) {
            let t = Instant::now();
            let f = self
                .featurizer
                .features(&space.config_at(i))
                .expect("configs of the space lower");
            self.overhead.features += t.elapsed();
            self.features.insert(i, f);
        }
        &self.features[&i]
    }

    /// Model scores of `points`, computing only those not scored under this fit.
    fn score(&mut self, space: &Space, points: &[u128]) -> Result<Vec<f32>, ModelError> {
        let fresh: Vec<u128> = {
            let mut seen = HashSet::new();
            points
                .iter()
                .copied()
                .filter(|i| !self.scores.contains_key(i) && seen.insert(*i))
                .collect()
        };
        if !fresh.is_empty() {
            let mut x = Matrix::new(self.featurizer.len());
            for &i in &fresh {
                let row = self.features_of(space, i).to_vec();
                x.push(&row);
            }
            let t = Instant::now();
            let p = self.model.predict(&x, None)?;
            self.overhead.predict += t.elapsed();
            self.overhead.scored += fresh.len();
            self.scores.extend(fresh.into_iter().zip(p));
        }
        Ok(points.iter().map(|i| self.scores[i]).collect())
    }

    fn neighbour(&mut self, space: &Space, i: u128) -> u128 {
        let mut d = space.digits(i);
        let movable: Vec<usize> = (0..d.len())
            .filter(|&k| space.knobs[k].choices.len() > 1)
            .collect();
        if movable.is_empty() {
            return i;
        }
        let k = movable[self.rng.gen_range(0..movable.len())];
        let n = space.knobs[k].choices.len();
        d[k] = (d[k] + self.rng.gen_range(1..n)) % n;
        space.from_digits(&d)
    }

    /// Simulated annealing on the model; returns the best unmeasured configs seen.
    fn anneal(
        &mut self,
        space: &Space,
        want: usize,
        measured: &HashSet<u128>,
    ) -> Result<Vec<(u128, f32)>, ModelError> {
        // Chains start from the best measured configs, the seeds and random points.
        if self.chains.is_empty() {
            let mut best: Vec<(u128, f64)> = self
                .observed
                .iter()
                .filter_map(|(i, g)| g.map(|g| (*i, g)))
                .collect();
            best.sort_by(|a, b| b.1.total_cmp(&a.1));
            self.chains = self.seeds.clone();
            self.chains
                .extend(best.iter().take(self.opts.chains / 4).map(|b| b.0));
            let fill = self.opts.chains.saturating_sub(self.chains.len());
            let none = HashSet::new();
            let more = random_fresh(&mut self.rng, space, fill, &none);
            self.chains.extend(more);
        }
        let chains = self.chains.clone();
        let mut current = self.score(space, &chains)?;
        let start = Instant::now();
        for step in 0..self.opts.steps {
            if start.elapsed() > self.opts.max_search {
                break;
            }
            let temp = self.scale * (1.0 - step as f32 / self.opts.steps as f32);
            let next: Vec<u128> = (0..self.chains.len())
                .map(|c| self.neighbour(space, self.chains[c]))
                .map(|i| {
                    if space.sensible(&space.config_at(i)) {
                        i
                    } else {
                        u128::MAX
                    }
                })
                .collect();
            let valid: Vec<u128> = next.iter().copied().filter(|&i| i != u128::MAX).collect();
            let scored = self.score(space, &valid)?;
            let mut s = scored.into_iter();
            for c in 0..self.chains.len() {
                if next[c] == u128::MAX {
                    continue;
                }
                let new = s.next().expect("one score per valid point");
                let accept = new >= current[c]
                    || (temp > 0.0 && self.rng.gen::<f32>() < ((new - current[c]) / temp).exp());
                if accept {
                    self.chains[c] = next[c];
                    current[c] = new;
                }
            }
        }
        let mut top: Vec<(u128, f32)> = self
            .scores
            .iter()
            .filter(|(i, _)| !measured.contains(i))
            .map(|(i, s)| (*i, *s))
            .collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(want);
        Ok(top)
    }

    /// Greedy pick of `n` from scored candidates: score (normalised to `[0, 1]`)
    /// plus the share of knobs whose value the pick does not yet cover.
    fn pick_diverse(&self, space: &Space, cands: &[(u128, f32)], n: usize) -> Vec<u128> {
        let (lo, hi) = cands
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), c| (l.min(c.1), h.max(c.1)));
        let span = (hi - lo).max(1e-9);
        let digits: Vec<Vec<usize>> = cands.iter().map(|c| space.digits(c.0)).collect();
        let mut covered: Vec<HashSet<usize>> = vec![HashSet::new(); space.knobs.len()];
        let mut taken = vec![false; cands.len()];
        let mut out = Vec::new();
        while out.len() < n {
            let best = (0..cands.len())
                .filter(|&c| !taken[c])
                .map(|c| {
                    let new = digits[c]
                        .iter()
                        .zip(&covered)
                        .filter(|(d, cov)| !cov.contains(d))
                        .count();
                    let gain = (cands[c].1 - lo) / span + new as f32 / space.knobs.len() as f32;
                    (c, gain)
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((c, _)) = best else { break };
            taken[c] = true;
            for (d, cov) in digits[c].iter().zip(covered.iter_mut()) {
                cov.insert(*d);
            }
            out.push(cands[c].0);
        }
        out
    }

    fn refit(&mut self, space: &Space) -> Result<(), ModelError> {
        let max = self
            .observed
            .iter()
            .filter_map(|o| o.1)
            .fold(0.0f64, f64::max);
        if self.observed.len() < self.opts.min_train || max <= 0.0 {
            return Ok(());
        }
        let mut data = TrainingSet {
            x: Matrix::new(self.featurizer.len()),
            ..TrainingSet::default()
        };
        let observed = self.observed.clone();
        for (i, g) in &observed {
            let row = self.features_of(space, *i).to_vec();
            data.x.push(&row);
            data.y.push((g.unwrap_or(0.0) / max) as f32);
        }
        let t = Instant::now();
        self.model.fit(&data)?;
        let train = self.model.predict(&data.x, None)?;
        self.overhead.fit += t.elapsed();
        self.overhead.fits += 1;
        let mean = train.iter().sum::<f32>() / train.len() as f32;
        let var = train.iter().map(|p| (p - mean).powi(2)).sum::<f32>() / train.len() as f32;
        self.scale = var.sqrt().max(1e-6);
        self.scores.clear();
        self.fitted = true;
        Ok(())
    }
}

impl Tuner for ModelTuner {
    fn name(&self) -> &str {
        &self.name
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        let mut out: Vec<u128> = self
            .seeds
            .iter()
            .copied()
            .filter(|i| !measured.contains(i))
            .take(n)
            .collect();
        let mut seen = measured.clone();
        seen.extend(out.iter().copied());
        let left = n - out.len();
        if left == 0 {
            return out;
        }
        if !self.fitted {
            out.extend(random_fresh(&mut self.rng, space, left, &seen));
            return out;
        }
        let picked = match self.anneal(space, left * self.opts.pool, &seen) {
            Ok(cands) if self.opts.diversity => self.pick_diverse(space, &cands, left),
            Ok(cands) => cands.iter().take(left).map(|c| c.0).collect(),
            // A model that cannot score leaves the search random, not stopped.
            Err(_) => Vec::new(),
        };
        for i in picked {
            if self.rng.gen_bool(self.opts.epsilon) {
                continue; // this slot goes to a random config below
            }
            seen.insert(i);
            out.push(i);
        }
        let short = n.saturating_sub(out.len());
        out.extend(random_fresh(&mut self.rng, space, short, &seen));
        out
    }

    fn observe(&mut self, space: &Space, results: &[(u128, Option<f64>)]) {
        self.observed.extend_from_slice(results);
        if self.refit(space).is_err() {
            self.fitted = false;
        }
    }
}

/// The model-guided tuner with XGBoost and the given objective.
pub fn xgb_tuner(
    w: &Workload,
    objective: Objective,
    opts: SearchOptions,
    seed: u64,
) -> Result<ModelTuner, ModelError> {
    let model = crate::model::default_model(objective, seed)?;
    Ok(ModelTuner::new(w, model, opts, seed))
}
