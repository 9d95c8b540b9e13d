//! The tuner interface and the black-box tuners (random, grid, genetic), which
//! need no cost model. The model-guided tuner is in [`crate::search`].

use std::collections::HashSet;

use autotune_codegen::Space;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Proposes configs (as space indices) to measure.
pub trait Tuner {
    fn name(&self) -> &str;
    /// Up to `n` indices not in `measured`; fewer (or none) when the space is spent.
    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128>;
    /// Measured results: throughput, or `None` for a failed trial.
    fn observe(&mut self, _space: &Space, _results: &[(u128, Option<f64>)]) {}
    /// Figures about the tuner's own work (name, value), for reports.
    fn stats(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// What the user should know about how the search went (fallbacks).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Uniformly random configs.
pub struct RandomTuner {
    rng: StdRng,
}

impl RandomTuner {
    pub fn new(seed: u64) -> RandomTuner {
        RandomTuner {
            rng: StdRng::seed_from_u64(seed),
        }
    }
}

/// Random unmeasured indices of sensible code size, giving up after a bounded
/// number of draws.
pub fn random_fresh(
    rng: &mut StdRng,
    space: &Space,
    n: usize,
    measured: &HashSet<u128>,
) -> Vec<u128> {
    let mut out = Vec::new();
    let mut tries = 0;
    while out.len() < n && tries < 100 * n.max(1) {
        tries += 1;
        let i = space.canonical(rng.gen_range(0..space.size()));
        if space.sensible(&space.config_at(i)) && !measured.contains(&i) && !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

impl Tuner for RandomTuner {
    fn name(&self) -> &str {
        "random"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        random_fresh(&mut self.rng, space, n, measured)
    }
}

/// Every config in index order (for small spaces).
#[derive(Default)]
pub struct GridTuner {
    next: u128,
}

impl Tuner for GridTuner {
    fn name(&self) -> &str {
        "grid"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        let mut out = Vec::new();
        while out.len() < n && self.next < space.size() {
            if !measured.contains(&self.next) {
                out.push(self.next);
            }
            self.next += 1;
        }
        out
    }
}

/// A genetic algorithm over knob choices: tournament selection among the
/// measured configs, uniform crossover, per-knob mutation.
pub struct GeneticTuner {
    rng: StdRng,
    population: Vec<(u128, f64)>,
    /// Probability that a knob takes a random choice.
    pub mutation: f64,
    /// Size of the population kept (the best so far).
    pub elite: usize,
}

impl GeneticTuner {
    pub fn new(seed: u64) -> GeneticTuner {
        GeneticTuner {
            rng: StdRng::seed_from_u64(seed),
            population: Vec::new(),
            mutation: 0.1,
            elite: 16,
        }
    }

    fn pick(&mut self) -> u128 {
        let a = self.rng.gen_range(0..self.population.len());
        let b = self.rng.gen_range(0..self.population.len());
        if self.population[a].1 >= self.population[b].1 {
            self.population[a].0
        } else {
            self.population[b].0
        }
    }
}

impl Tuner for GeneticTuner {
    fn name(&self) -> &str {
        "genetic"
    }

    fn propose(&mut self, space: &Space, n: usize, measured: &HashSet<u128>) -> Vec<u128> {
        if self.population.len() < 2 {
            return random_fresh(&mut self.rng, space, n, measured);
        }
        let mut out = Vec::new();
        let mut tries = 0;
        while out.len() < n && tries < 100 * n.max(1) {
            tries += 1;
            let (a, b) = (space.digits(self.pick()), space.digits(self.pick()));
            let child: Vec<usize> = a
                .iter()
                .zip(&b)
                .zip(&space.knobs)
                .map(|((x, y), k)| {
                    if self.rng.gen_bool(self.mutation) {
                        self.rng.gen_range(0..k.choices.len())
                    } else if self.rng.gen_bool(0.5) {
                        *x
                    } else {
                        *y
                    }
                })
                .collect();
            let i = space.canonical(space.from_digits(&child));
            if space.sensible(&space.config_at(i)) && !measured.contains(&i) && !out.contains(&i) {
                out.push(i);
            }
        }
        if out.len() < n {
            let mut seen = measured.clone();
            seen.extend(out.iter().copied());
            out.extend(random_fresh(&mut self.rng, space, n - out.len(), &seen));
        }
        out
    }

    fn observe(&mut self, _space: &Space, results: &[(u128, Option<f64>)]) {
        for &(i, g) in results {
            self.population.push((i, g.unwrap_or(0.0)));
        }
        self.population.sort_by(|a, b| b.1.total_cmp(&a.1));
        self.population.truncate(self.elite);
    }
}
