//! Compiling candidate configs of one workload into a measurement program and
//! running it: check each candidate against the reference, then time it.
//!
//! A batch is one C program: every candidate kernel (generated exactly as the
//! build generates it, for the host's best ISA level), the runtime (thread pool,
//! ISA detection) and a driver `main`. It is compiled with the flags that ship
//! ([`crate::C_FLAGS`], `-O3`), one object file per core in parallel, and each
//! run is a child process with a timeout, so a crashing or hanging candidate
//! only loses its own result.
//!
//! Driver protocol: `prog INDEX DIR check OUT` writes candidate INDEX's output for
//! the inputs `DIR/in<i>.bin` to OUT (`reference` instead of `check`: the
//! reference's output); `prog INDEX DIR time MIN_SECONDS SAMPLES
//! THREADS FLUSH` prints `median_s=… min_s=… max_s=… reps=…`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autotune_lang::ir::{DType, Operator};
use autotune_lang::mangle::Variant;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::codegen::Isa;
use crate::space::Config;

/// One operator at one of its specialisations.
#[derive(Clone, Debug)]
pub struct Workload {
    pub op: Operator,
    pub spec: usize,
}

impl Workload {
    pub fn shapes(&self) -> &[i64] {
        &self.op.specializations[self.spec].values
    }

    /// Floating-point operations of one call.
    pub fn flops(&self) -> f64 {
        self.op.flops(self.shapes())
    }

    /// Element counts of each input and of the output.
    fn sizes(&self) -> (Vec<usize>, usize) {
        let shapes = self.shapes();
        let count = |dims: &[autotune_lang::ir::Extent]| -> usize {
            dims.iter().map(|d| d.value(shapes) as usize).product()
        };
        (
            self.op.inputs.iter().map(|i| count(&i.dims)).collect(),
            count(&self.op.output().dims),
        )
    }

    /// `matmul[M=1024 K=1024 N=1024]`.
    pub fn key(&self) -> String {
        format!(
            "{}[{}]",
            self.op.name,
            autotune_lang::mangle::variant_name(&self.op, Variant::Specialized(self.spec))
                .replace('_', " ")
        )
    }
}

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("cannot prepare the measurement in {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config is not in the space: {0}")]
    Config(#[from] crate::Error),
    #[error("compile error: {0}")]
    Compile(String),
    #[error("the compiler ran past its {0:?} time limit")]
    CompileTimeout(Duration),
    #[error("the candidate crashed: {0}")]
    Crash(String),
    #[error("the candidate ran past its {0:?} time limit")]
    Timeout(Duration),
    #[error("wrong result: {0}")]
    WrongResult(String),
    #[error("the candidate could not allocate its scratch memory")]
    Alloc,
    /// The measurement machinery itself failed (not the candidate).
    #[error("measurement failed: {0}")]
    Harness(String),
    /// A candidate that did not build, with its recorded error.
    #[error("{1}")]
    Failed(ErrorClass, String),
}

/// The class of a failed trial, as tuning records store it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    InvalidConfig,
    CompileError,
    CompileTimeout,
    RuntimeCrash,
    RunTimeout,
    WrongResult,
    AllocFailed,
    Harness,
}

impl MeasureError {
    pub fn class(&self) -> ErrorClass {
        match self {
            MeasureError::Config(_) => ErrorClass::InvalidConfig,
            MeasureError::Compile(_) => ErrorClass::CompileError,
            MeasureError::CompileTimeout(_) => ErrorClass::CompileTimeout,
            MeasureError::Crash(_) => ErrorClass::RuntimeCrash,
            MeasureError::Timeout(_) => ErrorClass::RunTimeout,
            MeasureError::WrongResult(_) => ErrorClass::WrongResult,
            MeasureError::Alloc => ErrorClass::AllocFailed,
            MeasureError::Io { .. } | MeasureError::Harness(_) => ErrorClass::Harness,
            MeasureError::Failed(c, _) => *c,
        }
    }
}

