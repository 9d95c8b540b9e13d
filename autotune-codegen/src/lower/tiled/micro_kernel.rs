//! The register tile, the body of the nest: one accumulator local (a vector
//! along the vector axis, or of partial results along the innermost reduction,
//! combined in the store) per element of the tile, the inner reduction loops
//! with the innermost unrolled, and the store of the result with the fused
//! consumer computed on the way. Everything is emitted twice where a tile may
//! overhang the stage: plain for full tiles, guarded element- or lane-wise for
//! the overhanging one (in the generic kernel, a vector inside the stage
//! whole, lane-wise only the one across its edge), so that full tiles never
//! branch. Likewise the inner
//! reduction loops where the plan reads a padded operand in place
//! ([`crate::space::Read::Guard`]): once untested, for a tile whose reads
//! stay inside, and once testing each read, for a border tile.
//!
//! When the reduction is split into several outer blocks, each block resumes
//! from the partial sums the previous one stored (in the output, or where its
//! lanes are strided there, in a buffer of their own with the lanes innermost:
//! [`super::index::partial_sums`]), and only the last block stores the final
//! value.

use std::ops::Range;

use autotune_lang::ir::{AxisId, BinaryOp, Expr, ReduceOp, Stage, UnaryOp};

use super::geometry::{tile_var, ReduceAxis, Tiling};
use super::index::Point;
use super::sites::Sites;
use crate::loopnest::{Guard, IExpr, LoopKind, Stmt, VExpr, BORDER_TILE, MASKED_REST};

/// The loop variable of lane-wise code.
const LANE: &str = "l__";

/// The accumulator of element `i` of the tile.
fn acc_name(i: usize) -> String {
    format!("acc__{i}")
}

/// With lanes along the reduction, the scalar that element `i`'s single steps
/// (the block's remainder, where it is not one masked step:
/// [`MicroKernel::masked_rest`]) accumulate into: one lane of its vector would
/// chain every step through an insert and an extract.
fn rest_name(i: usize) -> String {
    format!("rest__{i}")
}

/// With lanes along the reduction, the vector whose lanes hold the combined
/// lanes of group `g` of the tile's accumulators ([`MicroKernel::lane_groups`]).
fn sums_name(g: usize) -> String {
    format!("sums__{g}")
}

/// The local holding the value stored for element `i` of the tile.
fn value_name(i: usize) -> String {
    format!("v__{i}")
}

/// What each register tile prefetches of a whole copy of an operand
/// ([`crate::space::Read::PackAhead`]): the next outer tile's slice of it
/// (`slice` elements from `next`), spread evenly over the `count` iterations
/// of the tile's outermost reduction loop that one outer tile runs, of which
/// `at` numbers the current one. Built by the nest, which knows the loops.
pub(super) struct Ahead {
    pub buf: String,
    pub next: IExpr,
    pub at: IExpr,
    pub count: i64,
    pub slice: i64,
    /// Elements of a cache line.
    pub line: i64,
}

impl Ahead {
    /// The prefetches of `steps` iterations of that loop from the current one:
    /// their share of the slice, a line at a time (as many lines as an
    /// iteration reads of the copy, divided by the times one outer tile reads
    /// its slice, so never more prefetches than loads).
    fn prefetches(&self, steps: i64) -> Vec<Stmt> {
        let share = (steps * self.slice + self.count - 1) / self.count;
        let lines = ((share + self.line - 1) / self.line).max(1);
        let g = gcd(self.slice, self.count);
        let from = self.next.clone().plus(
            self.at
                .clone()
                .times(IExpr::Const(self.slice / g))
                .floor_div(self.count / g),
        );
        (0..lines)
            .map(|l| Stmt::Prefetch {
                buf: self.buf.clone(),
                index: from.clone().plus(IExpr::Const(l * self.line)),
            })
            .collect()
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    match b {
        0 => a.max(1),
        _ => gcd(b, a % b),
    }
}

/// The register tile of one tiled stage.
pub(super) struct MicroKernel<'a> {
    sites: &'a Sites<'a>,
    /// The stage's index, as its fused consumer's loads name it.
    s: usize,
    /// The body of the consumer computed in the store, if one is fused.
    consumer: Option<&'a Expr>,
    /// The buffer the tile stores to: the stage's, or its fused consumer's
    /// (which has the same dimensions).
    target_buf: String,
    /// Per element of the tile, its offset per spatial axis; along the vector
    /// axis an element is a vector of lanes.
    elems: Vec<Vec<i64>>,
    /// Spatial axes whose last tile may overhang the stage.
    overhang: Vec<usize>,
    /// Copies whose next slice the tile prefetches.
    ahead: Vec<Ahead>,
    /// The buffer of partial sums kept apart from the target, if any.
    partial: Option<String>,
    /// With lanes along the reduction, whether a block's remainder is one
    /// vector step with its reads masked past the block's end (a sum whose
    /// body those zeroed reads make 0: [`vanishes`]) rather than single
    /// steps into scalars. At 424×3×79 the single steps took a third of a
    /// GEMM's call.
    masked_rest: bool,
}

