//! Features of a config for the cost model, read from the loop nest the config
//! lowers to (as AutoTVM's `itervar` and `curve` features), or from its knob
//! values.
//!
//! The nest is described without lowering the config: [`nest_shape`] derives
//! its loops, strides and footprints from the plan, the same geometry the
//! lowering uses ([`FeatureSource::Plan`], some 100× cheaper than lowering an
//! unrolled register tile). Walking the lowered nest ([`FeatureSource::Lowered`])
//! is kept as the reference the plan's features are measured against
//! (`bench/feature-quality.sh`).
//!
//! The loop nest varies with the config (packing adds loops, the order knob
//! permutes them), so the layout is anchored on the kernel's *main statement*:
//! the leaf statement that executes the most arithmetic. Its loops, innermost
//! first, fill a fixed number of loop slots; the buffers it reads, in the order
//! it reads them, plus the output, fill a fixed number of buffer slots. Every
//! count is scaled by a signed `log2(|x| + 1)`, so a feature vector of one
//! workload always has the same length and the same meaning per position.
//!
//! - [`FeatureSet::Itervar`]: per loop slot, its extent, depth, the products of
//!   the extents above and below it, its kind (serial, unrolled, vector lanes,
//!   parallel), the arithmetic and statements in its body, and per buffer slot
//!   the stride of the loop variable in the access, the accesses executed, the
//!   bytes touched and their reuse; then kernel-wide figures.
//! - [`FeatureSet::Curve`]: per buffer slot, reuse and access count sampled at
//!   fixed footprints (bytes touched), and arithmetic intensity the same way —
//!   relations that keep their meaning across shapes and operators, for
//!   transfer learning — then the register tile and the work around it
//!   (`kernel_features`), which the curves cannot see (version 2: held-out
//!   pairwise accuracy 0.63 → 0.72 on the AVX-512 corpus, `bench/heldout-rank.sh`;
//!   version 3: the copies prefetched a slice ahead).
//! - [`FeatureSet::Knobs`]: the knob values themselves (numbers, or the index of
//!   a named choice).

use std::collections::HashMap;
use std::fmt;

use autotune_lang::ir::{Operator, TensorRef};
use autotune_lang::mangle::Variant;

use autotune_codegen::loopnest::{opens_border_tile, IExpr, Kernel, LoopKind, Stmt, VExpr};
use autotune_codegen::lower::nest_shape;
use autotune_codegen::lower::shape::{LoopRun, NestShape, OperandShape, Storage};
use autotune_codegen::{Config, ConfigError, Space, Value, Workload};

/// Version of what the features mean: bump it with any change to a feature's
/// definition or position, so that a pre-trained model of another version is
/// reported instead of applied ([`crate::pretrained`]).
pub const FEATURES_VERSION: u32 = 3;

