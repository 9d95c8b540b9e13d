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
//! - Transfer learning (as AutoTVM's): a global model fitted on the history of
//!   earlier workloads, over features that keep their meaning across shapes and
//!   operators (`FeatureSet::Curve`), guides the search from the first batch;
//!   once there are local trials, its prediction is the base margin the local
//!   model learns a correction to, with a weight that fades as local trials
//!   accumulate.
//! - Few-shot tuning ([`few_shot`]): the global model is a pre-trained one
//!   shipped with the project, the batches are small, and the search stops
//!   once the measured best is within a threshold of what the model, calibrated
//!   on the trials so far, expects of the configs it has not measured. Without
//!   XGBoost there is no local model: the pre-trained one picks the first
//!   batch, and later ones are bred from the measured configs (the genetic
//!   tuner's operators), ranked by the model where its scores track the
//!   measurements. The stop needs a batch past the first that did not improve;
//!   three that improved little end the search whatever the model expects.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use autotune_codegen::space::KnobKind;
use autotune_codegen::{Config, Isa, Space, Workload};

use crate::compile_cost::SourceSizes;
use crate::features::{FeatureSet, Featurizer};
use crate::history::{History, Reached};
use crate::model::{CostModel, Matrix, ModelError, Objective, TrainingSet};
use crate::parallel;
use crate::tuner::{random_fresh, GeneticTuner, Tuner};

/// Configs a search featurises or checks at once past which it does so on
/// every core ([`parallel::on_every_core_from`]): one takes 10-30 µs.
const PARALLEL_FROM: usize = 16;

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
    /// Pick the first batch from the best config of each register tile (the
    /// tile sizes and vector of every stage) rather than from the best configs
    /// overall ([`ModelTuner::tile_leaders`]; few-shot).
    pub tile_diverse: bool,
    /// Stop once a batch past the first improved the best by less than this
    /// share and the measured best is within it of what the model expects,
    /// once three did by less than [`FEW_SHOT_STALL`], or where the model
    /// cannot judge, two (few-shot); `None`: run the whole budget.
    pub stop_within: Option<f64>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            features: FeatureSet::Itervar,
            chains: 64,
            steps: 200,
            epsilon: 0.05,
            diversity: true,
            pool: 3,
            min_train: 16,
            max_search: Duration::from_secs(3),
            tile_diverse: false,
            stop_within: None,
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
    /// Fits and predictions that failed (the batch was then proposed at random).
    pub failures: usize,
    /// The first failure, for the tuner's note.
    pub first_failure: Option<String>,
}

/// The global model of transfer learning and what it reads.
struct Transfer {
    model: Box<dyn CostModel>,
    set: FeatureSet,
    features: HashMap<u128, Vec<f32>>,
}

pub struct ModelTuner {
    name: String,
    /// The local model, refitted on every batch; `None`: the global model
    /// scores alone (a pre-trained model where XGBoost is not built in).
    model: Option<Box<dyn CostModel>>,
    featurizer: Featurizer,
    opts: SearchOptions,
    rng: StdRng,
    features: HashMap<u128, Vec<f32>>,
    observed: Vec<(u128, Option<f64>)>,
    /// Scores under the current fit, and their spread (the annealing scale).
    scores: HashMap<u128, f32>,
    scale: f32,
    /// Whether the local model is fitted.
    fitted: bool,
    transfer: Option<Transfer>,
    /// Local trials over which the global model's weight fades to zero.
    pub fade: usize,
    chains: Vec<u128>,
    seeds: Vec<u128>,
    pub overhead: Overhead,
    /// What the model expected of the unmeasured configs at the last batch.
    outlook: Option<Outlook>,
    /// Without a local model: breeds the later batches from the measured
    /// configs (ranked by the global model where its scores track them).
    breeder: Option<GeneticTuner>,
    /// Whether a few-shot search that chose to stop has taken its last look
    /// ([`ModelTuner::unroll_steps`]); it proposes nothing more.
    looked: bool,
    /// The best throughput after each batch (0 before any config ran).
    bests: Vec<f64>,
    /// Each config carried to the first batch from the model's corpus
    /// (few-shot), with the corpus workload it comes from.
    carried: Vec<(u128, String)>,
    /// The register-tile starts the first batch measures.
    starts: Vec<u128>,
    /// Every config proposed so far: what the notes say was measured (a run
    /// whose budget ends first measures fewer than the tuner meant to).
    proposed: HashSet<u128>,
    /// What the nearest past workload of the operator reached (few-shot): the
    /// search does not stop while its best is under [`FEW_SHOT_PRIOR`] of it.
    prior: Option<Reached>,
    /// The candidates' C sizes, where the search knows the level they are
    /// compiled at: a large one is measured after every other.
    sizes: Option<SourceSizes>,
}

/// What the model, calibrated on the measured trials, expects of the best
/// unmeasured config, as a share of the measured best's throughput (1.1: 10%
/// faster); `None` where its scores do not track the measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct Outlook {
    pub trials: usize,
    pub expected: Option<f64>,
    /// Whether the search stopped on it.
    pub stopped: bool,
    /// The share of the expectation the search stops within (`stop_within`).
    pub within: f64,
    /// The measured best and the prior it fell short of, where it did.
    pub short_of: Option<(f64, Reached)>,
}

