//! How a trial fails, and the class its record stores.

use std::path::PathBuf;
use std::time::Duration;

use autotune_codegen::CodegenError;

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("cannot prepare the measurement in {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config is not in the space: {}", .0.source)]
    Config(#[from] CodegenError),
    #[error("compile error: {0}")]
    Compile(String),
    #[error("the compiler ran past its {0:?} time limit")]
    CompileTimeout(Duration),
    #[error("{bytes} bytes of C, over the {limit}-byte limit: not compiled")]
    SourceTooLarge { bytes: usize, limit: usize },
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
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    InvalidConfig,
    CompileError,
    CompileTimeout,
    SourceTooLarge,
    RuntimeCrash,
    RunTimeout,
    WrongResult,
    AllocFailed,
    Harness,
    /// A class this version does not know, read from a log that a newer
    /// version wrote: the trial failed, for a reason this version cannot name.
    #[serde(other)]
    Unknown,
}

impl MeasureError {
    pub fn class(&self) -> ErrorClass {
        match self {
            MeasureError::Config(_) => ErrorClass::InvalidConfig,
            MeasureError::Compile(_) => ErrorClass::CompileError,
            MeasureError::CompileTimeout(_) => ErrorClass::CompileTimeout,
            MeasureError::SourceTooLarge { .. } => ErrorClass::SourceTooLarge,
            MeasureError::Crash(_) => ErrorClass::RuntimeCrash,
            MeasureError::Timeout(_) => ErrorClass::RunTimeout,
            MeasureError::WrongResult(_) => ErrorClass::WrongResult,
            MeasureError::Alloc => ErrorClass::AllocFailed,
            MeasureError::Io { .. } | MeasureError::Harness(_) => ErrorClass::Harness,
            MeasureError::Failed(c, _) => *c,
        }
    }
}