/// The operators [`probe`] describes (attribute, function): a GEMM and a 3×3
/// convolution with a bias and ReLU epilogue (two stages).
pub(crate) const PROBES: [(&str, &str); 2] = [
    (
        "specialize(M = 96, N = 80, K = 72)",
        "fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    ),
    (
        "R = 3, S = 3, specialize(C = 32, H = 14, W = 14, K = 48)",
        "fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>)
            -> Tensor<f32, (K, H, W)> {
            let y: Tensor<f32, (K, H, W)> = compute(|k, h, v| sum(|c, r, s|
                x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
            compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
        }",
    ),
];

/// A fingerprint of what `set`'s features are in this build: 64 fixed configs
/// of each of [`PROBES`] and their feature vectors, hashed. A pre-trained
/// model records it and is stale where it differs: a change to the space, the
/// plans or the featuriser changes it (whether or not [`FEATURES_VERSION`]
/// was bumped); a change only to the C a plan is written as does not.
pub fn probe(set: FeatureSet) -> u64 {
    let mut bytes = Vec::new();
    for (attr, source) in PROBES {
        let item: syn::ItemFn = syn::parse_str(source).expect("a probe operator parses");
        let attr = attr.parse().expect("a probe attribute lexes");
        let op = autotune_lang::parse_operator(attr, &item).expect("a probe operator is valid");
        let f = Featurizer::new(&Workload { op, spec: 0 }, set);
        let size = f.space.size();
        for i in 0..64u128 {
            // A fixed stride through the space, not a random stream (whose
            // algorithm may change with the `rand` crate).
            let config = f
                .space
                .config_at(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % size);
            bytes.extend(config.to_string().bytes());
            // Rounded: another libm's last bit of a logarithm is not a change.
            for x in f.features(&config).unwrap_or_default() {
                bytes.extend(((f64::from(x) * 1024.0).round() as i64).to_le_bytes());
            }
        }
    }
    autotune_lang::mangle::fnv1a(&bytes)
}

/// Loops of the main statement described, innermost first.
pub const LOOP_SLOTS: usize = 10;
/// Buffers described: up to three read by the main statement, then the output.
pub const BUFFER_SLOTS: usize = 4;
const PER_BUFFER: usize = 4;
const PER_LOOP: usize = 10 + BUFFER_SLOTS * PER_BUFFER;
const GLOBALS: usize = 7 + BUFFER_SLOTS;
/// Footprints (log2 bytes) at which the curve features are sampled.
const CURVE_POINTS: [f64; 14] = [
    4.0, 6.0, 8.0, 10.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 20.0, 22.0, 24.0,
];

/// Which features describe a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FeatureSet {
    Itervar,
    Curve,
    Knobs,
}

impl FeatureSet {
    pub fn name(self) -> &'static str {
        match self {
            FeatureSet::Itervar => "itervar",
            FeatureSet::Curve => "curve",
            FeatureSet::Knobs => "knobs",
        }
    }
}

impl fmt::Display for FeatureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FeatureSet {
    type Err = String;
    fn from_str(s: &str) -> Result<FeatureSet, String> {
        match s {
            "itervar" => Ok(FeatureSet::Itervar),
            "curve" => Ok(FeatureSet::Curve),
            "knobs" => Ok(FeatureSet::Knobs),
            _ => Err(format!(
                "unknown feature set `{s}` (expected itervar, curve or knobs)"
            )),
        }
    }
}

/// `sign(x) * log2(|x| + 1)`: counts spanning many orders of magnitude on one
/// scale, zero kept as zero.
pub fn slog(x: f64) -> f32 {
    (x.signum() * (x.abs() + 1.0).log2()) as f32
}

/// Where the loop nest's description comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FeatureSource {
    /// Derived from the decoded plan ([`nest_shape`]).
    Plan,
    /// Walked from the lowered loop nest.
    Lowered,
}

/// Extracts one feature set for configs of one workload.
#[derive(Clone, Debug)]
pub struct Featurizer {
    op: Operator,
    spec: usize,
    space: Space,
    set: FeatureSet,
    source: FeatureSource,
}

impl Featurizer {
    pub fn new(w: &Workload, set: FeatureSet) -> Featurizer {
        Featurizer::with_source(w, set, FeatureSource::Plan)
    }

    pub fn with_source(w: &Workload, set: FeatureSet, source: FeatureSource) -> Featurizer {
        Featurizer {
            op: w.op.clone(),
            spec: w.spec,
            space: Space::new(&w.op, w.shapes()),
            set,
            source,
        }
    }

    pub fn set(&self) -> FeatureSet {
        self.set
    }