impl ModelTuner {
    pub fn new(
        w: &Workload,
        model: Option<Box<dyn CostModel>>,
        opts: SearchOptions,
        seed: u64,
    ) -> ModelTuner {
        let mut name = model
            .as_ref()
            .map_or("pretrained".to_string(), |m| m.name());
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
            transfer: None,
            fade: 128,
            chains: Vec::new(),
            seeds: Vec::new(),
            overhead: Overhead::default(),
            outlook: None,
            breeder: None,
            looked: false,
            bests: Vec::new(),
            carried: Vec::new(),
            proposed: HashSet::new(),
            starts: Vec::new(),
            prior: None,
            sizes: None,
        }
    }

    /// The model's expectation at the last batch (few-shot).
    pub fn outlook(&self) -> Option<Outlook> {
        self.outlook.clone()
    }

    /// What a past workload of the operator reached at this thread count
    /// ([`History::reached`]): a few-shot search does not stop far below it.
    pub fn with_prior(mut self, prior: Option<Reached>) -> ModelTuner {
        self.prior = prior;
        self
    }

    /// Candidates are compiled at `isa`: one whose C is far larger than the
    /// measured configs' ([`crate::compile_cost`]) is measured after every other.
    pub fn compiled_at(mut self, w: &Workload, isa: Isa) -> ModelTuner {
        self.sizes = Some(SourceSizes::new(w, isa));
        self
    }

    /// Configs to measure first and to start chains from; those not in the
    /// space (or not sensible there) are ignored.
    pub fn with_seeds(mut self, space: &Space, configs: &[Config]) -> ModelTuner {
        for c in configs {
            if let Ok(i) = space.index_of(c).map(|i| space.canonical(i)) {
                if space.sensible(c) && !self.seeds.contains(&i) {
                    self.seeds.push(i);
                }
            }
        }
        self
    }

    /// Up to `n` of `starts` ([`Space::register_tile_starts`]) as seeds: the
    /// model's best and the generator's first in turn (the given order alone
    /// where no model scores yet, a search's first batch without transfer, or
    /// where the generator ranks them by cost, a GEMM's:
    /// [`Space::starts_ranked_by_cost`]).
    pub fn with_ranked_starts(mut self, space: &Space, starts: &[Config], n: usize) -> ModelTuner {
        let fresh: Vec<(u128, &Config)> = starts
            .iter()
            .filter_map(|c| Some((space.canonical(space.index_of(c).ok()?), c)))
            .filter(|(i, c)| space.sensible(c) && !self.seeds.contains(i))
            .collect();
        let points: Vec<u128> = fresh.iter().map(|f| f.0).collect();
        let given: Vec<usize> = (0..fresh.len()).collect();
        let mut ranked = given.clone();
        if self.can_score() && !space.starts_ranked_by_cost() {
            match self.score(space, &points) {
                Ok(s) => ranked.sort_by(|&a, &b| s[b].total_cmp(&s[a])),
                Err(e) => self.failed(&e),
            }
        }
        // The model's pick and the generator's in turn (a model that never
        // measured this family may rank it poorly). Not one per vector axis:
        // a second start of another axis (a conv's pixels rather than its
        // channels) made ResNet-18's cold build 0.91× as fast
        // (`resnet18-cold-20261206-070449.log`).
        let mut taken: Vec<usize> = Vec::new();
        for turn in 0..n {
            let from = if turn % 2 == 0 { &ranked } else { &given };
            taken.extend(from.iter().find(|o| !taken.contains(o)).copied());
        }
        self.starts = taken.iter().map(|&t| fresh[t].0).collect();
        self.seeds.extend(self.starts.iter().copied());
        self
    }

    /// Transfer learning from `global`, a model fitted on the history of other
    /// workloads over `set` features (see [`transfer_model`]).
    pub fn with_transfer(mut self, global: Box<dyn CostModel>, set: FeatureSet) -> ModelTuner {
        self.name.push_str("-transfer");
        self.transfer = Some(Transfer {
            model: global,
            set,
            features: HashMap::new(),
        });
        self
    }

    /// Computes (once) the local features (none without a local model) and,
    /// with transfer, the global ones of every config of `points`, on every
    /// core: featurising is most of the search's own time, and nothing else
    /// runs between batches.
    fn describe(&mut self, space: &Space, points: &[u128]) {
        let fresh = parallel::unknown(points, |i| self.features.contains_key(&i));
        if fresh.is_empty() {
            return;
        }
        let t = Instant::now();
        let local = self.model.is_some();
        let mut sets = Vec::new();
        if local {
            sets.push(self.featurizer.set());
        }
        sets.extend(self.transfer.as_ref().map(|g| g.set));
        let featurizer = &self.featurizer;
        let described = parallel::on_every_core_from(&fresh, PARALLEL_FROM, |&i| {
            featurizer
                .features_sets(&space.config_at(i), &sets)
                .expect("configs of the space lower")
        });
        for (i, mut f) in fresh.into_iter().zip(described) {
            if let Some(g) = &mut self.transfer {
                g.features.insert(i, f.pop().expect("one vector per set"));
            }
            let own = if local {
                f.pop().expect("one vector per set")
            } else {
                Vec::new()
            };
            self.features.insert(i, own);
        }
        self.overhead.features += t.elapsed();
    }

    /// Weight of the global model with `n` local trials: 1 until the local model
    /// exists, then fading linearly to 0 at `fade` trials.
    fn global_weight(&self) -> f32 {
        if !self.fitted {
            return 1.0;
        }
        (1.0 - self.observed.len() as f32 / self.fade.max(1) as f32).max(0.0)
    }

    /// The global model's weighted margins for `points`, with transfer.
    fn base_margin(
        &mut self,
        space: &Space,
        points: &[u128],
    ) -> Result<Option<Vec<f32>>, ModelError> {
        let weight = self.global_weight();
        if self.transfer.is_none() || weight == 0.0 {
            return Ok(None);
        }
        self.describe(space, points);
        let g = self.transfer.as_ref().expect("checked above");
        let mut x = Matrix::new(g.features.get(&points[0]).map_or(0, Vec::len));
        for i in points {
            x.push(&g.features[i]);
        }
        let p = g.model.predict(&x, None)?;
        Ok(Some(p.into_iter().map(|v| v * weight).collect()))
    }

    /// Whether there is a model to score with (local, or global by itself).
    fn failed(&mut self, e: &ModelError) {
        self.overhead.failures += 1;
        self.overhead
            .first_failure
            .get_or_insert_with(|| e.to_string());
    }

    fn can_score(&self) -> bool {
        self.fitted || self.transfer.is_some()
    }

    /// Model scores of `points`, computing only those not scored under this fit.
    fn score(&mut self, space: &Space, points: &[u128]) -> Result<Vec<f32>, ModelError> {
        let fresh = parallel::unknown(points, |i| self.scores.contains_key(&i));
        if !fresh.is_empty() {
            self.describe(space, &fresh);
            let mut x = Matrix::new(self.featurizer.len());
            if self.model.is_some() {
                for i in &fresh {
                    x.push(&self.features[i]);
                }
            }
            let t = Instant::now();
            let base = self.base_margin(space, &fresh)?;
            let p = match (&self.model, base) {
                (Some(m), base) if self.fitted => m.predict(&x, base.as_deref())?,
                (_, Some(base)) => base,
                (_, None) => return Err(ModelError::NotFitted),
            };
            self.overhead.predict += t.elapsed();
            self.overhead.scored += fresh.len();
            self.scores.extend(fresh.into_iter().zip(p));
        }
        Ok(points.iter().map(|i| self.scores[i]).collect())
    }

    fn neighbour(&mut self, space: &Space, i: u128) -> u128 {
        let mut d = space.digits(i);
        let live = space.live_knobs(&d);
        let movable: Vec<usize> = (0..d.len())
            .filter(|&k| live[k] && space.knobs[k].choices.len() > 1)
            .collect();
        if movable.is_empty() {
            return i;
        }
        let k = movable[self.rng.gen_range(0..movable.len())];
        let n = space.knobs[k].choices.len();
        d[k] = (d[k] + self.rng.gen_range(1..n)) % n;
        space.canonical(space.from_digits(&d))
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
        if !self.fitted {
            // Scored by the global model alone: anneal on the spread of its scores.
            self.scale = spread(&current);
        }
        let start = Instant::now();
        for step in 0..self.opts.steps {
            if start.elapsed() > self.opts.max_search {
                break;
            }
            let temp = self.scale * (1.0 - step as f32 / self.opts.steps as f32);
            // A step to a config of unsensible code size is not taken.
            let steps: Vec<u128> = (0..self.chains.len())
                .map(|c| self.neighbour(space, self.chains[c]))
                .collect();
            let sensible = parallel::on_every_core_from(&steps, PARALLEL_FROM, |&i| {
                space.sensible(&space.config_at(i))
            });
            let next: Vec<Option<u128>> = steps
                .into_iter()
                .zip(sensible)
                .map(|(i, ok)| ok.then_some(i))
                .collect();
            let valid: Vec<u128> = next.iter().flatten().copied().collect();
            let mut s = self.score(space, &valid)?.into_iter();
            for (c, step) in next.into_iter().enumerate() {
                let Some(next) = step else { continue };
                let new = s.next().expect("one score per valid point");
                let accept = new >= current[c]
                    || (temp > 0.0 && self.rng.gen::<f32>() < ((new - current[c]) / temp).exp());
                if accept {
                    self.chains[c] = next;
                    current[c] = new;
                }
            }
        }
        Ok(self.top_unmeasured(want, measured))
    }

    /// The `want` best-scored configs scored under this fit and not in
    /// `measured`, best first.
    fn top_unmeasured(&self, want: usize, measured: &HashSet<u128>) -> Vec<(u128, f32)> {
        let mut top: Vec<(u128, f32)> = self
            .scores
            .iter()
            .filter(|(i, _)| !measured.contains(i))
            .map(|(i, s)| (*i, *s))
            .collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(want);
        top
    }

    /// Greedy pick of `n` from scored candidates: score (normalised to `[0, 1]`)
    /// plus the share of knobs whose value the pick does not yet cover. A
    /// candidate the models see as they see one already picked comes after
    /// every other: it scores the same, and measuring it spends a slot on a
    /// difference the models cannot rank (`pack.N=4` against `pack.N=1`: the
    /// features do not describe prefetches), while its new knob value would
    /// have put it first. So does a candidate whose C is large
    /// ([`crate::compile_cost`]): slow to compile, and rarely the best.
    pub(crate) fn pick_diverse(
        &mut self,
        space: &Space,
        cands: &[(u128, f32)],
        n: usize,
    ) -> Vec<u128> {
        let ids: Vec<u128> = cands.iter().map(|c| c.0).collect();
        let large = self.large(space, &ids);
        let (lo, hi) = cands
            .iter()
            .fold((f32::MAX, f32::MIN), |(l, h), c| (l.min(c.1), h.max(c.1)));
        let span = (hi - lo).max(1e-9);
        let digits: Vec<Vec<usize>> = cands.iter().map(|c| space.digits(c.0)).collect();
        let looks: Vec<Vec<u32>> = cands.iter().map(|c| self.seen_as(c.0)).collect();
        let mut covered: Vec<HashSet<usize>> = vec![HashSet::new(); space.knobs.len()];
        let mut seen: HashSet<&[u32]> = HashSet::new();
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
                    let mut gain = (cands[c].1 - lo) / span + new as f32 / space.knobs.len() as f32;
                    // (Both terms are at most 1.)
                    if seen.contains(looks[c].as_slice()) {
                        gain -= 2.0;
                    }
                    if large[c] {
                        gain -= 2.0;
                    }
                    (c, gain)
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((c, _)) = best else { break };
            taken[c] = true;
            for (d, cov) in digits[c].iter().zip(covered.iter_mut()) {
                cov.insert(*d);
            }
            seen.insert(&looks[c]);
            out.push(cands[c].0);
        }
        out
    }

    /// The best-scored config not in `seen` of each register tile (the digits
    /// of every stage's tile and vector knobs), best first, at most `n`; the
    /// tiles of `taken` (the batch's seeds) after every other.
    ///
    /// Why: the model's best-scored configs are mostly one register tile in
    /// several loop orders and blockings, and the tile sets what a conv
    /// reaches. ResNet-18's first 3×3 conv, tuned twice from the same corpus
    /// seeds: one annealing seed's three picks were all 16 channels × 7
    /// pixels × 2 rows (272-304 GFLOP/s), the other's all 16 channels × 2
    /// pixels × 7 rows (130-154), and the breeding after it never left the
    /// seeds' tiles (225 at 32 trials).
    fn tile_leaders(
        &self,
        space: &Space,
        seen: &HashSet<u128>,
        taken: &[u128],
        n: usize,
    ) -> Vec<(u128, f32)> {
        let tile_knobs: Vec<usize> = (0..space.knobs.len())
            .filter(|&k| {
                matches!(
                    space.knobs[k].name.kind,
                    KnobKind::Tile(_) | KnobKind::Vector
                )
            })
            .collect();
        // A dead knob (the tile of a stage fused into its producer) does not
        // make another tile.
        let tile = |i: u128| -> Vec<usize> {
            let d = space.digits(i);
            let live = space.live_knobs(&d);
            tile_knobs
                .iter()
                .map(|&k| if live[k] { d[k] } else { usize::MAX })
                .collect()
        };
        let mut best: HashMap<Vec<usize>, (u128, f32)> = HashMap::new();
        for (&i, &score) in self.scores.iter().filter(|(i, _)| !seen.contains(i)) {
            let b = best.entry(tile(i)).or_insert((i, score));
            if score > b.1 || (score == b.1 && i < b.0) {
                *b = (i, score);
            }
        }
        let taken: HashSet<Vec<usize>> = taken.iter().map(|&i| tile(i)).collect();
        let mut leaders: Vec<(bool, (u128, f32))> = best
            .into_iter()
            .map(|(t, b)| (taken.contains(&t), b))
            .collect();
        leaders.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1 .1.total_cmp(&a.1 .1))
                .then(a.1 .0.cmp(&b.1 .0))
        });
        leaders.into_iter().take(n).map(|l| l.1).collect()
    }

    /// Which of `pool` are large candidates (none where the search does not
    /// size them).
    fn large(&mut self, space: &Space, pool: &[u128]) -> Vec<bool> {
        match &mut self.sizes {
            Some(s) => s.large(space, pool),
            None => vec![false; pool.len()],
        }
    }

    /// What the models read of scored config `i`: its local and global
    /// features (bit patterns, to compare), empty where it has none.
    fn seen_as(&self, i: u128) -> Vec<u32> {
        let global = self.transfer.as_ref().and_then(|g| g.features.get(&i));
        self.features
            .get(&i)
            .into_iter()
            .chain(global)
            .flatten()
            .map(|x| x.to_bits())
            .collect()
    }

    fn refit(&mut self, space: &Space) -> Result<(), ModelError> {
        if self.model.is_none() {
            // Nothing to refit: the next batch's chains start around the best
            // measured configs instead of where the last ones ended.
            self.chains.clear();
            return Ok(());
        }
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
        let observed: Vec<u128> = self.observed.iter().map(|o| o.0).collect();
        self.describe(space, &observed);
        for (i, g) in self.observed.clone() {
            data.x.push(&self.features[&i]);
            data.y.push((g.unwrap_or(0.0) / max) as f32);
        }
        let t = Instant::now();
        // The margin the local model corrects: the global model at the weight it
        // will have once this fit is in place.
        self.fitted = true;
        data.base_margin = self.base_margin(space, &observed)?;
        let model = self.model.as_mut().expect("checked above");
        let fitted = model.fit(&data);
        self.fitted = fitted.is_ok();
        fitted?;
        let train = model.predict(&data.x, data.base_margin.as_deref())?;
        self.overhead.fit += t.elapsed();
        self.overhead.fits += 1;
        self.scale = spread(&train);
        self.scores.clear();
        Ok(())
    }
}

