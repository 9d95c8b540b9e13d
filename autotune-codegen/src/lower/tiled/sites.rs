//! The load sites of the tiled stage (and of its fused consumer), each with
//! its resolved [`Access`], and expressions evaluated through them at a point
//! of the register tile. A site's index at the tile origin is bound once in a
//! `Let` (`ix__k`); each element of the tile reads at that local plus a
//! constant (plus, along a merged pair, locals bound once per tile; in the
//! generic kernel, symbolic strides and, for a window, the innermost
//! reduction variable: [`Indexer::inner_step`]), so the unrolled code repeats
//! no index arithmetic.

use autotune_lang::analysis::load_sites;
use autotune_lang::ir::{Affine, AxisId, Expr, TensorRef};

use super::geometry::tile_var;
use super::index::{Indexer, Point};
use super::operands::{Access, Source};
use crate::loopnest::{Guard, IExpr, Stmt, VExpr};
use crate::lower::dims::Dims;

/// The resolved load sites of a stage.
pub(super) struct Sites<'a> {
    pub idx: Indexer<'a>,
    dims: Dims<'a>,
    /// Access per load site, keyed by the address of its `Expr::Load`; a site's
    /// position names its index local.
    accesses: Vec<(*const Expr, Access)>,
}

impl<'a> Sites<'a> {
    pub fn new(idx: Indexer<'a>, dims: Dims<'a>) -> Self {
        Sites {
            idx,
            dims,
            accesses: Vec::new(),
        }
    }

    /// Records that the load `site` (a node of the operator's IR) reads through `access`.
    pub fn push(&mut self, site: &Expr, access: Access) {
        self.accesses.push((site as *const Expr, access));
    }

    fn access_of(&self, e: &Expr) -> &Access {
        &self
            .accesses
            .iter()
            .find(|(p, _)| std::ptr::eq(*p, e))
            .expect("every load site is resolved")
            .1
    }

    /// The `const int64_t` holding a load site's index at the tile origin.
    fn site_var(&self, e: &Expr) -> String {
        let k = self
            .accesses
            .iter()
            .position(|(p, _)| std::ptr::eq(*p, e))
            .expect("every load site is resolved");
        format!("ix__{k}")
    }

    /// `Let`s of the origin index of every load site in `e` (not the producer's).
    pub fn base_lets(&self, e: &Expr, producer: Option<usize>) -> Vec<Stmt> {
        let origin = self.idx.point(&vec![0; self.idx.t.n], 0);
        // Loads under a reduction live in the reduction loops, which have their own.
        let mut sites = Vec::new();
        collect_outside_reduce(e, &mut sites);
        sites
            .into_iter()
            .filter(|l| !matches!(l, Expr::Load { tensor: TensorRef::Stage(t), .. } if Some(*t) == producer))
            .map(|l| {
                let Expr::Load { index, .. } = l else { unreachable!("load sites are loads") };
                let access = self.access_of(l);
                let origin = Point {
                    inner_var: self.idx.inner_step(access, index).is_none(),
                    ..origin.clone()
                };
                Stmt::Let {
                    name: self.site_var(l),
                    value: self.idx.load_index(access, index, &origin).0,
                }
            })
            .collect()
    }

    /// An expression at a point, with lanes along the vector axis; the
    /// reduction node (and, in a consumer, the producer's value) is `acc`.
    pub fn value(&self, e: &Expr, p: &Point, acc: &VExpr, producer: Option<usize>) -> VExpr {
        self.eval(e, p, acc, producer, false)
    }

    /// As [`Sites::value`], in a border tile: the reads of guarded sites
    /// are tested (the pad value outside their tensor).
    pub fn border_value(&self, e: &Expr, p: &Point) -> VExpr {
        self.eval(e, p, &VExpr::Const(0.0), None, true)
    }

