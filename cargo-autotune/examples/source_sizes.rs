//! The size of each logged trial's C, for `bench/compile-cost.sh`: one line per
//! trial of the record logs (`workload id`, GFLOP/s or 0 where it failed, bytes
//! of C at the target's ISA level or 0 where it cannot be generated).
//!
//! `cargo run --release -p cargo-autotune --example source_sizes -- OPS.rs TARGET LOG...`

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use autotune_codegen::Target;
use autotune_tune::compile_cost::source_bytes;
use autotune_tune::features::{FeatureSet, FeatureSource};
use autotune_tune::history::History;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, target, logs @ ..] = args.as_slice() else {
        anyhow::bail!("usage: source_sizes OPS.rs TARGET LOG...");
    };
    let file = Path::new(file);
    let target: Target = target.parse().context("TARGET is triple/isa")?;
    let ops: Vec<_> = autotune_build::load_operators(
        file.parent().unwrap_or(Path::new(".")),
        &[PathBuf::from(
            file.file_name().context("OPS.rs names a file")?,
        )],
    )?
    .into_iter()
    .map(|s| s.op)
    .collect();
    let logs: Vec<PathBuf> = logs.iter().map(PathBuf::from).collect();
    let (history, problems) = History::load(
        &logs,
        &ops,
        &target,
        None,
        FeatureSet::Curve,
        FeatureSource::Plan,
    );
    for p in problems {
        eprintln!("skipped: {p}");
    }
    for p in &history.workloads {
        for (config, gflops, _) in &p.trials {
            let bytes = source_bytes(&p.workload, config, target.isa).unwrap_or(0);
            println!("{}\t{}\t{bytes}", p.id, gflops.unwrap_or(0.0));
        }
    }
    Ok(())
}
