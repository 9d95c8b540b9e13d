//! Every input of a build that does not come from the source: the variables
//! cargo sets for build scripts, autotune's own environment variables and the
//! crate's `[package.metadata.autotune]`. Nothing else in the build helper
//! reads the environment; [`ENV`] is the one table of autotune's variables, and
//! the `rerun-if-env-changed` lines are printed from it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use autotune_codegen::{Isa, Target};
use autotune_lang::mangle::Package;

use crate::cache::Cpu;
use crate::error::Error;

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

/// One of autotune's build-time environment variables.
pub struct EnvVar {
    pub name: &'static str,
    /// What it does, as the README's table says.
    pub doc: &'static str,
}

/// autotune's variables that change what a build does; cargo reruns the build
/// script when any of them changes.
pub const ENV: &[EnvVar] = &[
    EnvVar {
        name: "AUTOTUNE",
        doc: "the mode: off, cached, locked, tune (default) or retune",
    },
    EnvVar {
        name: "AUTOTUNE_TRIALS",
        doc: "trials per workload tuned in the build (default 48)",
    },
    EnvVar {
        name: "AUTOTUNE_SECONDS",
        doc: "seconds per workload tuned in the build (default 120)",
    },
    EnvVar {
        name: "AUTOTUNE_TRANSFER",
        doc: "`off` tunes without the tuning history",
    },
    EnvVar {
        name: "AUTOTUNE_MODEL",
        doc: "the pre-trained cost model tuning ranks with: a model file (`cargo autotune \
              train`), or `off` for none (default: the one shipped for the target)",
    },
    EnvVar {
        name: "AUTOTUNE_HISTORY",
        doc: "the per-user store of record logs (empty: none)",
    },
    EnvVar {
        name: "AUTOTUNE_TUNE_ISA",
        doc: "avx2 or baseline: tune and look up entries for that ISA level instead of \
              this CPU's best (the kernels' run-time cap, AUTOTUNE_ISA, is not a build input)",
    },
    EnvVar {
        name: "AUTOTUNE_NUM_THREADS",
        doc: "the kernels' thread count, which build-time tuning times with",
    },
    EnvVar {
        name: "XDG_CACHE_HOME",
        doc: "where the per-user store lives by default",
    },
    EnvVar {
        name: "HOME",
        doc: "where the per-user store lives without XDG_CACHE_HOME",
    },
];

/// The budget of a workload tuned in a build.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub trials: usize,
    pub seconds: f64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            trials: 48,
            seconds: 120.0,
        }
    }
}

/// Which pre-trained cost model build-time tuning ranks with (`AUTOTUNE_MODEL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// The one shipped with autotune for the target, if any.
    Shipped,
    /// None: the model-guided search from scratch (or the black-box tuner).
    Off,
    /// A model file (`cargo autotune train`).
    File(PathBuf),
}

/// What a build script was given.
#[derive(Clone, Debug)]
pub struct Settings {
    pub out_dir: PathBuf,
    pub manifest_dir: PathBuf,
    pub package: Package,
    /// The target the kernels are built for, at the ISA level tuned and looked up.
    pub target: Target,
    /// Every ISA level the kernels carry a clone for.
    pub isas: Vec<Isa>,
    /// Whether the build runs on the machine it builds for (tuning measures).
    pub native: bool,
    /// This machine's CPU: the cache prefers its entries, and stores them.
    pub cpu: Cpu,
    /// Jobs cargo runs at once (the build's share of the cores).
    pub jobs: usize,
    pub mode: Option<Mode>,
    pub budget: Budget,
    pub model: ModelChoice,
    pub transfer: bool,
    /// The per-user store of record logs.
    pub user_store: Option<PathBuf>,
    /// The thread count the kernels ship with.
    pub threads: usize,
    /// Whether the package's source may be written (not a registry or git
    /// dependency, nor `cargo package`'s verification build).
    pub local: bool,
}

impl Settings {
    /// Reads the build script's environment and the manifest's metadata.
    pub fn from_env() -> Result<Settings, Error> {
        Settings::read(&|name| std::env::var_os(name))
    }

