//! What a candidate costs to compile, known before it is compiled: the size of
//! its C at the ISA level it is compiled at. A search measures a candidate
//! whose C is far larger than the configs it measured after every other.
//!
//! Why: gcc's time grows with the C (about 0.55 s for a 70 KB conv kernel,
//! 1.9 s for 200 KB on an Intel Xeon), and the large ones are the register
//! tiles that spill and the tiles that need guarded border copies of the
//! micro-kernel, which are rarely fast. In the corpus of the shipped model
//! (43 workloads of 21 operators, 2872 trials of xgb-rank on an Intel Xeon),
//! the configs over twice their workload's median size and over
//! [`LARGE_FLOOR`] took a fifth of the compile time, and none of them was a
//! workload's best (docs/experiments.md).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use autotune_codegen::{Config, Isa, Space, Workload};
use autotune_lang::mangle::Variant;

use crate::parallel;

/// A candidate whose C is over this many times the median of the measured
/// configs' is large (if also over [`LARGE_FLOOR`]).
pub const LARGE_RATIO: f64 = 2.0;

/// Under this size no C is large: it compiles in a few tenths of a second,
/// where the compiler's start-up is a fair part of the cost.
pub const LARGE_FLOOR: usize = 32 << 10;

/// The size of each candidate's C, computed once per config.
pub struct SourceSizes {
    w: Workload,
    isa: Isa,
    bytes: HashMap<u128, Option<usize>>,
    /// The sizes of the measured configs.
    measured: Vec<usize>,
    /// Time spent generating C to size it.
    pub spent: Duration,
    /// The configs found large in a pool.
    pub large: HashSet<u128>,
}

impl SourceSizes {
    /// Sizes of `w`'s candidates compiled at `isa`.
    pub fn new(w: &Workload, isa: Isa) -> SourceSizes {
        SourceSizes {
            w: w.clone(),
            isa,
            bytes: HashMap::new(),
            measured: Vec::new(),
            spent: Duration::ZERO,
            large: HashSet::new(),
        }
    }

    /// The size of config `i`'s C (sized before), `None` where it cannot be
    /// generated (then the measurement records why).
    fn of(&self, i: u128) -> Option<usize> {
        self.bytes.get(&i).copied().flatten()
    }

    /// Sizes every config of `configs` not sized yet, on every core (about a
    /// millisecond each: the whole kernel's C is generated).
    fn size(&mut self, space: &Space, configs: &[u128]) {
        let fresh = parallel::unknown(configs, |i| self.bytes.contains_key(&i));
        let t = Instant::now();
        let (w, isa) = (&self.w, self.isa);
        let sizes = parallel::on_every_core(&fresh, |&i| source_bytes(w, &space.config_at(i), isa));
        self.bytes.extend(fresh.into_iter().zip(sizes));
        self.spent += t.elapsed();
    }

    /// Configs `measured`: their sizes are what later candidates are judged by.
    pub fn measured(&mut self, space: &Space, measured: &[u128]) {
        self.size(space, measured);
        for &i in measured {
            if let Some(b) = self.of(i) {
                self.measured.push(b);
            }
        }
    }

    /// Which of the candidates `pool` are large: C over [`LARGE_RATIO`] times
    /// the median size of the configs measured so far (of the pool's before
    /// any) and over [`LARGE_FLOOR`]. Not the pool's alone: a search that
    /// measures no large config never learns they are slow, and its pools
    /// fill with them.
    pub fn large(&mut self, space: &Space, pool: &[u128]) -> Vec<bool> {
        self.size(space, pool);
        let sizes: Vec<Option<usize>> = pool.iter().map(|&i| self.of(i)).collect();
        let mut known: Vec<usize> = match self.measured.is_empty() {
            true => sizes.iter().flatten().copied().collect(),
            false => self.measured.clone(),
        };
        if known.is_empty() {
            return vec![false; pool.len()];
        }
        known.sort_unstable();
        let median = known[known.len() / 2] as f64;
        let large: Vec<bool> = sizes
            .iter()
            .map(|s| s.is_some_and(|b| b > LARGE_FLOOR && b as f64 > LARGE_RATIO * median))
            .collect();
        for (&i, _) in pool.iter().zip(&large).filter(|l| *l.1) {
            self.large.insert(i);
        }
        large
    }
}