    /// Length of every feature vector of this workload.
    pub fn len(&self) -> usize {
        self.len_of(self.set)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The features of `config`.
    pub fn features(&self, config: &Config) -> Result<Vec<f32>, ConfigError> {
        let mut v = self.features_sets(config, &[self.set])?;
        Ok(v.remove(0))
    }

    /// Several feature sets of `config`, describing its nest once.
    pub fn features_sets(
        &self,
        config: &Config,
        sets: &[FeatureSet],
    ) -> Result<Vec<Vec<f32>>, ConfigError> {
        let mut profile = None;
        let mut out = Vec::new();
        for &set in sets {
            if set == FeatureSet::Knobs {
                out.push(self.knob_features(config)?);
                continue;
            }
            if profile.is_none() {
                profile = Some(self.profile(config)?);
            }
            let p = profile.as_ref().expect("described above");
            out.push(match set {
                FeatureSet::Itervar => p.itervar(),
                _ => p.curve(),
            });
        }
        Ok(out)
    }

    fn profile(&self, config: &Config) -> Result<Profile, ConfigError> {
        let plan = self.space.plan(&self.op, config)?;
        let elem_bytes = self.op.dtype.size() as f64;
        let shapes = &self.op.specializations[self.spec].values;
        let shape = nest_shape(&self.op, shapes, &plan);
        let mut profile = match self.source {
            FeatureSource::Plan => Profile::of_shape(&shape, elem_bytes),
            FeatureSource::Lowered => {
                let kernel = autotune_codegen::lower::lower(
                    &self.op,
                    Variant::Specialized(self.spec),
                    Some(&plan),
                    String::new(),
                    String::new(),
                );
                Nest::of(&kernel).profile()
            }
        };
        // From the plan whichever way the nest was described: the walker
        // does not model the register tile.
        profile.kernel = kernel_features(&shape, elem_bytes);
        Ok(profile)
    }

    /// Length of the vectors of `set` for this workload.
    pub fn len_of(&self, set: FeatureSet) -> usize {
        match set {
            FeatureSet::Itervar => LOOP_SLOTS * PER_LOOP + GLOBALS,
            FeatureSet::Curve => (BUFFER_SLOTS * 2 + 1) * CURVE_POINTS.len() + KERNEL_FEATURES,
            FeatureSet::Knobs => self.space.knobs.len(),
        }
    }

    fn knob_features(&self, config: &Config) -> Result<Vec<f32>, ConfigError> {
        let digits = self.space.digits(self.space.index_of(config)?);
        Ok(self
            .space
            .knobs
            .iter()
            .zip(digits)
            .map(|(k, d)| match &k.choices[d] {
                Value::Int(i) => slog(*i as f64),
                Value::Name(_) => d as f32,
            })
            .collect())
    }
}

/// A loop of the nest.
#[derive(Debug)]
struct Loop {
    var: String,
    extent: f64,
    kind: Kind,
    depth: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Serial,
    Unrolled,
    Lanes,
    Parallel,
}

/// A buffer access of a leaf statement.
#[derive(Debug)]
struct Access {
    buf: String,
    lanes: usize,
    /// Per loop of the leaf's chain: how far the index moves per iteration.
    coeffs: Vec<f64>,
    /// Equal for accesses with the same index expression (the same elements).
    id: usize,
}

/// A statement that computes: its loops (innermost first), arithmetic and
/// accesses.
#[derive(Debug)]
struct Leaf {
    chain: Vec<usize>,
    flops: f64,
    accesses: Vec<Access>,
}

/// The loop nest flattened for feature extraction.
struct Nest {
    loops: Vec<Loop>,
    leaves: Vec<Leaf>,
    /// Buffers that the kernel fills itself (packed copies, stages), in elements.
    scratch: HashMap<String, f64>,
    elem_bytes: f64,
    /// The distinct (buffer, index) pairs seen.
    ids: HashMap<(String, IExpr), usize>,
}

/// Per level of the main statement's loops (innermost first): what runs in one
/// full run of that loop.
struct Levels {
    path: Vec<usize>,
    flops: Vec<f64>,
    stmts: Vec<f64>,
    /// Per buffer slot, per level: stride, accesses, bytes touched, reuse.
    buffers: Vec<Vec<[f64; PER_BUFFER]>>,
    slots: Vec<Option<String>>,
}

/// A loop of the main statement, as the features see it.
#[derive(Clone, Copy, Debug)]
struct LoopInfo {
    extent: f64,
    /// Loops around it.
    depth: usize,
    kind: Kind,
}

/// What both feature layouts are read from, whichever way the nest was
/// described: the main statement's loops (innermost first), what runs in each,
/// and kernel-wide figures.
struct Profile {
    loops: Vec<LoopInfo>,
    flops: Vec<f64>,
    stmts: Vec<f64>,
    /// Per buffer slot, per loop: stride, accesses, bytes touched, reuse.
    buffers: Vec<Vec<[f64; PER_BUFFER]>>,
    /// Per buffer slot: whether it is a copy the kernel makes (packed or padded).
    packed: Vec<bool>,
    total_flops: f64,
    parallel: f64,
    scratch_bytes: f64,
    lanes: usize,
    /// Arithmetic of one execution of the main statement.
    main_flops: f64,
    /// The register tile and the work around it ([`kernel_features`]).
    kernel: [f32; KERNEL_FEATURES],
}

impl Profile {
    /// From the nest's shape, derived from the plan. Operands reading the same
    /// tensor share a buffer slot, as the walker's do.
    fn of_shape(n: &NestShape, elem_bytes: f64) -> Profile {
        let levels = n.loops.len();
        let mut tensors: Vec<TensorRef> = Vec::new();
        for o in n.operands.iter().filter(|o| o.storage != Storage::Output) {
            if !tensors.contains(&o.tensor) {
                tensors.push(o.tensor);
            }
        }
        tensors.truncate(BUFFER_SLOTS - 1);
        let slot_of = |o: &OperandShape| -> Option<usize> {
            if o.storage == Storage::Output {
                Some(BUFFER_SLOTS - 1)
            } else {
                tensors.iter().position(|t| *t == o.tensor)
            }
        };
        let mut buffers = vec![vec![[0.0; PER_BUFFER]; levels]; BUFFER_SLOTS];
        let mut stride: Vec<Vec<Option<f64>>> = vec![vec![None; levels]; BUFFER_SLOTS];
        let mut packed = vec![false; BUFFER_SLOTS];
        for o in &n.operands {
            let Some(b) = slot_of(o) else { continue };
            packed[b] |= matches!(o.storage, Storage::Packed | Storage::Copy);
            for l in 0..levels {
                if o.accesses[l] > 0.0 {
                    stride[b][l] = Some(stride[b][l].map_or(o.strides[l], |s| s.min(o.strides[l])));
                }
                buffers[b][l][1] += o.accesses[l];
                buffers[b][l][2] += o.footprint[l] * elem_bytes;
            }
        }
        for (b, per_level) in buffers.iter_mut().enumerate() {
            for (l, x) in per_level.iter_mut().enumerate() {
                x[0] = stride[b][l].unwrap_or(0.0);
                x[3] = if x[2] > 0.0 {
                    x[1] * elem_bytes / x[2]
                } else {
                    0.0
                };
            }
        }
        // Statements: the tile's updates inside the reduction loops (where the
        // output is not stored), its initialisation and stores as well further out.
        let reductions = n
            .operands
            .last()
            .map_or(0, |o| o.accesses.iter().take_while(|x| **x == 0.0).count());
        Profile {
            loops: n
                .loops
                .iter()
                .enumerate()
                .map(|(i, l)| LoopInfo {
                    extent: l.extent,
                    depth: levels - 1 - i,
                    kind: match l.run {
                        LoopRun::Serial => Kind::Serial,
                        LoopRun::Unrolled => Kind::Unrolled,
                        LoopRun::Parallel => Kind::Parallel,
                    },
                })
                .collect(),
            flops: (0..levels)
                .map(|l| n.flops_per_iteration * n.iterations(l))
                .collect(),
            stmts: (0..levels)
                .map(|l| {
                    n.statements
                        + if l < reductions {
                            0.0
                        } else {
                            2.0 * n.accumulators as f64
                        }
                })
                .collect(),
            buffers,
            packed,
            total_flops: n.total_flops,
            parallel: n
                .loops
                .iter()
                .filter(|l| l.run == LoopRun::Parallel)
                .map(|l| l.extent)
                .product(),
            scratch_bytes: n.scratch_elems * elem_bytes,
            lanes: n.lanes,
            main_flops: n.flops_per_iteration / n.statements.max(1.0),
            kernel: [0.0; KERNEL_FEATURES],
        }
    }

