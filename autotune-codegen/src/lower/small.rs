//! The small-call schedule of a stage: the default schedule's loops with the
//! last spatial axis in vectors and a few points of the axis before it in
//! registers, every operand read in place. A generic kernel runs it for calls
//! its tiled kernels do not fit (too small for their copies and whole tiles):
//! it copies nothing, a partial vector is read and stored masked
//! ([`VExpr::MaskedLoad`], [`Stmt::MaskedStore`]), and the rows past the
//! axis's end read its last row again and store nothing.
//!
//! It applies to a stage whose every read steps along the last spatial axis
//! by one element of its last dimension, or not at all (a GEMM's B and A, a
//! conv's input along its rows and its weights), so that lane `l` of every
//! vector is the point `l` further along that axis.

use std::collections::HashMap;

use autotune_lang::ir::{Affine, AxisId, Expr, Operator, ReduceOp, Stage, TensorRef};

use super::dims::Dims;
use super::names::{buffer_name, c_ident};
use crate::loopnest::{Guard, IExpr, LoopKind, Stmt, VExpr};

/// Register tiles (rows, vectors per row): where a row holds more than one
/// vector, and where it holds one at most. On an Intel Xeon (AVX-512, 1
/// thread) at ten small GEMMs, 6 × 2 ran best or near it where N > 16 and
/// 4 × 1 where N ≤ 16 (a hand-written C of each, 4.5–148 GFLOP/s).
const WIDE: (usize, usize) = (6, 2);
const NARROW: (usize, usize) = (4, 1);
/// A stage with one spatial axis has no rows: more vectors along it instead.
const ONE_AXIS_WIDE: (usize, usize) = (1, 4);
const ONE_AXIS_NARROW: (usize, usize) = (1, 1);

/// Index constants beyond this (offsets, coefficients) leave a stage to the
/// default schedule: the tile's offsets added to them must not overflow
/// (the fuzzer's operators read `x[i + 2^63 - 1]`; the wrapper refuses
/// such reads at run time, but the kernel is generated).
const LARGEST_CONSTANT: i64 = 1 << 40;

/// The fewest iterations of a stage that one of the pool's threads runs: a
/// call of fewer than twice as many runs on its caller, a larger one in as
/// many chunks of its row tiles as it holds `GRAIN`s (at most one row tile
/// each). On an Intel Xeon (`bench/small-calls.sh`, 2 threads) 2^17 ran the
/// calls of 0.3-0.5 M iterations 1.4x faster than 2^18, which kept them on
/// one thread, and a call of one chunk as fast as before it had chunks.
pub const GRAIN: i64 = 1 << 17;

/// The loop variables of the chunks and of the units (row tiles) in one,
/// and their counts.
const CHUNK: &str = "chunk__";
const UNIT: &str = "unit__";
const CHUNKS: &str = "chunks__";
const UNITS: &str = "units__";

/// Whether stage `stage` can take the small-call schedule.
pub(crate) fn applies(stage: &Stage) -> bool {
    let Some(j) = stage.n_spatial.checked_sub(1) else {
        return false;
    };
    let small = |c: i64| c.unsigned_abs() <= LARGEST_CONSTANT as u64;
    let mut ok = true;
    stage.body.visit(&mut |e| {
        if let Expr::Load { index, .. } = e {
            ok &= index
                .iter()
                .all(|ix| small(ix.offset) && ix.terms.iter().all(|&(_, c)| small(c)));
            let last = index.len().saturating_sub(1);
            ok &= index
                .iter()
                .enumerate()
                .all(|(d, ix)| match ix.coefficient(j) {
                    0 => true,
                    1 => d == last,
                    _ => false,
                });
        }
    });
    ok
}