/// Standard deviation of scores (kept above zero): the annealing temperature's unit.
fn spread(scores: &[f32]) -> f32 {
    let n = scores.len().max(1) as f32;
    let mean = scores.iter().sum::<f32>() / n;
    let var = scores.iter().map(|p| (p - mean).powi(2)).sum::<f32>() / n;
    var.sqrt().max(1e-6)
}

/// The global model of transfer learning: `objective` fitted on `history`
/// (one ranking group per past workload). `None` when the history holds no
/// measured trial.
pub fn transfer_model(
    history: &History,
    objective: Objective,
    seed: u64,
) -> Result<Option<Box<dyn CostModel>>, ModelError> {
    if history.is_empty() {
        return Ok(None);
    }
    let mut model = crate::model::default_model(objective, seed)?;
    model.fit(&history.training_set())?;
    Ok(Some(model))
}

impl ModelTuner {
    /// The next batch ([`Tuner::propose`]): the seeds not measured yet, then
    /// the search's picks.
    fn next_batch(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
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
        if !self.can_score() {
            out.extend(random_fresh(&mut self.rng, space, left, &seen));
            return out;
        }
        if self.looked {
            return out; // a few-shot search's last look is measured: done
        }
        // Past the first batch, few-shot without a local model breeds its
        // batches; the fixed model only judges whether to stop, from the best
        // configs it scored and nobody measured. Annealing again would walk the
        // landscape it has scored once more (about half the tuner's time).
        let bred = self.breeder.is_some() && !self.observed.is_empty();
        let cands = if bred && self.model.is_none() {
            Ok(self.top_unmeasured(left * self.opts.pool, &seen))
        } else {
            self.anneal(space, left * self.opts.pool, &seen)
        };
        let picked = match cands {
            // Once, before it stops: the best's next unroll depths.
            Ok(cands) if self.should_stop(space, &cands) => {
                return match std::mem::replace(&mut self.looked, true) {
                    false => self.unroll_steps(space, &seen),
                    true => Vec::new(),
                };
            }
            Ok(_) if bred => self.breed(space, left, &seen),
            Ok(_) if self.opts.tile_diverse && self.observed.is_empty() => {
                let leaders = self.tile_leaders(space, &seen, &out, left * self.opts.pool);
                self.pick_diverse(space, &leaders, left)
            }
            Ok(cands) if self.opts.diversity => self.pick_diverse(space, &cands, left),
            Ok(cands) => cands.iter().take(left).map(|c| c.0).collect(),
            // A model that cannot score leaves the search random, not stopped
            // (and the tuner's notes say so).
            Err(e) => {
                self.failed(&e);
                Vec::new()
            }
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
}

impl Tuner for ModelTuner {
    fn name(&self) -> &str {
        &self.name
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        let out = self.next_batch(space, n, measured);
        self.proposed.extend(out.iter().copied());
        out
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let o = &self.overhead;
        vec![
            ("features_seconds", o.features.as_secs_f64()),
            ("fit_seconds", o.fit.as_secs_f64()),
            ("predict_seconds", o.predict.as_secs_f64()),
            ("configs_scored", o.scored as f64),
            ("fits", o.fits as f64),
            ("model_failures", o.failures as f64),
            (
                "sizing_seconds",
                self.sizes.as_ref().map_or(0.0, |s| s.spent.as_secs_f64()),
            ),
            (
                "configs_large",
                self.sizes.as_ref().map_or(0.0, |s| s.large.len() as f64),
            ),
        ]
    }

    fn notes(&self) -> Vec<String> {
        let o = &self.overhead;
        let mut notes: Vec<String> = o
            .first_failure
            .iter()
            .map(|first| {
                format!(
                    "the cost model failed {} time(s) ({first}); those batches were proposed at random",
                    o.failures
                )
            })
            .collect();
        let starts = self
            .starts
            .iter()
            .filter(|i| self.proposed.contains(i))
            .count();
        if starts > 0 {
            notes.push(format!(
                "the first batch measured {starts} register-tile start(s) (configs shaped as a hand-written micro-kernel)"
            ));
        }
        let mut from: Vec<String> = self
            .carried
            .iter()
            .filter(|(i, _)| self.proposed.contains(i))
            .map(|(_, w)| w.clone())
            .collect();
        if !from.is_empty() {
            let n = from.len();
            from.dedup();
            notes.push(format!(
                "few-shot: the first batch measured {n} config(s) carried from the model's corpus ({})",
                from.join(", ")
            ));
        }
        // Judged before the last batch was proposed; the note counts every trial.
        notes.extend(self.outlook.as_ref().map(|o| {
            Outlook {
                trials: self.observed.len(),
                ..o.clone()
            }
            .to_string()
        }));
        notes
    }

    fn observe(&mut self, space: &Space, results: &[(u128, Option<f64>)]) {
        self.observed.extend_from_slice(results);
        let best = self.observed.iter().filter_map(|o| o.1).reduce(f64::max);
        self.bests.push(best.unwrap_or(0.0));
        if let Some(s) = &mut self.sizes {
            s.measured(space, &results.iter().map(|r| r.0).collect::<Vec<_>>());
        }
        if let Some(b) = &mut self.breeder {
            b.observe(space, results);
        }
        if let Err(e) = self.refit(space) {
            self.failed(&e);
            self.fitted = false;
            self.scores.clear();
        }
    }
}

impl ModelTuner {
    /// What the model expects of an unmeasured config scored `top`, relative
    /// to the measured best: a least-squares line from score to throughput
    /// (as a share of the best) through the successful trials, read at `top`,
    /// plus the line's residual spread (its error on those trials: the best
    /// unmeasured configs score below the measured ones by construction, so
    /// the line alone would always call the search done). `None` with fewer
    /// than four trials, or where the scores do not rise with throughput
    /// (correlation below 0.3): then the model cannot judge.
    fn expected_gain(&mut self, space: &Space, top: f32) -> Result<Option<f64>, ModelError> {
        let ok: Vec<(u128, f64)> = self
            .observed
            .iter()
            .filter_map(|(i, g)| g.map(|g| (*i, g)))
            .collect();
        let best = ok.iter().map(|o| o.1).fold(0.0f64, f64::max);
        if ok.len() < 4 || best <= 0.0 {
            return Ok(None);
        }
        let ids: Vec<u128> = ok.iter().map(|o| o.0).collect();
        let s: Vec<f64> = self
            .score(space, &ids)?
            .into_iter()
            .map(f64::from)
            .collect();
        let g: Vec<f64> = ok.iter().map(|o| o.1 / best).collect();
        let n = s.len() as f64;
        let (ms, mg) = (s.iter().sum::<f64>() / n, g.iter().sum::<f64>() / n);
        let cov: f64 = s.iter().zip(&g).map(|(a, b)| (a - ms) * (b - mg)).sum();
        let (vs, vg) = (
            s.iter().map(|a| (a - ms).powi(2)).sum::<f64>(),
            g.iter().map(|b| (b - mg).powi(2)).sum::<f64>(),
        );
        if vs <= 0.0 || vg <= 0.0 || cov / (vs * vg).sqrt() < 0.3 {
            return Ok(None);
        }
        let slope = cov / vs;
        let line = |x: f64| mg + slope * (x - ms);
        let residual = s
            .iter()
            .zip(&g)
            .map(|(a, b)| (b - line(*a)).powi(2))
            .sum::<f64>();
        let spread = (residual / (n - 2.0)).sqrt();
        Ok(Some(line(f64::from(top)) + spread))
    }

    /// A later batch without a local model: offspring of the measured configs
    /// (the genetic tuner's crossover and mutation), the `n` best by the
    /// global model's score where its scores track this workload, else as bred.
    fn breed(&mut self, space: &Space, n: usize, seen: &HashSet<u128>) -> Vec<u128> {
        let pool = n * self.opts.pool;
        let bred = self
            .breeder
            .as_mut()
            .expect("called with a breeder")
            .propose(space, pool, seen);
        let tracks = self.outlook.as_ref().is_some_and(|o| o.expected.is_some());
        if !tracks {
            // As bred, the large ones last (a stable sort).
            let large = self.large(space, &bred);
            let mut order: Vec<(u128, bool)> = bred.into_iter().zip(large).collect();
            order.sort_by_key(|b| b.1);
            return order.into_iter().take(n).map(|b| b.0).collect();
        }
        match self.score(space, &bred) {
            Ok(scores) => {
                let cands: Vec<(u128, f32)> = bred.into_iter().zip(scores).collect();
                self.pick_diverse(space, &cands, n)
            }
            Err(e) => {
                self.failed(&e);
                bred.into_iter().take(n).collect()
            }
        }
    }

    /// A few-shot search's last look before it stops early, where its best
    /// is a register-tile start: the start's neighbours along its `unroll`
    /// knobs (the next depth up and down), unmeasured. A start takes its
    /// unroll from the default schedule, and which depth a tile runs best at
    /// is what the pre-trained model tells least (a C80 48² 3×3 conv's
    /// start: 424 GFLOP/s at unroll 2 against 401 at 4 on two threads,
    /// where 160 xgb-rank trials never measured it; Intel Xeon). Only
    /// there, and only at the end: stepping the best's unroll in the first
    /// bred batch kept ResNet-18's cold build searching for gains of 1-3%
    /// (201 s against 157, `resnet18-cold-20261206-132103.log`), and a last
    /// look at every search's best cost it 181-183 s against 153-174
    /// (`resnet18-cold-20261206-133202.log`, `-140518.log`).
    fn unroll_steps(&self, space: &Space, seen: &HashSet<u128>) -> Vec<u128> {
        let Some(best) = self
            .observed
            .iter()
            .filter_map(|(i, g)| g.map(|g| (*i, g)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return Vec::new();
        };
        if !self.starts.contains(&best.0) {
            return Vec::new();
        }
        let digits = space.digits(best.0);
        let live = space.live_knobs(&digits);
        let mut out = Vec::new();
        for (k, knob) in space.knobs.iter().enumerate() {
            if !live[k] || knob.name.kind != KnobKind::Unroll {
                continue;
            }
            for next in [digits[k].checked_sub(1), Some(digits[k] + 1)] {
                let Some(next) = next.filter(|&d| d < knob.choices.len()) else {
                    continue;
                };
                let mut d = digits.clone();
                d[k] = next;
                let i = space.canonical(space.from_digits(&d));
                if !seen.contains(&i) && !out.contains(&i) {
                    out.push(i);
                }
            }
        }
        out
    }

    /// Whether the few-shot search is done: a batch past the first stopped
    /// improving and the measured best is within `stop_within` of what the
    /// model expects of `cands`, the best unmeasured configs it found; or,
    /// where the model cannot judge, two batches past the first improved the
    /// best by less than [`FEW_SHOT_STALL`]. Records the outlook either way.
    fn should_stop(&mut self, space: &Space, cands: &[(u128, f32)]) -> bool {
        let Some(within) = self.opts.stop_within else {
            return false;
        };
        if self.observed.len() < 4 {
            return false; // the first batch is the model's pick alone
        }
        let top = cands.iter().map(|c| c.1).fold(f32::MIN, f32::max);
        let expected = match self.expected_gain(space, top) {
            Ok(e) => e,
            Err(e) => {
                self.failed(&e);
                None
            }
        };
        // The model's expectation is relative to its own picks, which may all
        // sit in one poor region: a same-operator workload that reached far
        // more says so where the calibration cannot.
        let best = self.bests.last().copied().unwrap_or(0.0);
        let short_of = self
            .prior
            .clone()
            .filter(|p| best < FEW_SHOT_PRIOR * p.gflops)
            .map(|p| (best, p));
        let stopped = short_of.is_none() && done(&self.bests, expected, within);
        self.outlook = Some(Outlook {
            trials: self.observed.len(),
            expected,
            stopped,
            within,
            short_of,
        });
        stopped
    }
}

/// The few-shot stop, from the best after each batch (`bests`, the first
/// batch's first) and what the model expects of the configs it has not
/// measured (`None` where its scores do not track the measurements).
fn done(bests: &[f64], expected: Option<f64>, within: f64) -> bool {
    match expected {
        // The model's calibration rests on its own picks, which score alike:
        // it is trusted only once a batch past the first stopped improving
        // too. Three that gained little end the search whatever it expects:
        // in ResNet-18's cold builds such searches ran their whole budget
        // (48 trials) while the model expected 6–18% more, and replayed on
        // 28 runs of 40 or more trials the rule stopped 14 of them 8–16 trials
        // earlier, their best at 0.99–1.00 of the budget's in all but one
        // (0.888) (docs/experiments.md).
        Some(e) => {
            (stalled(bests, 1, within) && e <= 1.0 + within) || stalled(bests, 3, FEW_SHOT_STALL)
        }
        // Where the model cannot judge, the measurements alone: two batches
        // past the first that gained little.
        None => stalled(bests, 2, FEW_SHOT_STALL),
    }
}

/// Whether the last `n` batches together improved the best (`bests`, after
/// each batch) by less than the share `by`, where some config ran.
fn stalled(bests: &[f64], n: usize, by: f64) -> bool {
    let last = bests.last().copied().unwrap_or(0.0);
    bests.len() > n && last > 0.0 && last <= bests[bests.len() - 1 - n] * (1.0 + by)
}

impl std::fmt::Display for Outlook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.expected, self.stopped) {
            (Some(e), true) if e > 1.0 + self.within => write!(
                f,
                "few-shot: stopped after {} trials, its last three batches improving the best by under {:.0}%, though the model expects {:+.1}% from the configs it did not measure",
                self.trials,
                FEW_SHOT_STALL * 100.0,
                (e - 1.0) * 100.0
            ),
            (Some(e), true) => write!(
                f,
                "few-shot: stopped after {} trials, the model expecting {:+.1}% at most from the configs it did not measure",
                self.trials,
                (e - 1.0).max(0.0) * 100.0
            ),
            (Some(e), false) => write!(
                f,
                "few-shot: the budget ended after {} trials with the model still expecting {:+.1}% from the configs it did not measure",
                self.trials,
                (e - 1.0) * 100.0
            ),
            (None, true) => write!(
                f,
                "few-shot: stopped after {} trials, its last two batches improving the best by under {:.0}%; the model's scores do not track this workload's measurements, so how far the search is from converged is unknown",
                self.trials,
                FEW_SHOT_STALL * 100.0
            ),
            (None, false) => write!(
                f,
                "few-shot: after {} trials the model's scores do not track this workload's measurements, so how far the search is from converged is unknown",
                self.trials
            ),
        }?;
        match &self.short_of {
            Some((best, p)) => write!(
                f,
                "; it did not stop early because its best ({best:.2} GFLOP/s) is under {:.0}% of the {:.2} that {} reached",
                FEW_SHOT_PRIOR * 100.0,
                p.gflops,
                p.workload
            ),
            None => Ok(()),
        }
    }
}

