//! A workload: one operator at one of its specialisations, the unit that is
//! tuned, cached and measured; and its exact identity.

use std::fmt;
use std::str::FromStr;

use autotune_lang::ir::{geometric_mean, Bucket, Extent, ShapeRange};
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

    /// Floating-point operations of one timed run ([`Workload::sweep`]).
    pub fn flops(&self) -> f64 {
        self.sweep()
            .iter()
            .map(|(shapes, reps)| f64::from(*reps) * self.op.flops(shapes))
            .sum()
    }

    /// The calls one timed run makes, as (shapes, repeats): one call at its
    /// shapes. A bucket is tuned over its range: a sweep of calls at its
    /// anchor, at the top of every range and at the geometric midpoints
    /// between the bottoms and the anchor (a shape where a read would leave its
    /// tensor, which a wrapper refuses, left out), each repeated to about the
    /// flops of the largest (at most [`SWEEP_REPEATS`] times), so that every
    /// part of the range weighs alike in its time.
    pub fn sweep(&self) -> Vec<(Vec<i64>, u32)> {
        let spec = &self.op.specializations[self.spec];
        let Some(bucket) = &spec.bucket else {
            return vec![(spec.values.clone(), 1)];
        };
        let mut shapes: Vec<Vec<i64>> = Vec::new();
        for pick in [
            |r: &ShapeRange, anchor: i64| geometric_mean(r.lo, anchor),
            |_: &ShapeRange, anchor: i64| anchor,
            |r: &ShapeRange, _: i64| r.hi,
        ] {
            let given: Vec<_> = self
                .op
                .input_shape_vars()
                .map(|(v, _)| {
                    let r = bucket.ranges.iter().find(|r| r.var == v);
                    (v, r.map_or(spec.values[v], |r| pick(r, spec.values[v])))
                })
                .collect();
            let Some(values) = self.op.resolve_shapes(&given) else {
                continue;
            };
            if self.op.read_out_of_bounds(&values).is_none() && !shapes.contains(&values) {
                shapes.push(values);
            }
        }
        let flops: Vec<f64> = shapes.iter().map(|s| self.op.flops(s).max(1.0)).collect();
        let top = flops.iter().cloned().fold(1.0, f64::max);
        shapes
            .into_iter()
            .zip(flops)
            .map(|(s, f)| (s, ((top / f).round() as u32).clamp(1, SWEEP_REPEATS)))
            .collect()
    }

    /// Element counts of each input and of the output: the largest of the
    /// [`sweep`](Workload::sweep)'s calls.
    pub fn sizes(&self) -> (Vec<usize>, usize) {
        let sweep = self.sweep();
        let count = |dims: &[Extent]| -> usize {
            sweep
                .iter()
                .map(|(shapes, _)| dims.iter().map(|d| d.value(shapes) as usize).product())
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

/// The most times a bucket's sweep repeats one of its calls.
pub const SWEEP_REPEATS: u32 = 256;

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
