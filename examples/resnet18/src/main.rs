//! Batch-1 ResNet-18 inference from autotune kernels: checks the network against a
//! forward pass built from the operators' naive references, then prints the latency
//! (median of repeats) on one thread and on every core.
//!
//! `resnet18 [--layers] [--threads 1,2] [--export DIR]`
//! - `--layers`: also time each operator call of the network on its own and inside
//!   the pass (and compare their sums with the pass), and each of the twelve conv
//!   layers C1–C12 of the AutoTVM paper's table with the network's kernels;
//! - `--threads`: the thread counts to time (default: 1 and all CPUs);
//! - `--export DIR`: write the weights, the input and the logits for the peer benchmark.

mod layers;
mod net;
mod ops;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use net::{Impl, ResNet18};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Median seconds per call over at least `min_samples` calls lasting `min` in total.
fn time(min: Duration, min_samples: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up
    f();
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < min_samples || (start.elapsed() < min && samples.len() < 1000) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    median(samples)
}

struct Args {
    layers: bool,
    threads: Vec<usize>,
    export: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = Args {
        layers: false,
        threads: if all > 1 { vec![1, all] } else { vec![1] },
        export: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--layers" => args.layers = true,
            "--threads" => {
                let v = it.next().ok_or("--threads needs a list, e.g. 1,2")?;
                args.threads = v
                    .split(',')
                    .map(|t| t.trim().parse().ok().filter(|&n: &usize| n > 0))
                    .collect::<Option<_>>()
                    .ok_or(format!(
                        "--threads: `{v}` is not a list of positive integers"
                    ))?;
            }
            "--export" => args.export = Some(it.next().ok_or("--export needs a directory")?.into()),
            _ => {
                return Err(format!(
                    "unknown argument `{a}` (expected --layers, --threads LIST, --export DIR)"
                ))
            }
        }
    }
    Ok(args)
}

fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

/// Times each operator call of the network warm, on its own (repeated where the pass
/// makes it), and inside the pass (each call timed once per pass, median over passes),
/// and compares their sums with the pass's `pass_secs`: what a call loses in the pass
/// (caches refilled, weights streamed in) shows as its in-pass time over its warm one.
fn time_nodes(net: &ResNet18, input: &[f32], ws: &mut net::Workspace, nt: usize, pass_secs: f64) {
    let mut in_pass: Vec<Vec<f64>> = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..PASSES {
        let mut i = 0;
        let wall = Instant::now();
        net.forward_each(input, ws, Impl::Kernels, &mut |_, call| {
            let t = Instant::now();
            call();
            let secs = t.elapsed().as_secs_f64();
            match in_pass.get_mut(i) {
                Some(samples) => samples.push(secs),
                None => in_pass.push(vec![secs]),
            }
            i += 1;
        });
        walls.push(wall.elapsed().as_secs_f64());
    }
    let mut nodes = Vec::new();
    net.forward_each(input, ws, Impl::Kernels, &mut |name, call| {
        nodes.push((name, time(Duration::from_millis(100), 20, call)));
    });
    let in_pass: Vec<f64> = in_pass.into_iter().map(median).collect();
    for (i, ((name, warm), pass)) in nodes.iter().zip(&in_pass).enumerate() {
        let name = name.trim_end_matches("_into");
        println!(
            "node {i:2} threads={nt}: {:8.3} ms warm  {:8.3} ms in the pass  ({name})",
            warm * 1e3,
            pass * 1e3
        );
    }
    let sum: f64 = nodes.iter().map(|n| n.1).sum();
    // The passes whose calls were timed, whole: against the sum of their calls'
    // medians, what lies between the calls and how the calls' spread adds up.
    println!(
        "nodes threads={nt}: the pass {:.3} ms is {:.2}x the sum of its {} calls' warm times, {:.3} ms \
         (their in-pass times sum to {:.3} ms, those passes took {:.3} ms)",
        pass_secs * 1e3,
        pass_secs / sum,
        nodes.len(),
        sum * 1e3,
        in_pass.iter().sum::<f64>() * 1e3,
        median(walls) * 1e3
    );
}

