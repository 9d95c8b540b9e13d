//! The loop-nest AST: an imperative kernel (loops, scalar locals, loads and
//! stores on flat buffers) that schedules transform and `codegen` prints as C.
//!
//! Index arithmetic ([`IExpr`]) is kept symbolic and folded as it is built, so a
//! specialised kernel shows plain constants and a generic one shows shape names.

use autotune_lang::ir::{BinaryOp, DType, UnaryOp};

/// Integer (index) expression; C type `int64_t`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IExpr {
    Const(i64),
    Var(String),
    Add(Box<IExpr>, Box<IExpr>),
    Mul(Box<IExpr>, Box<IExpr>),
    Min(Box<IExpr>, Box<IExpr>),
    Max(Box<IExpr>, Box<IExpr>),
    /// Division of non-negative values (rounds down).
    Div(Box<IExpr>, Box<IExpr>),
    Mod(Box<IExpr>, Box<IExpr>),
}

impl IExpr {
    pub fn var(name: &str) -> IExpr {
        IExpr::Var(name.to_string())
    }

    /// `self + other`, folding constants.
    pub fn plus(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a + b),
            (IExpr::Const(0), e) | (e, IExpr::Const(0)) => e,
            // Keep constants last so `i * 64 + 3` reads naturally.
            (IExpr::Add(a, b), IExpr::Const(c)) if matches!(*b, IExpr::Const(_)) => {
                let IExpr::Const(bc) = *b else { unreachable!() };
                a.plus(IExpr::Const(bc + c))
            }
            (a, b) => IExpr::Add(Box::new(a), Box::new(b)),
        }
    }

    /// `self` as a sum `(rest, constant)`: the constant term that `plus`
    /// keeps last split off (`i * 64 + 3` → `(i * 64, 3)`).
    pub fn split_constant(self) -> (IExpr, i64) {
        match self {
            IExpr::Const(c) => (IExpr::Const(0), c),
            IExpr::Add(a, b) => match *b {
                IExpr::Const(c) => (*a, c),
                b => (IExpr::Add(a, Box::new(b)), 0),
            },
            e => (e, 0),
        }
    }

    /// `self * other`, folding constants.
    pub fn times(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a * b),
            (IExpr::Const(0), _) | (_, IExpr::Const(0)) => IExpr::Const(0),
            (IExpr::Const(1), e) | (e, IExpr::Const(1)) => e,
            (IExpr::Const(c), e) => IExpr::Mul(Box::new(e), Box::new(IExpr::Const(c))),
            (a, b) => IExpr::Mul(Box::new(a), Box::new(b)),
        }
    }

    pub fn min(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a.min(b)),
            (a, b) if a == b => a,
            (a, b) => IExpr::Min(Box::new(a), Box::new(b)),
        }
    }

    pub fn max(self, other: IExpr) -> IExpr {
        match (self, other) {
            (IExpr::Const(a), IExpr::Const(b)) => IExpr::Const(a.max(b)),
            (a, b) if a == b => a,
            (a, b) => IExpr::Max(Box::new(a), Box::new(b)),
        }
    }

    /// `self / d` for a divisor that may be symbolic (positive at run time).
    pub fn div_by(self, d: IExpr) -> IExpr {
        match d {
            IExpr::Const(c) => self.floor_div(c),
            d => IExpr::Div(Box::new(self), Box::new(d)),
        }
    }

    /// `self % d` for a divisor that may be symbolic (positive at run time).
    pub fn rem_by(self, d: IExpr) -> IExpr {
        match d {
            IExpr::Const(c) => self.modulo(c),
            d => IExpr::Mod(Box::new(self), Box::new(d)),
        }
    }

    /// `ceil(self / d)` for a non-negative `self`.
    pub fn ceil_div(self, d: i64) -> IExpr {
        self.plus(IExpr::Const(d - 1)).floor_div(d)
    }

    pub fn floor_div(self, d: i64) -> IExpr {
        match self {
            IExpr::Const(a) => IExpr::Const(a.div_euclid(d)),
            e if d == 1 => e,
            e => IExpr::Div(Box::new(e), Box::new(IExpr::Const(d))),
        }
    }

    pub fn modulo(self, d: i64) -> IExpr {
        match self {
            IExpr::Const(a) => IExpr::Const(a.rem_euclid(d)),
            _ if d == 1 => IExpr::Const(0),
            e => IExpr::Mod(Box::new(e), Box::new(IExpr::Const(d))),
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        match self {
            IExpr::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// Whether the expression reads variable `v`.
    pub fn mentions(&self, v: &str) -> bool {
        match self {
            IExpr::Const(_) => false,
            IExpr::Var(n) => n == v,
            IExpr::Add(a, b)
            | IExpr::Mul(a, b)
            | IExpr::Min(a, b)
            | IExpr::Max(a, b)
            | IExpr::Div(a, b)
            | IExpr::Mod(a, b) => a.mentions(v) || b.mentions(v),
        }
    }
}

/// Value expression in the kernel's element type: a scalar, or a vector of
/// `lanes` elements (GCC vector extensions) where a load or local says so.
#[derive(Clone, Debug, PartialEq)]
pub enum VExpr {
    Const(f64),
    /// An index expression converted to the element type (shape values).
    FromIndex(IExpr),
    /// `buf[index]`, or with `lanes > 1` the vector `buf[index + l * stride]` for
    /// each lane `l` (one vector load when `stride` is 1). When `guard` is not
    /// empty, an element (lane) is read only where every test of `guard`
    /// holds, and is `pad` otherwise.
    Load {
        buf: String,
        index: IExpr,
        guard: Vec<Guard>,
        pad: f64,
        lanes: usize,
        stride: i64,
    },
    /// Lanes `l` of `buf[index + l]` where every test of `guard` holds (those
    /// with a `lane_step` of 1 bound a run of lanes, those of 0 keep all or
    /// none; no other step),
    /// `pad` in the others: a partial vector read without touching the
    /// elements of its other lanes (masked loads, which do not fault there).
    MaskedLoad {
        buf: String,
        index: IExpr,
        guard: Vec<Guard>,
        pad: f64,
        lanes: usize,
    },
    Local(String),
    /// One lane of a vector local.
    Lane(String, IExpr),
    /// A scalar repeated in every lane.
    Splat(Box<VExpr>, usize),
    Unary(UnaryOp, Box<VExpr>),
    Binary(BinaryOp, Box<VExpr>, Box<VExpr>),
    /// The lanes of a vector combined into one value with `+`, max or min
    /// (the accumulator of lanes along a reduction, in the store).
    Horizontal(BinaryOp, Box<VExpr>),
    /// The lanes of each of `n` vectors combined as by [`VExpr::Horizontal`],
    /// at once: a vector of their lanes whose lane `i * lanes / n` holds
    /// vector `i`'s (`n` a power of two, at most the lanes). A register
    /// tile's accumulators of lanes along a reduction share one tree of
    /// shuffles.
    Horizontals(BinaryOp, Vec<VExpr>),
}

/// The comment that opens a border tile's code (the `else` of a register
/// tile's test that its reads stay inside): the only tiled code whose
/// innermost loops test bounds.
pub const BORDER_TILE: &str = "border tile: guarded reads tested";

/// Whether `code` (the `else` of an `If`) is a border tile's code.
pub fn opens_border_tile(code: &[Stmt]) -> bool {
    matches!(code.first(), Some(Stmt::Comment(c)) if c == BORDER_TILE)
}

/// The comment that opens the one step ending a block of lanes along a
/// reduction where the block's length is not a whole number of vectors (the
/// `then` of an `If`): its reads test their lanes, as a mask, once a block.
pub const MASKED_REST: &str = "the block's last lanes: reads masked past its end";

/// Whether `code` (the `then` of an `If`) is that step.
pub fn opens_masked_rest(code: &[Stmt]) -> bool {
    matches!(code.first(), Some(Stmt::Comment(c)) if c == MASKED_REST)
}

/// A bounds test of a guarded load: `0 <= index + l * lane_step < bound` for
/// lane `l` (`lane_step` is 0 for a scalar, or where the lanes run along
/// another dimension).
#[derive(Clone, Debug, PartialEq)]
pub struct Guard {
    pub index: IExpr,
    pub lane_step: i64,
    pub bound: IExpr,
}

impl VExpr {
    /// The expression with every vector load's lanes also tested by `guard`
    /// (a load of consecutive elements masked), reading its pad where it
    /// fails: a step of lanes along a reduction that runs past its end.
    pub fn guard_lanes(self, guard: &Guard) -> VExpr {
        let inner = |e: Box<VExpr>| Box::new(e.guard_lanes(guard));
        match self {
            VExpr::Load {
                buf,
                index,
                guard: mut tests,
                pad,
                lanes,
                stride,
            } if lanes > 1 => {
                tests.push(guard.clone());
                match stride {
                    1 => VExpr::MaskedLoad {
                        buf,
                        index,
                        guard: tests,
                        pad,
                        lanes,
                    },
                    _ => VExpr::Load {
                        buf,
                        index,
                        guard: tests,
                        pad,
                        lanes,
                        stride,
                    },
                }
            }
            VExpr::MaskedLoad {
                buf,
                index,
                guard: mut tests,
                pad,
                lanes,
            } => {
                tests.push(guard.clone());
                VExpr::MaskedLoad {
                    buf,
                    index,
                    guard: tests,
                    pad,
                    lanes,
                }
            }
            VExpr::Splat(a, lanes) => VExpr::Splat(inner(a), lanes),
            VExpr::Unary(op, a) => VExpr::Unary(op, inner(a)),
            VExpr::Binary(op, a, b) => VExpr::Binary(op, inner(a), inner(b)),
            VExpr::Horizontal(op, a) => VExpr::Horizontal(op, inner(a)),
            VExpr::Horizontals(op, vs) => {
                VExpr::Horizontals(op, vs.into_iter().map(|v| v.guard_lanes(guard)).collect())
            }
            e => e,
        }
    }

    /// Whether the expression reads index variable `v`.
    pub fn mentions(&self, v: &str) -> bool {
        match self {
            VExpr::Const(_) | VExpr::Local(_) => false,
            VExpr::FromIndex(e) | VExpr::Lane(_, e) => e.mentions(v),
            VExpr::Load { index, guard, .. } | VExpr::MaskedLoad { index, guard, .. } => {
                index.mentions(v)
                    || guard
                        .iter()
                        .any(|g| g.index.mentions(v) || g.bound.mentions(v))
            }
            VExpr::Splat(e, _) | VExpr::Unary(_, e) | VExpr::Horizontal(_, e) => e.mentions(v),
            VExpr::Binary(_, a, b) => a.mentions(v) || b.mentions(v),
            VExpr::Horizontals(_, vs) => vs.iter().any(|e| e.mentions(v)),
        }
    }

    /// A scalar load without guard.
    pub fn load(buf: &str, index: IExpr) -> VExpr {
        VExpr::Load {
            buf: buf.to_string(),
            index,
            guard: Vec::new(),
            pad: 0.0,
            lanes: 1,
            stride: 1,
        }
    }
}

/// How a loop runs, for readers of the nest (features, comments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    Serial,
    /// The body holds explicit copies for consecutive iterations.
    Unrolled(usize),
    /// Runs over the lanes of vectors (partial-tile and lane-wise code).
    Lanes,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `for (int64_t var = start; var < end; var += step)`.
    For {
        var: String,
        start: IExpr,
        end: IExpr,
        step: i64,
        kind: LoopKind,
        body: Vec<Stmt>,
    },
    /// Runs `body` for `var` in `0..extent` on the thread pool; the body may read
    /// every buffer of the kernel and write disjoint parts of them.
    Parallel {
        var: String,
        extent: IExpr,
        body: Vec<Stmt>,
    },
    /// `const int64_t name = value;`
    Let {
        name: String,
        value: IExpr,
    },
    /// Declares a local of the element type (a vector of `lanes` if above 1).
    Local {
        name: String,
        lanes: usize,
        init: VExpr,
    },
    /// Declares an array of `elems` of the element type, 64-byte aligned, on
    /// the stack of the thread that runs it: a buffer private to one
    /// iteration of a parallel loop (a block's pack). A `kept` one is instead
    /// a part of the thread's kept block buffer, which the function running
    /// it takes once, before its loops (`emit`: `at_block_scratch`).
    Array {
        name: String,
        elems: i64,
        kept: bool,
    },
    /// `name = value`. A `value` that combines `name` itself by max or min
    /// is a reduction's update, and `name` its accumulator: it starts at the
    /// reduction's identity or at partial results of the same reduction, and
    /// a NaN operand never wins, so it is never NaN -- the emitter relies on
    /// that to write the combine as one compare and a blend.
    Assign {
        name: String,
        value: VExpr,
    },
    SetLane {
        name: String,
        lane: IExpr,
        value: VExpr,
    },
    /// `buf[index] = value`, or for `lanes > 1` one vector store (stride 1) or a
    /// store per lane.
    Store {
        buf: String,
        index: IExpr,
        value: VExpr,
        lanes: usize,
        stride: i64,
    },
    /// The first `count` lanes of `value` (none if it is below 1, all if above
    /// `lanes`) stored to `buf[index + l]`, no other element written.
    MaskedStore {
        buf: String,
        index: IExpr,
        value: VExpr,
        lanes: usize,
        count: IExpr,
    },
    /// Vectors of `lanes` stored transposed: lane `l` of `rows[j]` to
    /// `buf[index + l * stride + j]`, a row of `rows.len()` elements per lane
    /// (a power of two, at most `lanes`; `stride` at least that).
    StoreRows {
        buf: String,
        index: IExpr,
        rows: Vec<VExpr>,
        lanes: usize,
        stride: i64,
    },
    /// A hint to fetch the cache line of `buf[index]` into the L2 cache
    /// (`__builtin_prefetch`, which never faults: the index may be past the end).
    Prefetch {
        buf: String,
        index: IExpr,
    },
    /// `if (all lhs < rhs) then else otherwise`.
    If {
        conds: Vec<(IExpr, IExpr)>,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    Comment(String),
}

impl Stmt {
    /// The kept arrays ([`Stmt::Array`]) that `code` declares, as (name,
    /// elements), by name (one declared in several branches once, at its
    /// largest); `nested` says whether those of parallel loops' bodies count
    /// (each is a function of its own when emitted).
    pub fn kept_arrays(code: &[Stmt], nested: bool) -> Vec<(&str, i64)> {
        let mut out = Vec::new();
        let mut stack: Vec<&[Stmt]> = vec![code];
        while let Some(code) = stack.pop() {
            for st in code.iter().rev() {
                match st {
                    Stmt::Array {
                        name,
                        elems,
                        kept: true,
                    } => out.push((name.as_str(), *elems)),
                    Stmt::For { body, .. } => stack.push(body),
                    Stmt::Parallel { body, .. } if nested => stack.push(body),
                    Stmt::If {
                        then, otherwise, ..
                    } => {
                        stack.push(otherwise);
                        stack.push(then);
                    }
                    _ => {}
                }
            }
        }
        // By name, the largest first, then one per name.
        out.sort_unstable_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }

    /// `for (var = 0; var < extent; ++var) body`.
    pub fn serial(var: &str, extent: IExpr, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: var.to_string(),
            start: IExpr::Const(0),
            end: extent,
            step: 1,
            kind: LoopKind::Serial,
            body,
        }
    }

    /// Whether the statement (its body included) reads index variable `v`.
    pub fn mentions(&self, v: &str) -> bool {
        let any = |body: &[Stmt]| body.iter().any(|s| s.mentions(v));
        match self {
            Stmt::For {
                start, end, body, ..
            } => start.mentions(v) || end.mentions(v) || any(body),
            Stmt::Parallel { extent, body, .. } => extent.mentions(v) || any(body),
            Stmt::Let { value, .. } => value.mentions(v),
            Stmt::Local { init, .. } => init.mentions(v),
            Stmt::Assign { value, .. } => value.mentions(v),
            Stmt::SetLane { lane, value, .. } => lane.mentions(v) || value.mentions(v),
            Stmt::Store { index, value, .. } => index.mentions(v) || value.mentions(v),
            Stmt::MaskedStore {
                index,
                value,
                count,
                ..
            } => index.mentions(v) || value.mentions(v) || count.mentions(v),
            Stmt::StoreRows { index, rows, .. } => {
                index.mentions(v) || rows.iter().any(|r| r.mentions(v))
            }
            Stmt::Prefetch { index, .. } => index.mentions(v),
            Stmt::If {
                conds,
                then,
                otherwise,
            } => {
                conds.iter().any(|(a, b)| a.mentions(v) || b.mentions(v))
                    || any(then)
                    || any(otherwise)
            }
            Stmt::Array { .. } | Stmt::Comment(_) => false,
        }
    }

    /// Whether a register tile stores `run` elements along the output's last
    /// axis, in vectors of `lanes` strided there, as rows ([`Stmt::StoreRows`]):
    /// a power of two, 2 to `lanes`. The lowering and the register-tile starts
    /// both ask.
    pub fn stores_rows(run: i64, lanes: i64) -> bool {
        (2..=lanes).contains(&run) && run.count_ones() == 1
    }

    /// A scalar store.
    pub fn store(buf: &str, index: IExpr, value: VExpr) -> Stmt {
        Stmt::Store {
            buf: buf.to_string(),
            index,
            value,
            lanes: 1,
            stride: 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Input,
    Output,
    /// The slot of a constant input's handle (`void *`, NULL for a plain
    /// tensor): where the kernel keeps its copies of that input.
    Slot,
    Shape,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// A buffer the kernel allocates for one call (an intermediate stage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scratch {
    pub name: String,
    pub elems: IExpr,
}

impl Scratch {
    /// The elements of all the buffers.
    pub fn total(buffers: &[Scratch]) -> IExpr {
        buffers
            .iter()
            .fold(IExpr::Const(0), |acc, b| acc.plus(b.elems.clone()))
    }
}

/// The copies a kernel makes of one constant input (packs, padded copies):
/// one block, filled by the first call through a handle and kept in the
/// handle's slot under `layout` (and the call's sizes in `key`), or per call
/// without a handle.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstantCopies {
    /// The input's buffer (`in_w`) and its slot parameter.
    pub input: String,
    pub slot: String,
    /// Tells this kernel's block apart from other kernels' in the same slot: a
    /// hash of the kernel's symbol and of the copies' buffers and loops.
    pub layout: u64,
    /// The shape parameters the copies' sizes and loops read (only in the
    /// generic kernel): their values at the call pick its block among this
    /// kernel's, and are kept at the start of the block's data.
    pub key: Vec<String>,
    /// Sizes: constants in a specialisation, expressions of `key` in the
    /// generic kernel.
    pub buffers: Vec<Scratch>,
    /// The loops that fill `buffers` from the input.
    pub fill: Vec<Stmt>,
}

impl ConstantCopies {
    /// The block's header (`AT_CONST_HEAD` in [`crate::emit::CONSTANTS_C`]).
    pub const HEADER_BYTES: usize = 64;

    /// Where each buffer starts in the block's data, in bytes, and the
    /// block's size with its header: each buffer (one element more, as scratch
    /// has) on its own cache lines.
    pub fn layout_bytes(&self, elem_bytes: usize) -> (Vec<usize>, usize) {
        let mut offsets = Vec::new();
        let mut at = 0;
        for b in &self.buffers {
            offsets.push(at);
            let elems = b
                .elems
                .as_const()
                .expect("constant copies have known sizes");
            at += ((elems as usize + 1) * elem_bytes).div_ceil(64) * 64;
        }
        (offsets, Self::HEADER_BYTES + at)
    }
}

/// One C function.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub symbol: String,
    /// Prefix of the runtime's C functions (`<prefix>_parallel_for`).
    pub runtime: String,
    pub dtype: DType,
    /// Lines of the comment above the function.
    pub doc: Vec<String>,
    pub params: Vec<Param>,
    pub scratch: Vec<Scratch>,
    /// Whether the scratch (there is some) is kept per thread between calls
    /// (up to a limit) instead of allocated and freed by each call: the
    /// generic kernel's tiled schedules, whose calls at odd or small shapes
    /// pad-copy their operands. The file defines [`crate::emit::kept_scratch_c`]
    /// before the kernel.
    pub keeps_scratch: bool,
    /// Per constant input it copies: those copies, made once per handle.
    pub constants: Vec<ConstantCopies>,
    /// The elements a call fills in its buffers (at least: where a stage picks
    /// one of two nests at run time, the smaller's), a measure of its set-up.
    pub setup: IExpr,
    pub body: Vec<Stmt>,
}

impl Kernel {
    /// Whether some block's copy is a kept array ([`Stmt::Array`]): the file
    /// defines [`crate::emit::kept_blocks_c`] before the kernel.
    pub fn keeps_blocks(&self) -> bool {
        !Stmt::kept_arrays(&self.body, true).is_empty()
    }
}