    fn itervar(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(LOOP_SLOTS * PER_LOOP + GLOBALS);
        for slot in 0..LOOP_SLOTS {
            let Some(lp) = self.loops.get(slot) else {
                out.extend([0.0; PER_LOOP]);
                continue;
            };
            let below: f64 = self.loops[..=slot].iter().map(|m| m.extent).product();
            let above: f64 = self.loops[slot..].iter().map(|m| m.extent).product();
            out.extend([
                slog(lp.extent),
                (lp.depth + 1) as f32,
                slog(above),
                slog(below),
                (lp.kind == Kind::Serial) as u8 as f32,
                (lp.kind == Kind::Unrolled) as u8 as f32,
                (lp.kind == Kind::Lanes) as u8 as f32,
                (lp.kind == Kind::Parallel) as u8 as f32,
                slog(self.flops[slot]),
                slog(self.stmts[slot]),
            ]);
            for b in &self.buffers {
                out.extend(b[slot].iter().map(|x| slog(*x)));
            }
        }
        out.extend([
            slog(self.total_flops),
            slog(self.parallel),
            slog(self.scratch_bytes),
            slog(self.lanes as f64),
            slog(self.main_flops),
            slog(self.stmts.first().copied().unwrap_or(0.0)),
            self.loops.len() as f32,
        ]);
        out.extend(self.packed.iter().map(|p| *p as u8 as f32));
        out
    }