/// How to time a candidate.
#[derive(Clone, Copy, Debug)]
pub struct TimingOptions {
    /// Each sample repeats the call until it lasts at least this long.
    pub min_sample_secs: f64,
    pub samples: usize,
    pub threads: usize,
    /// Evict the caches before every call (then each sample is one call).
    pub flush: bool,
    /// Limit for one run of the program.
    pub timeout: Duration,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            min_sample_secs: 0.05,
            samples: 7,
            threads: 1,
            flush: false,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Seconds per call: the median and spread of the samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The best ISA level of this machine (capped by `AUTOTUNE_ISA`, as the runtime does).
pub fn host_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    let detected = if is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512dq")
    {
        Isa::Avx512
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        Isa::Avx2
    } else {
        Isa::Baseline
    };
    #[cfg(not(target_arch = "x86_64"))]
    let detected = Isa::Baseline;
    let rank = |i: Isa| match i {
        Isa::Avx512 => 2,
        Isa::Avx2 => 1,
        Isa::Baseline => 0,
    };
    let cap = match std::env::var("AUTOTUNE_ISA").as_deref() {
        Ok("avx2") => Isa::Avx2,
        Ok("baseline") => Isa::Baseline,
        _ => Isa::Avx512,
    };
    if rank(cap) < rank(detected) {
        cap
    } else {
        detected
    }
}

/// A compiled batch of candidates, with inputs written and the reference output.
pub struct Batch {
    pub workload: Workload,
    pub dir: PathBuf,
    exe: PathBuf,
    pub len: usize,
    /// Per candidate: why it did not build, if it did not.
    pub failed: Vec<Option<(ErrorClass, String)>>,
    reference: Vec<f64>,
}

const RUNTIME_PREFIX: &str = "autotune1_measure";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MeasureError + '_ {
    move |source| MeasureError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a batch measures: a config of the space, or (for fault-injection tests)
/// a hand-written C function whose name is the placeholder `CANDIDATE`.
#[derive(Clone, Debug, PartialEq)]
pub enum Candidate {
    Config(Config),
    #[doc(hidden)]
    Source(String),
}

/// Limit for one compiler process.
const COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// Generates, compiles and prepares `configs` of `w` in `dir` (created if
/// missing). Inputs are uniform in [-1, 1) from `seed`.
pub fn build_batch(
    w: &Workload,
    configs: &[Config],
    dir: &Path,
    seed: u64,
) -> Result<Batch, MeasureError> {
    let candidates: Vec<Candidate> = configs.iter().cloned().map(Candidate::Config).collect();
    build_candidates(w, &candidates, dir, seed)
}

