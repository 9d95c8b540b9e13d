//! The loops around the register tile: outer tiles (the leading ones fused
//! into one parallel loop), outer reduction blocks (inside all the outer tile
//! loops, or between them where the plan says), register tiles of the block.
//! It knows only the geometry and the loop-variable names the tile's code
//! reads (`o__`, `ro__`, `k0__`, `b__`, `base__`, a merged pair's `m__`), not what the tile computes,
//! and places each per-block copy inside the last loop it depends on.

use autotune_lang::ir::{AxisId, Stage};

use super::geometry::{merge_vars, product, tile_var, Merge, Tiling};
use super::micro_kernel::Ahead;
use super::operands::{BlockCopy, Level};
use crate::loopnest::{IExpr, LoopKind, Stmt};
use crate::space::StagePlan;

/// The nest of `stage` around `micro` (the register tile's code), spatial
/// axes in `order` (outer to inner), as `plan` lays out its outer levels;
/// each of `copies` at the start of the innermost level it depends on.
pub(super) fn nest(
    stage: &Stage,
    t: &Tiling,
    order: &[usize],
    plan: &StagePlan,
    copies: Vec<BlockCopy>,
    micro: Vec<Stmt>,
) -> Vec<Stmt> {
    let nest = Nest { stage, t };
    let levels = outer_levels(t, order, plan);
    let mut at: Vec<Vec<Stmt>> = vec![Vec::new(); levels.len().max(1)];
    for c in copies {
        at[copy_depth(&levels, t.n, &c.axes)].extend(c.code);
    }
    let mut body = nest.block_loops(order, micro);
    if levels.is_empty() {
        return [at.swap_remove(0), body].concat();
    }
    for (l, level) in levels.iter().enumerate().rev() {
        body = [std::mem::take(&mut at[l]), body].concat();
        body = match level {
            OuterLevel::Parallel(fused) => vec![nest.fused_parallel(fused, body)],
            OuterLevel::Tile(a) => {
                vec![Stmt::serial(&nest.var("o", *a), t.outer[*a].clone(), body)]
            }
            OuterLevel::Reduce => nest.reduction_blocks(body),
        };
    }
    body
}

/// A level of the loops around the register tiles of a block, outer to inner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OuterLevel {
    /// One parallel loop over the outer tiles of these axes.
    Parallel(Vec<usize>),
    /// The outer tiles of one axis.
    Tile(usize),
    /// The outer blocks of every reduction axis.
    Reduce,
}

/// The levels of `plan`'s nest, outer to inner: the parallel loop, the outer
/// tile loops outside the reduction blocks, the reduction blocks, the rest.
pub(super) fn outer_levels(t: &Tiling, order: &[usize], plan: &StagePlan) -> Vec<OuterLevel> {
    let par = plan.parallel.min(t.n);
    let at = plan.reduction_depth().clamp(par, t.n);
    let mut levels = Vec::new();
    if par > 0 {
        levels.push(OuterLevel::Parallel(order[..par].to_vec()));
    }
    levels.extend(order[par..at].iter().map(|&a| OuterLevel::Tile(a)));
    if !t.red.is_empty() {
        levels.push(OuterLevel::Reduce);
    }
    levels.extend(order[at..].iter().map(|&a| OuterLevel::Tile(a)));
    levels
}

/// The level a copy of `axes` runs in: the innermost that binds one of them
/// (a spatial axis's outer tile; for a reduction axis, any of `n` spatial
/// axes' ids or more, the reduction blocks), or the innermost of all where
/// none does.
pub(super) fn copy_depth(levels: &[OuterLevel], n: usize, axes: &[AxisId]) -> usize {
    levels
        .iter()
        .rposition(|level| binds(level, n, axes))
        .unwrap_or(levels.len().saturating_sub(1))
}

/// Whether `level` binds one of `axes` (a reduction axis: any of `n` spatial
/// axes' ids or more, by the reduction blocks).
fn binds(level: &OuterLevel, n: usize, axes: &[AxisId]) -> bool {
    axes.iter().any(|&a| match level {
        OuterLevel::Parallel(fused) => fused.contains(&a),
        OuterLevel::Tile(b) => a == *b,
        OuterLevel::Reduce => a >= n,
    })
}

