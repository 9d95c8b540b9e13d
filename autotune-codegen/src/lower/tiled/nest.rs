//! The loops around the register tile: outer tiles (the leading ones fused
//! into one parallel loop), outer reduction blocks, register tiles of the
//! block. It knows only the geometry and the loop-variable names the tile's
//! code reads (`o__`, `ro__`, `k0__`, `b__`, `base__`), not what the tile
//! computes.

use autotune_lang::ir::Stage;

use super::geometry::{product, tile_var, Tiling};
use crate::loopnest::{IExpr, LoopKind, Stmt};

/// The nest of `stage` around `micro` (the register tile's code), spatial
/// axes in `order` (outer to inner), the leading `parallel` outer loops fused
/// and run on the pool; `block` (per-block copies) runs at the start of every
/// block, before its register tiles.
pub(super) fn nest(
    stage: &Stage,
    t: &Tiling,
    order: &[usize],
    parallel: usize,
    block: Vec<Stmt>,
    micro: Vec<Stmt>,
) -> Vec<Stmt> {
    let nest = Nest { stage, t };
    let mut body = block;
    body.extend(nest.block_loops(order, micro));
    let body = nest.reduction_blocks(body);
    nest.outer_loops(order, parallel, body)
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
                end: self.tiles_in_block(a),
                step: 1,
                kind: LoopKind::Serial,
                body,
            }];
        }
        body
    }

    /// The number of register tiles in the current block along axis `a`.
    fn tiles_in_block(&self, a: usize) -> IExpr {
        let t = self.t;
        if t.ext[a]
            .as_const()
            .is_some_and(|e| e % t.block_size(a) == 0)
        {
            IExpr::Const(t.block[a])
        } else {
            // The last block holds fewer tiles.
            t.ext[a]
                .clone()
                .plus(IExpr::Const(t.tile[a] - 1))
                .plus(IExpr::var(&self.var("o", a)).times(IExpr::Const(-t.block_size(a))))
                .floor_div(t.tile[a])
                .min(IExpr::Const(t.block[a]))
        }
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

    /// Level 0: the outer tiles; the leading `parallel` ones fused into one
    /// parallel loop.
    fn outer_loops(&self, order: &[usize], parallel: usize, body: Vec<Stmt>) -> Vec<Stmt> {
        let t = self.t;
        let par = parallel.min(t.n);
        let mut body = body;
        for &a in order[par..].iter().rev() {
            body = vec![Stmt::serial(&self.var("o", a), t.outer[a].clone(), body)];
        }
        if par > 0 {
            body = vec![self.fused_parallel(&order[..par], body)];
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