    /// As [`Settings::from_env`], from any variable lookup (tests).
    pub fn read(var: &dyn Fn(&str) -> Option<OsString>) -> Result<Settings, Error> {
        let text = |name: &'static str| -> Result<Option<String>, Error> {
            match var(name) {
                None => Ok(None),
                Some(v) => v.into_string().map(Some).map_err(|v| Error::BadEnv {
                    var: name,
                    value: v.to_string_lossy().into_owned(),
                    expected: "UTF-8 text",
                }),
            }
        };
        let out_dir = PathBuf::from(var("OUT_DIR").ok_or(Error::NotInBuildScript)?);
        let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR").unwrap_or_default());
        let package = Package {
            name: text("CARGO_PKG_NAME")?.unwrap_or_default(),
            version: text("CARGO_PKG_VERSION")?.unwrap_or_default(),
        };
        let triple = text("TARGET")?.unwrap_or_default();
        let native = text("HOST")? == Some(triple.clone());
        let arch = text("CARGO_CFG_TARGET_ARCH")?.unwrap_or_default();
        let isas = Isa::levels(&arch);
        // The level tuned and looked up: the host's (when building for it), capped.
        let best = if native { Isa::detect() } else { isas[0] };
        let isa = tune_isa(best, text("AUTOTUNE_TUNE_ISA")?.as_deref())?;
        let mode = match text("AUTOTUNE")?.as_deref() {
            None | Some("") => None,
            Some("off") => Some(Mode::Off),
            Some("cached") => Some(Mode::Cached),
            Some("locked") => Some(Mode::Locked),
            Some("tune") => Some(Mode::Tune),
            Some("retune") => Some(Mode::Retune),
            Some(other) => {
                return Err(Error::BadEnv {
                    var: "AUTOTUNE",
                    value: other.to_string(),
                    expected: "off, cached, locked, tune or retune",
                })
            }
        };
        let meta = Metadata::read(&manifest_dir)?;
        let budget = Budget {
            trials: match text("AUTOTUNE_TRIALS")? {
                Some(v) => parse_count(&v).ok_or(Error::BadEnv {
                    var: "AUTOTUNE_TRIALS",
                    value: v,
                    expected: "a whole number of trials, at least 1",
                })?,
                None => meta.trials.unwrap_or(Budget::default().trials),
            },
            seconds: match text("AUTOTUNE_SECONDS")? {
                Some(v) => parse_seconds(&v).ok_or(Error::BadEnv {
                    var: "AUTOTUNE_SECONDS",
                    value: v,
                    expected: "a positive number of seconds",
                })?,
                None => meta.seconds.unwrap_or(Budget::default().seconds),
            },
        };
        let transfer = match text("AUTOTUNE_TRANSFER")?.as_deref() {
            None | Some("" | "on" | "1" | "true") => true,
            Some("off" | "0" | "false") => false,
            Some(v) => {
                return Err(Error::BadEnv {
                    var: "AUTOTUNE_TRANSFER",
                    value: v.to_string(),
                    expected: "on or off",
                })
            }
        };
        let model = match text("AUTOTUNE_MODEL")?.as_deref() {
            None | Some("") => ModelChoice::Shipped,
            Some("off") => ModelChoice::Off,
            // Relative to the package, where cargo runs build scripts.
            Some(path) => ModelChoice::File(manifest_dir.join(path)),
        };
        let user_store = user_store(var("AUTOTUNE_HISTORY"), var("XDG_CACHE_HOME"), var("HOME"));
        let threads = shipped_threads(text("AUTOTUNE_NUM_THREADS")?.as_deref());
        let jobs = text("NUM_JOBS")?
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(1);
        Ok(Settings {
            local: is_local(&manifest_dir),
            out_dir,
            manifest_dir,
            package,
            target: Target { triple, isa },
            isas,
            native,
            cpu: Cpu::host(),
            jobs,
            mode,
            budget,
            model,
            transfer,
            user_store,
            threads,
        })
    }

    /// The `cargo:rerun-if-env-changed` lines of [`ENV`].
    pub fn rerun_lines() -> impl Iterator<Item = String> {
        ENV.iter()
            .map(|v| format!("cargo:rerun-if-env-changed={}", v.name))
    }
}

/// The ISA level to tune and look up entries for: `best`, capped by the value
/// of `AUTOTUNE_TUNE_ISA` (`avx512`, `avx2` or `baseline`; a cap at or above
/// `best` changes nothing; unset or empty: no cap).
pub fn tune_isa(best: Isa, cap: Option<&str>) -> Result<Isa, Error> {
    match cap {
        None | Some("") => Ok(best),
        Some(v) => match v.parse::<Isa>() {
            Ok(level) => Ok(level.min(best)),
            Err(_) => Err(Error::BadEnv {
                var: "AUTOTUNE_TUNE_ISA",
                value: v.to_string(),
                expected: "avx512, avx2 or baseline",
            }),
        },
    }
}

fn parse_count(v: &str) -> Option<usize> {
    v.trim().parse::<usize>().ok().filter(|&n| n > 0)
}

fn parse_seconds(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
}

/// The per-user store (the rule lives with the tuner when it is built in, so
/// that `cargo autotune` and the build agree).
#[cfg(feature = "tune")]
use autotune_tune::history::user_store;

#[cfg(not(feature = "tune"))]
fn user_store(_: Option<OsString>, _: Option<OsString>, _: Option<OsString>) -> Option<PathBuf> {
    None
}

/// The thread count a kernel ships with, and so the one tuning times with: the
/// value of `AUTOTUNE_NUM_THREADS` (read by the caller) if it is a positive
/// integer, else the CPUs this process may run on (its affinity mask, as the
/// pool in `pool.c` counts them); at most 256 (the pool's cap).
pub fn shipped_threads(num_threads_var: Option<&str>) -> usize {
    num_threads_var
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(affinity_cpus)
        .min(256)
}