/// How the small-call schedule's register tiles fit a call of `op`'s
/// generic kernel, for its dispatcher: the first stage with a reduction that
/// takes the schedule and whose vector loads under the reduction do not
/// depend on the row (one vector load feeds a row of FMAs per row, a GEMM's
/// B; a conv's input is read again for each row, and its tiled kernels are
/// the better choice wherever they fit at all). `None` where no stage is so.
pub(crate) fn fit(op: &Operator, dims: Dims) -> Option<crate::emit::SmallFit> {
    op.stages.iter().find_map(|stage| {
        let n = stage.n_spatial;
        let (j, row) = (n.checked_sub(1)?, n.checked_sub(2));
        let mut reduces = false;
        let mut shared = applies(stage);
        stage.body.visit(&mut |e| {
            if let Expr::Reduce { body, .. } = e {
                reduces = true;
                body.visit(&mut |l| {
                    if let (Expr::Load { index, .. }, Some(row)) = (l, row) {
                        let along = index.iter().any(|ix| ix.coefficient(j) != 0);
                        shared &= !along || index.iter().all(|ix| ix.coefficient(row) == 0);
                    }
                });
            }
        });
        let extent = |a: AxisId| dims.extent(&stage.axes[a].extent);
        let (wide, narrow) = tiles(row);
        let reread = (n..stage.axes.len()).fold(
            extent(j).times(IExpr::Const(op.dtype.size() as i64)),
            |bytes, a| bytes.times(extent(a)),
        );
        (reduces && shared).then(|| crate::emit::SmallFit {
            row: row.map(extent),
            vector: extent(j),
            extents: (0..stage.axes.len()).map(extent).collect(),
            reread,
            wide,
            narrow,
        })
    })
}

/// The nest of stage `s` in the small-call schedule with vectors of `lanes`
/// (the caller checked [`applies`]): a call of `2 × GRAIN` iterations or
/// more runs its row tiles in chunks on the pool's threads, so that a call
/// of a few million iterations on 2 threads does not run on one.
pub(crate) fn stage(op: &Operator, dims: Dims, s: usize, lanes: usize) -> Vec<Stmt> {
    let stage = &op.stages[s];
    let n = stage.n_spatial;
    let l = Lowering {
        op,
        dims,
        stage,
        lanes,
        j: n - 1,
        row: n.checked_sub(2),
    };
    let (wide, narrow) = tiles(l.row);
    vec![Stmt::If {
        conds: vec![(IExpr::Const(lanes as i64), l.extent(l.j))],
        then: l.units(s, wide),
        otherwise: l.units(s, narrow),
    }]
}

/// The register tiles where the vector axis is longer than a vector, and
/// where it is not.
fn tiles(row: Option<AxisId>) -> ((usize, usize), (usize, usize)) {
    match row {
        Some(_) => (WIDE, NARROW),
        None => (ONE_AXIS_WIDE, ONE_AXIS_NARROW),
    }
}

fn var(stage: &Stage, a: AxisId) -> String {
    c_ident(&stage.axes[a].name)
}

struct Lowering<'a> {
    op: &'a Operator,
    dims: Dims<'a>,
    stage: &'a Stage,
    lanes: usize,
    /// The vector axis (the last spatial one) and the row axis before it.
    j: AxisId,
    row: Option<AxisId>,
}

/// One point of a register tile: its row and its vector along the row.
#[derive(Clone, Copy)]
struct Point {
    r: usize,
    v: usize,
}

