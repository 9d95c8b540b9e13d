//! What a kernel is generated for: an ISA level (each kernel carries one clone
//! per level and dispatches at run time) and a [`Target`], the triple and level
//! a tuning result stands for.

use std::fmt;
use std::str::FromStr;

/// An instruction-set level a kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    Baseline,
    Avx2,
    Avx512,
}

impl Isa {
    /// Levels for a target architecture, best first.
    pub fn levels(target_arch: &str) -> Vec<Isa> {
        match target_arch {
            "x86_64" => vec![Isa::Avx512, Isa::Avx2, Isa::Baseline],
            _ => vec![Isa::Baseline],
        }
    }

    /// The best level of the CPU this runs on (CPUID; no cap applied: callers
    /// that honour a cap take the minimum).
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512dq")
            {
                Isa::Avx512
            } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                Isa::Avx2
            } else {
                Isa::Baseline
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Baseline
    }

    /// The value `<runtime>_isa_level()` returns for this level.
    pub(crate) fn code(self) -> i32 {
        match self {
            Isa::Avx512 => 2,
            Isa::Avx2 => 1,
            Isa::Baseline => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Baseline => "baseline",
        }
    }

    pub(crate) fn attribute(self) -> &'static str {
        match self {
            Isa::Avx512 => {
                "__attribute__((target(\"avx512f,avx512vl,avx512bw,avx512dq,avx2,fma\"))) "
            }
            Isa::Avx2 => "__attribute__((target(\"avx2,fma\"))) ",
            Isa::Baseline => "",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not an ISA level.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown ISA level `{0}` (expected avx512, avx2 or baseline)")]
pub struct UnknownIsa(pub String);

impl FromStr for Isa {
    type Err = UnknownIsa;

    fn from_str(s: &str) -> Result<Isa, UnknownIsa> {
        match s {
            "avx512" => Ok(Isa::Avx512),
            "avx2" => Ok(Isa::Avx2),
            "baseline" => Ok(Isa::Baseline),
            _ => Err(UnknownIsa(s.to_string())),
        }
    }
}

/// What a measurement stands for: the target triple and the ISA level the
/// kernels ran at. Written `x86_64-unknown-linux-gnu/avx512` in caches and
/// record logs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub triple: String,
    pub isa: Isa,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.triple, self.isa)
    }
}

/// Text that is not `<triple>/<isa level>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadTarget {
    #[error("`{0}` is not a target (expected `<triple>/<isa level>`)")]
    Form(String),
    #[error(transparent)]
    Isa(#[from] UnknownIsa),
}

impl FromStr for Target {
    type Err = BadTarget;

    fn from_str(s: &str) -> Result<Target, BadTarget> {
        let (triple, isa) = s
            .rsplit_once('/')
            .filter(|(t, _)| !t.is_empty())
            .ok_or_else(|| BadTarget::Form(s.to_string()))?;
        Ok(Target {
            triple: triple.to_string(),
            isa: isa.parse()?,
        })
    }
}

crate::text::text_serde!(Target);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_text() {
        let t: Target = "x86_64-unknown-linux-gnu/avx512".parse().unwrap();
        assert_eq!(t.isa, Isa::Avx512);
        assert_eq!(t.to_string(), "x86_64-unknown-linux-gnu/avx512");
        assert!("x86_64".parse::<Target>().is_err());
        assert!("x86_64/avx9".parse::<Target>().is_err());
    }
}
