//! A workload: one operator at one of its specialisations, the unit that is
//! tuned, cached and measured; and its exact identity.

use std::fmt;
use std::str::FromStr;

use autotune_lang::ir::{Bucket, Extent, ShapeRange};
use autotune_lang::mangle::{self, Variant};
use autotune_lang::Operator;

/// One operator at one of its specialisations.
#[derive(Clone, Debug)]
pub struct Workload {
    pub op: Operator,
    pub spec: usize,
}

impl Workload {
    /// The shapes it is measured at: a bucket's anchor.
    pub fn shapes(&self) -> &[i64] {
        &self.op.specializations[self.spec].values
    }

    /// The range of shapes it serves, if it is a bucket.
    pub fn bucket(&self) -> Option<&Bucket> {
        self.op.specializations[self.spec].bucket.as_ref()
    }

    /// Floating-point operations of one call.
    pub fn flops(&self) -> f64 {
        self.op.flops(self.shapes())
    }

    /// Element counts of each input and of the output.
    pub fn sizes(&self) -> (Vec<usize>, usize) {
        let shapes = self.shapes();
        let count =
            |dims: &[Extent]| -> usize { dims.iter().map(|d| d.value(shapes) as usize).product() };
        (
            self.op.inputs.iter().map(|i| count(&i.dims)).collect(),
            count(&self.op.output().dims),
        )
    }

    /// Readable name, e.g. `matmul[M1024 K1024 N1024]`, or for a bucket
    /// `matmul[M1..=4096 K1024 N1024]`.
    pub fn key(&self) -> String {
        format!(
            "{}[{}]",
            self.op.name,
            mangle::variant_name(&self.op, Variant::Specialized(self.spec)).replace('_', " ")
        )
    }

    /// The exact identity of this workload.
    pub fn id(&self) -> WorkloadId {
        let mut op = self.op.clone();
        op.specializations.clear();
        WorkloadId {
            op: self.op.name.clone(),
            fingerprint: mangle::fingerprint(&op),
            shapes: self.shapes().to_vec(),
            bucket: self.bucket().cloned(),
        }
    }
}

/// Exact identity of a workload: the operator's name, the fingerprint of its IR
/// (without its list of specialisations, so adding a shape keeps the others'
/// ids), the shape values and a bucket's ranges. Written
/// `matmul:cfd6a1cf9a3aa21e:1024,1024,1024`; a bucket adds its ranges by shape
/// variable: `matmul:cfd6a1cf9a3aa21e:64,1024,1024:0=1..=4096`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId {
    pub op: String,
    pub fingerprint: u64,
    pub shapes: Vec<i64>,
    pub bucket: Option<Bucket>,
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:016x}:", self.op, self.fingerprint)?;
        for (i, v) in self.shapes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{v}")?;
        }
        if let Some(b) = &self.bucket {
            for (i, r) in b.ranges.iter().enumerate() {
                let sep = if i == 0 { ':' } else { ',' };
                write!(f, "{sep}{}={}..={}", r.var, r.lo, r.hi)?;
            }
        }
        Ok(())
    }
}

/// Text that is not `<operator>:<fingerprint>:<shapes>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a workload id (expected `<operator>:<16 hex digits>:<shape,...>`)")]
pub struct BadWorkloadId(pub String);

impl FromStr for WorkloadId {
    type Err = BadWorkloadId;

    fn from_str(s: &str) -> Result<WorkloadId, BadWorkloadId> {
        let bad = || BadWorkloadId(s.to_string());
        let mut parts = s.splitn(4, ':');
        let (Some(op), Some(fp), Some(shapes)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let bucket = match parts.next() {
            None => None,
            Some(ranges) => Some(Bucket {
                ranges: ranges
                    .split(',')
                    .map(|r| {
                        let (var, range) = r.split_once('=')?;
                        let (lo, hi) = range.split_once("..=")?;
                        Some(ShapeRange {
                            var: var.parse().ok()?,
                            lo: lo.parse().ok()?,
                            hi: hi.parse().ok()?,
                        })
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?,
            }),
        };
        if op.is_empty() || fp.len() != 16 {
            return Err(bad());
        }
        let fingerprint = u64::from_str_radix(fp, 16).map_err(|_| bad())?;
        let shapes = if shapes.is_empty() {
            Vec::new()
        } else {
            shapes
                .split(',')
                .map(|v| v.parse::<i64>().map_err(|_| bad()))
                .collect::<Result<_, _>>()?
        };
        Ok(WorkloadId {
            op: op.to_string(),
            fingerprint,
            shapes,
            bucket,
        })
    }
}

crate::text::text_serde!(WorkloadId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text() {
        for text in [
            "matmul:cfd6a1cf9a3aa21e:1024,1024,1024",
            "pool:0000000000000001:",
            "matmul:cfd6a1cf9a3aa21e:64,1024,1024:0=1..=4096",
            "matmul:cfd6a1cf9a3aa21e:64,32,1024:0=1..=4096,1=2..=512",
        ] {
            let id: WorkloadId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
        for bad in [
            "matmul",
            "matmul:12:1",
            "matmul:cfd6a1cf9a3aa21e:x",
            ":cfd6a1cf9a3aa21e:1",
            "matmul:cfd6a1cf9a3aa21e:1:0=1..4",
            "matmul:cfd6a1cf9a3aa21e:1:",
        ] {
            assert!(bad.parse::<WorkloadId>().is_err(), "{bad}");
        }
    }
}