/// What a register tile prefetches of the whole copy `buf` of an operand,
/// laid out as `layout` ([`crate::space::Read::PackAhead`]), `line` elements to a
/// cache line: the slice of the next outer tile of the layout's first axis,
/// where the outermost level that reads the copy runs those outer tiles (so
/// one outer tile reads one slice of it, in layout order); `None` where the
/// nest reads the copy otherwise (the reduction blocks outside, lanes along
/// the reduction) or at sizes only run time knows.
pub(super) fn ahead(
    stage: &Stage,
    t: &Tiling,
    order: &[usize],
    plan: &StagePlan,
    buf: &str,
    layout: &[(AxisId, Level, IExpr)],
    line: i64,
) -> Option<Ahead> {
    if !t.known() || t.red.is_empty() || t.lane_reduction().is_some() {
        return None;
    }
    let &(a, Level::Outer, ref outer) = layout.first()? else {
        return None;
    };
    let outer = outer.as_const().filter(|o| *o > 1)?;
    let slice = layout[1..]
        .iter()
        .map(|l| l.2.as_const())
        .product::<Option<i64>>()?;
    let levels = outer_levels(t, order, plan);
    let reads: Vec<AxisId> = layout.iter().map(|l| l.0).collect();
    let x = levels.iter().position(|level| binds(level, t.n, &reads))?;
    match &levels[x] {
        OuterLevel::Tile(b) if *b == a => {}
        OuterLevel::Parallel(fused) if fused.contains(&a) => {}
        _ => return None,
    }
    // The loops one outer tile runs down to the outermost reduction loop of
    // the register tile, with their trip counts (a border block's fewer).
    let var = |kind: &str, a: usize| tile_var(kind, stage, a);
    let mut loops: Vec<(String, i64)> = Vec::new();
    for level in &levels[x + 1..] {
        match level {
            OuterLevel::Tile(b) => loops.push((var("o", *b), t.outer[*b].as_const()?)),
            OuterLevel::Reduce => {
                for r in &t.red {
                    loops.push((var("ro", r.axis), r.outer.as_const()?));
                }
            }
            OuterLevel::Parallel(_) => return None,
        }
    }
    for &b in order {
        // (The first block's: every block's but the last's.)
        let tiles = t.tiles_in_block(b, IExpr::Const(0)).as_const()?;
        loops.push((var("b", b), tiles));
    }
    let r0 = &t.red[0];
    loops.push((var("ri", r0.axis), r0.inner));
    let (at, count) = loops.iter().fold((IExpr::Const(0), 1), |(at, n), (v, e)| {
        (at.times(IExpr::Const(*e)).plus(IExpr::var(v)), n * e)
    });
    let next = IExpr::var(&var("o", a))
        .plus(IExpr::Const(1))
        .min(IExpr::Const(outer - 1));
    Some(Ahead {
        buf: buf.to_string(),
        next: next.times(IExpr::Const(slice)),
        at,
        count,
        slice,
        line,
    })
}

struct Nest<'a> {
    stage: &'a Stage,
    t: &'a Tiling,
}

impl Nest<'_> {
    fn var(&self, kind: &str, a: usize) -> String {
        tile_var(kind, self.stage, a)
    }

    /// Level 1: the register tiles of the block, each binding its first index
    /// `base__` for the body.
    fn block_loops(&self, order: &[usize], micro: Vec<Stmt>) -> Vec<Stmt> {
        let t = self.t;
        let mut body = micro;
        for &a in order.iter().rev() {
            let base = IExpr::var(&self.var("o", a))
                .times(IExpr::Const(t.block_size(a)))
                .plus(IExpr::var(&self.var("b", a)).times(IExpr::Const(t.tile[a])));
            if let Some(m) = t.merge.filter(|m| m.a + 1 == a) {
                body = [self.merge_lets(m), body].concat();
            }
            body.insert(
                0,
                Stmt::Let {
                    name: self.var("base", a),
                    value: base,
                },
            );
            body = vec![Stmt::For {
                var: self.var("b", a),
                start: IExpr::Const(0),
                end: t.tiles_in_block(a, IExpr::var(&self.var("o", a))),
                step: 1,
                kind: LoopKind::Serial,
                body,
            }];
        }
        body
    }

    /// The `Let`s of [`merge_vars`] for every offset of a register tile that
    /// starts at `base` (the merged index): a point past the last one (in an
    /// overhanging tile, which stores nothing there) reads the last one's
    /// operands, so every read stays inside.
    fn merge_lets(&self, m: Merge) -> Vec<Stmt> {
        let (stage, t) = (self.stage, self.t);
        let base = IExpr::var(&tile_var("base", stage, m.a + 1));
        let last = m.ext_a * m.ext_b - 1;
        let mut out = Vec::new();
        for o in 0..t.tile[m.a + 1] {
            let at = base.clone().plus(IExpr::Const(o)).min(IExpr::Const(last));
            let (va, vb) = merge_vars(stage, m, o);
            out.push(Stmt::Let {
                name: va,
                value: at.clone().floor_div(m.ext_b),
            });
            out.push(Stmt::Let {
                name: vb,
                value: at.modulo(m.ext_b),
            });
        }
        out
    }

    /// The outer reduction blocks, each binding its first index `k0__`.
    fn reduction_blocks(&self, body: Vec<Stmt>) -> Vec<Stmt> {
        let mut body = body;
        for r in self.t.red.iter().rev() {
            body.insert(
                0,
                Stmt::Let {
                    name: self.var("k0", r.axis),
                    value: IExpr::var(&self.var("ro", r.axis)).times(IExpr::Const(r.inner)),
                },
            );
            body = vec![Stmt::serial(&self.var("ro", r.axis), r.outer.clone(), body)];
        }
        body
    }

    /// One parallel loop over the outer tiles of the `fused` axes, recovering
    /// each axis's `o__` from the fused index.
    fn fused_parallel(&self, fused: &[usize], body: Vec<Stmt>) -> Stmt {
        let t = self.t;
        let total = product(fused.iter().map(|a| &t.outer[*a]));
        let mut lets = Vec::new();
        let mut inner = IExpr::Const(1);
        for &a in fused.iter().rev() {
            lets.insert(
                0,
                Stmt::Let {
                    name: self.var("o", a),
                    value: IExpr::var("par__")
                        .div_by(inner.clone())
                        .rem_by(t.outer[a].clone()),
                },
            );
            inner = inner.times(t.outer[a].clone());
        }
        lets.extend(body);
        Stmt::Parallel {
            var: "par__".to_string(),
            extent: total,
            body: lets,
        }
    }
}