    fn curve(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity((BUFFER_SLOTS * 2 + 1) * CURVE_POINTS.len());
        // Per sample point: the outermost level whose footprint fits.
        let sample = |points: &[(f64, f64)], out: &mut Vec<f32>| {
            for x in CURVE_POINTS {
                let v = points
                    .iter()
                    .rev()
                    .find(|(bytes, _)| *bytes > 0.0 && bytes.log2() <= x)
                    .map_or(0.0, |(_, y)| slog(*y));
                out.push(v);
            }
        };
        for b in &self.buffers {
            for key in [3, 1] {
                let points: Vec<(f64, f64)> = b.iter().map(|l| (l[2], l[key])).collect();
                sample(&points, &mut out);
            }
        }
        // Arithmetic intensity (flops per byte touched) against footprint.
        let points: Vec<(f64, f64)> = (0..self.loops.len())
            .map(|p| {
                let bytes: f64 = self.buffers.iter().map(|b| b[p][2]).sum();
                (bytes, self.flops[p] / bytes.max(1.0))
            })
            .collect();
        sample(&points, &mut out);
        out.extend(&self.kernel);
        out
    }
}

/// Length of [`kernel_features`].
const KERNEL_FEATURES: usize = 10;

/// What the memory curves leave out, from the plan's nest: the register
/// tile (accumulators, lanes, arithmetic per load of the innermost
/// iteration), the work the tiles add past the iteration space, the
/// innermost loop's extent, the parallel tasks and the bytes copied per flop.
/// Figures of the machine's limits rather than of the workload, so they
/// keep their meaning on workloads the model never saw.
fn kernel_features(n: &NestShape, elem_bytes: f64) -> [f32; KERNEL_FEATURES] {
    let loads: f64 = n
        .operands
        .iter()
        .filter(|o| o.storage != Storage::Output)
        .map(|o| o.accesses.first().copied().unwrap_or(0.0))
        .sum();
    let executed = n.flops_per_iteration * n.iterations(n.loops.len().saturating_sub(1));
    let parallel: f64 = n
        .loops
        .iter()
        .filter(|l| l.run == LoopRun::Parallel)
        .map(|l| l.extent)
        .product();
    [
        slog(n.accumulators as f64),
        slog(n.lanes as f64),
        slog(n.flops_per_iteration / loads.max(1.0)),
        (executed / n.total_flops.max(1.0)) as f32,
        slog(n.loops.first().map_or(1.0, |l| l.extent)),
        slog(n.unroll as f64),
        slog(parallel),
        // Per thousand flops: the log scale resolves the small ratios then.
        slog(1e3 * n.scratch_elems * elem_bytes / n.total_flops.max(1.0)),
        // The copies prefetched a slice ahead (`pack.N=4`, version 3): per
        // thousand flops, and in bytes, which say whether a slice would come
        // from memory. Without them `pack.N=4` and `pack.N=1` look the same.
        slog(1e3 * n.prefetched_elems * elem_bytes / n.total_flops.max(1.0)),
        slog(n.prefetched_elems * elem_bytes),
    ]
}

struct Walker {
    nest: Nest,
    /// `let` names → their expressions in loop variables.
    lets: HashMap<String, IExpr>,
    /// Loop variables and `let`s → their value in the first iteration.
    values: HashMap<String, i64>,
    lanes: HashMap<String, usize>,
    /// Loops enclosing the statement being walked, innermost first.
    chain: Vec<usize>,
}

impl Nest {
    fn of(k: &Kernel) -> Nest {
        let mut w = Walker {
            nest: Nest {
                loops: Vec::new(),
                leaves: Vec::new(),
                scratch: HashMap::new(),
                elem_bytes: k.dtype.size() as f64,
                ids: HashMap::new(),
            },
            lets: HashMap::new(),
            values: HashMap::new(),
            lanes: HashMap::new(),
            chain: Vec::new(),
        };
        for s in &k.scratch {
            let elems = w.eval(&s.elems) as f64;
            w.nest.scratch.insert(s.name.clone(), elems);
        }
        w.stmts(&k.body);
        w.nest
    }

    fn iterations(&self, leaf: &Leaf) -> f64 {
        leaf.chain.iter().map(|&i| self.loops[i].extent).product()
    }

    /// The leaf executing the most arithmetic (the first such).
    fn main_leaf(&self) -> Option<&Leaf> {
        let mut best: Option<(&Leaf, f64)> = None;
        for leaf in &self.leaves {
            let work = leaf.flops * self.iterations(leaf);
            if best.is_none_or(|(_, w)| work > w) {
                best = Some((leaf, work));
            }
        }
        best.map(|b| b.0)
    }