impl<'a> MicroKernel<'a> {
    /// The tile of the stage of `sites`, its spatial axes in `order` (outer to
    /// inner). `s` is the stage's index, `consumer` the body of the consumer
    /// fused into it, `target_buf` the buffer stored to.
    pub fn new(
        sites: &'a Sites<'a>,
        s: usize,
        consumer: Option<&'a Expr>,
        target_buf: String,
        order: &[usize],
    ) -> Self {
        let t = sites.idx.t;
        let mut masked_rest = false;
        if let Some((r, _)) = t.lane_reduction() {
            sites.idx.stage.body.visit(&mut |e| {
                if let Expr::Reduce { op, body, .. } = e {
                    masked_rest = *op == ReduceOp::Sum && vanishes(body, r);
                }
            });
        }
        MicroKernel {
            sites,
            s,
            consumer,
            target_buf,
            elems: tile_elems(t, order),
            overhang: (0..t.n).filter(|a| t.may_overhang(*a)).collect(),
            ahead: Vec::new(),
            partial: None,
            masked_rest,
        }
    }

    /// Blocks of the reduction before the last keep their partial sums in
    /// `buf` (laid out by [`super::index::Indexer::partial_index`]).
    pub fn keeping_partial_sums(self, buf: Option<String>) -> Self {
        MicroKernel {
            partial: buf,
            ..self
        }
    }

    /// The tile also prefetches these copies' next slices.
    pub fn prefetching(self, ahead: Vec<Ahead>) -> Self {
        MicroKernel { ahead, ..self }
    }

    /// The prefetches of `steps` iterations of the outermost reduction loop.
    fn prefetches(&self, steps: i64) -> Vec<Stmt> {
        self.ahead
            .iter()
            .flat_map(|a| a.prefetches(steps))
            .collect()
    }

    /// The tile's code: accumulate `reduction` (the stage's reduction node, if
    /// any; its innermost loop unrolled `unroll` times), then store.
    pub fn lower(&self, reduction: Option<&Expr>, unroll: usize) -> Vec<Stmt> {
        match reduction {
            Some(Expr::Reduce { op, body, .. }) => self.reduction(*op, body, unroll),
            _ => self.elementwise(),
        }
    }

    fn t(&self) -> &Tiling {
        self.sites.idx.t
    }

    fn stage(&self) -> &Stage {
        self.sites.idx.stage
    }

    fn lanes(&self) -> usize {
        self.t().lanes()
    }

    /// An accumulator's lanes: a stored value's, or those along the reduction.
    fn acc_lanes(&self) -> usize {
        self.t().acc_lanes()
    }

    fn point(&self, offset: &[i64], unroll: i64) -> Point {
        self.sites.idx.point(offset, unroll)
    }

    /// An element-wise stage: compute each element and store it. (The space
    /// fuses consumers into reduction stages only.)
    fn elementwise(&self) -> Vec<Stmt> {
        let body = &self.stage().body;
        let mut out = self.sites.base_lets(body, None);
        out.extend(self.split_full(|full| {
            self.compute_and_store(full, |_, p| {
                self.sites.value(body, p, &VExpr::Const(0.0), None)
            })
        }));
        out
    }

    /// A reduction stage: initialise the accumulators (or resume the partial
    /// sums), run the inner reduction loops, store.
    fn reduction(&self, rop: ReduceOp, rbody: &Expr, unroll: usize) -> Vec<Stmt> {
        let mut out = self.init_accumulators(rop);
        // Several outer blocks: each but the first resumes the partial sums.
        let split = self.t().split_reduction();
        if split {
            out.push(Stmt::If {
                conds: self.first_block(),
                then: Vec::new(),
                otherwise: self.split_full(|full| self.reload_partial_sums(full)),
            });
        }
        // Guarded reads: a register tile whose reads all stay inside runs
        // them untested; a border tile tests each.
        let interior = self.sites.interior(rbody);
        if interior.is_empty() {
            out.extend(self.reduction_loops(rop, rbody, unroll, false));
        } else {
            // (Not unrolled: the few border tiles are not worth the code.)
            let mut border = vec![Stmt::Comment(BORDER_TILE.to_string())];
            border.extend(self.reduction_loops(rop, rbody, 1, true));
            out.push(Stmt::If {
                conds: interior,
                then: self.reduction_loops(rop, rbody, unroll, false),
                otherwise: border,
            });
        }
        let final_store = self.final_store(rop);
        if split {
            // Before the last block, store the partial sums as they are.
            out.push(Stmt::If {
                conds: self.last_block(),
                then: final_store,
                otherwise: self.split_full(|full| self.store_accumulators(rop, full)),
            });
        } else {
            out.extend(final_store);
        }
        out
    }