/// As [`build_batch`] for any candidates. A candidate that cannot be generated
/// or compiled is recorded in [`Batch::failed`] and the others still build.
pub fn build_candidates(
    w: &Workload,
    candidates: &[Candidate],
    dir: &Path,
    seed: u64,
) -> Result<Batch, MeasureError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let isa = host_isa();
    let t = w.op.dtype.c_name();
    let (in_sizes, out_size) = w.sizes();
    let header = crate::codegen::file_header(
        &format!("measuring `{}`", w.key()),
        w.op.dtype,
        RUNTIME_PREFIX,
    );
    let mut failed: Vec<Option<(ErrorClass, String)>> = vec![None; candidates.len()];
    let mut sources: Vec<Option<String>> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let name = format!("cand{i}");
        sources.push(match c {
            Candidate::Config(c) => match crate::kernel_c(
                &w.op,
                Variant::Specialized(w.spec),
                Some(c.clone()),
                &[isa],
                name,
                RUNTIME_PREFIX.to_string(),
            ) {
                Ok(src) => Some(src),
                Err(e) => {
                    failed[i] = Some((ErrorClass::InvalidConfig, e.to_string()));
                    None
                }
            },
            Candidate::Source(src) => Some(src.replace("CANDIDATE", &name)),
        });
    }
    // Kernels in two files so both cores compile; a file that fails is split into
    // one file per candidate to find the culprits.
    let mut objects = Vec::new();
    let groups: Vec<Vec<usize>> = (0..2)
        .map(|g| {
            (0..candidates.len())
                .filter(|i| i % 2 == g && sources[*i].is_some())
                .collect()
        })
        .collect();
    let write_group = |name: &str, members: &[usize]| -> Result<PathBuf, MeasureError> {
        let mut text = header.clone();
        for &i in members {
            text.push_str(sources[i].as_deref().unwrap_or_default());
        }
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
        Ok(path)
    };
    let mut files = Vec::new();
    for (g, members) in groups.iter().enumerate() {
        files.push((
            write_group(&format!("kernels{g}.c"), members)?,
            members.clone(),
        ));
    }
    let compiler = c_compiler()?;
    let results = compile_objects(
        &compiler,
        &files.iter().map(|f| f.0.clone()).collect::<Vec<_>>(),
    );
    for ((_, members), result) in files.iter().zip(results) {
        match result {
            Ok(o) => objects.push(o),
            Err(_) => {
                let singles: Vec<PathBuf> = members
                    .iter()
                    .map(|&i| write_group(&format!("cand{i}.c"), &[i]))
                    .collect::<Result<_, _>>()?;
                for (&i, r) in members.iter().zip(compile_objects(&compiler, &singles)) {
                    match r {
                        Ok(o) => objects.push(o),
                        Err(e) => failed[i] = Some((e.class(), e.to_string())),
                    }
                }
            }
        }
    }
    // The reference: the generic kernel with the default schedule (plain loops,
    // a different lowering path from the candidates').
    let mut reference = header.clone();
    reference.push_str(&crate::kernel_c(
        &w.op,
        Variant::Generic,
        None,
        &[isa],
        "reference".to_string(),
        RUNTIME_PREFIX.to_string(),
    )?);
    let params: Vec<String> = (0..in_sizes.len())
        .map(|_| format!("const {t} *"))
        .chain([format!("{t} *")])
        .collect();
    let mut driver = String::new();
    let _ = writeln!(
        driver,
        "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\
         typedef int32_t (*kernel_t)({});\nvoid {RUNTIME_PREFIX}_set_num_threads(int32_t);",
        params.join(", ")
    );
    let names: Vec<String> = (0..candidates.len())
        .map(|i| match failed[i] {
            None => {
                let _ = writeln!(driver, "int32_t cand{i}({});", params.join(", "));
                format!("cand{i}")
            }
            Some(_) => "0".to_string(),
        })
        .collect();
    let shape_params: Vec<&str> = w.shapes().iter().map(|_| "int64_t").collect();
    let _ = writeln!(
        driver,
        "int32_t reference({});\nstatic int32_t run_reference({}) {{ return reference({}); }}",
        params
            .iter()
            .map(|p| p.as_str())
            .chain(shape_params)
            .collect::<Vec<_>>()
            .join(", "),
        params
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{p}p{i}"))
            .collect::<Vec<_>>()
            .join(", "),
        (0..params.len())
            .map(|i| format!("p{i}"))
            .chain(w.shapes().iter().map(|v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        driver,
        "static kernel_t kernels[] = {{{}}};",
        if names.is_empty() {
            "0".to_string()
        } else {
            names.join(", ")
        }
    );
    let _ = writeln!(
        driver,
        "static const size_t in_sizes[] = {{{}}};",
        in_sizes
            .iter()
            .map(|s| s.to_string())
            .chain(["0".to_string()])
            .collect::<Vec<_>>()
            .join(", ")
    );
    let args: Vec<String> = (0..in_sizes.len())
        .map(|i| format!("in[{i}]"))
        .chain(["out".to_string()])
        .collect();
    driver.push_str(
        &DRIVER
            .replace("ELEM", t)
            .replace("N_INPUTS", &in_sizes.len().to_string())
            .replace("N_IN", &in_sizes.len().max(1).to_string())
            .replace("OUT_SIZE", &out_size.to_string())
            .replace("CALL_ARGS", &args.join(", "))
            .replace("PREFIX", RUNTIME_PREFIX),
    );
    let mut support = Vec::new();
    for (name, source) in crate::RUNTIME_C {
        let path = dir.join(name);
        std::fs::write(&path, crate::runtime_c(RUNTIME_PREFIX, source)).map_err(io(&path))?;
        support.push(path);
    }
    for (name, text) in [("reference.c", reference), ("driver.c", driver)] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
        support.push(path);
    }
    for r in compile_objects(&compiler, &support) {
        objects
            .push(r.map_err(|e| MeasureError::Harness(format!("the measurement program: {e}")))?);
    }
    let exe = dir.join("measure");
    let mut link = compiler.to_command();
    link.args(&objects)
        .arg("-o")
        .arg(&exe)
        .args(["-lm", "-pthread"]);
    run_compiler(link).map_err(|e| MeasureError::Harness(format!("linking: {e}")))?;
    // Inputs, then the reference output.
    let mut rng = StdRng::seed_from_u64(seed);
    for (i, n) in in_sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..*n)
            .flat_map(|_| {
                let v: f64 = rng.gen_range(-1.0..1.0);
                match w.op.dtype {
                    DType::F32 => (v as f32).to_le_bytes().to_vec(),
                    DType::F64 => v.to_le_bytes().to_vec(),
                }
            })
            .collect();
        let path = dir.join(format!("in{i}.bin"));
        std::fs::write(&path, bytes).map_err(io(&path))?;
    }
    let ref_path = dir.join("reference.bin");
    let mut cmd = Command::new(&exe);
    cmd.arg("0").arg(dir).arg("reference").arg(&ref_path);
    run_limited(cmd, Duration::from_secs(600))
        .map_err(|e| MeasureError::Harness(format!("the reference kernel: {e}")))?;
    let reference = read_output(&ref_path, w.op.dtype)?;
    Ok(Batch {
        workload: w.clone(),
        dir: dir.to_path_buf(),
        exe,
        len: candidates.len(),
        failed,
        reference,
    })
}