impl Lowering<'_> {
    fn extent(&self, a: AxisId) -> IExpr {
        self.dims.extent(&self.stage.axes[a].extent)
    }

    fn row_var(&self, r: usize) -> Option<String> {
        self.row.map(|a| format!("{}__r{r}", var(self.stage, a)))
    }

    /// The first row of a row tile.
    fn first_row(&self) -> Option<String> {
        self.row.map(|a| format!("{}__0", var(self.stage, a)))
    }

    /// The stage's tiles of `rows` × `vectors`: its row tiles (with the points
    /// of its outer spatial axes: "units", row tiles innermost) in its own
    /// loops where the stage has fewer than `2 × GRAIN` iterations, else in
    /// chunks of consecutive units on the pool. (Outlined into the pool's
    /// body for every call, the loops ran the smallest calls 1.3x slower.)
    fn units(&self, s: usize, (rows, vectors): (usize, usize)) -> Vec<Stmt> {
        let body = self.tile(s, (rows, vectors));
        let mut digits: Vec<Digit> = (0..self.stage.n_spatial.saturating_sub(2))
            .map(|a| Digit {
                var: var(self.stage, a),
                count: self.extent(a),
                step: 1,
                end: self.extent(a),
            })
            .collect();
        if let (Some(row), Some(first)) = (self.row, self.first_row()) {
            digits.push(Digit {
                var: first,
                count: self.extent(row).ceil_div(rows as i64),
                step: rows as i64,
                end: self.extent(row),
            });
        }
        if digits.is_empty() {
            return body;
        }
        let work = self.dims.iterations(self.stage);
        vec![Stmt::If {
            conds: vec![(work.clone(), IExpr::Const(2 * GRAIN))],
            then: serial(&digits, body.clone()),
            otherwise: vec![chunked(digits, work, body)],
        }]
    }

    /// Tiles of `rows` points of the row axis × `vectors` vectors of the
    /// vector axis over the stage's last two spatial axes.
    fn tile(&self, s: usize, (rows, vectors): (usize, usize)) -> Vec<Stmt> {
        let points: Vec<Point> = (0..rows)
            .flat_map(|r| (0..vectors).map(move |v| Point { r, v }))
            .collect();
        // Reductions first, all points' accumulators in one nest each.
        let mut reductions = Vec::new();
        self.stage.body.visit(&mut |e| {
            if let Expr::Reduce { op, axes, body } = e {
                reductions.push((*op, axes.as_slice(), body.as_ref()));
            }
        });
        let mut body: Vec<Stmt> = reductions
            .into_iter()
            .enumerate()
            .flat_map(|(i, (rop, axes, rb))| self.reduction(i, rop, axes, rb, &points))
            .collect();
        // The epilogue reads each load once per point, in place.
        let values: Vec<VExpr> = points
            .iter()
            .map(|&p| self.value(&self.stage.body, p, &mut 0, None))
            .collect();
        let j = var(self.stage, self.j);
        let out = TensorRef::Stage(s);
        let own: Vec<Affine> = (0..self.stage.n_spatial).map(Affine::axis).collect();
        // The row loop's variable: the first row of a tile.
        let first = self.first_row().unwrap_or_default();
        for r in 0..rows {
            let mut stores: Vec<Stmt> = (0..vectors)
                .map(|v| {
                    let p = Point { r, v };
                    let at = IExpr::var(&j).plus(IExpr::Const((v * self.lanes) as i64));
                    Stmt::MaskedStore {
                        buf: buffer_name(self.op, out),
                        index: self.flat(out, &own, p),
                        value: values[r * vectors + v].clone(),
                        lanes: self.lanes,
                        count: self.extent(self.j).plus(at.times(IExpr::Const(-1))),
                    }
                })
                .collect();
            if let (Some(row), true) = (self.row, r > 0) {
                stores = vec![Stmt::If {
                    conds: vec![(
                        IExpr::var(&first).plus(IExpr::Const(r as i64)),
                        self.extent(row),
                    )],
                    then: stores,
                    otherwise: Vec::new(),
                }];
            }
            body.extend(stores);
        }
        let step = (vectors * self.lanes) as i64;
        let mut nest = vec![Stmt::For {
            var: j,
            start: IExpr::Const(0),
            end: self.extent(self.j),
            step,
            kind: LoopKind::Serial,
            body,
        }];
        if let Some(row) = self.row {
            let last = self.extent(row).plus(IExpr::Const(-1));
            // Rows past the end compute the last row again: their reads stay inside.
            let mut lets: Vec<Stmt> = (0..rows)
                .map(|r| Stmt::Let {
                    name: self.row_var(r).expect("a row axis"),
                    value: IExpr::var(&first)
                        .plus(IExpr::Const(r as i64))
                        .min(last.clone()),
                })
                .collect();
            lets.extend(nest);
            nest = lets;
        }
        nest
    }

    /// Reduction `i` of the stage for every point: accumulators, then one
    /// nest over its axes that loads each operand once for all points.
    fn reduction(
        &self,
        i: usize,
        rop: ReduceOp,
        axes: &[AxisId],
        rbody: &Expr,
        points: &[Point],
    ) -> Vec<Stmt> {
        let mut out: Vec<Stmt> = points
            .iter()
            .map(|&p| Stmt::Local {
                name: acc_name(i, p),
                lanes: self.lanes,
                init: VExpr::Const(rop.identity()),
            })
            .collect();
        let mut loads = Loads::default();
        let updates: Vec<Stmt> = points
            .iter()
            .map(|&p| {
                let value = self.value(rbody, p, &mut 0, Some(&mut loads));
                Stmt::Assign {
                    name: acc_name(i, p),
                    value: VExpr::Binary(
                        rop.combiner(),
                        Box::new(VExpr::Local(acc_name(i, p))),
                        Box::new(value),
                    ),
                }
            })
            .collect();
        let mut inner = loads.locals();
        inner.extend(updates);
        for &a in axes.iter().rev() {
            inner = vec![Stmt::serial(&var(self.stage, a), self.extent(a), inner)];
        }
        out.extend(inner);
        out
    }

    /// Axis `a`'s value at point `p`: its variable, the point's row, or the
    /// vector's first point along the row.
    fn axis_value(&self, a: AxisId, p: Point) -> IExpr {
        if Some(a) == self.row {
            IExpr::var(&self.row_var(p.r).expect("a row axis"))
        } else if a == self.j {
            IExpr::var(&var(self.stage, a)).plus(IExpr::Const((p.v * self.lanes) as i64))
        } else {
            IExpr::var(&var(self.stage, a))
        }
    }

    /// Row-major flat offset of `tensor[index...]` at point `p`.
    fn flat(&self, tensor: TensorRef, index: &[Affine], p: Point) -> IExpr {
        let dims = self.dims.tensor(tensor);
        index
            .iter()
            .zip(dims)
            .fold(IExpr::Const(0), |acc, (ix, d)| {
                acc.times(d).plus(self.affine(ix, p))
            })
    }

    fn affine(&self, ix: &Affine, p: Point) -> IExpr {
        ix.terms
            .iter()
            .fold(IExpr::Const(0), |acc, &(a, c)| {
                acc.plus(self.axis_value(a, p).times(IExpr::Const(c)))
            })
            .plus(IExpr::Const(ix.offset))
    }

    /// The value of `e` at point `p` (a vector of `lanes`), its reductions
    /// the accumulators of [`Self::reduction`] (`reduce` counts them in
    /// visiting order) and its loads kept in `loads` (else read in place).
    fn value(
        &self,
        e: &Expr,
        p: Point,
        reduce: &mut usize,
        mut loads: Option<&mut Loads>,
    ) -> VExpr {
        match e {
            Expr::Const(c) => VExpr::Const(*c),
            Expr::ShapeValue(v) => VExpr::FromIndex(self.dims.shape_value(*v)),
            Expr::Load { tensor, index, pad } => {
                let load = self.load(*tensor, index, *pad, p);
                match loads {
                    Some(loads) => loads.get(load),
                    None => load,
                }
            }
            Expr::Unary(op, a) => VExpr::Unary(*op, Box::new(self.value(a, p, reduce, loads))),
            Expr::Binary(op, a, b) => {
                let a = self.value(a, p, reduce, loads.as_deref_mut());
                let b = self.value(b, p, reduce, loads);
                VExpr::Binary(*op, Box::new(a), Box::new(b))
            }
            Expr::Reduce { .. } => {
                *reduce += 1;
                VExpr::Local(acc_name(*reduce - 1, p))
            }
        }
    }

    /// A read at point `p`: a vector where it steps along the vector axis
    /// (lanes outside the tensor, or its padding, read `pad`), else a scalar.
    fn load(&self, tensor: TensorRef, index: &[Affine], pad: Option<f64>, p: Point) -> VExpr {
        let dims = self.dims.tensor(tensor);
        let along = index.iter().any(|ix| ix.coefficient(self.j) != 0);
        let last = index.len().saturating_sub(1);
        let guard = index
            .iter()
            .zip(&dims)
            .enumerate()
            .filter(|&(d, (ix, _))| {
                let lanes_step = along && d == last;
                // A bare spatial axis over this whole dimension stays inside
                // (the row axis is clamped), except along the vector's lanes.
                let inside = ix
                    .as_axis()
                    .is_some_and(|a| self.stage.axes[a].extent == self.op.tensor_dims(tensor)[d]);
                lanes_step || (pad.is_some() && !inside)
            })
            .map(|(d, (ix, bound))| Guard {
                index: self.affine(ix, p),
                lane_step: i64::from(along && d == last),
                bound: bound.clone(),
            })
            .collect();
        let flat = self.flat(tensor, index, p);
        let buf = buffer_name(self.op, tensor);
        let pad = pad.unwrap_or(0.0);
        if along {
            VExpr::MaskedLoad {
                buf,
                index: flat,
                guard,
                pad,
                lanes: self.lanes,
            }
        } else {
            // A scalar: vector operations take it in every lane (a broadcast
            // load; a splat `{0} + x` costs an add, as -0 + 0 is +0).
            VExpr::Load {
                buf,
                index: flat,
                guard,
                pad,
                lanes: 1,
                stride: 1,
            }
        }
    }
}

