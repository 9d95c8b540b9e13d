//! Build-script helper of autotune: finds the `#[tensor_op]` operators in the
//! source files it is given, lowers each variant (every `specialize(...)` and one
//! generic kernel) to a loop nest and then to C, and compiles the C with the `cc`
//! crate into a static library linked into the calling crate.
//!
//! ```ignore
//! // build.rs
//! fn main() {
//!     autotune_build::Builder::new().file("src/ops.rs").compile();
//! }
//! ```
//!
//! Modules, in the order data flows through them: [`space`] (the schedule
//! space of a workload and its configs), [`lower`] and `tiled` (IR + schedule →
//! [`loopnest`]), [`codegen`] (loop nest → C); [`measure`] compiles candidates into a
//! program and times them; [`tune`] runs the tuning loop and its record log.
//! Parsing and symbol names come
//! from `autotune-lang`, shared with the `#[tensor_op]` macro.

pub mod cache;
pub mod codegen;
mod configs;
pub mod error;
pub mod features;
pub mod history;
pub mod loopnest;
pub mod lower;
pub mod measure;
pub mod model;
pub mod search;
pub mod space;
mod tiled;
pub mod tune;

use std::path::{Path, PathBuf};

use autotune_lang::mangle::{self, Package, Variant};
use autotune_lang::Operator;

use crate::codegen::Isa;
use crate::space::{Config, Space};

pub use error::{Diagnostic, Error};

/// The C source of the runtime the kernels call (thread pool, ISA detection);
/// compiled with each package's kernels and into measurement programs, with
/// `AUTOTUNE_POOL_PREFIX` replaced by [`mangle::runtime_prefix`].
pub const RUNTIME_C: [(&str, &str); 2] = [
    ("pool.c", include_str!("pool.c")),
    ("isa.c", include_str!("isa.c")),
];

/// The runtime's C source for a package.
pub fn runtime_c(prefix: &str, source: &str) -> String {
    source.replace("AUTOTUNE_POOL_PREFIX", prefix)
}

/// The optimisation level of every kernel, in the build and when measured.
/// (`-O2` compiles in half the time but ran the best GEMM and conv kernels
/// 20–30% slower: measured 157 vs 230 GFLOP/s on 1024³.)
pub const OPT_LEVEL: u32 = 3;

/// The flags every kernel is compiled with, in the build and when measured.
pub const C_FLAGS: [&str; 4] = [
    "-std=gnu99",
    "-fno-math-errno",
    "-ffp-contract=fast",
    // Generated nests define every tile index, whether or not a schedule reads it.
    "-Wno-unused-variable",
];

/// Compiles the operators of a crate's source files; see the crate docs.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    files: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    mode: Option<Mode>,
}

/// What the build does with the tuning cache (`AUTOTUNE=off|cached|locked|tune|retune`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Default schedules; the cache is not read.
    Off,
    /// Cached configs where the cache has them, default schedules elsewhere (with a
    /// warning).
    Cached,
    /// Like `Cached`, but a missing entry fails the build (as `cargo --locked`).
    Locked,
    /// Tune what the cache lacks (within `AUTOTUNE_TRIALS` / `AUTOTUNE_SECONDS`)
    /// and write it, when the package is local. The default: a first build tunes,
    /// later ones (and teammates') replay.
    Tune,
    /// Tune every workload again.
    Retune,
}

impl Mode {
    fn from_env() -> Result<Option<Mode>, Error> {
        match std::env::var("AUTOTUNE").as_deref() {
            Err(_) | Ok("") => Ok(None),
            Ok("cached") => Ok(Some(Mode::Cached)),
            Ok("off") => Ok(Some(Mode::Off)),
            Ok("locked") => Ok(Some(Mode::Locked)),
            Ok("tune") => Ok(Some(Mode::Tune)),
            Ok("retune") => Ok(Some(Mode::Retune)),
            Ok(other) => Err(Error::BadEnv {
                var: "AUTOTUNE",
                value: other.to_string(),
                expected: "off, cached, locked, tune or retune",
            }),
        }
    }
}