    /// Buffer slots: what the main statement reads, in order, then `out`.
    fn buffer_slots(main: Option<&Leaf>) -> Vec<Option<String>> {
        let mut slots: Vec<Option<String>> = Vec::new();
        for a in main.iter().flat_map(|m| &m.accesses) {
            if a.buf != "out" && !slots.iter().flatten().any(|b| *b == a.buf) {
                slots.push(Some(a.buf.clone()));
            }
        }
        slots.resize(BUFFER_SLOTS - 1, None);
        slots.push(Some("out".to_string()));
        slots
    }

    /// One pass over the leaves, summing what each contributes to every level
    /// of the main statement's loops.
    fn levels(&self) -> Levels {
        let main = self.main_leaf();
        let path: Vec<usize> = main.map(|m| m.chain.clone()).unwrap_or_default();
        let slots = Nest::buffer_slots(main);
        let mut level_of = vec![None; self.loops.len()];
        for (p, &l) in path.iter().enumerate() {
            level_of[l] = Some(p);
        }
        let n = path.len();
        let mut flops = vec![0.0; n];
        let mut stmts = vec![0.0; n];
        let mut count = vec![vec![0.0; n]; BUFFER_SLOTS];
        let mut stride: Vec<Vec<Option<f64>>> = vec![vec![None; n]; BUFFER_SLOTS];
        // Per slot and level: footprint (elements) of each distinct access.
        let mut footprint: Vec<Vec<HashMap<usize, f64>>> =
            vec![vec![HashMap::new(); n]; BUFFER_SLOTS];
        for leaf in &self.leaves {
            let mut iters = 1.0;
            let accesses: Vec<(usize, &Access)> = leaf
                .accesses
                .iter()
                .filter_map(|a| {
                    let slot = slots.iter().position(|s| s.as_deref() == Some(&a.buf))?;
                    Some((slot, a))
                })
                .collect();
            let mut elems: Vec<f64> = accesses.iter().map(|(_, a)| a.lanes as f64).collect();
            for (ci, &m) in leaf.chain.iter().enumerate() {
                let extent = self.loops[m].extent;
                iters *= extent;
                for (e, (_, a)) in elems.iter_mut().zip(&accesses) {
                    if a.coeffs[ci] != 0.0 {
                        *e *= extent;
                    }
                }
                let Some(p) = level_of[m] else { continue };
                flops[p] += leaf.flops * iters;
                stmts[p] += 1.0;
                for (e, (slot, a)) in elems.iter().zip(&accesses) {
                    count[*slot][p] += iters;
                    let s = a.coeffs[ci].abs();
                    stride[*slot][p] = Some(stride[*slot][p].map_or(s, |t: f64| t.min(s)));
                    let f = footprint[*slot][p].entry(a.id).or_insert(0.0);
                    *f = f.max(*e);
                }
            }
        }
        let buffers = (0..BUFFER_SLOTS)
            .map(|b| {
                (0..n)
                    .map(|p| {
                        let mut touched: f64 = footprint[b][p].values().sum();
                        if let Some(size) = slots[b].as_ref().and_then(|s| self.scratch.get(s)) {
                            touched = touched.min(*size);
                        }
                        let reuse = if touched > 0.0 {
                            count[b][p] / touched
                        } else {
                            0.0
                        };
                        [
                            stride[b][p].unwrap_or(0.0),
                            count[b][p],
                            touched * self.elem_bytes,
                            reuse,
                        ]
                    })
                    .collect()
            })
            .collect();
        Levels {
            path,
            flops,
            stmts,
            buffers,
            slots,
        }
    }