/// Configs a few-shot search measures per batch, so that it can stop early.
pub const FEW_SHOT_BATCH: usize = 8;

/// Register-tile starts ([`Space::register_tile_starts`]) a search measures
/// in its first batch: random and model-guided searches rarely met them (the
/// corpus's best 3×3 conv at C160 20×20 ran at 180 GFLOP/s, such a config at
/// 302), so a model and the configs carried from its corpus seldom propose
/// them.
pub const REGISTER_TILE_STARTS: usize = 2;

/// Share of a pre-trained model's scores a few-shot search is satisfied with:
/// it stops once the measured best is within 5% of what the model expects.
pub const FEW_SHOT_WITHIN: f64 = 0.05;

/// Where the model's scores do not track a workload's measurements, a
/// few-shot search stops once its last two batches together improved its
/// best by less than this. Those searches ran their whole budget (48 trials in a cold
/// build), bred from the measured configs; replayed on five such runs of
/// ResNet-18's layers, the rule would have stopped them after 24-40 trials
/// with the best within 2.3% of the budget's (docs/experiments.md).
pub const FEW_SHOT_STALL: f64 = 0.02;

/// Share of what the nearest past workload of the operator reached below
/// which a few-shot search does not stop early. Low, because smaller shapes
/// of an operator reach less (ResNet-18's 3×3 conv at 7×7 pixels: 0.73× of
/// its 14×14 layer); a search far below it has stopped in a poor region (its
/// 1×1 stride-2 conv at 14×14: 0.53× of the 28×28 one, where longer
/// searches found 1.2×).
pub const FEW_SHOT_PRIOR: f64 = 0.6;

