//! The tuner of autotune: measures candidate kernels of a workload and searches
//! its schedule space for the fastest. **Internal crate**: its API serves
//! `autotune-build` and `cargo autotune` and is not stable.
//!
//! Modules, in the order a tuning run uses them:
//! - [`measure`]: a batch of candidates compiled into one program (the kernel C
//!   from `autotune-codegen`, the flags that ship), run in child processes:
//!   checked against the reference, then timed;
//! - [`record`]: the JSON-lines record log of every trial;
//! - [`tuner`]: the [`Tuner`] interface and the black-box tuners;
//! - [`features`], [`model`], [`search`]: the loop nest's features, the cost
//!   model (XGBoost behind the `xgboost` feature) and the model-guided search;
//!   [`trees`] evaluates a saved XGBoost model without XGBoost, and
//!   [`pretrained`] is such a model as a versioned file;
//! - [`history`]: past trials of other workloads, for transfer learning;
//! - [`parallel`]: work spread over the cores (compiles, featurisation);
//! - [`spec`]: which tuner to run ([`TunerSpec`]);
//! - [`session`]: the tuning loop and [`TuningSession`], the one way both
//!   `cargo build` and `cargo autotune tune` tune a workload.
//!
//! This crate reads no environment variable: callers pass what they read
//! (thread count, per-user store, ISA cap) in.

pub mod compile_cost;
pub mod features;
pub mod history;
pub mod measure;
pub mod model;
pub mod parallel;
pub mod pretrained;
pub mod record;
pub mod search;
pub mod session;
pub mod spec;
pub mod trees;
pub mod tuner;

pub use measure::HOST_TRIPLE;
pub use record::{LogError, Record};
pub use session::{SessionReport, Summary, TuneError, TuneOptions, TuningSession};
pub use spec::TunerSpec;
pub use tuner::Tuner;