    fn profile(&self) -> Profile {
        let lv = self.levels();
        let main = self.main_leaf();
        let n = lv.path.len();
        Profile {
            loops: lv
                .path
                .iter()
                .map(|&l| LoopInfo {
                    extent: self.loops[l].extent,
                    depth: self.loops[l].depth,
                    kind: self.loops[l].kind,
                })
                .collect(),
            total_flops: self
                .leaves
                .iter()
                .map(|l| l.flops * self.iterations(l))
                .sum(),
            parallel: self
                .loops
                .iter()
                .filter(|l| l.kind == Kind::Parallel)
                .map(|l| l.extent)
                .product(),
            scratch_bytes: self.scratch.values().sum::<f64>() * self.elem_bytes,
            lanes: main
                .and_then(|m| m.accesses.iter().map(|a| a.lanes).max())
                .unwrap_or(1),
            main_flops: main.map_or(0.0, |m| m.flops),
            packed: lv
                .slots
                .iter()
                .map(|b| {
                    b.as_ref()
                        .is_some_and(|b| b != "out" && self.scratch.contains_key(b))
                })
                .collect(),
            flops: lv.flops,
            stmts: lv.stmts,
            buffers: lv
                .buffers
                .into_iter()
                .map(|b| b.into_iter().take(n).collect())
                .collect(),
            kernel: [0.0; KERNEL_FEATURES],
        }
    }
}

impl Walker {
    fn subst(&self, e: &IExpr) -> IExpr {
        match e {
            IExpr::Const(_) => e.clone(),
            IExpr::Var(v) => self.lets.get(v).cloned().unwrap_or_else(|| e.clone()),
            IExpr::Add(a, b) => self.subst(a).plus(self.subst(b)),
            IExpr::Mul(a, b) => self.subst(a).times(self.subst(b)),
            IExpr::Min(a, b) => self.subst(a).min(self.subst(b)),
            IExpr::Max(a, b) => self.subst(a).max(self.subst(b)),
            IExpr::Div(a, b) => IExpr::Div(Box::new(self.subst(a)), b.clone()),
            IExpr::Mod(a, b) => IExpr::Mod(Box::new(self.subst(a)), b.clone()),
        }
    }

    /// Value in the first iteration of every enclosing loop.
    fn eval(&self, e: &IExpr) -> i64 {
        match e {
            IExpr::Const(c) => *c,
            IExpr::Var(v) => self.values.get(v).copied().unwrap_or(0),
            IExpr::Add(a, b) => self.eval(a) + self.eval(b),
            IExpr::Mul(a, b) => self.eval(a) * self.eval(b),
            IExpr::Min(a, b) => self.eval(a).min(self.eval(b)),
            IExpr::Max(a, b) => self.eval(a).max(self.eval(b)),
            IExpr::Div(a, b) => self.eval(a).div_euclid(self.eval(b).max(1)),
            IExpr::Mod(a, b) => self.eval(a).rem_euclid(self.eval(b).max(1)),
        }
    }

    /// Walks `body` inside a new loop.
    fn in_loop(&mut self, var: &str, extent: f64, kind: Kind, body: &[Stmt]) {
        self.nest.loops.push(Loop {
            var: var.to_string(),
            extent: extent.max(1.0),
            kind,
            depth: self.chain.len(),
        });
        self.chain.insert(0, self.nest.loops.len() - 1);
        self.stmts(body);
        self.chain.remove(0);
    }