/// Passes whose calls are timed one by one.
const PASSES: usize = 30;

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The logits of the kernels and of the naive references for one input.
fn forward_both(net: &ResNet18, input: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let kernels = net
        .forward(input, &mut net.workspace(), Impl::Kernels)
        .to_vec();
    let reference = net
        .forward(input, &mut net.workspace(), Impl::Reference)
        .to_vec();
    (kernels, reference)
}

/// Whether the kernels' logits match the reference's: within 1e-3 of the largest logit
/// (the two sum in different orders) and the same class.
fn compare(logits: &[f32], reference: &[f32]) -> Result<String, String> {
    let scale = reference.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let max_err = logits
        .iter()
        .zip(reference)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b]));
    let (class, ref_class) = (argmax(logits), argmax(reference));
    if max_err <= 1e-3 * scale && class == ref_class && logits.len() == reference.len() {
        Ok(format!(
            "logits match the reference (max |error| {max_err:.1e} of max |logit| {scale:.2}; \
             class {} both)",
            class.unwrap_or(0)
        ))
    } else {
        Err(format!(
            "the kernels differ from the reference forward pass: max |error| {max_err:e} \
             of max |logit| {scale}, classes {class:?} vs {ref_class:?}"
        ))
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("resnet18: {e}");
            return ExitCode::from(2);
        }
    };
    let net = ResNet18::random(2018);
    let mut rng = StdRng::seed_from_u64(1);
    let input = random(&mut rng, net::INPUT.iter().product());

    let mut ws = net.workspace();
    let t = Instant::now();
    let (logits, reference) = forward_both(&net, &input);
    let ref_secs = t.elapsed().as_secs_f64();
    match compare(&logits, &reference) {
        Ok(summary) => println!(
            "resnet18 batch 1, 224x224x3 f32 ({:.2} GFLOP): {summary}",
            net.flop() / 1e9
        ),
        Err(e) => {
            eprintln!("resnet18: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(dir) = &args.export {
        if let Err(e) = net.export(dir, &input, &logits) {
            eprintln!("resnet18: cannot write {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
        println!("wrote the weights, input and logits to {}", dir.display());
    }

    println!(
        "the check (kernels and naive reference, one pass each) took {:.0} ms",
        ref_secs * 1e3
    );
    let mut layer_list = if args.layers {
        layers::all()
    } else {
        Vec::new()
    };
    for &nt in &args.threads {
        ops::set_num_threads(nt);
        let secs = time(Duration::from_secs(3), 20, || {
            net.forward(&input, &mut ws, Impl::Kernels);
        });
        println!(
            "network threads={nt}: {:8.3} ms  {:6.1} GFLOP/s  (median)",
            secs * 1e3,
            net.flop() / secs / 1e9
        );
        if args.layers {
            time_nodes(&net, &input, &mut ws, nt, secs);
        }
        for l in &mut layer_list {
            let secs = time(Duration::from_millis(500), 20, &mut l.run);
            println!(
                "layer {} threads={nt}: {:8.3} ms  {:6.1} GFLOP/s  ({})",
                l.name,
                secs * 1e3,
                l.flop / secs / 1e9,
                l.what
            );
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_matches_reference() {
        let net = ResNet18::random(2018);
        let mut rng = StdRng::seed_from_u64(3);
        let input = random(&mut rng, net::INPUT.iter().product());
        let (logits, reference) = forward_both(&net, &input);
        compare(&logits, &reference).unwrap();
    }

    #[test]
    fn compare_rejects_a_wrong_logit() {
        let reference: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let mut wrong = reference.clone();
        wrong[3] += 0.1;
        assert!(compare(&reference, &reference).is_ok());
        assert!(compare(&wrong, &reference).is_err());
    }
}