/// The size of `config`'s C for `w` at `isa`, `None` where it cannot be
/// generated. A bucket is compiled as a generic kernel; its specialised
/// kernel at the anchor is of the same schedule, and sizes it as well.
pub fn source_bytes(w: &Workload, config: &Config, isa: Isa) -> Option<usize> {
    autotune_codegen::kernel_c(
        &w.op,
        Variant::Specialized(w.spec),
        Some(config),
        &[isa],
        "k".to_string(),
        "rt".to_string(),
    )
    .ok()
    .map(|c| c.len())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;
    use crate::search::{ModelTuner, SearchOptions};
    use crate::tuner::random_fresh;

    /// ResNet-18's 3×3 conv at 28×28 pixels and 128 channels (the features'
    /// probe conv at another shape), where sensible configs' C ranges from
    /// about 25 to 200 KB.
    fn conv() -> Workload {
        let item: syn::ItemFn = syn::parse_str(crate::features::PROBES[1].1).unwrap();
        let attr = "R = 3, S = 3, specialize(C = 128, H = 28, W = 28, K = 128)";
        let op = autotune_lang::parse_operator(attr.parse().unwrap(), &item).unwrap();
        Workload { op, spec: 0 }
    }

    /// The model's favourites are measured first unless their C is large:
    /// those come after every other candidate.
    #[test]
    fn a_batch_measures_candidates_with_large_c_after_the_others() {
        let w = conv();
        let space = Space::new(&w.op, w.shapes());
        let mut sizes = SourceSizes::new(&w, Isa::Avx512);
        let mut rng = StdRng::seed_from_u64(7);
        let pool = random_fresh(&mut rng, &space, 300, &HashSet::new());
        sizes.size(&space, &pool);
        let mut sized: Vec<(u128, usize)> = pool
            .into_iter()
            .filter_map(|i| sizes.of(i).map(|b| (i, b)))
            .collect();
        sized.sort_by_key(|s| s.1);
        // 16 candidates around the median size, and the 8 largest, which the
        // model scores higher.
        let mid = sized.len() / 2;
        let typical = &sized[mid - 8..mid + 8];
        let large = &sized[sized.len() - 8..];
        let limit = LARGE_RATIO * typical[15].1 as f64;
        assert!(
            large
                .iter()
                .all(|l| l.1 > LARGE_FLOOR && l.1 as f64 > limit),
            "{large:?} against {typical:?}"
        );
        let cands: Vec<(u128, f32)> = large
            .iter()
            .map(|l| (l.0, 2.0))
            .chain(typical.iter().map(|t| (t.0, 1.0)))
            .collect();
        let is_large = |i: &u128| large.iter().any(|l| l.0 == *i);

        let plain =
            ModelTuner::new(&w, None, SearchOptions::default(), 1).pick_diverse(&space, &cands, 8);
        assert!(plain.iter().any(is_large), "{plain:?}");
        let mut t =
            ModelTuner::new(&w, None, SearchOptions::default(), 1).compiled_at(&w, Isa::Avx512);
        let picked = t.pick_diverse(&space, &cands, 8);
        assert_eq!(picked.len(), 8);
        assert!(!picked.iter().any(is_large), "{picked:?}");
        // Past the others, the large ones are still measured.
        let picked = t.pick_diverse(&space, &cands, 20);
        assert!(!picked[..16].iter().any(is_large), "{picked:?}");
        assert!(picked[16..].iter().all(is_large), "{picked:?}");

        // Once configs are measured, their sizes are the measure: a pool of
        // large candidates alone is large (the search learns they are slow by
        // measuring them, after the others), not judged by its own median.
        let ids = |s: &[(u128, usize)]| s.iter().map(|s| s.0).collect::<Vec<_>>();
        let mut sizes = SourceSizes::new(&w, Isa::Avx512);
        assert_eq!(sizes.large(&space, &ids(large)), vec![false; 8]);
        sizes.measured(&space, &ids(typical));
        assert_eq!(sizes.large(&space, &ids(large)), vec![true; 8]);
        assert_eq!(sizes.large(&space, &ids(typical)), vec![false; 16]);
    }
}
