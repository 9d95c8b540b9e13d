//! `cargo autotune verify --other-cpus`: what replaying another CPU's cache
//! entry costs on this one. Each workload's entries of other CPUs (stale ones
//! too: a config of an earlier generator is still a point of the space; those
//! of other ISA levels too, compiled at this one's, as a kernel's clone for
//! this level would run them) are compiled in one batch beside this CPU's own
//! entry and the space's default config (what a miss builds), checked, and
//! timed in alternating rounds, so drift of the machine hits all of them alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use autotune_build::cache::{self, Cpu, Entry};
use autotune_codegen::{Space, Target, Workload};
use autotune_tune::measure::{build_batch, TimingOptions};

/// One workload: this CPU's entry, the default config and the other CPUs'
/// entries (with their target), in GFLOP/s measured here.
pub struct Replay {
    pub own: f64,
    pub default: f64,
    pub others: Vec<(Cpu, Target, f64)>,
}

/// Times `w`'s entries of other CPUs beside this CPU's current one, those
/// for the thread count of `opts` (none without both).
fn measure(
    w: &Workload,
    entries: &[Entry],
    target: &Target,
    cpu: &Cpu,
    opts: &TimingOptions,
    rounds: usize,
    dir: &Path,
) -> Result<Option<Replay>> {
    let id = w.id();
    // Entries for the thread count timed here (or of an unrecorded one), of
    // this triple at any ISA level.
    let mine = |e: &&Entry| {
        e.workload_id == id
            && e.target.triple == target.triple
            && e.threads.is_none_or(|t| t == opts.threads)
    };
    let Some(own) = entries.iter().filter(mine).find(|e| {
        e.target == *target && e.generator == cache::GENERATOR_VERSION && cpu.same(&e.tuned_on())
    }) else {
        return Ok(None);
    };
    let space = Space::new(&w.op, w.shapes());
    let others: Vec<&Entry> = entries
        .iter()
        .filter(mine)
        .filter(|e| !cpu.same(&e.tuned_on()) && space.index_of(&e.config).is_ok())
        .collect();
    if others.is_empty() {
        return Ok(None);
    }
    // This CPU's entry, the default config, then the others'.
    let configs: Vec<_> = [
        own.config.clone(),
        space.default_config_for(&w.op, w.shapes(), target.isa),
    ]
    .into_iter()
    .chain(others.iter().map(|e| e.config.clone()))
    .collect();
    let batch = build_batch(w, &configs, target.isa, dir, 1)?;
    for i in 0..configs.len() {
        batch
            .check(i, opts)
            .with_context(|| format!("{}: config {i} is wrong", w.key()))?;
    }
    let mut seconds = vec![Vec::new(); configs.len()];
    for _ in 0..rounds.max(1) {
        for (i, s) in seconds.iter_mut().enumerate() {
            s.push(batch.time(i, opts)?.median);
        }
    }
    let gflops: Vec<f64> = seconds
        .iter_mut()
        .map(|s| {
            s.sort_by(f64::total_cmp);
            w.flops() / s[s.len() / 2] / 1e9
        })
        .collect();
    Ok(Some(Replay {
        own: gflops[0],
        default: gflops[1],
        others: others
            .iter()
            .zip(&gflops[2..])
            .map(|(e, g)| (e.tuned_on(), e.target.clone(), *g))
            .collect(),
    }))
}

/// `verify --other-cpus`: each workload's other CPUs' entries and its default
/// config against this CPU's entry, and per target of the replayed entries
/// (and for the default) the geometric mean and worst ratio.
pub fn report(
    ops: &[autotune_lang::Operator],
    cache: &Path,
    host: &Target,
    cpu: &Cpu,
    threads: usize,
    rounds: usize,
) -> Result<()> {
    println!("this CPU: {cpu}; {threads} thread(s), median of {rounds} alternating rounds");
    let opts = TimingOptions {
        threads,
        ..TimingOptions::default()
    };
    let dir = PathBuf::from("target/autotune/verify");
    // Ratios to this CPU's entries, by the target the replayed entries were
    // tuned for (`None`: the default config).
    let mut ratios: BTreeMap<Option<Target>, Vec<f64>> = BTreeMap::new();
    for op in ops {
        let entries = cache::load_for(cache, op)?;
        for spec in 0..op.specializations.len() {
            let w = Workload {
                op: op.clone(),
                spec,
            };
            let Some(r) = measure(&w, &entries, host, cpu, &opts, rounds, &dir)? else {
                continue;
            };
            println!(
                "{:<40} own {:>8.2} GFLOP/s, default config: {:>8.2} ({:.3}x)",
                w.key(),
                r.own,
                r.default,
                r.default / r.own
            );
            ratios.entry(None).or_default().push(r.default / r.own);
            for (other, at, gflops) in &r.others {
                ratios
                    .entry(Some(at.clone()))
                    .or_default()
                    .push(gflops / r.own);
                println!(
                    "{:<40} own {:>8.2} GFLOP/s, tuned on {other} for {}: {:>8.2} ({:.3}x)",
                    w.key(),
                    r.own,
                    at.isa,
                    gflops,
                    gflops / r.own
                );
            }
        }
    }
    if ratios.is_empty() {
        println!("no workload has entries of this CPU for {host} and of another CPU");
        return Ok(());
    }
    for (at, rs) in &ratios {
        let geomean = (rs.iter().map(|r| r.ln()).sum::<f64>() / rs.len() as f64).exp();
        let worst = rs.iter().copied().fold(f64::INFINITY, f64::min);
        let what = match at {
            Some(t) => format!("replays of {} entries", t.isa),
            None => "default configs".to_string(),
        };
        println!(
            "{} {what}: geometric mean {geomean:.3}x of this CPU's entries, worst {worst:.3}x",
            rs.len()
        );
    }
    Ok(())
}