    // ---- accumulators ----

    /// Every accumulator, set to the reduction's identity.
    fn init_accumulators(&self, rop: ReduceOp) -> Vec<Stmt> {
        let identity = VExpr::Const(rop.identity());
        let local = |name: String, lanes: usize| Stmt::Local {
            name,
            lanes,
            init: identity.clone(),
        };
        let mut out: Vec<Stmt> = (0..self.elems.len())
            .map(|i| local(acc_name(i), self.acc_lanes()))
            .collect();
        if self.t().lane_reduction().is_some() && !self.masked_rest {
            out.extend((0..self.elems.len()).map(|i| local(rest_name(i), 1)));
        }
        out
    }

    /// Every accumulator, set to the partial sum in the output (of a `full`
    /// tile, or only where an overhanging one is inside the stage).
    fn reload_partial_sums(&self, full: bool) -> Vec<Stmt> {
        self.elems
            .iter()
            .enumerate()
            .map(|(i, e)| {
                if let Some(buf) = &self.partial {
                    let load = VExpr::Load {
                        buf: buf.clone(),
                        index: self.sites.idx.partial_index(&self.point(e, 0)),
                        guard: Vec::new(),
                        pad: 0.0,
                        lanes: self.lanes(),
                        stride: 1,
                    };
                    self.inside(e, full, self.set_acc(i, load))
                } else if full {
                    self.reload(i, e)
                } else if self.lanes() == 1 {
                    self.reload_guarded(i, e, None)
                } else {
                    let lanewise = self.lane_loop(vec![self.reload_guarded(i, e, Some(LANE))]);
                    match self.vector_guards(e) {
                        Some(split) => split.wrap(self.reload(i, e), lanewise),
                        None => lanewise,
                    }
                }
            })
            .collect()
    }

    /// Accumulator `i` (at `offset`), set from the output with one load.
    fn reload(&self, i: usize, offset: &[i64]) -> Stmt {
        let (index, stride) = self.target_index(offset);
        let Some(stride) = stride.as_const() else {
            // A symbolic lane stride (the generic kernel): lane by lane.
            let idx = index.plus(IExpr::var(LANE).times(stride));
            return self.lane_loop(vec![Stmt::SetLane {
                name: acc_name(i),
                lane: IExpr::var(LANE),
                value: VExpr::load(&self.target_buf, idx),
            }]);
        };
        self.set_acc(
            i,
            VExpr::Load {
                buf: self.target_buf.clone(),
                index,
                guard: Vec::new(),
                pad: 0.0,
                lanes: self.lanes(),
                stride,
            },
        )
    }

    /// Accumulator `i` set to `value` (a stored value's lanes); with lanes
    /// along the reduction, its first lane (the others hold the identity).
    fn set_acc(&self, i: usize, value: VExpr) -> Stmt {
        match self.t().lane_reduction() {
            Some(_) => Stmt::SetLane {
                name: acc_name(i),
                lane: IExpr::Const(0),
                value,
            },
            None => Stmt::Assign {
                name: acc_name(i),
                value,
            },
        }
    }

    /// Accumulator `i` (at `offset`; with `lane`, that lane of it), set from
    /// the output if it is inside the stage.
    fn reload_guarded(&self, i: usize, offset: &[i64], lane: Option<&str>) -> Stmt {
        let (index, stride) = self.target_index(offset);
        let idx = match lane {
            Some(l) => index.plus(IExpr::var(l).times(stride)),
            None => index,
        };
        let v = VExpr::load(&self.target_buf, idx);
        let st = match lane {
            Some(l) => Stmt::SetLane {
                name: acc_name(i),
                lane: IExpr::var(l),
                value: v,
            },
            None => self.set_acc(i, v),
        };
        Stmt::If {
            conds: self.in_range(offset, lane),
            then: vec![st],
            otherwise: Vec::new(),
        }
    }

    // ---- the inner reduction ----