/// An operator found in a source file.
pub struct SourceOp {
    pub op: Operator,
    pub path: PathBuf,
    pub line: usize,
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
    /// and line) and exits the build script with status 1.
    pub fn compile(&self) {
        if let Err(e) = self.try_compile() {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }

    /// As [`Builder::compile`], returning the error instead.
    pub fn try_compile(&self) -> Result<(), Error> {
        let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").ok_or(Error::NotInBuildScript)?);
        let manifest_dir =
            PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
        for f in &self.files {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        let ops = load_operators(&manifest_dir, &self.files)?;
        let pkg = Package::from_env();
        let c_dir = out_dir.join("autotune");
        std::fs::create_dir_all(&c_dir).map_err(|source| Error::Write {
            path: c_dir.clone(),
            source,
        })?;
        let isas = Isa::levels(&std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default());
        for var in [
            "AUTOTUNE",
            "AUTOTUNE_TRIALS",
            "AUTOTUNE_SECONDS",
            "AUTOTUNE_ISA",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        let mode = Mode::from_env()?.or(self.mode).unwrap_or(Mode::Tune);
        let cache_dir = self
            .cache_dir
            .clone()
            .map(|d| manifest_dir.join(d))
            .unwrap_or_else(|| manifest_dir.join("tuning-cache"));
        if cache_dir.exists() {
            println!("cargo:rerun-if-changed={}", cache_dir.display());
        }
        let mut c_files = Vec::new();
        let mut missing = Vec::new();
        let all_ops: Vec<Operator> = ops.iter().map(|s| s.op.clone()).collect();
        for s in &ops {
            let path = c_dir.join(format!("{}.c", s.op.name));
            let configs = configs::for_operator(
                &s.op,
                &all_ops,
                mode,
                &cache_dir,
                &out_dir,
                &manifest_dir,
                &mut missing,
            )?;
            write_if_changed(&path, &operator_c(&pkg, &s.op, &configs, &isas)?)?;
            c_files.push(path);
        }
        if !missing.is_empty() {
            return Err(Error::Locked { missing });
        }
        let prefix = mangle::runtime_prefix(&pkg);
        for (name, source) in RUNTIME_C {
            let path = c_dir.join(name);
            write_if_changed(&path, &runtime_c(&prefix, source))?;
            c_files.push(path);
        }
        if !c_files.is_empty() {
            compile_c(
                &c_files,
                &format!("autotune_kernels_{}", mangle::sanitize(&pkg.name)),
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
            ops.push(SourceOp {
                op,
                path: rel.clone(),
                line,
            });
        }
    }
    Ok(ops)
}

/// The C source of every variant of one operator: each specialisation with its
/// config (`None`: the space's default config), and the generic kernel.
pub fn operator_c(
    pkg: &Package,
    op: &Operator,
    configs: &[Option<Config>],
    isas: &[Isa],
) -> Result<String, Error> {
    let runtime = mangle::runtime_prefix(pkg);
    let mut c = codegen::file_header(&format!("operator `{}`", op.name), op.dtype, &runtime);
    for i in 0..op.specializations.len() {
        let config = configs.get(i).cloned().flatten();
        c.push_str(&variant_c(pkg, op, Variant::Specialized(i), config, isas)?);
    }
    c.push_str(&variant_c(pkg, op, Variant::Generic, None, isas)?);
    Ok(c)
}

/// The C source of one variant (without the file header).
pub fn variant_c(
    pkg: &Package,
    op: &Operator,
    variant: Variant,
    config: Option<Config>,
    isas: &[Isa],
) -> Result<String, Error> {
    let symbol = mangle::kernel_symbol(pkg, op, variant);
    kernel_c(
        op,
        variant,
        config,
        isas,
        symbol,
        mangle::runtime_prefix(pkg),
    )
}

/// The C source of one variant under any symbol and runtime prefix (measurement
/// programs hold many candidates of one variant).
pub fn kernel_c(
    op: &Operator,
    variant: Variant,
    config: Option<Config>,
    isas: &[Isa],
    symbol: String,
    runtime: String,
) -> Result<String, Error> {
    let schedule = match variant {
        Variant::Generic => None,
        Variant::Specialized(i) => {
            let shapes = &op.specializations[i].values;
            let space = Space::new(op, shapes);
            let config = config.unwrap_or_else(|| space.default_config(op, shapes));
            Some(space.plan(op, &config).map_err(|source| Error::Config {
                op: op.name.clone(),
                variant: mangle::variant_name(op, variant),
                source,
            })?)
        }
    };
    let kernel = lower::lower(op, variant, schedule.as_deref(), symbol, runtime);
    Ok(codegen::kernel_c(&kernel, isas))
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

/// Compiles the kernels into `lib<name>.a` and tells cargo to link it. The flags
/// are fixed here, not taken from the profile: kernels are always optimised.
fn compile_c(files: &[PathBuf], name: &str) -> Result<(), Error> {
    let mut build = cc::Build::new();
    build.files(files).opt_level(OPT_LEVEL).warnings(true);
    for f in C_FLAGS {
        build.flag(f);
    }
    let compiler = build.try_get_compiler().map_err(|e| Error::NoCompiler {
        detail: e.to_string(),
    })?;
    if let Err(e) = compiler.to_command().arg("--version").output() {
        return Err(Error::NoCompiler {
            detail: format!("`{}`: {e}", compiler.path().display()),
        });
    }
    build.try_compile(name).map_err(|e| Error::Compile {
        dir: files[0].parent().unwrap_or(Path::new(".")).to_path_buf(),
        message: e.to_string(),
    })
}