/// The C compiler's own version line (`gcc (Debian 12.2.0-14) 12.2.0`).
pub fn compiler_version() -> String {
    c_compiler()
        .ok()
        .and_then(|c| c.to_command().arg("--version").output().ok())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn c_compiler() -> Result<cc::Tool, MeasureError> {
    let target = env!("AUTOTUNE_HOST_TARGET");
    cc::Build::new()
        .target(target)
        .host(target)
        .opt_level(crate::OPT_LEVEL)
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| MeasureError::Harness(format!("no C compiler: {e}")))
}

/// Compiles each file to an object with the shipping flags, two at a time.
fn compile_objects(compiler: &cc::Tool, files: &[PathBuf]) -> Vec<Result<PathBuf, MeasureError>> {
    let mut out = Vec::new();
    for pair in files.chunks(2) {
        let results: Vec<Result<PathBuf, MeasureError>> = std::thread::scope(|s| {
            let handles: Vec<_> = pair
                .iter()
                .map(|f| {
                    let o = f.with_extension("o");
                    let mut cmd = compiler.to_command();
                    cmd.args(crate::C_FLAGS).arg("-c").arg(f).arg("-o").arg(&o);
                    s.spawn(move || run_compiler(cmd).map(|_| o))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("compiler thread"))
                .collect()
        });
        out.extend(results);
    }
    out
}

fn run_compiler(cmd: Command) -> Result<(), MeasureError> {
    match run_limited(cmd, COMPILE_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(MeasureError::Timeout(d)) => Err(MeasureError::CompileTimeout(d)),
        Err(MeasureError::Crash(text)) => {
            // The first errors say what went wrong; keep the record short.
            let head: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("error"))
                .take(5)
                .collect();
            Err(MeasureError::Compile(if head.is_empty() {
                text
            } else {
                head.join("\n")
            }))
        }
        Err(e) => Err(e),
    }
}

/// Runs a command with a time limit, returning its stdout.
fn run_limited(mut cmd: Command, limit: Duration) -> Result<String, MeasureError> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| MeasureError::Crash(format!("cannot start the measurement program: {e}")))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(MeasureError::Timeout(limit));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(MeasureError::Crash(e.to_string())),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| MeasureError::Crash(e.to_string()))?;
    match out.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(3) => Err(MeasureError::Alloc),
        code => {
            use std::os::unix::process::ExitStatusExt;
            let why = match (code, out.status.signal()) {
                (_, Some(sig)) => format!("killed by signal {sig}"),
                (Some(c), _) => format!("exit status {c}"),
                _ => "unknown".to_string(),
            };
            Err(MeasureError::Crash(format!(
                "{why}; {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

impl Batch {
    fn built(&self, i: usize) -> Result<(), MeasureError> {
        match &self.failed[i] {
            Some((class, msg)) => Err(MeasureError::Failed(*class, msg.clone())),
            None => Ok(()),
        }
    }

    /// Runs candidate `i` once and compares its output with the reference.
    pub fn check(&self, i: usize, timeout: Duration) -> Result<(), MeasureError> {
        self.built(i)?;
        let out_path = self.dir.join(format!("out{i}.bin"));
        let mut cmd = Command::new(&self.exe);
        cmd.arg(i.to_string())
            .arg(&self.dir)
            .arg("check")
            .arg(&out_path);
        run_limited(cmd, timeout)?;
        let got = read_output(&out_path, self.workload.op.dtype)?;
        let _ = std::fs::remove_file(&out_path);
        compare(&got, &self.reference, self.workload.op.dtype)
    }

    /// Times candidate `i`.
    pub fn time(&self, i: usize, opts: &TimingOptions) -> Result<Timing, MeasureError> {
        self.built(i)?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg(i.to_string())
            .arg(&self.dir)
            .arg("time")
            .arg(opts.min_sample_secs.to_string())
            .arg(opts.samples.to_string())
            .arg(opts.threads.to_string())
            .arg(if opts.flush { "1" } else { "0" });
        let text = run_limited(cmd, opts.timeout)?;
        let field = |name: &str| -> Option<f64> {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        };
        match (field("median_s"), field("min_s"), field("max_s")) {
            (Some(median), Some(min), Some(max)) => Ok(Timing { median, min, max }),
            _ => Err(MeasureError::Crash(format!("unexpected output: {text}"))),
        }
    }
}

/// Reads an output file the driver wrote.
pub fn read_output(path: &Path, dtype: DType) -> Result<Vec<f64>, MeasureError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    Ok(match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64)
            .collect(),
        DType::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect(),
    })
}

/// Tolerance of a kernel against the reference: reductions may run in another
/// order and with fused multiply-adds.
pub fn compare(got: &[f64], want: &[f64], dtype: DType) -> Result<(), MeasureError> {
    if got.len() != want.len() {
        return Err(MeasureError::WrongResult(format!(
            "{} outputs, expected {}",
            got.len(),
            want.len()
        )));
    }
    let rtol = match dtype {
        DType::F32 => 1e-4,
        DType::F64 => 1e-10,
    };
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f64, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g == w {
            continue;
        }
        let tol = rtol * (w.abs() + scale);
        // NaN differences fail too.
        let close = (g - w).abs() <= tol;
        if !close {
            return Err(MeasureError::WrongResult(format!(
                "output element {i} is {g}, the reference {w} (tolerance {tol:e})"
            )));
        }
    }
    Ok(())
}

