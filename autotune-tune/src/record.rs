//! The record log: one JSON line per trial (measured or failed), appended as
//! trials finish, so that a run can be resumed and later runs can learn from it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use autotune_codegen::{
    Config, CpuId, KernelFingerprint, Target, Workload, WorkloadId, GENERATOR_VERSION,
};
use autotune_lang::ir::{Operator, Specialization};
use serde::{Deserialize, Serialize};

use crate::measure::{ErrorClass, MeasureError, Timing};

/// One measured (or failed) trial, as a line of the record log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Readable workload, e.g. `matmul[M1024 K1024 N1024]`.
    pub workload: String,
    /// Exact identity: operator IR fingerprint and shape values.
    pub workload_id: WorkloadId,
    /// Architecture and ISA level the trial ran with.
    pub target: Target,
    pub tuner: String,
    pub config: Config,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Median seconds per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TrialError>,
    /// Unix time of the measurement, in seconds.
    pub time: u64,
    /// The generator version the config was lowered with; records written before
    /// the field existed are of version 1, the only one there was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<u32>,
    /// The kernel thread count the trial was timed at; none in records written
    /// before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// The fingerprint of the kernel that was timed; none in records written
    /// before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFingerprint>,
    /// The CPU that timed the trial (its vendor, family and model); none in
    /// records written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuId>,
}

impl Record {
    /// The record of one trial of `w` on `target` at `threads` kernel
    /// threads, now.
    pub fn new(
        w: &Workload,
        target: &Target,
        threads: usize,
        tuner: &str,
        config: Config,
        outcome: Result<Timing, MeasureError>,
    ) -> Record {
        let (gflops, seconds, error) = match outcome {
            Ok(t) => (Some(w.flops() / t.median / 1e9), Some(t.median), None),
            Err(e) => (
                None,
                None,
                Some(TrialError {
                    class: e.class(),
                    message: e.to_string(),
                }),
            ),
        };
        Record {
            workload: w.key(),
            workload_id: w.id(),
            target: target.clone(),
            tuner: tuner.to_string(),
            kernel: KernelFingerprint::of(w, &config, target.isa).ok(),
            config,
            gflops,
            seconds,
            error,
            time: now(),
            generator: Some(GENERATOR_VERSION),
            threads: Some(threads),
            // The harness runs candidates on this machine.
            cpu: CpuId::detect(),
        }
    }

    /// Whether this generator lowered its config (records written before the
    /// field existed are of version 1, the only one there was).
    pub fn of_this_generator(&self) -> bool {
        self.generator.unwrap_or(1) == GENERATOR_VERSION
    }

    /// Whether this record, of workload `w`, measured the kernel this
    /// generator makes of its config (only such records are resumed or
    /// learned from): it was lowered by this generator, or it records the
    /// kernel it timed and that is still the kernel.
    pub fn is_current(&self, w: &Workload) -> bool {
        self.of_this_generator()
            || KernelFingerprint::still_made(self.kernel, w, &self.config, self.target.isa)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialError {
    pub class: ErrorClass,
    pub message: String,
}

/// A record log that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot read the record log {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not a tuning record", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot append to the record log {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Reads a record log (none if the file does not exist); a line that does not
/// parse is an error naming it.
pub fn load_log(path: &Path) -> Result<Vec<Record>, LogError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LogError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| LogError::Corrupt {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// Operators by the name and fingerprint their workload ids carry: the
/// workload of a record, at its own shapes.
pub(crate) struct Known<'a>(BTreeMap<(String, u64), &'a Operator>);

impl<'a> Known<'a> {
    pub(crate) fn new(ops: &'a [Operator]) -> Known<'a> {
        Known(
            ops.iter()
                .map(|op| {
                    let w = Workload {
                        op: Operator {
                            specializations: vec![Specialization::exact(Vec::new())],
                            ..op.clone()
                        },
                        spec: 0,
                    };
                    let id = w.id();
                    ((id.op, id.fingerprint), op)
                })
                .collect(),
        )
    }

    /// The workload `id` names, if its operator is known.
    pub(crate) fn workload(&self, id: &WorkloadId) -> Option<Workload> {
        let op = self.0.get(&(id.op.clone(), id.fingerprint))?;
        (id.shapes.len() == op.shape_vars.len()).then(|| Workload {
            op: Operator {
                specializations: vec![Specialization {
                    values: id.shapes.clone(),
                    bucket: id.bucket.clone(),
                }],
                ..(*op).clone()
            },
            spec: 0,
        })
    }
}

/// Records the kernel fingerprint of the records of this generator version in
/// the log at `path` that lack one and whose workload is of `ops` (at any
/// shapes); returns how many. Every other line is kept as it was; the file is
/// replaced atomically.
pub fn stamp_log(path: &Path, ops: &[Operator]) -> Result<usize, LogError> {
    let text = std::fs::read_to_string(path).map_err(|source| LogError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let known = Known::new(ops);
    let mut stamped = 0;
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        let mut r: Record = match line.trim() {
            "" => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            l => serde_json::from_str(l).map_err(|source| LogError::Corrupt {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            })?,
        };
        let w = known.workload(&r.workload_id);
        match w {
            Some(w) if r.kernel.is_none() && r.of_this_generator() => {
                r.kernel = KernelFingerprint::of(&w, &r.config, r.target.isa).ok();
                stamped += usize::from(r.kernel.is_some());
                out.push_str(&serde_json::to_string(&r).expect("records serialise"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    let err = |source| LogError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("jsonl.stamp.tmp");
    std::fs::write(&tmp, out).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(stamped)
}

/// Appends one record (creating the file and its directory).
pub fn append(path: &Path, r: &Record) -> Result<(), LogError> {
    let err = |source| LogError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let line = serde_json::to_string(r).expect("records serialise");
    // One write per line, so concurrent appenders interleave whole lines.
    f.write_all(format!("{line}\n").as_bytes()).map_err(err)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