    /// The inner reduction loops over a block, outer to inner; the innermost
    /// unrolled `unroll` times, with a remainder loop. In a `border` tile,
    /// guarded reads are tested.
    fn reduction_loops(
        &self,
        rop: ReduceOp,
        rbody: &Expr,
        unroll: usize,
        border: bool,
    ) -> Vec<Stmt> {
        let t = self.t();
        let last = t.red.last().expect("a reduction has axes");
        let u = unroll.max(1) as i64;
        let ri = tile_var("ri", self.stage(), last.axis);
        // The prefetches go into the outermost loop's body: here if it is
        // this one, for the steps each iteration makes.
        let ahead = |steps: i64| match t.red.len() {
            1 => self.prefetches(steps),
            _ => Vec::new(),
        };
        let mut body = if let Some((_, lanes)) = t.lane_reduction() {
            self.lane_loops(rop, rbody, u, lanes as i64, last)
        } else if u == 1 {
            vec![Stmt::serial(
                &ri,
                self.inner_bound(last),
                [ahead(1), self.iteration(rop, rbody, 0..1, border)].concat(),
            )]
        } else {
            let end = self.inner_bound(last);
            let main_end = end.clone().plus(IExpr::Const(-(u - 1)));
            let rem_start = end.clone().floor_div(u).times(IExpr::Const(u));
            let mut loops = vec![Stmt::For {
                var: ri.clone(),
                start: IExpr::Const(0),
                end: main_end,
                step: u,
                kind: LoopKind::Unrolled(u as usize),
                body: [ahead(u), self.iteration(rop, rbody, 0..u, border)].concat(),
            }];
            // The remainder, unless the trip count is a known multiple of the unroll.
            if end.as_const().is_none_or(|e| e % u != 0) {
                loops.push(Stmt::For {
                    var: ri,
                    start: rem_start,
                    end,
                    step: 1,
                    kind: LoopKind::Serial,
                    body: [ahead(1), self.iteration(rop, rbody, 0..1, border)].concat(),
                });
            }
            loops
        };
        for (i, r) in t.red.iter().enumerate().rev().skip(1) {
            if i == 0 {
                body = [self.prefetches(1), body].concat();
            }
            body = vec![Stmt::serial(
                &tile_var("ri", self.stage(), r.axis),
                self.inner_bound(r),
                body,
            )];
        }
        body
    }

    /// The innermost reduction loops with lanes along it: `u` vectors of
    /// `lanes` steps an iteration, then single vectors, then the rest (one
    /// masked vector, or single steps into a scalar beside the vector), each
    /// only where the block can leave a remainder.
    /// (Lanes along the reduction read in place or from their copy, never
    /// padded, so there is no border tile.)
    fn lane_loops(
        &self,
        rop: ReduceOp,
        rbody: &Expr,
        u: i64,
        lanes: i64,
        last: &ReduceAxis,
    ) -> Vec<Stmt> {
        let ri = tile_var("ri", self.stage(), last.axis);
        let end = self.inner_bound(last);
        let leaves = |step: i64| end.as_const().is_none_or(|e| e % step != 0);
        let up_to = |step: i64| end.clone().floor_div(step).times(IExpr::Const(step));
        let mut loops = vec![Stmt::For {
            var: ri.clone(),
            start: IExpr::Const(0),
            end: end.clone().plus(IExpr::Const(-(u * lanes - 1))),
            step: u * lanes,
            kind: match u {
                1 => LoopKind::Serial,
                u => LoopKind::Unrolled(u as usize),
            },
            body: self.iteration(rop, rbody, 0..u, false),
        }];
        if u > 1 && end.as_const().is_none_or(|e| e % (u * lanes) >= lanes) {
            loops.push(Stmt::For {
                var: ri.clone(),
                start: up_to(u * lanes),
                end: end.clone().plus(IExpr::Const(-(lanes - 1))),
                step: lanes,
                kind: LoopKind::Serial,
                body: self.iteration(rop, rbody, 0..1, false),
            });
        }
        if leaves(lanes) && self.masked_rest {
            // One step, not a loop: its reads test their lanes once, as a
            // mask (the loops' reads never test).
            let start = up_to(lanes);
            let past_end = Guard {
                index: IExpr::var(&ri),
                lane_step: 1,
                bound: end.clone(),
            };
            let mut step = vec![
                Stmt::Comment(MASKED_REST.to_string()),
                Stmt::Let {
                    name: ri,
                    value: start.clone(),
                },
            ];
            step.extend(
                self.iteration(rop, rbody, 0..1, false)
                    .into_iter()
                    .map(|st| match st {
                        Stmt::Assign { name, value } => Stmt::Assign {
                            name,
                            value: value.guard_lanes(&past_end),
                        },
                        st => st,
                    }),
            );
            loops.push(Stmt::If {
                conds: vec![(start, end)],
                then: step,
                otherwise: Vec::new(),
            });
        } else if leaves(lanes) {
            let mut body = self.sites.base_lets(rbody, None);
            body.extend(self.elems.iter().enumerate().map(|(i, e)| {
                let p = Point {
                    lanes: 1,
                    ..self.point(e, 0)
                };
                let v = self.sites.value(rbody, &p, &VExpr::Const(0.0), None);
                Stmt::Assign {
                    name: rest_name(i),
                    value: VExpr::Binary(
                        rop.combiner(),
                        Box::new(VExpr::Local(rest_name(i))),
                        Box::new(v),
                    ),
                }
            }));
            loops.push(Stmt::For {
                var: ri,
                start: up_to(lanes),
                end,
                step: 1,
                kind: LoopKind::Serial,
                body,
            });
        }
        loops
    }

