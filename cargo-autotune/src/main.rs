//! `cargo autotune`: the command-line face of autotune.
//!
//! - `cargo autotune space --file src/ops.rs [--op NAME]`: each workload's
//!   schedule space (knobs, choices, size) and its default config;
//! - `cargo autotune bench --file src/ops.rs --op NAME [--spec I] [--config
//!   "knob=value ..."]`: compiles one config exactly as the build would, checks it
//!   against the reference and prints its speed.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use autotune_build::measure::{self, TimingOptions, Workload};
use autotune_build::space::{Config, Space};
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// Schedule spaces and measurements of #[tensor_op] kernels.
    Autotune(Cli),
}

#[derive(Args)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct Target {
    /// Source file holding the #[tensor_op] operators.
    #[arg(long, default_value = "src/ops.rs")]
    file: PathBuf,
    /// Operator name (all operators when omitted, where that makes sense).
    #[arg(long)]
    op: Option<String>,
    /// Index of the specialisation (`specialize(...)` in source order).
    #[arg(long, default_value_t = 0)]
    spec: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Print each workload's schedule space and default config.
    Space {
        #[command(flatten)]
        target: Target,
        /// Also list every knob with its choices.
        #[arg(long)]
        knobs: bool,
    },
    /// Compile one config, check it against the reference and time it.
    Bench {
        #[command(flatten)]
        target: Target,
        /// The config (`knob=value` pairs); the space's default when omitted.
        #[arg(long)]
        config: Option<String>,
        /// Threads of the kernel's thread pool.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Evict the caches before every call.
        #[arg(long)]
        flush: bool,
        /// Samples (the median is reported).
        #[arg(long, default_value_t = 9)]
        samples: usize,
        /// Where to build the measurement program.
        #[arg(long, default_value = "target/autotune/bench")]
        dir: PathBuf,
    },
}

fn load(target: &Target) -> Result<Vec<autotune_lang::Operator>> {
    let dir = target.file.parent().unwrap_or(std::path::Path::new("."));
    let name = target.file.file_name().context("--file names a file")?;
    let ops = autotune_build::load_operators(dir, &[PathBuf::from(name)])?;
    let ops: Vec<_> = ops
        .into_iter()
        .map(|s| s.op)
        .filter(|op| target.op.as_deref().is_none_or(|n| n == op.name))
        .collect();
    if ops.is_empty() {
        bail!(
            "no operator {}in {}",
            target
                .op
                .as_deref()
                .map(|n| format!("`{n}` "))
                .unwrap_or_default(),
            target.file.display()
        );
    }
    Ok(ops)
}

fn main() -> Result<()> {
    let Cargo::Autotune(cli) = Cargo::parse();
    match cli.command {
        Command::Space { target, knobs } => {
            for op in load(&target)? {
                for spec in 0..op.specializations.len() {
                    let w = Workload {
                        op: op.clone(),
                        spec,
                    };
                    let space = Space::new(&op, w.shapes());
                    println!(
                        "{}: {} configs ({} knobs)",
                        w.key(),
                        space.size(),
                        space.knobs.len()
                    );
                    if knobs {
                        for k in &space.knobs {
                            let choices: Vec<String> =
                                k.choices.iter().map(|c| c.to_string()).collect();
                            println!("  {:<28} {}", k.name, choices.join(" "));
                        }
                    }
                    println!("  default: {}", space.default_config(&op, w.shapes()));
                }
                if op.specializations.is_empty() {
                    println!("{}: no specialisation (only the generic kernel)", op.name);
                }
            }
        }
        Command::Bench {
            target,
            config,
            threads,
            flush,
            samples,
            dir,
        } => {
            let op = load(&target)?.remove(0);
            if target.spec >= op.specializations.len() {
                bail!(
                    "`{}` has {} specialisation(s); --spec {} is out of range",
                    op.name,
                    op.specializations.len(),
                    target.spec
                );
            }
            let w = Workload {
                op,
                spec: target.spec,
            };
            let space = Space::new(&w.op, w.shapes());
            let config = match config {
                Some(text) => text.parse::<Config>().map_err(anyhow::Error::msg)?,
                None => space.default_config(&w.op, w.shapes()),
            };
            space.index_of(&config).with_context(|| {
                format!("the config does not belong to the space of {}", w.key())
            })?;
            let opts = TimingOptions {
                threads,
                flush,
                samples,
                ..TimingOptions::default()
            };
            let m = measure::bench(&w, &config, &dir, &opts)?;
            println!(
                "{} ({} threads, {})",
                w.key(),
                threads,
                measure::host_isa().name()
            );
            println!("config: {config}");
            println!(
                "{:.2} GFLOP/s  (median {:.3} ms, min {:.3}, max {:.3})",
                m.gflops,
                m.timing.median * 1e3,
                m.timing.min * 1e3,
                m.timing.max * 1e3
            );
        }
    }
    Ok(())
}
