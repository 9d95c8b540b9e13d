//! Helpers shared by the tuning tests: workloads from source text, scratch
//! directories, and tuning options with short timing.
#![allow(dead_code)] // each test file uses some of them

use std::path::{Path, PathBuf};
use std::time::Duration;

use autotune_codegen::{Isa, Target, Workload};
use autotune_tune::measure::{Candidate, Harness, MeasureError, TimingOptions};
use autotune_tune::TuneOptions;

/// Whether `candidate`, which failed its check with `e` (a crash or a wrong
/// result), runs right when built again (in `dir`) without the GCC pass such
/// a miscompile of GCC 12.2's comes from: a crash (vector loads past an
/// input) without vectorisation, a wrong result without loop if-conversion.
/// `Ok` names the pass; `Err` names it and the second run's failure.
pub fn right_without(
    harness: &Harness,
    e: &MeasureError,
    candidate: &[Candidate],
    dir: &Path,
    timing: &TimingOptions,
) -> Result<&'static str, String> {
    let (again, pass) = match e {
        MeasureError::Crash(_) => (harness.without_vectorization(), "vectorisation"),
        _ => (harness.without_if_conversion(), "loop if-conversion"),
    };
    again
        .and_then(|h| h.build(candidate, dir))
        .and_then(|b| b.check(0, timing))
        .map(|()| pass)
        .map_err(|again| format!("without {pass}: {again}"))
}

/// The first specialisation of the operator `src` with attribute `attr`.
pub fn workload(attr: &str, src: &str) -> Workload {
    let item: syn::ItemFn = syn::parse_str(src).unwrap();
    let op = autotune_lang::parse_operator(attr.parse().unwrap(), &item).unwrap();
    Workload { op, spec: 0 }
}

/// A 3×3 conv, stride 1, padding 1, + bias + ReLU (ResNet-18's), as source
/// for [`workload`] with an attribute that fixes `R = 3, S = 3`.
pub const CONV3X3_BIAS_RELU: &str = "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> =
        compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}";

/// A GEMM `mm` at M×N×K.
pub fn gemm(m: i64, n: i64, k: i64) -> Workload {
    workload(
        &format!("specialize(M = {m}, N = {n}, K = {k})"),
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    )
}

/// An empty directory of the test target's scratch space.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Tuning options for tests: batches of 4, short timing, the winner not
/// re-timed, programs and the record log (`records.jsonl`) under `dir`.
pub fn options(dir: &Path) -> TuneOptions {
    TuneOptions {
        batch: 4,
        confirm: 0,
        timing: TimingOptions {
            min_sample_secs: 0.001,
            samples: 3,
            timeout: Duration::from_secs(3),
            ..TimingOptions::default()
        },
        dir: dir.join("build"),
        log: Some(dir.join("records.jsonl")),
        target: target(),
        ..TuneOptions::default()
    }
}

/// What the tests measure for: this machine's triple and best ISA level,
/// capped by `AUTOTUNE_TUNE_ISA` (CI runs the tests again on the fallbacks).
pub fn target() -> Target {
    let best = Isa::detect();
    let isa = match std::env::var("AUTOTUNE_TUNE_ISA").map(|v| v.parse::<Isa>()) {
        Ok(Ok(cap)) => cap.min(best),
        _ => best,
    };
    Target {
        triple: autotune_tune::HOST_TRIPLE.to_string(),
        isa,
    }
}

/// A tuner by name, as `cargo autotune tune --tuner` takes it.
pub fn tuner(
    name: &str,
    seed: u64,
    w: &Workload,
    history: Option<&autotune_tune::history::History>,
) -> Box<dyn autotune_tune::Tuner> {
    // The few-shot tuners rank with the model shipped for this machine.
    let pretrained = autotune_tune::pretrained::shipped(&target()).map(|m| m.unwrap());
    name.parse::<autotune_tune::TunerSpec>()
        .unwrap()
        .build(w, seed, history, &[], pretrained.as_ref(), 1, target().isa)
        .unwrap()
}