/// The few-shot tuner: the pre-trained `global` model (over `set` features)
/// ranks the space from the first batch; with `refit`, a local XGBoost model
/// corrects it as measurements come (as transfer does), without, later
/// batches are bred from the measured configs; the search stops once a batch
/// past the first improved the best by less than `stop_within` (e.g.
/// [`FEW_SHOT_WITHIN`]) and the measured best is within that of what the
/// model expects, once three did by less than [`FEW_SHOT_STALL`], or, where
/// the model's scores do not track the measurements, two. `history`
/// adds seeds (the best configs of the most similar past workloads), not a
/// model; so does `corpus` (configs of the model's corpus carried to this
/// workload, with the workload each came from:
/// [`crate::pretrained::Loaded::seeds_for`]), after the others.
#[allow(clippy::too_many_arguments)]
pub fn few_shot(
    w: &Workload,
    global: Box<dyn CostModel>,
    set: FeatureSet,
    refit: bool,
    opts: SearchOptions,
    seed: u64,
    history: Option<&History>,
    seeds: &[Config],
    starts: &[Config],
    corpus: &[(Config, String)],
) -> Result<ModelTuner, ModelError> {
    let space = Space::new(&w.op, w.shapes());
    let mut seeds = starting_configs(w, &space, seeds, history);
    // Seeds are measured first: at most half of the first batch, so that the
    // model's own picks are measured too; the register-tile starts keep their
    // share of it.
    seeds.truncate(FEW_SHOT_BATCH / 2 - REGISTER_TILE_STARTS);
    let local = match refit {
        true => Some(crate::model::default_model(Objective::Rank, seed)?),
        false => None,
    };
    let mut t = ModelTuner::new(w, local, opts, seed)
        .with_transfer(global, set)
        .with_seeds(&space, &seeds)
        .with_ranked_starts(&space, starts, REGISTER_TILE_STARTS);
    t.name = if refit { "few-shot-refit" } else { "few-shot" }.to_string();
    if !refit {
        t.breeder = Some(GeneticTuner::new(seed));
    }
    // The corpus's configs fill the rest of that half; the notes name those taken.
    for (c, from) in corpus {
        if t.seeds.len() >= FEW_SHOT_BATCH / 2 {
            break;
        }
        let before = t.seeds.len();
        t = t.with_seeds(&space, std::slice::from_ref(c));
        if t.seeds.len() > before {
            let at = *t.seeds.last().expect("a seed was added");
            t.carried.push((at, from.clone()));
        }
    }
    Ok(t)
}