    /// The trip count of the inner loop of reduction axis `r` in the current
    /// block ([`Tiling::inner_bound`]).
    fn inner_bound(&self, r: &ReduceAxis) -> IExpr {
        self.t()
            .inner_bound(r, IExpr::var(&tile_var("k0", self.stage(), r.axis)))
    }

    /// One iteration of the innermost reduction loop: the origin indices of
    /// the loads of `rbody`, then the update of every accumulator for each
    /// unroll offset in `unrolls`.
    fn iteration(
        &self,
        rop: ReduceOp,
        rbody: &Expr,
        unrolls: Range<i64>,
        border: bool,
    ) -> Vec<Stmt> {
        let mut body = self.sites.base_lets(rbody, None);
        for u in unrolls {
            body.extend(self.update(rop, rbody, u, border));
        }
        body
    }

    /// `acc = combine(acc, body)` for every element, `u` into the unroll.
    fn update(&self, rop: ReduceOp, rbody: &Expr, u: i64, border: bool) -> Vec<Stmt> {
        // With lanes along the reduction, each unroll step is a vector of steps.
        let step = self.t().lane_reduction().map_or(1, |(_, l)| l as i64);
        self.elems
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let p = self.point(e, u * step);
                let v = if border {
                    self.sites.border_value(rbody, &p)
                } else {
                    self.sites.value(rbody, &p, &VExpr::Const(0.0), None)
                };
                Stmt::Assign {
                    name: acc_name(i),
                    value: VExpr::Binary(
                        rop.combiner(),
                        Box::new(VExpr::Local(acc_name(i))),
                        Box::new(v),
                    ),
                }
            })
            .collect()
    }

    /// `ro < 1` for every reduction axis: the first outer block.
    fn first_block(&self) -> Vec<(IExpr, IExpr)> {
        self.t()
            .red
            .iter()
            .map(|r| {
                (
                    IExpr::var(&tile_var("ro", self.stage(), r.axis)),
                    IExpr::Const(1),
                )
            })
            .collect()
    }

    /// `outer - 2 < ro` for every reduction axis: the last outer block.
    fn last_block(&self) -> Vec<(IExpr, IExpr)> {
        self.t()
            .red
            .iter()
            .map(|r| {
                (
                    r.outer.clone().plus(IExpr::Const(-2)),
                    IExpr::var(&tile_var("ro", self.stage(), r.axis)),
                )
            })
            .collect()
    }

    // ---- stores ----

    /// The store of the final values: the stage's body applied to each
    /// accumulator, then the fused consumer's.
    fn final_store(&self, rop: ReduceOp) -> Vec<Stmt> {
        let mut out = self.lane_sums(rop);
        out.extend(self.sites.base_lets(&self.stage().body, None));
        if let Some(c) = self.consumer {
            out.extend(self.sites.base_lets(c, Some(self.s)));
        }
        out.extend(
            self.split_full(|full| self.compute_and_store(full, |i, p| self.result(rop, i, p))),
        );
        out
    }

    /// The value stored for element `i` (at `p`) after the last block.
    fn result(&self, rop: ReduceOp, i: usize, p: &Point) -> VExpr {
        let acc = self.acc_value(rop, i);
        let value = self.sites.value(&self.stage().body, p, &acc, None);
        match self.consumer {
            Some(c) => self.sites.value(c, p, &value, Some(self.s)),
            None => value,
        }
    }

    /// With lanes along the reduction, the tile's accumulators in groups of
    /// a power of two, at most a vector's lanes, largest first: each group's
    /// lanes are combined at once ([`VExpr::Horizontals`]). One at a time, a
    /// 4 × 4 tile of 16 lanes ran 424×4×79 at half the speed.
    fn lane_groups(&self) -> Vec<Range<usize>> {
        let (mut groups, mut start, n) = (Vec::new(), 0, self.elems.len());
        while start < n {
            let left = n - start;
            let size = (1 << left.ilog2()).min(self.acc_lanes().max(1));
            groups.push(start..start + size);
            start += size;
        }
        groups
    }

    /// The combined lanes of each group of more than one accumulator.
    fn lane_sums(&self, rop: ReduceOp) -> Vec<Stmt> {
        if self.t().lane_reduction().is_none() {
            return Vec::new();
        }
        let groups = self.lane_groups().into_iter().enumerate();
        let many = groups.filter(|(_, r)| r.len() > 1);
        many.map(|(g, r)| Stmt::Local {
            name: sums_name(g),
            lanes: self.acc_lanes(),
            init: VExpr::Horizontals(
                rop.combiner(),
                r.map(|i| VExpr::Local(acc_name(i))).collect(),
            ),
        })
        .collect()
    }

    /// Accumulator `i` as a stored value: with lanes along the reduction,
    /// its lanes combined (a lane of its group's [`MicroKernel::lane_sums`]).
    fn acc_value(&self, rop: ReduceOp, i: usize) -> VExpr {
        let acc = VExpr::Local(acc_name(i));
        if self.t().lane_reduction().is_none() {
            return acc;
        }
        let groups = self.lane_groups();
        let (g, group) = (groups.iter().enumerate())
            .find(|(_, r)| r.contains(&i))
            .expect("every accumulator is in a group");
        let lanes = match group.len() {
            1 => VExpr::Horizontal(rop.combiner(), Box::new(acc)),
            len => {
                let lane = (i - group.start) * self.acc_lanes() / len;
                VExpr::Lane(sums_name(g), IExpr::Const(lane as i64))
            }
        };
        match self.masked_rest {
            true => lanes,
            false => VExpr::Binary(
                rop.combiner(),
                Box::new(lanes),
                Box::new(VExpr::Local(rest_name(i))),
            ),
        }
    }

    /// Every accumulator stored as it is (a partial sum).
    fn store_accumulators(&self, rop: ReduceOp, full: bool) -> Vec<Stmt> {
        if self.t().lane_reduction().is_some() {
            let mut out = self.lane_sums(rop);
            out.extend(self.compute_and_store(full, |i, _| self.acc_value(rop, i)));
            return out;
        }
        self.elems
            .iter()
            .enumerate()
            .map(|(i, e)| match &self.partial {
                Some(buf) => {
                    let store = Stmt::Store {
                        buf: buf.clone(),
                        index: self.sites.idx.partial_index(&self.point(e, 0)),
                        value: VExpr::Local(acc_name(i)),
                        lanes: self.lanes(),
                        stride: 1,
                    };
                    self.inside(e, full, store)
                }
                None => self.store(&acc_name(i), e, full),
            })
            .collect()
    }

    /// `st` for the element at `offset`: as it is in a `full` tile, else if
    /// the element (its first lane) is inside the stage.
    fn inside(&self, offset: &[i64], full: bool, st: Stmt) -> Stmt {
        match full {
            true => st,
            false => Stmt::If {
                conds: self.in_range(offset, None),
                then: vec![st],
                otherwise: Vec::new(),
            },
        }
    }

    /// Per element `i`, a local of `value(i, point)`, stored; in a full tile
    /// whose lanes are strided in the target, by rows where it can
    /// ([`MicroKernel::row_stores`]).
    fn compute_and_store(&self, full: bool, value: impl Fn(usize, &Point) -> VExpr) -> Vec<Stmt> {
        let rows = if full { self.row_stores() } else { None };
        let mut out = Vec::new();
        for (i, e) in self.elems.iter().enumerate() {
            let name = value_name(i);
            out.push(Stmt::Local {
                name: name.clone(),
                lanes: self.lanes(),
                init: value(i, &self.point(e, 0)),
            });
            if rows.is_none() {
                out.push(self.store(&name, e, full));
            }
        }
        out.extend(rows.unwrap_or_default());
        out
    }

    /// Where the lanes are strided in the target (a conv's output channels in
    /// NCHW) and the tile holds a power of two of elements, at most a vector's
    /// lanes, along the target's contiguous last axis: the stores of those
    /// elements as one [`Stmt::StoreRows`] each run, the run transposed in
    /// registers and written a row of elements per lane. Lane by lane, the
    /// stores and the extracts they need took a fifth of the stem's time.
    /// `None` where that does not apply (every tile stores element-wise).
    fn row_stores(&self) -> Option<Vec<Stmt>> {
        let t = self.t();
        let lanes = self.lanes();
        let last = t.n.checked_sub(1)?;
        if t.lane_reduction().is_some()
            || t.vector_axis().is_none_or(|v| v == last)
            || !Stmt::stores_rows(t.tile[last], lanes as i64)
        {
            return None;
        }
        let run = t.tile[last] as usize;
        // Elements by their offsets (along the other axes, then along
        // `last`): each run is `run` of them, offsets 0, 1, ... along `last`,
        // which lie one apart (the target is row-major over the stage's axes).
        let mut order: Vec<(&[i64], usize)> = self
            .elems
            .iter()
            .enumerate()
            .map(|(i, e)| (e.as_slice(), i))
            .collect();
        order.sort_unstable();
        order
            .chunks(run)
            .map(|members| {
                let origin = &self.elems[members[0].1];
                let (index, stride) = self.target_index(origin);
                let stride = stride.as_const().filter(|&s| s >= run as i64)?;
                let along = members.iter().map(|&(_, i)| self.elems[i][last]);
                along.eq(0..run as i64).then(|| Stmt::StoreRows {
                    buf: self.target_buf.clone(),
                    index,
                    rows: members
                        .iter()
                        .map(|&(_, i)| VExpr::Local(value_name(i)))
                        .collect(),
                    lanes,
                    stride,
                })
            })
            .collect()
    }

    /// The store of `local` to the element at `offset`: one (vector) store in a
    /// full tile, else guarded by the element (or per lane) being inside the
    /// stage; in the generic kernel, a vector inside the stage stored whole
    /// ([`MicroKernel::vector_guards`]).
    fn store(&self, local: &str, offset: &[i64], full: bool) -> Stmt {
        let lanes = self.lanes();
        let (index, stride) = self.target_index(offset);
        let whole = |stride: i64| Stmt::Store {
            buf: self.target_buf.clone(),
            index: index.clone(),
            value: VExpr::Local(local.to_string()),
            lanes,
            stride,
        };
        // Lane by lane: an overhanging tile, or a symbolic lane stride.
        let lanewise = || {
            let st = Stmt::store(
                &self.target_buf,
                index.clone().plus(IExpr::var(LANE).times(stride.clone())),
                VExpr::Lane(local.to_string(), IExpr::var(LANE)),
            );
            self.lane_loop(vec![if full {
                st
            } else {
                Stmt::If {
                    conds: self.in_range(offset, Some(LANE)),
                    then: vec![st],
                    otherwise: Vec::new(),
                }
            }])
        };
        match stride.as_const() {
            Some(stride) if full => whole(stride),
            Some(stride) if lanes == 1 => Stmt::If {
                conds: self.in_range(offset, None),
                then: vec![whole(stride)],
                otherwise: Vec::new(),
            },
            Some(stride) => match self.vector_guards(offset) {
                Some(split) => split.wrap(whole(stride), lanewise()),
                None => lanewise(),
            },
            None => lanewise(),
        }
    }

    /// Index and lane stride of the element at `offset` in the target (the
    /// stride symbolic in the generic kernel where axes inside the vector's
    /// have symbolic extents).
    fn target_index(&self, offset: &[i64]) -> (IExpr, IExpr) {
        // The target has the stage's dimensions (a fused consumer has the same).
        self.sites
            .idx
            .target_index(&self.t().ext, &self.point(offset, 0))
    }

    // ---- full and overhanging tiles ----

    /// `code(true)` (for a full tile), and where a tile may overhang, behind a
    /// check of that, `code(false)` for an overhanging one.
    fn split_full(&self, code: impl Fn(bool) -> Vec<Stmt>) -> Vec<Stmt> {
        if self.overhang.is_empty() {
            code(true)
        } else {
            vec![Stmt::If {
                conds: self.full_tile(),
                then: code(true),
                otherwise: code(false),
            }]
        }
    }

    /// The tile lies inside the stage along every axis that may overhang.
    fn full_tile(&self) -> Vec<(IExpr, IExpr)> {
        let t = self.t();
        self.overhang
            .iter()
            .map(|&a| {
                (
                    IExpr::var(&tile_var("base", self.stage(), a))
                        .plus(IExpr::Const(t.tile[a] - 1)),
                    t.ext[a].clone(),
                )
            })
            .collect()
    }

    /// The element at `offset` (with `lane`, that lane of it) lies inside the
    /// stage along every axis that may overhang.
    fn in_range(&self, offset: &[i64], lane: Option<&str>) -> Vec<(IExpr, IExpr)> {
        let t = self.t();
        self.overhang
            .iter()
            .map(|&a| {
                let mut e =
                    IExpr::var(&tile_var("base", self.stage(), a)).plus(IExpr::Const(offset[a]));
                if let (Some(l), Some((v, _))) = (lane, t.vector) {
                    if v == a {
                        e = e.plus(IExpr::var(l));
                    }
                }
                (e, t.ext[a].clone())
            })
            .collect()
    }

    /// In the generic kernel, the tests of an overhanging tile's element at
    /// `offset` split by what they depend on, so that a vector inside the
    /// stage is loaded or stored whole: the other axes' (its row inside the
    /// stage) and the vector's last lane's. `None` in a specialisation (its
    /// C, and so its cache entries, as they were) or with a symbolic lane
    /// stride. Lane by lane, the masked moves of a 14×359×14 GEMM, whose
    /// every tile overhangs its 16 rows, were among its hottest instructions
    /// (41 GFLOP/s, 47 with whole vectors).
    fn vector_guards(&self, offset: &[i64]) -> Option<VectorGuards> {
        let t = self.t();
        let (v, lanes) = t.vector?;
        if matches!(t.ext[v], IExpr::Const(_)) || self.target_index(offset).1.as_const().is_none() {
            return None;
        }
        let mut rows = Vec::new();
        let mut whole = None;
        for (&a, (at, end)) in self.overhang.iter().zip(self.in_range(offset, None)) {
            match a == v {
                true => whole = Some((at.plus(IExpr::Const(lanes as i64 - 1)), end)),
                false => rows.push((at, end)),
            }
        }
        Some(VectorGuards { rows, whole })
    }

    /// `body` for each lane of the vector.
    fn lane_loop(&self, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: LANE.to_string(),
            start: IExpr::Const(0),
            end: IExpr::Const(self.lanes() as i64),
            step: 1,
            kind: LoopKind::Lanes,
            body,
        }
    }
}

