//! Build-script helper of autotune: finds the `#[tensor_op]` operators in the
//! source files it is given, picks each specialisation's config (from the
//! committed tuning cache, by tuning a miss, or the default), generates the C
//! with `autotune-codegen` and compiles it with the `cc` crate into a static
//! library linked into the calling crate.
//!
//! ```ignore
//! // build.rs
//! fn main() {
//!     autotune_build::Builder::new().file("src/ops.rs").compile();
//! }
//! ```
//!
//! Modules: [`settings`] (every environment and manifest input, in one
//! place), [`cache`] (the tuning cache), `configs` (which config each
//! specialisation gets), `objects` (compiling the C, with each file's
//! object kept by content in the target directory) and, with the `tune`
//! feature, `tuning` (tuning a miss with `autotune-tune`). The API of this crate is [`Builder`], [`Mode`],
//! [`Error`] and the cache; parsing comes from `autotune-lang`, shared with
//! the `#[tensor_op]` macro.
//!
//! Features: `tune` (default) tunes cache misses with a black-box tuner;
//! `xgboost` adds the learned cost model (needs cmake, a C++ compiler and
//! libclang). Without either, a build replays the cache and builds the default
//! schedule for a miss, with a warning.

pub mod cache;
mod configs;
pub mod error;
mod objects;
mod report;
pub mod settings;
#[cfg(feature = "tune")]
mod tuning;

use std::path::{Path, PathBuf};

use autotune_codegen::runtime::{runtime_c, RUNTIME_C};
use autotune_codegen::GenericSchedule;
use autotune_lang::mangle;
use autotune_lang::Operator;

pub use error::{Diagnostic, Error};
pub use settings::Mode;
use settings::Settings;

/// Compiles the operators of a crate's source files; see the crate docs.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    files: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    mode: Option<Mode>,
}

/// An operator found in a source file.
pub struct SourceOp {
    pub op: Operator,
    pub path: PathBuf,
    pub line: usize,
    /// A blocked variant of the operator declared there: called only at its
    /// specialisations, so its generic kernel is the default schedule.
    pub variant: bool,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Adds a source file (relative to the package root) that holds
    /// `#[tensor_op]` functions. Out-of-line modules are not followed.
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Builder {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// The mode when `AUTOTUNE` is not set (default: [`Mode::Tune`]).
    pub fn default_mode(&mut self, mode: Mode) -> &mut Builder {
        self.mode = Some(mode);
        self
    }

    /// Where the tuning cache lives (default: `tuning-cache/` beside the manifest).
    pub fn cache_dir(&mut self, dir: impl AsRef<Path>) -> &mut Builder {
        self.cache_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Generates and compiles the kernels; on failure prints the error (with file
    /// and line, and its causes) and exits the build script with status 1.
    pub fn compile(&self) {
        if let Err(e) = self.try_compile() {
            eprintln!("error: {}", error::chain(&e));
            std::process::exit(1);
        }
    }

    /// As [`Builder::compile`], returning the error instead.
    pub fn try_compile(&self) -> Result<(), Error> {
        let settings = Settings::from_env()?;
        for line in Settings::rerun_lines() {
            println!("{line}");
        }
        for f in &self.files {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        let ops = load_operators(&settings.manifest_dir, &self.files)?;
        let pkg = &settings.package;
        let c_dir = settings.out_dir.join("autotune");
        std::fs::create_dir_all(&c_dir).map_err(|source| Error::Write {
            path: c_dir.clone(),
            source,
        })?;
        let mode = settings.mode.or(self.mode).unwrap_or(Mode::Tune);
        let cache_dir = settings.manifest_dir.join(
            self.cache_dir
                .as_deref()
                .unwrap_or(Path::new("tuning-cache")),
        );
        // Every file the build reads is tracked, also one the build does not find
        // yet: a local package gets its (empty) cache directory now, so that a
        // cache that appears later (`git pull`, `cargo autotune tune --save`) reruns
        // this script. A packaged one cannot change.
        if settings.local && mode != Mode::Off {
            std::fs::create_dir_all(&cache_dir).map_err(|source| Error::Write {
                path: cache_dir.clone(),
                source,
            })?;
        }
        if cache_dir.exists() {
            println!("cargo:rerun-if-changed={}", cache_dir.display());
        }
        // `[package.metadata.autotune]`.
        println!(
            "cargo:rerun-if-changed={}",
            settings.manifest_dir.join("Cargo.toml").display()
        );
        let mut c_files = Vec::new();
        let mut missing = Vec::new();
        let all_ops: Vec<Operator> = ops.iter().map(|s| s.op.clone()).collect();
        for s in &ops {
            let path = c_dir.join(format!("{}.c", s.op.name));
            let configs =
                configs::for_operator(&s.op, &all_ops, mode, &cache_dir, &settings, &mut missing)?;
            let generic = match s.variant {
                true => Vec::new(),
                false => GenericSchedule::for_operator(&s.op, &configs, settings.target.isa),
            };
            // The generic kernel's tiles run the configs chosen for this target's level.
            let c = autotune_codegen::operator_c(
                pkg,
                &s.op,
                &configs,
                &generic,
                &settings.isas,
                settings.target.isa,
            )?;
            write_if_changed(&path, &c)?;
            c_files.push(path);
        }
        if !missing.is_empty() {
            return Err(Error::Locked { missing });
        }
        let prefix = mangle::runtime_prefix(pkg);
        for (name, source) in RUNTIME_C {
            let path = c_dir.join(name);
            write_if_changed(&path, &runtime_c(&prefix, source))?;
            c_files.push(path);
        }
        if !c_files.is_empty() {
            objects::compile(
                &c_files,
                &format!("autotune_kernels_{}", mangle::sanitize(&pkg.name)),
                objects::cache_dir(&settings.out_dir).as_deref(),
            )?;
        }
        for s in &ops {
            println!(
                "cargo:rustc-env={}={:016x}",
                mangle::built_marker(&s.op.name),
                mangle::fingerprint(&s.op)
            );
        }
        Ok(())
    }
}

/// Parses every operator of `files` (relative to `root`), rejecting duplicates.
pub fn load_operators(root: &Path, files: &[PathBuf]) -> Result<Vec<SourceOp>, Error> {
    let mut ops: Vec<SourceOp> = Vec::new();
    for rel in files {
        let path = root.join(rel);
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        let diag = |e: &syn::Error| Error::Source(Diagnostic::from_syn(rel.clone(), &text, e));
        let file = syn::parse_file(&text).map_err(|e| diag(&e))?;
        for found in autotune_lang::find_tensor_ops(&file) {
            let op = autotune_lang::parse_operator(found.attr, found.item).map_err(|e| diag(&e))?;
            let line = found.item.sig.ident.span().start().line;
            if let Some(prev) = ops.iter().find(|o| o.op.name == op.name) {
                return Err(Error::DuplicateOperator {
                    name: op.name,
                    first: format!("{}:{}", prev.path.display(), prev.line),
                    second: format!("{}:{line}", rel.display()),
                });
            }
            // Its blocked variants are operators of their own, tuned, cached
            // and built as any other (`autotune_lang::layout`).
            let variants = op.blocked_variants();
            ops.push(SourceOp {
                op,
                path: rel.clone(),
                line,
                variant: false,
            });
            ops.extend(variants.into_iter().map(|v| SourceOp {
                op: v.op,
                path: rel.clone(),
                line,
                variant: true,
            }));
        }
    }
    Ok(ops)
}

fn write_if_changed(path: &Path, text: &str) -> Result<(), Error> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|source| Error::Write {
        path: path.to_path_buf(),
        source,
    })
}