/// The model-guided tuner with XGBoost and the given objective, starting from
/// `seeds`, then two of `starts` ([`Space::register_tile_starts`]) and, when
/// `history` holds trials of other workloads, learning from them (transfer)
/// and starting from the best configs of the most similar ones.
pub fn xgb_tuner(
    w: &Workload,
    objective: Objective,
    opts: SearchOptions,
    seed: u64,
    history: Option<&History>,
    seeds: &[Config],
    starts: &[Config],
) -> Result<ModelTuner, ModelError> {
    let model = crate::model::default_model(objective, seed)?;
    let space = Space::new(&w.op, w.shapes());
    let seeds = starting_configs(w, &space, seeds, history);
    let mut t = ModelTuner::new(w, Some(model), opts, seed);
    if let Some(h) = history.filter(|h| !h.is_empty()) {
        if let (Some(global), Some(set)) = (transfer_model(h, objective, seed)?, h.set) {
            t = t.with_transfer(global, set);
        }
    }
    Ok(t.with_seeds(&space, &seeds)
        .with_ranked_starts(&space, starts, REGISTER_TILE_STARTS))
}

/// The configs a search starts from: the caller's `seeds`, then the best
/// configs of the most similar workloads of `history`.
fn starting_configs(
    w: &Workload,
    space: &Space,
    seeds: &[Config],
    history: Option<&History>,
) -> Vec<Config> {
    let mut out = seeds.to_vec();
    if let Some(h) = history.filter(|h| !h.is_empty()) {
        out.extend(h.seeds(w, space, 2, 8));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The few-shot stop: where the model expects more than its share, one
    /// batch past the first that gained nothing does not end the search; three
    /// that gained under 2% together do, whatever it expects; where it cannot
    /// judge, two do.
    #[test]
    fn three_batches_that_gained_little_stop_a_search_whatever_the_model_expects() {
        let w = FEW_SHOT_WITHIN;
        let hopeful = Some(1.10);
        assert!(!done(&[100.0, 150.0, 150.0], hopeful, w));
        assert!(!done(&[100.0, 150.0, 150.5, 151.0], hopeful, w));
        assert!(done(&[100.0, 150.0, 150.5, 151.0, 151.5], hopeful, w));
        assert!(!done(&[100.0, 150.0, 150.5, 151.0, 160.0], hopeful, w));
        assert!(done(&[100.0, 150.0, 150.0], Some(1.02), w));
        assert!(!done(&[100.0, 150.0, 150.0], None, w));
        assert!(done(&[100.0, 150.0, 150.5, 151.0], None, w));
    }

    /// A 3×3 conv's workload (C = K = 128 at 28²), its space, and the digits
    /// of its default config for AVX-512.
    fn conv_at_its_default() -> (Workload, Space, Vec<usize>) {
        let item: syn::ItemFn = syn::parse_str(crate::features::PROBES[1].1).unwrap();
        let attr = "R = 3, S = 3, specialize(C = 128, H = 28, W = 28, K = 128)";
        let op = autotune_lang::parse_operator(attr.parse().unwrap(), &item).unwrap();
        let w = Workload { op, spec: 0 };
        let space = Space::new(&w.op, w.shapes());
        let default = space.default_config_for(&w.op, w.shapes(), Isa::Avx512);
        let base = space.digits(space.index_of(&default).unwrap());
        (w, space, base)
    }

    /// The model's three best configs share one register tile; the first
    /// batch's picks come one per tile, the batch's seeds' tiles last.
    #[test]
    fn a_first_batch_picks_one_config_per_register_tile() {
        let (w, space, base) = conv_at_its_default();
        let live = space.live_knobs(&base);
        let knob = |kind: &dyn Fn(&KnobKind) -> bool| {
            (0..space.knobs.len())
                .find(|&k| {
                    live[k] && kind(&space.knobs[k].name.kind) && space.knobs[k].choices.len() > 2
                })
                .unwrap()
        };
        let tile = knob(&|k| matches!(k, KnobKind::Tile(_)));
        let order = knob(&|k| matches!(k, KnobKind::Order));
        let with = |t: usize, o: usize| {
            let mut d = base.clone();
            d[tile] = t;
            d[order] = o;
            space.canonical(space.from_digits(&d))
        };
        // Tile 0 in three loop orders scores best, then tiles 1 and 2.
        let scored = [
            (with(0, 0), 0.9),
            (with(0, 1), 0.8),
            (with(0, 2), 0.7),
            (with(1, 0), 0.6),
            (with(2, 0), 0.5),
        ];
        let mut t = ModelTuner::new(&w, None, SearchOptions::default(), 1);
        t.scores.extend(scored.iter().copied());
        let none = HashSet::new();
        let ids = |v: Vec<(u128, f32)>| v.into_iter().map(|c| c.0).collect::<Vec<_>>();
        assert_eq!(
            ids(t.tile_leaders(&space, &none, &[], 3)),
            [scored[0].0, scored[3].0, scored[4].0]
        );
        // Measured configs are not candidates; a seed's tile comes last.
        let seen: HashSet<u128> = [scored[0].0].into();
        assert_eq!(
            ids(t.tile_leaders(&space, &seen, &[scored[3].0], 3)),
            [scored[1].0, scored[4].0, scored[3].0]
        );
    }

    /// A last look steps the unroll of a best that is a register-tile start:
    /// its next depths up and down, those not measured yet.
    #[test]
    fn the_last_look_steps_a_starts_unroll() {
        let (w, space, base) = conv_at_its_default();
        let unroll = (0..space.knobs.len())
            .find(|&k| space.knobs[k].name.kind == KnobKind::Unroll)
            .expect("an unroll knob");
        assert!(space.knobs[unroll].choices.len() > 3);
        let with = |u: usize| {
            let mut d = base.clone();
            d[unroll] = u;
            space.canonical(space.from_digits(&d))
        };
        let mut t = ModelTuner::new(&w, None, SearchOptions::default(), 1);
        t.starts = vec![with(1)];
        t.observe(&space, &[(with(1), Some(100.0)), (with(3), Some(50.0))]);
        let mut seen: HashSet<u128> = [with(1), with(3)].into();
        assert_eq!(t.unroll_steps(&space, &seen), [with(0), with(2)]);
        seen.insert(with(0));
        assert_eq!(t.unroll_steps(&space, &seen), [with(2)]);
        // A best that is not a start: its unroll was searched.
        t.observe(&space, &[(with(3), Some(200.0))]);
        assert_eq!(t.unroll_steps(&space, &seen), Vec::<u128>::new());
    }
}
