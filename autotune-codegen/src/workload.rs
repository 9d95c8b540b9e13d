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
    /// The shapes it is planned and checked at: a bucket's anchor.
    pub fn shapes(&self) -> &[i64] {
        &self.op.specializations[self.spec].values
    }

    /// The range of shapes it serves, if it is a bucket.
    pub fn bucket(&self) -> Option<&Bucket> {
        self.op.specializations[self.spec].bucket.as_ref()
    }

    /// Floating-point operations of one call (a bucket's: of one call at each
    /// shape of its [`sweep`](Workload::sweep)).
    pub fn flops(&self) -> f64 {
        self.sweep().iter().map(|s| self.op.flops(s)).sum()
    }

    /// The shapes it is timed at: its own. A bucket is tuned over its range:
    /// at [`SWEEP`] shapes spaced evenly in log size along every range at
    /// once, from its bottom to its top (its anchor, always kept); a shape
    /// where a read would leave its tensor, which a wrapper refuses, is left
    /// out. The tuner times each and ranks by their geometric mean GFLOP/s,
    /// so that every part of the range weighs alike.
    pub fn sweep(&self) -> Vec<Vec<i64>> {
        let spec = &self.op.specializations[self.spec];
        let Some(bucket) = &spec.bucket else {
            return vec![spec.values.clone()];
        };
        let mut shapes: Vec<Vec<i64>> = Vec::new();
        for i in 0..SWEEP {
            let t = i as f64 / (SWEEP - 1) as f64;
            let given: Vec<_> = self
                .op
                .input_shape_vars()
                .map(|(v, _)| {
                    let size = bucket.ranges.iter().find(|r| r.var == v);
                    (v, size.map_or(spec.values[v], |r| log_lerp(r.lo, r.hi, t)))
                })
                .collect();
            let Some(values) = self.op.resolve_shapes(&given) else {
                continue;
            };
            if self.op.read_out_of_bounds(&values).is_none() && !shapes.contains(&values) {
                shapes.push(values);
            }
        }
        shapes
    }

    /// Element counts of each input and of the output: the largest over the
    /// [`sweep`](Workload::sweep).
    pub fn sizes(&self) -> (Vec<usize>, usize) {
        let sweep = self.sweep();
        let count = |dims: &[Extent]| -> usize {
            sweep
                .iter()
                .map(|shapes| dims.iter().map(|d| d.value(shapes) as usize).product())
                .max()
                .unwrap_or(0)
        };
        (
            self.op.inputs.iter().map(|i| count(&i.dims)).collect(),
            count(&self.op.output().dims),
        )
    }

    /// Elements of the output at its [`shapes`](Workload::shapes) (where a
    /// run is checked).
    pub fn output_size(&self) -> usize {
        let shapes = self.shapes();
        self.op
            .output()
            .dims
            .iter()
            .map(|d| d.value(shapes) as usize)
            .product()
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

/// Shapes a bucket is timed at.
pub const SWEEP: usize = 5;

/// `lo^(1-t) · hi^t`, rounded, within `lo..=hi`.
fn log_lerp(lo: i64, hi: i64, t: f64) -> i64 {
    let x = ((lo as f64).ln() * (1.0 - t) + (hi as f64).ln() * t).exp();
    (x.round() as i64).clamp(lo, hi)
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