    /// The tests that every read of the guarded sites in `e` (over the
    /// register tile and the inner reduction block) stays inside its tensor:
    /// a tile that passes them reads without tests. Empty if `e` has none.
    pub fn interior(&self, e: &Expr) -> Vec<(IExpr, IExpr)> {
        let t = self.idx.t;
        let stage = self.idx.stage;
        // An axis's first and last value in the tile or the inner block.
        let span = |a: AxisId| {
            let (first, len) = if a < t.n {
                (tile_var("base", stage, a), t.tile[a])
            } else {
                let inner = t.reduce_axis(a).map_or(1, |r| r.inner);
                (tile_var("k0", stage, a), inner)
            };
            (
                IExpr::var(&first),
                IExpr::var(&first).plus(IExpr::Const(len - 1)),
            )
        };
        let mut conds = Vec::new();
        for site in load_sites(e) {
            let Expr::Load { index, .. } = site else {
                unreachable!("load sites are loads")
            };
            let Source::Guarded { dims, guarded } = &self.access_of(site).source else {
                continue;
            };
            for &d in guarded {
                let ix = &index[d];
                let (mut lo, mut hi) = (IExpr::Const(ix.offset), IExpr::Const(ix.offset));
                for &(a, c) in &ix.terms {
                    let (first, last) = span(a);
                    let (at_lo, at_hi) = if c > 0 { (first, last) } else { (last, first) };
                    lo = lo.plus(at_lo.times(IExpr::Const(c)));
                    hi = hi.plus(at_hi.times(IExpr::Const(c)));
                }
                conds.push((IExpr::Const(-1), lo));
                conds.push((hi, dims[d].clone()));
            }
        }
        conds
    }

    fn eval(
        &self,
        e: &Expr,
        p: &Point,
        acc: &VExpr,
        producer: Option<usize>,
        border: bool,
    ) -> VExpr {
        match e {
            Expr::Const(c) => VExpr::Const(*c),
            Expr::ShapeValue(v) => VExpr::FromIndex(self.dims.shape_value(*v)),
            Expr::Load {
                tensor: TensorRef::Stage(t),
                ..
            } if Some(*t) == producer => acc.clone(),
            Expr::Load { index, pad, .. } => {
                let access = self.access_of(e);
                let (_, stride) = self.idx.load_index(access, index, p);
                let guard = match &access.source {
                    Source::Guarded { guarded, dims } if border => guarded
                        .iter()
                        .map(|&d| self.guard(&index[d], &dims[d], p))
                        .collect(),
                    _ => Vec::new(),
                };
                // The site's index at the tile origin (a `Let` of `base_lets`) plus
                // this point's offset: its symbolic part, the innermost reduction
                // variable where the origin leaves it out, then the constant.
                let site = IExpr::var(&self.site_var(e));
                let delta = self.idx.load_delta(access, index, p);
                let index = match self.idx.inner_step(access, index) {
                    None => site.plus(delta),
                    Some(step) => {
                        let (symbolic, constant) = delta.split_constant();
                        let r = self.idx.t.last_reduce().expect("a step has a reduction");
                        site.plus(symbolic)
                            .plus(
                                IExpr::var(&tile_var("ri", self.idx.stage, r))
                                    .times(IExpr::Const(step)),
                            )
                            .plus(IExpr::Const(constant))
                    }
                };
                VExpr::Load {
                    buf: access.buf.clone(),
                    index,
                    guard,
                    pad: pad.unwrap_or(0.0),
                    lanes: if stride == 0 { 1 } else { p.lanes },
                    stride,
                }
            }
            Expr::Unary(op, a) => {
                VExpr::Unary(*op, Box::new(self.eval(a, p, acc, producer, border)))
            }
            Expr::Binary(op, a, b) => VExpr::Binary(
                *op,
                Box::new(self.eval(a, p, acc, producer, border)),
                Box::new(self.eval(b, p, acc, producer, border)),
            ),
            Expr::Reduce { .. } => acc.clone(),
        }
    }

    /// The test of one dimension's index `ix` of a guarded read at a point.
    fn guard(&self, ix: &Affine, dim: &IExpr, p: &Point) -> Guard {
        let index = ix
            .terms
            .iter()
            .fold(IExpr::Const(ix.offset), |acc, &(a, c)| {
                acc.plus(self.idx.axis_value(a, p).times(IExpr::Const(c)))
            });
        let lane_step = self.idx.t.vector_axis().map_or(0, |v| ix.coefficient(v));
        Guard {
            index,
            lane_step,
            bound: dim.clone(),
        }
    }
}

/// Load sites of `e`, not descending into reductions.
fn collect_outside_reduce<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Load { .. } => out.push(e),
        Expr::Unary(_, a) => collect_outside_reduce(a, out),
        Expr::Binary(_, a, b) => {
            collect_outside_reduce(a, out);
            collect_outside_reduce(b, out);
        }
        Expr::Const(_) | Expr::ShapeValue(_) | Expr::Reduce { .. } => {}
    }
}