#[cfg(target_os = "linux")]
fn affinity_cpus() -> usize {
    // SAFETY: sched_getaffinity fills the zeroed set of the size it is given;
    // CPU_COUNT only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) == 0 {
            return (libc::CPU_COUNT(&set) as usize).max(1);
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(not(target_os = "linux"))]
fn affinity_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A package from a registry, a vendored directory, a git dependency or
/// `cargo package`'s verification build never has its source directory
/// written. Every packaged crate carries the `Cargo.toml.orig` that `cargo
/// package` writes beside the normalised manifest, wherever it was unpacked.
fn is_local(manifest_dir: &Path) -> bool {
    let p = manifest_dir.to_string_lossy().replace('\\', "/");
    !(manifest_dir.join("Cargo.toml.orig").exists()
        || p.contains("/.cargo/registry/")
        || p.contains("/.cargo/git/")
        || p.contains("/target/package/"))
}

/// `[package.metadata.autotune]` of the crate's manifest.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Metadata {
    trials: Option<usize>,
    seconds: Option<f64>,
}

impl Metadata {
    fn read(manifest_dir: &Path) -> Result<Metadata, Error> {
        let path = manifest_dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(Metadata::default());
        };
        let bad = |message: String| Error::BadMetadata {
            path: path.clone(),
            message,
        };
        let manifest: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let Some(table) = manifest
            .get("package")
            .and_then(|p| p.get("metadata"))
            .and_then(|m| m.get("autotune"))
        else {
            return Ok(Metadata::default());
        };
        let meta: Metadata = table.clone().try_into().map_err(|e: toml::de::Error| {
            bad(format!("[package.metadata.autotune]: {}", e.message()))
        })?;
        if meta.trials == Some(0) {
            return Err(bad(
                "[package.metadata.autotune] trials must be at least 1".into()
            ));
        }
        if meta.seconds.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return Err(bad(
                "[package.metadata.autotune] seconds must be positive".into()
            ));
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, Error> {
        let dir = std::env::temp_dir().join(format!("autotune-settings-{}", std::process::id()));
        let mut map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        map.entry("OUT_DIR".into()).or_insert(dir.clone().into());
        map.entry("CARGO_MANIFEST_DIR".into()).or_insert(dir.into());
        Settings::read(&|name| map.get(name).cloned())
    }

    #[test]
    fn bad_values_name_the_variable_and_the_value() {
        for (var, value) in [
            ("AUTOTUNE_SECONDS", "-1"),
            ("AUTOTUNE_SECONDS", "NaN"),
            ("AUTOTUNE_TRIALS", "0"),
            ("AUTOTUNE_TRIALS", "many"),
            ("AUTOTUNE", "fast"),
            ("AUTOTUNE_TUNE_ISA", "avx9"),
            ("AUTOTUNE_TRANSFER", "maybe"),
        ] {
            let e = settings(&[(var, value)]).unwrap_err().to_string();
            assert!(e.contains(var) && e.contains(value), "{var}={value}: {e}");
        }
        // A cap names any level; one above the CPU's best changes nothing.
        assert_eq!(tune_isa(Isa::Avx2, Some("avx512")).unwrap(), Isa::Avx2);
        assert_eq!(tune_isa(Isa::Avx512, Some("avx2")).unwrap(), Isa::Avx2);
        let s = settings(&[("AUTOTUNE_SECONDS", "2.5"), ("AUTOTUNE_TRIALS", "7")]).unwrap();
        assert_eq!(
            s.budget,
            Budget {
                trials: 7,
                seconds: 2.5
            }
        );
    }

    #[test]
    fn metadata_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("autotune-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("Cargo.toml");
        let with = |meta: &str| {
            std::fs::write(
                &manifest,
                format!("[package]\nname = \"x\"\n[package.metadata.autotune]\n{meta}\n"),
            )
            .unwrap();
            let d = dir.to_str().unwrap();
            settings(&[("CARGO_MANIFEST_DIR", d)])
        };
        let s = with("trials = 5\nseconds = 9").unwrap();
        assert_eq!(
            s.budget,
            Budget {
                trials: 5,
                seconds: 9.0
            }
        );
        for bad in ["trials = \"5\"", "tirals = 5", "seconds = -3", "trials = 0"] {
            let e = with(bad).unwrap_err().to_string();
            assert!(
                e.contains("Cargo.toml") && e.contains("metadata.autotune"),
                "{bad}: {e}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_variable_read_is_in_the_rerun_table() {
        let src = include_str!("settings.rs");
        let rerun: Vec<String> = Settings::rerun_lines().collect();
        // Cargo's own variables never need a rerun line.
        let cargo = [
            "OUT_DIR",
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION",
            "TARGET",
            "HOST",
            "CARGO_CFG_TARGET_ARCH",
            "NUM_JOBS",
        ];
        for piece in src.split("var(\"").chain(src.split("text(\"")).skip(1) {
            let name = piece.split('"').next().unwrap();
            if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') && !cargo.contains(&name) {
                assert!(
                    rerun.contains(&format!("cargo:rerun-if-env-changed={name}")),
                    "{name} is read but not in ENV"
                );
            }
        }
    }
}