/// A measured config.
#[derive(Clone, Debug)]
pub struct Measurement {
    pub timing: Timing,
    pub gflops: f64,
}

/// Compiles one config, checks it against the reference and times it: the
/// measurable interface the tuner builds on.
pub fn bench(
    w: &Workload,
    config: &Config,
    dir: &Path,
    opts: &TimingOptions,
) -> Result<Measurement, MeasureError> {
    let batch = build_batch(w, std::slice::from_ref(config), dir, 1)?;
    batch.check(0, opts.timeout)?;
    let timing = batch.time(0, opts)?;
    Ok(Measurement {
        gflops: w.flops() / timing.median / 1e9,
        timing,
    })
}

/// The driver's `main` (ELEM, N_IN, N_INPUTS, OUT_SIZE, CALL_ARGS and PREFIX are
/// replaced when a batch is generated).
const DRIVER: &str = r#"
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static ELEM *read_input(const char *dir, int i, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
  ELEM *p = malloc(sizeof(ELEM) * (n + 1));
  FILE *f = fopen(path, "rb");
  if (!p || !f || fread(p, sizeof(ELEM), n, f) != n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  return p;
}

/* Evicts the caches by writing a buffer larger than the last-level cache. */
static void flush_caches(void) {
  static char *junk;
  const size_t size = (size_t)256 << 20;
  if (!junk) junk = malloc(size);
  if (junk) memset(junk, (int)(now() * 1000) & 0xff, size);
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int idx = atoi(argv[1]);
  const char *dir = argv[2];
  ELEM *in[N_IN];
  for (int i = 0; i < N_INPUTS; ++i) in[i] = read_input(dir, i, in_sizes[i]);
  ELEM *out = calloc((size_t)OUT_SIZE + 1, sizeof(ELEM));
  if (!out) return 3;
  kernel_t k = kernels[idx];
  if (!k && strcmp(argv[3], "reference")) return 4;
  if (!strcmp(argv[3], "check") || !strcmp(argv[3], "reference")) {
    if (!strcmp(argv[3], "reference") ? run_reference(CALL_ARGS) : k(CALL_ARGS)) return 3;
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(out, sizeof(ELEM), (size_t)OUT_SIZE, f) != (size_t)OUT_SIZE) return 2;
    fclose(f);
    return 0;
  }
  double min_sample = atof(argv[4]);
  int samples = atoi(argv[5]);
  PREFIX_set_num_threads(atoi(argv[6]));
  int flush = atoi(argv[7]);
  if (samples < 1) samples = 1;
  if (samples > 64) samples = 64;
  /* Warm-up, which also sizes the repeats of a sample. */
  double t0 = now();
  if (k(CALL_ARGS)) return 3;
  double once = now() - t0;
  long reps = flush ? 1 : (long)(min_sample / (once > 1e-9 ? once : 1e-9)) + 1;
  if (reps > 1000000) reps = 1000000;
  double s[64];
  for (int j = 0; j < samples; ++j) {
    double total = 0;
    for (long r = 0; r < reps; ++r) {
      if (flush) flush_caches();
      double a = now();
      if (k(CALL_ARGS)) return 3;
      total += now() - a;
    }
    s[j] = total / (double)reps;
  }
  qsort(s, (size_t)samples, sizeof s[0], cmp_double);
  printf("median_s=%.9e min_s=%.9e max_s=%.9e reps=%ld\n", s[samples / 2], s[0], s[samples - 1], reps);
  return 0;
}
"#;
