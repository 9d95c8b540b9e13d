//! How well the cost model ranks configs with features derived from the plan
//! against features walked from the lowered nest, on the same records: the
//! check behind `FeatureSource::Plan` (run by `bench/feature-quality.sh`).
//!
//! For each feature set (itervar, curve) and source (plan, lowered), per
//! workload of the record logs:
//! - *held-out workload*: an XGBoost ranking model fitted on every other
//!   workload's trials ranks this one's;
//! - *within workload*: fitted on a random half of its trials (three seeds),
//!   it ranks the other half (what the search does between batches).
//!
//! Reported: pairwise accuracy (share of pairs of different throughput put in
//! the right order) and recall of the 16 best (a batch), and the microseconds
//! each source takes per config.
//!
//! Usage: `feature_quality TARGET OPS_FILE... -- LOG_OR_DIR...`

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use autotune_codegen::Target;
use autotune_tune::features::{FeatureSet, FeatureSource, Featurizer};
use autotune_tune::history::{History, Past};
use autotune_tune::model::{self, pairwise_accuracy, recall_at, Matrix, Objective, TrainingSet};
use rand::seq::SliceRandom;
use rand::SeedableRng;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args
        .iter()
        .position(|a| a == "--")
        .context("usage: TARGET OPS... -- LOGS...")?;
    if split < 2 {
        bail!("usage: feature_quality TARGET OPS_FILE... -- LOG_OR_DIR...");
    }
    let target: Target = args[0].parse().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut ops = Vec::new();
    for f in &args[1..split] {
        let path = PathBuf::from(f);
        let dir = path.parent().context("an operator file")?;
        let name = PathBuf::from(path.file_name().context("an operator file")?);
        ops.extend(
            autotune_build::load_operators(dir, &[name])?
                .into_iter()
                .map(|s| s.op),
        );
    }
    let logs: Vec<PathBuf> = args[split + 1..].iter().map(PathBuf::from).collect();
    println!(
        "{:<8} {:<8} {:<36} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "set", "source", "workload", "trials", "held_pair", "held_rec16", "in_pair", "in_rec16"
    );
    for set in [FeatureSet::Itervar, FeatureSet::Curve] {
        for source in [FeatureSource::Lowered, FeatureSource::Plan] {
            let (h, errors) = History::load(&logs, &ops, &target, None, set, source);
            for e in errors {
                eprintln!("skipped: {e}");
            }
            let (mut sums, mut n) = ([0.0; 4], 0.0);
            for (i, p) in h.workloads.iter().enumerate() {
                let others: Vec<&Past> = h
                    .workloads
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, q)| q)
                    .collect();
                let held = score(&others, p, &p.trials.iter().collect::<Vec<_>>())?;
                let mut within = [0.0; 2];
                for seed in 0..3u64 {
                    let mut trials: Vec<_> = p.trials.iter().collect();
                    trials.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
                    let (train, test) = trials.split_at(trials.len() / 2);
                    let half = Past {
                        trials: train.iter().map(|t| (*t).clone()).collect(),
                        ..p.clone()
                    };
                    let s = score(&[&half], p, test)?;
                    within[0] += s[0] / 3.0;
                    within[1] += s[1] / 3.0;
                }
                let row = [held[0], held[1], within[0], within[1]];
                for (s, r) in sums.iter_mut().zip(row) {
                    *s += r;
                }
                n += 1.0;
                println!(
                    "{:<8} {:<8} {:<36} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                    set.name(),
                    format!("{source:?}").to_lowercase(),
                    p.workload.key(),
                    p.trials.len(),
                    row[0],
                    row[1],
                    row[2],
                    row[3]
                );
            }
            println!(
                "{:<8} {:<8} {:<36} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                set.name(),
                format!("{source:?}").to_lowercase(),
                "MEAN",
                "",
                sums[0] / n,
                sums[1] / n,
                sums[2] / n,
                sums[3] / n
            );
            // The cost of describing a config, over every config of the history.
            let start = Instant::now();
            let mut configs = 0;
            for p in &h.workloads {
                let f = Featurizer::with_source(&p.workload, set, source);
                for t in &p.trials {
                    f.features(&t.0)?;
                    configs += 1;
                }
            }
            println!(
                "# {set} from {source:?}: {:.1} us per config ({configs} configs)",
                1e6 * start.elapsed().as_secs_f64() / configs as f64
            );
        }
    }
    Ok(())
}

/// Fits a ranking model on `train` (one group per workload, throughput
/// relative to the workload's best) and scores `test`, trials of `p`:
/// pairwise accuracy and recall of the 16 best.
fn score(
    train: &[&Past],
    p: &Past,
    test: &[&(autotune_codegen::Config, Option<f64>, Vec<f32>)],
) -> Result<[f64; 2]> {
    let cols = p.trials[0].2.len();
    let mut data = TrainingSet {
        x: Matrix::new(cols),
        ..TrainingSet::default()
    };
    for q in train {
        let best = q.best().max(1e-9);
        for (_, g, f) in &q.trials {
            data.x.push(f);
            data.y.push((g.unwrap_or(0.0) / best) as f32);
        }
        data.groups.push(q.trials.len() as u32);
    }
    let mut m = model::default_model(Objective::Rank, 1)?;
    m.fit(&data)?;
    let mut x = Matrix::new(cols);
    for t in test {
        x.push(&t.2);
    }
    let pred = m.predict(&x, None)?;
    let truth: Vec<f32> = test.iter().map(|t| t.1.unwrap_or(0.0) as f32).collect();
    Ok([
        pairwise_accuracy(&truth, &pred),
        recall_at(&truth, &pred, 16),
    ])
}
