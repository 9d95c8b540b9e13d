//! What a kernel is generated for: an ISA level (each kernel carries one clone
//! per level and dispatches at run time), a [`Target`], the triple and level
//! a tuning result stands for, and the [`CpuId`] it was tuned on (the same ISA
//! level runs at different speeds on different microarchitectures).

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

    /// The most lanes of `elem_bytes`-byte elements a vector register of
    /// this level holds (x86: zmm, ymm, xmm; the baseline of any target is
    /// taken as 16-byte vectors).
    pub fn max_lanes(self, elem_bytes: usize) -> usize {
        let bytes = match self {
            Isa::Avx512 => 64,
            Isa::Avx2 => 32,
            Isa::Baseline => 16,
        };
        bytes / elem_bytes
    }

    /// The vector registers of this level (x86: zmm0–31, ymm0–15, xmm0–15).
    pub fn vector_registers(self) -> usize {
        match self {
            Isa::Avx512 => 32,
            Isa::Avx2 | Isa::Baseline => 16,
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

/// A CPU as CPUID names it: vendor string (its letters and digits) and display
/// family and model (as `/proc/cpuinfo` prints them), which together name a
/// microarchitecture. Written `GenuineIntel-6-167`, `AuthenticAMD-25-17`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuId {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
}

impl CpuId {
    /// The CPU this runs on (`None` off x86).
    pub fn detect() -> Option<CpuId> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::__cpuid;
            let leaf0 = __cpuid(0);
            let vendor: Vec<u8> = [leaf0.ebx, leaf0.edx, leaf0.ecx]
                .iter()
                .flat_map(|r| r.to_le_bytes())
                .collect();
            let eax = __cpuid(1).eax;
            // Letters and digits only (some vendor strings are padded), so the
            // text parses back and is a plain C string literal.
            let vendor: String = vendor
                .iter()
                .filter(|b| b.is_ascii_alphanumeric())
                .map(|&b| char::from(b))
                .collect();
            Some(CpuId::from_signature(vendor, eax))
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }

    /// Decodes CPUID leaf 1's EAX: the extended family adds to family 15, and
    /// the extended model extends the model of families 6 and 15 (Intel's and
    /// AMD's rule, which Linux follows).
    pub fn from_signature(vendor: String, eax: u32) -> CpuId {
        let base_family = (eax >> 8) & 0xf;
        let family = if base_family == 0xf {
            base_family + ((eax >> 20) & 0xff)
        } else {
            base_family
        };
        let model = if base_family == 0x6 || base_family == 0xf {
            ((eax >> 4) & 0xf) | (((eax >> 16) & 0xf) << 4)
        } else {
            (eax >> 4) & 0xf
        };
        CpuId {
            vendor,
            family,
            model,
        }
    }
}

impl fmt::Display for CpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.vendor, self.family, self.model)
    }
}

/// Text that is not `<vendor>-<family>-<model>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a CPU id (expected `<vendor>-<family>-<model>`, e.g. `GenuineIntel-6-143`)")]
pub struct BadCpuId(pub String);

impl FromStr for CpuId {
    type Err = BadCpuId;

    fn from_str(s: &str) -> Result<CpuId, BadCpuId> {
        let bad = || BadCpuId(s.to_string());
        let mut parts = s.rsplitn(3, '-');
        let model = parts.next().and_then(|m| m.parse().ok()).ok_or_else(bad)?;
        let family = parts.next().and_then(|f| f.parse().ok()).ok_or_else(bad)?;
        let vendor = parts
            .next()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric()))
            .ok_or_else(bad)?;
        Ok(CpuId {
            vendor: vendor.to_string(),
            family,
            model,
        })
    }
}

crate::text::text_serde!(CpuId);

/// When a kernel variant tuned for particular machines runs: on this CPU and
/// at this thread count of the package's pool; `None` matches any.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Selector {
    pub cpu: Option<CpuId>,
    pub threads: Option<usize>,
}

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

    #[test]
    fn cpu_ids_decode_cpuid_and_round_trip_through_text() {
        // Sapphire Rapids (family 6, extended model 8) and Zen 4 (family 15 + 10).
        let spr = CpuId::from_signature("GenuineIntel".into(), 0x0008_06f8);
        assert_eq!(spr.to_string(), "GenuineIntel-6-143");
        let zen4 = CpuId::from_signature("AuthenticAMD".into(), 0x00a1_0f11);
        assert_eq!(zen4.to_string(), "AuthenticAMD-25-17");
        assert_eq!("AuthenticAMD-25-17".parse::<CpuId>(), Ok(zen4));
        for bad in [
            "",
            "AMD",
            "AMD-25",
            "-6-143",
            "Intel-six-143",
            "Intel-6-",
            "A\"B-6-1",
        ] {
            assert!(bad.parse::<CpuId>().is_err(), "{bad}");
        }
        if let Some(host) = CpuId::detect() {
            assert_eq!(host.to_string().parse::<CpuId>(), Ok(host));
        }
    }
}
