//! Carrying a config from one space to another: a tuned config of a similar
//! operator (another shape, another epilogue) as a starting point here.
//!
//! Two spaces are similar where each tiles exactly one reducing stage and
//! those stages have the same knobs (the same spatial and reduction axes by
//! name, the same load sites): a conv 3×3 + bias + ReLU and a plain conv 3×3 at
//! other sizes are; a GEMM and a conv are not. What carries is the reducing
//! stage's schedule (tiles, blocks, splits, order, vector, unroll, packing,
//! parallel loops), each number moved to the nearest one this space offers;
//! whether an epilogue is fused, and every other stage's knobs, come from the
//! config the caller starts from (its default).

use std::collections::HashSet;

use super::{Config, Knob, KnobKind, KnobName, Space, StageKind, TiledStage, Value};

/// The reducing stage of a space, for matching spaces: its knobs' prefix and
/// the extents of its spatial, then reduction axes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reducing<'a> {
    pub prefix: &'a str,
    pub extents: Vec<i64>,
}

impl Space {
    /// The one stage the space tiles that reduces; `None` where none or
    /// several do.
    pub fn reducing(&self) -> Option<Reducing<'_>> {
        let (_, one) = self.reducing_stage()?;
        Some(Reducing {
            prefix: &one.prefix,
            extents: one
                .extents
                .iter()
                .chain(&one.reduce_extents)
                .copied()
                .collect(),
        })
    }

    /// The one stage the space tiles that reduces, with its index.
    pub(super) fn reducing_stage(&self) -> Option<(usize, &TiledStage)> {
        let mut reducing = self.stages.iter().enumerate().filter_map(|(s, k)| match k {
            StageKind::Tiled(i) | StageKind::FusibleInto { own: i, .. }
                if !i.reduce_axes.is_empty() =>
            {
                Some((s, i))
            }
            _ => None,
        });
        let one = reducing.next()?;
        reducing.next().is_none().then_some(one)
    }

    /// `from`, a config of a similar space (see the module), carried here
    /// onto `base`: `None` where the reducing stages' knobs differ, a name
    /// (order, vector) is not offered here, or the result is not
    /// [sensible](Space::sensible).
    pub fn carry(&self, from: &Config, base: &Config) -> Option<Config> {
        let to = self.reducing()?.prefix;
        let src = reducing_prefix(from)?;
        let mine: Vec<&Knob> = self
            .knobs
            .iter()
            .filter(|k| k.name.stage == to && k.name.kind != KnobKind::Fuse)
            .collect();
        let theirs: HashSet<&KnobKind> = from
            .0
            .keys()
            .filter(|k| k.stage == src && k.kind != KnobKind::Fuse)
            .map(|k| &k.kind)
            .collect();
        if mine.len() != theirs.len() || !mine.iter().all(|k| theirs.contains(&k.name.kind)) {
            return None;
        }
        let mut out = base.clone();
        for k in mine {
            let v = from.0.get(&KnobName::new(src, k.name.kind.clone()))?;
            out.0.insert(k.name.clone(), nearest(&k.choices, v)?);
        }
        (self.index_of(&out).is_ok() && self.sensible(&out)).then_some(out)
    }
}

/// The stage whose knobs split a reduction in `c`, if there is one such stage.
fn reducing_prefix(c: &Config) -> Option<&str> {
    let mut stages =
        c.0.keys()
            .filter(|k| matches!(k.kind, KnobKind::Split(_)))
            .map(|k| k.stage.as_str());
    let first = stages.next()?;
    stages.all(|s| s == first).then_some(first)
}

/// `v` where `choices` has it; else, for a number, the choice nearest to it
/// by ratio (tile and block sizes scale with the shapes); a name must match.
fn nearest(choices: &[Value], v: &Value) -> Option<Value> {
    if choices.contains(v) {
        return Some(v.clone());
    }
    let Value::Int(want) = v else {
        return None;
    };
    let log = |x: i64| ((x.max(0) + 1) as f64).ln();
    choices
        .iter()
        .filter_map(|c| match c {
            Value::Int(i) => Some((*i, (log(*i) - log(*want)).abs())),
            Value::Name(_) => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| Value::Int(i))
}