/// An overhanging tile's element's tests, split ([`MicroKernel::vector_guards`]).
struct VectorGuards {
    /// The element's row lies inside the stage (the axes besides the vector's).
    rows: Vec<(IExpr, IExpr)>,
    /// Its whole vector does, where the vector axis may overhang.
    whole: Option<(IExpr, IExpr)>,
}

impl VectorGuards {
    /// `whole_vector` where the whole vector lies inside, else `lanewise`
    /// (which tests each lane), both only where the row does.
    fn wrap(self, whole_vector: Stmt, lanewise: Stmt) -> Stmt {
        let body = match self.whole {
            Some(test) => Stmt::If {
                conds: vec![test],
                then: vec![whole_vector],
                otherwise: vec![lanewise],
            },
            None => whole_vector,
        };
        match self.rows.is_empty() {
            true => body,
            false => Stmt::If {
                conds: self.rows,
                then: vec![body],
                otherwise: Vec::new(),
            },
        }
    }
}

/// The elements of the register tile, as offsets per spatial axis: the axes in
/// register order (`order` with the vector axis last), the vector axis by
/// whole vectors.
fn tile_elems(t: &Tiling, order: &[usize]) -> Vec<Vec<i64>> {
    let lanes = t.lanes() as i64;
    let mut elems: Vec<Vec<i64>> = vec![vec![0; t.n]];
    for a in t.reg_order(order) {
        let step = if Some(a) == t.vector_axis() { lanes } else { 1 };
        elems = elems
            .into_iter()
            .flat_map(|e| {
                (0..t.tile[a] / step).map(move |i| {
                    let mut e = e.clone();
                    e[a] = i * step;
                    e
                })
            })
            .collect();
    }
    elems
}

/// Whether `e` is 0 wherever every read along reduction axis `r` reads 0 (as
/// a masked lane past the end of the reduction does): such a read (unpadded,
/// or padded with 0), a product of such a value with another or with a
/// finite constant, a sum, difference or negation of such values. Products
/// with any other value are left out: an infinity or NaN read in a masked
/// lane would turn its 0 into a NaN.
fn vanishes(e: &Expr, r: AxisId) -> bool {
    let finite = |e: &Expr| matches!(e, Expr::Const(c) if c.is_finite());
    match e {
        Expr::Load { index, pad, .. } => {
            pad.unwrap_or(0.0) == 0.0 && index.iter().any(|ix| ix.coefficient(r) != 0)
        }
        Expr::Binary(BinaryOp::Mul, a, b) => {
            (vanishes(a, r) && (vanishes(b, r) || finite(b))) || (finite(a) && vanishes(b, r))
        }
        Expr::Binary(BinaryOp::Add | BinaryOp::Sub, a, b) => vanishes(a, r) && vanishes(b, r),
        Expr::Unary(UnaryOp::Neg, a) => vanishes(a, r),
        Expr::Const(c) => *c == 0.0,
        _ => false,
    }
}