/// One digit of a unit: a loop `var` over `count` values `step` apart,
/// below `end`.
struct Digit {
    var: String,
    count: IExpr,
    step: i64,
    end: IExpr,
}

/// `body` in a loop per digit, the first outermost.
fn serial(digits: &[Digit], body: Vec<Stmt>) -> Vec<Stmt> {
    digits.iter().rev().fold(body, |inner, d| {
        vec![Stmt::For {
            var: d.var.clone(),
            start: IExpr::Const(0),
            end: d.end.clone(),
            step: d.step,
            kind: LoopKind::Serial,
            body: inner,
        }]
    })
}

/// `body` for every unit (a value of each digit), in as many chunks of
/// consecutive units as `work` holds [`GRAIN`]s, on the pool; each unit's
/// digits taken apart from its number.
fn chunked(digits: Vec<Digit>, work: IExpr, body: Vec<Stmt>) -> Stmt {
    let units = digits
        .iter()
        .fold(IExpr::Const(1), |acc, d| acc.times(d.count.clone()));
    let chunks = work
        .floor_div(GRAIN)
        .max(IExpr::Const(1))
        .min(units.clone());
    let mut lets = Vec::new();
    let mut inner = IExpr::Const(1);
    let outermost = digits.len() - 1;
    for (i, d) in digits.into_iter().rev().enumerate() {
        // (The outermost digit is below its count: no remainder to take.)
        let digit = IExpr::var(UNIT).div_by(inner.clone());
        let digit = match i == outermost {
            true => digit,
            false => digit.rem_by(d.count.clone()),
        };
        lets.insert(
            0,
            Stmt::Let {
                name: d.var,
                value: digit.times(IExpr::Const(d.step)),
            },
        );
        inner = inner.times(d.count);
    }
    lets.extend(body);
    // The chunk's units, from the counts named once.
    let bound = |k: IExpr| k.times(IExpr::var(UNITS)).div_by(IExpr::var(CHUNKS));
    Stmt::Parallel {
        var: CHUNK.to_string(),
        extent: chunks.clone(),
        body: vec![
            Stmt::Let {
                name: UNITS.to_string(),
                value: units,
            },
            Stmt::Let {
                name: CHUNKS.to_string(),
                value: chunks,
            },
            Stmt::For {
                var: UNIT.to_string(),
                start: bound(IExpr::var(CHUNK)),
                end: bound(IExpr::var(CHUNK).plus(IExpr::Const(1))),
                step: 1,
                kind: LoopKind::Serial,
                body: lets,
            },
        ],
    }
}

fn acc_name(i: usize, p: Point) -> String {
    format!("acc{i}__r{}v{}", p.r, p.v)
}

/// The distinct loads of a nest's body, each read once into a local that
/// every point's expression shares (a GEMM's B vector for all rows).
#[derive(Default)]
struct Loads {
    names: HashMap<String, usize>,
    list: Vec<VExpr>,
}

impl Loads {
    fn get(&mut self, load: VExpr) -> VExpr {
        let key = format!("{load:?}");
        let next = self.list.len();
        let i = *self.names.entry(key).or_insert(next);
        if i == next {
            self.list.push(load);
        }
        VExpr::Local(Self::name(i))
    }

    fn name(i: usize) -> String {
        format!("ld__{i}")
    }

    /// The locals that read the loads (a reduction's loop body scopes them).
    fn locals(&self) -> Vec<Stmt> {
        self.list
            .iter()
            .enumerate()
            .map(|(i, load)| Stmt::Local {
                name: Self::name(i),
                lanes: match load {
                    VExpr::MaskedLoad { lanes, .. } => *lanes,
                    _ => 1,
                },
                init: load.clone(),
            })
            .collect()
    }
}
