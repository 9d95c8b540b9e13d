//! Kernel symbol names, derived once here so the macro's `extern "C"` declarations
//! and the build helper's C definitions agree by construction.
//!
//! A symbol reads `autotune1_<package>_<version>_<operator>_<fingerprint>_<variant>`:
//! - `autotune1` is the ABI version of this file (bump it when the calling
//!   convention of kernels changes);
//! - package and version keep two crates (or two versions of one) from clashing;
//! - the fingerprint hashes the operator's IR, so a macro expansion and a build
//!   script that disagree about an operator fail to link instead of running the
//!   wrong kernel;
//! - the variant is `generic` or the specialised sizes, e.g. `M1024_N1024_K1024`.
//!
//! Every kernel has the C signature
//! `int32_t sym(const T *in0, ..., T *out, void *slot0, ..., int64_t shape0, ...)`,
//! with a slot per input declared `constant` (where the kernel keeps its copies of
//! it; NULL for a plain tensor) and the shape arguments only in the generic variant
//! (one per shape variable, in id order). It returns 0, or 1 when it could not
//! allocate its scratch memory.

use crate::ir::Operator;

/// Which kernel of an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Symbolic shapes, passed at run time.
    Generic,
    /// `Operator::specializations[i]`.
    Specialized(usize),
}

/// Names the package that holds the operators, as the build script and the macro
/// both read it from Cargo's environment.
#[derive(Clone, Debug)]
pub struct Package {
    pub name: String,
    pub version: String,
}

impl Package {
    /// Reads `CARGO_PKG_NAME` and `CARGO_PKG_VERSION` (set for build scripts and
    /// for the crate compilations where the macro expands).
    pub fn from_env() -> Package {
        let get = |k| std::env::var(k).unwrap_or_default();
        Package {
            name: get("CARGO_PKG_NAME"),
            version: get("CARGO_PKG_VERSION"),
        }
    }
}

/// Replaces every character that cannot appear in a C identifier by `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// FNV-1a of the operator's `Debug` form: stable across runs and machines.
pub fn fingerprint(op: &Operator) -> u64 {
    fnv1a(format!("{op:?}").as_bytes())
}

/// 64-bit FNV-1a: a hash that is the same on every machine and Rust version
/// (std's hashers promise neither).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `M1024_N1024_K1024` for a specialisation (`M1..=4096_N1024_K1024` for a
/// bucket), `generic` otherwise.
pub fn variant_name(op: &Operator, variant: Variant) -> String {
    match variant {
        Variant::Generic => "generic".to_string(),
        Variant::Specialized(i) => {
            let spec = &op.specializations[i];
            op.input_shape_vars()
                .map(|(v, var)| format!("{}{}", var.name, spec.size_text(v)))
                .collect::<Vec<_>>()
                .join("_")
        }
    }
}

pub fn kernel_symbol(pkg: &Package, op: &Operator, variant: Variant) -> String {
    format!(
        "autotune1_{}_{}_{}_{:016x}_{}",
        sanitize(&pkg.name),
        sanitize(&pkg.version),
        op.name,
        fingerprint(op),
        sanitize(&variant_name(op, variant))
    )
}

/// Prefix of the runtime C functions (thread pool, ISA level) compiled with a
/// package's kernels: `<prefix>_parallel_for`, `<prefix>_isa_level`.
pub fn runtime_prefix(pkg: &Package) -> String {
    format!(
        "autotune1_{}_{}",
        sanitize(&pkg.name),
        sanitize(&pkg.version)
    )
}

/// The environment variable the build helper sets (`cargo:rustc-env`) for each
/// operator it compiled; the macro's expansion requires it, so a crate that
/// forgot its build script gets a compile error that says how to add one.
pub fn built_marker(op_name: &str) -> String {
    format!("AUTOTUNE_KERNELS_{op_name}")
}