    fn stmts(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                start,
                end,
                step,
                kind,
                body,
            } => {
                let first = self.eval(start);
                let trips = (self.eval(end) - first + step - 1).div_euclid((*step).max(1));
                let kind = match kind {
                    LoopKind::Serial => Kind::Serial,
                    LoopKind::Unrolled(_) => Kind::Unrolled,
                    LoopKind::Lanes => Kind::Lanes,
                };
                self.values.insert(var.clone(), first);
                self.in_loop(var, trips as f64, kind, body);
            }
            Stmt::Parallel { var, extent, body } => {
                let n = self.eval(extent) as f64;
                self.values.insert(var.clone(), 0);
                self.in_loop(var, n, Kind::Parallel, body);
            }
            Stmt::Let { name, value } => {
                let v = self.eval(value);
                let e = self.subst(value);
                self.values.insert(name.clone(), v);
                self.lets.insert(name.clone(), e);
            }
            Stmt::Local { name, lanes, init } => {
                self.lanes.insert(name.clone(), *lanes);
                self.leaf(init, *lanes, None);
            }
            Stmt::Assign { name, value } => {
                let lanes = self.lanes.get(name).copied().unwrap_or(1);
                self.leaf(value, lanes, None);
            }
            Stmt::SetLane { value, .. } => self.leaf(value, 1, None),
            Stmt::Store {
                buf,
                index,
                value,
                lanes,
                ..
            }
            | Stmt::MaskedStore {
                buf,
                index,
                value,
                lanes,
                ..
            } => {
                let store = self.access(buf, index, *lanes);
                self.leaf(value, *lanes, Some(store));
            }
            Stmt::StoreRows {
                buf,
                index,
                rows,
                lanes,
                ..
            } => {
                // As the element-wise stores it stands for: one per row.
                for (j, row) in rows.iter().enumerate() {
                    let at = index.clone().plus(IExpr::Const(j as i64));
                    let store = self.access(buf, &at, *lanes);
                    self.leaf(row, *lanes, Some(store));
                }
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                // Both branches count: the full-tile path dominates, the
                // partial one is code the compiler must also carry. Not a
                // border tile's code: the plan's features describe a
                // guarded read as read in place, and so does this walk.
                self.stmts(then);
                if !opens_border_tile(otherwise) {
                    self.stmts(otherwise);
                }
            }
            Stmt::Comment(_) | Stmt::Array { .. } | Stmt::Prefetch { .. } => {}
        }
    }

    fn leaf(&mut self, value: &VExpr, lanes: usize, store: Option<Access>) {
        let mut accesses = Vec::new();
        let flops = self.vexpr(value, lanes, &mut accesses);
        accesses.extend(store);
        self.nest.leaves.push(Leaf {
            chain: self.chain.clone(),
            flops,
            accesses,
        });
    }

    fn access(&mut self, buf: &str, index: &IExpr, lanes: usize) -> Access {
        let index = self.subst(index);
        let coeffs = self
            .chain
            .iter()
            .map(|&l| coefficient(&index, &self.nest.loops[l].var))
            .collect();
        let next = self.nest.ids.len();
        let id = *self
            .nest
            .ids
            .entry((buf.to_string(), index))
            .or_insert(next);
        Access {
            buf: buf.to_string(),
            lanes,
            coeffs,
            id,
        }
    }

    /// Arithmetic of `e` (lane operations); collects its loads.
    fn vexpr(&mut self, e: &VExpr, lanes: usize, out: &mut Vec<Access>) -> f64 {
        match e {
            VExpr::Const(_) | VExpr::FromIndex(_) | VExpr::Local(_) | VExpr::Lane(..) => 0.0,
            VExpr::Load {
                buf, index, lanes, ..
            }
            | VExpr::MaskedLoad {
                buf, index, lanes, ..
            } => {
                let a = self.access(buf, index, *lanes);
                out.push(a);
                0.0
            }
            VExpr::Splat(x, _) => self.vexpr(x, 1, out),
            // Halves combined: one operation per halving.
            VExpr::Horizontal(_, x) => (lanes.max(2) as f64).log2() + self.vexpr(x, lanes, out),
            // Pairs of vectors combined, then the last one's blocks (at the
            // scale of one halving per vector above).
            VExpr::Horizontals(_, xs) => {
                let n = xs.len() as f64;
                let tree = 1.5 * (n - 1.0) + (lanes as f64 / n).max(1.0).log2();
                xs.iter()
                    .fold(tree, |ops, x| ops + self.vexpr(x, lanes, out))
            }
            VExpr::Unary(_, x) => lanes as f64 + self.vexpr(x, lanes, out),
            VExpr::Binary(_, a, b) => {
                lanes as f64 + self.vexpr(a, lanes, out) + self.vexpr(b, lanes, out)
            }
        }
    }
}

/// How far `e` moves when `var` grows by one (approximate for `/`, `%`, `min`).
fn coefficient(e: &IExpr, var: &str) -> f64 {
    match e {
        IExpr::Const(_) => 0.0,
        IExpr::Var(v) => (v == var) as u8 as f64,
        IExpr::Add(a, b) => coefficient(a, var) + coefficient(b, var),
        IExpr::Mul(a, b) => match (a.as_const(), b.as_const()) {
            (_, Some(c)) => coefficient(a, var) * c as f64,
            (Some(c), _) => coefficient(b, var) * c as f64,
            // A product of two variables: count each side once.
            _ => coefficient(a, var) + coefficient(b, var),
        },
        IExpr::Min(a, _) | IExpr::Max(a, _) => coefficient(a, var),
        IExpr::Div(a, b) => coefficient(a, var) / b.as_const().unwrap_or(1).max(1) as f64,
        IExpr::Mod(a, _) => coefficient(a, var),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slog_keeps_sign_and_zero() {
        assert_eq!(slog(0.0), 0.0);
        assert_eq!(slog(1.0), 1.0);
        assert_eq!(slog(-3.0), -2.0);
    }

    #[test]
    fn coefficients_of_affine_indices() {
        let e = IExpr::var("i")
            .times(IExpr::Const(64))
            .plus(IExpr::var("k"))
            .plus(IExpr::Const(3));
        assert_eq!(coefficient(&e, "i"), 64.0);
        assert_eq!(coefficient(&e, "k"), 1.0);
        assert_eq!(coefficient(&e, "j"), 0.0);
    }
}
