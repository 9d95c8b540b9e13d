//! The schedule space of a workload, generated from the IR with no per-operator
//! template (as Ansor generates sketches rather than AutoTVM's hand templates).
//!
//! Every stage that is not fused into its producer gets the same tiled structure
//! (see `lower::tiled`): spatial axes split in three levels (outer, block,
//! register tile), reduction axes in two (outer, inner), one spatial axis
//! vectorised, register accumulation, optional packing of each operand and
//! fusion of an element-wise consumer. The knobs choose the split factors, the
//! loop order, the vector axis and width, the unroll depth, the parallel extent,
//! packing and fusion.
//!
//! A [`Config`] is one point of the space: knob name → value, readable and stable
//! (a later cache stores it as is). [`Space::index_of`] and [`Space::config_at`]
//! are a bijection between configs and `0..Space::size()`.

use std::collections::BTreeMap;
use std::fmt;

use autotune_lang::analysis::{fusible_consumer, load_sites, single_reduction, Reduction};
use autotune_lang::ir::{Affine, DType, Expr, Operator, Stage, TensorRef};

use crate::target::Isa;

pub mod carry;
pub mod starts;

/// A knob value: a number (tile sizes, flags) or a name (loop order, vector axis).
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Name(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Name(s) => write!(f, "{s}"),
        }
    }
}

/// One point of a schedule space.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Config(pub BTreeMap<KnobName, Value>);

impl Config {
    /// A numeric knob of a config that [`Space::index_of`] accepted.
    fn int(&self, key: &KnobName) -> i64 {
        match self.0.get(key) {
            Some(Value::Int(i)) => *i,
            other => panic!("config knob `{key}` is not a number: {other:?}"),
        }
    }

    fn name(&self, key: &KnobName) -> &str {
        match self.0.get(key) {
            Some(Value::Name(s)) => s,
            other => panic!("config knob `{key}` is not a name: {other:?}"),
        }
    }

    /// The value of a knob given by its text (`output.tile.i`), if the config has it.
    pub fn get(&self, knob: &str) -> Option<&Value> {
        self.0.get(&knob.parse::<KnobName>().ok()?)
    }
}

/// What a knob decides for its stage.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KnobKind {
    /// Register tile size along a spatial axis (vectors on the vector axis).
    Tile(String),
    /// Register tiles per block along a spatial axis.
    Block(String),
    /// Inner block of a reduction axis.
    Split(String),
    /// Order of the spatial loops, outer to inner.
    Order,
    /// Vectorised axis and lanes (`j16`), or `none`.
    Vector,
    /// Unroll depth of the innermost reduction loop.
    Unroll,
    /// Leading outer loops fused into one parallel loop.
    Parallel,
    /// How the register tile reads the operand of this load site (pre-order):
    /// 0 in place or from a pad-copy, 1 from a copy in tile order, 2 (padded
    /// loads under the reduction only) in place with border tiles testing
    /// their reads. See [`Read`].
    Pack(usize),
    /// Compute the stage's element-wise consumer in its store.
    Fuse,
}

/// A knob of a stage: `<stage>.<kind>`, e.g. `output.tile.i`, `output.pack.0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KnobName {
    /// The stage's tensor name (the output's name for the last stage).
    pub stage: String,
    pub kind: KnobKind,
}

impl KnobName {
    pub fn new(stage: &str, kind: KnobKind) -> KnobName {
        KnobName {
            stage: stage.to_string(),
            kind,
        }
    }
}

impl fmt::Display for KnobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stage;
        match &self.kind {
            KnobKind::Tile(a) => write!(f, "{s}.tile.{a}"),
            KnobKind::Block(a) => write!(f, "{s}.block.{a}"),
            KnobKind::Split(a) => write!(f, "{s}.split.{a}"),
            KnobKind::Order => write!(f, "{s}.order"),
            KnobKind::Vector => write!(f, "{s}.vector"),
            KnobKind::Unroll => write!(f, "{s}.unroll"),
            KnobKind::Parallel => write!(f, "{s}.parallel"),
            KnobKind::Pack(site) => write!(f, "{s}.pack.{site}"),
            KnobKind::Fuse => write!(f, "{s}.fuse"),
        }
    }
}

/// Text that names no knob.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a knob name (expected e.g. `output.tile.i`)")]
pub struct BadKnobName(pub String);

impl std::str::FromStr for KnobName {
    type Err = BadKnobName;

    fn from_str(text: &str) -> Result<KnobName, BadKnobName> {
        let bad = || BadKnobName(text.to_string());
        let (stage, rest) = text.split_once('.').ok_or_else(bad)?;
        let ident = |a: &str| {
            (!a.is_empty() && a.chars().all(|c| c.is_alphanumeric() || c == '_'))
                .then(|| a.to_string())
        };
        let ident_stage = ident(stage).ok_or_else(bad)?;
        let kind = match rest.split_once('.') {
            None => match rest {
                "order" => KnobKind::Order,
                "vector" => KnobKind::Vector,
                "unroll" => KnobKind::Unroll,
                "parallel" => KnobKind::Parallel,
                "fuse" => KnobKind::Fuse,
                _ => return Err(bad()),
            },
            Some((kind, arg)) => match kind {
                "tile" => KnobKind::Tile(ident(arg).ok_or_else(bad)?),
                "block" => KnobKind::Block(ident(arg).ok_or_else(bad)?),
                "split" => KnobKind::Split(ident(arg).ok_or_else(bad)?),
                "pack" => match arg.parse::<usize>() {
                    Ok(site) if site.to_string() == arg => KnobKind::Pack(site),
                    _ => return Err(bad()),
                },
                _ => return Err(bad()),
            },
        };
        Ok(KnobName {
            stage: ident_stage,
            kind,
        })
    }
}

impl Ord for KnobName {
    /// The order of the text form, so configs print and persist sorted as
    /// strings (as before knob names were typed).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use KnobKind::*;
        fn rank(k: &KnobKind) -> (u8, &str) {
            match k {
                Block(a) => (0, a),
                Fuse => (1, ""),
                Order => (2, ""),
                Pack(_) => (3, ""),
                Parallel => (4, ""),
                Split(a) => (5, a),
                Tile(a) => (6, a),
                Unroll => (7, ""),
                Vector => (8, ""),
            }
        }
        // A stage name never contains `.`, which sorts before every identifier
        // character, so comparing stage names first matches the text order.
        self.stage
            .cmp(&other.stage)
            .then_with(|| match (&self.kind, &other.kind) {
                (Pack(a), Pack(b)) => a.to_string().cmp(&b.to_string()),
                (a, b) => rank(a).cmp(&rank(b)),
            })
    }
}

impl PartialOrd for KnobName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

crate::text::text_serde!(KnobName);

impl std::str::FromStr for Config {
    type Err = String;

    /// Parses the `Display` form: `key=value` pairs separated by spaces or commas.
    fn from_str(s: &str) -> Result<Config, String> {
        let mut c = BTreeMap::new();
        for pair in s.split([' ', ',', '\n']).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("expected `knob=value`, found `{pair}`"))?;
            let k: KnobName = k.parse().map_err(|e: BadKnobName| e.to_string())?;
            let v = match v.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Name(v.to_string()),
            };
            c.insert(k, v);
        }
        Ok(Config(c))
    }
}

impl fmt::Display for Config {
    /// `key=value` pairs in key order, e.g. `output.tile.i=8 output.tile.j=2 ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knob {
    pub name: KnobName,
    pub choices: Vec<Value>,
}

/// Why a config does not belong to a space.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("knob `{0}` is missing")]
    Missing(KnobName),
    #[error("knob `{knob}` has value `{value}`, which the space does not offer")]
    BadValue { knob: KnobName, value: Value },
    #[error("knob `{0}` is not part of this space")]
    Unknown(KnobName),
}

/// The schedule space of one operator at one specialisation.
#[derive(Clone, Debug)]
pub struct Space {
    pub knobs: Vec<Knob>,
    op: Operator,
    /// Per stage: how it is scheduled.
    pub stages: Vec<StageKind>,
    dtype: DType,
    /// Per fusible consumer: its producer's `fuse` knob and the consumer's own knobs,
    /// which are dead while that knob is on.
    fusion: Vec<(usize, Vec<usize>)>,
    /// Per stage that may have lanes along its reduction: its `vector` knob,
    /// the choices that put them there, and its `pack` knobs, which are dead
    /// while one of those is chosen (its operands are read in place or
    /// through their copy).
    lane_packs: Vec<(usize, Vec<usize>, Vec<usize>)>,
}

/// How the space treats a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageKind {
    /// Tiled, with knobs prefixed by the stage name.
    Tiled(TiledStage),
    /// Computed inside its producer's store (stage index of the producer); only
    /// when that producer's `fuse` knob is on, else tiled with its own knobs.
    FusibleInto { producer: usize, own: TiledStage },
    /// Lowered with the default schedule (stages with several reductions).
    Default,
}

/// Static facts about a tiled stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TiledStage {
    pub prefix: String,
    pub n_spatial: usize,
    /// Extent of each spatial axis at the space's shapes.
    pub extents: Vec<i64>,
    /// Reduction axes (ids in `Stage::axes`) of the stage's one reduction.
    pub reduce_axes: Vec<usize>,
    /// Their extents at the space's shapes.
    pub reduce_extents: Vec<i64>,
    /// Number of load sites (pre-order) in the stage body.
    pub loads: usize,
    /// The load sites (by position) under the reduction: those that may be
    /// packed per block inside the nest ([`Read::PackBlock`]), prefetch
    /// their copy's next slice ([`Read::PackAhead`]) or copy it in the order
    /// they read it ([`Read::PackInOrder`]).
    pub blockable: Vec<usize>,
    /// The load sites (by position) that may read in place with guarded
    /// border tiles ([`Read::Guard`]): padded loads under the reduction.
    pub guardable: Vec<usize>,
    /// Whether the vector may run along the innermost reduction axis
    /// ([`StagePlan::reduce_lanes`]), and if so the load sites (by position)
    /// that then read from a copy with that axis innermost ([`Read::Pack`]):
    /// those that read along it other than at unit stride in their last
    /// dimension. The others read in place.
    pub reduction_lanes: Option<Vec<usize>>,
    /// Whether a consumer can be fused into this stage's store.
    pub fusible_consumer: Option<usize>,
}

/// The decoded schedule of one tiled stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagePlan {
    /// Per spatial axis: register tile size (elements) and register tiles per block.
    pub tile: Vec<i64>,
    pub block: Vec<i64>,
    /// Per reduction axis (in `TiledStage::reduce_axes` order): inner block size.
    pub split: Vec<i64>,
    /// Spatial axes from outer to inner (for both outer levels); the knob value
    /// names them outer to inner joined by `-`, e.g. `j-i`.
    pub order: Vec<usize>,
    /// Spatial axis `a` merged with the next one, `a + 1`, into one tiled
    /// axis over both (the knob value joins them with `*`: `k-h*w`): a
    /// register tile of pixels may then run across the rows of a small image,
    /// as oneDNN's 1×1 kernels flatten theirs. Axis `a`'s own tile and block
    /// are then unused. Never on the vector axis (a config that asks for it
    /// runs unmerged), and only at a specialisation's known extents.
    pub merge: Option<usize>,
    /// How many of the outer tile loops (in `order`) run outside the outer
    /// reduction blocks: all of them (the knob value without a `/`), or as
    /// many as the value names before its `/` (`j/i`: one), but never fewer
    /// than the parallel ones ([`StagePlan::reduction_depth`]).
    pub reduce_at: usize,
    /// Vectorised spatial axis and lanes.
    pub vector: Option<(usize, usize)>,
    /// Lanes along the innermost reduction axis instead (the knob value
    /// names that axis, e.g. `k16`): each accumulator sums a vector of
    /// partial results, one per lane, combined across its lanes once, in the
    /// store (TVM's rfactor, inside the register tile). For a stage whose
    /// only unit-stride reads run along its reduction, such as a matrix
    /// times a vector: vectorised along the output, its rows are 4 bytes
    /// wide. Never with a spatial vector; its operands are read in place
    /// ([`Read::Direct`]), or through a copy with the axis innermost
    /// ([`TiledStage::reduction_lanes`]), whatever the `pack` knobs say.
    pub reduce_lanes: Option<usize>,
    /// Unroll depth of the innermost reduction loop.
    pub unroll: usize,
    /// Number of leading outer loops fused into one parallel loop.
    pub parallel: usize,
    /// Per load site: how the register tile reads its operand.
    pub reads: Vec<Read>,
    /// Compute the fusible consumer in this stage's store.
    pub fuse: bool,
}

/// How the register tile of a stage reads the operand of one load site (the
/// `pack.N` knob: 0, 1, 2, 3, 4, 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// In place where every read (overhanging tiles' included) stays inside
    /// the tensor, else from a copy that covers the reads, padding included.
    Direct,
    /// From a copy in the nest's tile order.
    Pack,
    /// In place, padded reads included: each register tile tests once whether
    /// its reads stay inside the tensor, and only a border tile's code tests
    /// each read (the pad value outside). No copy. In a generic kernel, as
    /// `Direct` (its reads' ranges are only known at run time).
    Guard,
    /// From a copy in tile order of only what one block reads: refilled
    /// inside the innermost outer loop (or reduction block) it depends on, in
    /// a buffer of the thread's own, so the copy is read from cache while it
    /// is fresh and a tensor whose rows alias in the cache is read once, in
    /// runs. The buffer is on the thread's stack up to [`BLOCK_PACK_BYTES`],
    /// else the thread's kept block buffer (on the heap, reused by every
    /// block and call); as `Pack` where it would be over
    /// [`BLOCK_PACK_KEPT_BYTES`].
    PackBlock,
    /// As `Pack`, and each register tile also prefetches into L2 a share of
    /// what the next outer tile will read of the copy, spread over the tile's
    /// outermost reduction loop. Where the nest re-reads one outer tile's
    /// slice (a conv's weights, for each row of pixels; a GEMM's panel of B,
    /// for each block of rows), the next slice then streams in while this one
    /// is read from cache, instead of only while it is first read: from
    /// memory for a constant's copy (kept in the caller's handle, and a
    /// network's 47 MB of weights do not stay in the cache), from L3 for a
    /// copy larger than L2. As `Pack` where the nest does not read the copy
    /// slice by slice (`lower::tiled::nest::ahead`), and in a generic kernel.
    PackAhead,
    /// As `Pack`, the copy's loops in the order its reads walk the operand
    /// (the largest stride outermost) rather than the copy's own: it reads
    /// rows whole and scatters its runs into the copy. For an operand larger
    /// than L2 (a GEMM's B of megabytes) reading in order wins over writing
    /// in order. As `Pack` in a generic kernel and where a tile spans a
    /// merged pair of axes.
    PackInOrder,
}

/// The largest buffer of a [`Read::PackBlock`] copy on the stack of
/// whichever thread runs the block (a Rust thread has 2 MiB by default).
pub const BLOCK_PACK_BYTES: i64 = 256 << 10;

/// The largest buffer of a [`Read::PackBlock`] copy at all: above
/// [`BLOCK_PACK_BYTES`] it is the thread's kept block buffer, allocated once
/// per thread and reused. GEMM 1024³'s panel of 128 columns of B over the
/// whole reduction (512 KiB) copied per panel into it ran 1.7-7.7% faster than
/// the whole 4 MiB copy in 6 of 6 alternating rounds (docs/performance.md),
/// where the stack's limit had split the reduction in two to fit (every
/// output loaded and stored twice); past the size of an L2 a block's copy is
/// no longer read from it while fresh.
pub const BLOCK_PACK_KEPT_BYTES: i64 = 2 << 20;

impl StagePlan {
    /// How many outer tile loops run outside the outer reduction blocks: the
    /// knob's choice, but at least the fused parallel ones (the reduction
    /// blocks run inside the parallel loop).
    pub fn reduction_depth(&self) -> usize {
        let n = self.order.len();
        self.reduce_at.min(n).max(self.parallel.min(n))
    }

    /// Whether the register tile has a vector wholly past the end of its axis
    /// (`extents`: of the spatial axes), e.g. 3 vectors of 16 on an axis of 16.
    pub fn overhangs(&self, extents: &[i64]) -> bool {
        self.vector
            .is_some_and(|(a, w)| self.tile[a] - w as i64 >= extents[a])
    }

    /// Whether its lanes along the reduction are more than the innermost
    /// reduction axis has (`extents`: of the reduction axes): the vector loop
    /// would never run, only the remainder's single steps.
    pub fn lanes_past(&self, extents: &[i64]) -> bool {
        self.reduce_lanes
            .is_some_and(|w| extents.last().is_some_and(|&e| (w as i64) > e))
    }

    /// This plan with no vector wider than `max_lanes` ([`StageSchedule::narrowed`]).
    pub fn narrowed(&self, max_lanes: usize) -> StagePlan {
        StagePlan {
            vector: self.vector.map(|(a, w)| (a, w.min(max_lanes))),
            reduce_lanes: self.reduce_lanes.map(|w| w.min(max_lanes)),
            ..self.clone()
        }
    }

    /// Locals of the register tile: elements, counting a vector as one.
    pub fn accumulators(&self) -> usize {
        self.tile
            .iter()
            .enumerate()
            .map(|(a, t)| match self.vector {
                Some((v, w)) if v == a => (t / w as i64).max(1),
                _ => *t,
            })
            .product::<i64>() as usize
    }
}

/// The schedule of every stage of an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageSchedule {
    Default,
    Tiled(StagePlan),
    /// Computed in the store of the given producer stage.
    Fused(usize),
}

impl StageSchedule {
    /// This schedule with no vector wider than `max_lanes`: the same register
    /// tile (in elements), in more, narrower vectors. GCC keeps a vector wider
    /// than the target's registers in memory (matmul 1024³'s default config
    /// ran at a tenth of its speed split here, in an AVX2 clone), so each
    /// ISA clone is lowered with its own width ([`Isa::max_lanes`]).
    pub fn narrowed(&self, max_lanes: usize) -> StageSchedule {
        match self {
            StageSchedule::Tiled(p) => StageSchedule::Tiled(p.narrowed(max_lanes)),
            other => other.clone(),
        }
    }
}

const TILES: [i64; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16];
const BLOCKS: [i64; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
const SPLITS: [i64; 9] = [4, 8, 16, 32, 64, 128, 256, 512, 1024];
const UNROLLS: [i64; 4] = [1, 2, 4, 8];

impl Space {
    /// The space of `op` at the shape values `shapes`.
    pub fn new(op: &Operator, shapes: &[i64]) -> Space {
        let mut knobs = Vec::new();
        let mut stages = Vec::new();
        let mut fused_into: BTreeMap<usize, usize> = BTreeMap::new();
        let lanes: &[i64] = match op.dtype {
            DType::F32 => &[4, 8, 16],
            DType::F64 => &[2, 4, 8],
        };
        for (s, stage) in op.stages.iter().enumerate() {
            let reduction = match single_reduction(&stage.body) {
                Reduction::Several => {
                    stages.push(StageKind::Default);
                    continue;
                }
                Reduction::One(r) => Some(r),
                Reduction::None => None,
            };
            let reduce_axes = match reduction {
                Some(Expr::Reduce { axes, .. }) => axes.clone(),
                _ => Vec::new(),
            };
            let prefix = op.tensor_name(TensorRef::Stage(s)).to_string();
            let fusible = if reduction.is_some() {
                fusible_consumer(op, s)
            } else {
                None
            };
            let extents: Vec<i64> = stage
                .spatial_axes()
                .iter()
                .map(|a| a.extent.value(shapes))
                .collect();
            let info = TiledStage {
                prefix: prefix.clone(),
                n_spatial: stage.n_spatial,
                extents: stage
                    .spatial_axes()
                    .iter()
                    .map(|a| a.extent.value(shapes))
                    .collect(),
                reduce_extents: reduce_axes
                    .iter()
                    .map(|&a| stage.axes[a].extent.value(shapes))
                    .collect(),
                reduce_axes: reduce_axes.clone(),
                loads: load_sites(&stage.body).len(),
                blockable: sites_under_reduction(stage),
                guardable: guardable_sites(stage),
                reduction_lanes: reduction_lanes(stage, &extents),
                fusible_consumer: fusible,
            };
            stage_knobs(&mut knobs, stage, &info, shapes, lanes);
            if let Some(c) = fusible {
                fused_into.insert(c, s);
            }
            stages.push(match fused_into.get(&s) {
                Some(&producer) => StageKind::FusibleInto {
                    producer,
                    own: info,
                },
                None => StageKind::Tiled(info),
            });
        }
        let knob = |name: &KnobName| knobs.iter().position(|k| k.name == *name);
        let fusion = stages
            .iter()
            .filter_map(|st| match st {
                StageKind::FusibleInto { producer, own } => {
                    let fuse = op.tensor_name(TensorRef::Stage(*producer));
                    let consumer = (0..knobs.len())
                        .filter(|&k| knobs[k].name.stage == own.prefix)
                        .collect();
                    Some((knob(&KnobName::new(fuse, KnobKind::Fuse))?, consumer))
                }
                _ => None,
            })
            .collect();
        let lane_packs = stages
            .iter()
            .enumerate()
            .filter_map(|(s, st)| match st {
                StageKind::Tiled(i) | StageKind::FusibleInto { own: i, .. } => {
                    let &r = i
                        .reduce_axes
                        .last()
                        .filter(|_| i.reduction_lanes.is_some())?;
                    let vector = knob(&KnobName::new(&i.prefix, KnobKind::Vector))?;
                    let name = &op.stages[s].axes[r].name;
                    let along = (0..knobs[vector].choices.len())
                        .filter(|&c| {
                            matches!(&knobs[vector].choices[c], Value::Name(v)
                                if vector_lanes(v, name).is_some())
                        })
                        .collect();
                    let packs = (0..i.loads)
                        .filter_map(|site| knob(&KnobName::new(&i.prefix, KnobKind::Pack(site))))
                        .collect();
                    Some((vector, along, packs))
                }
                StageKind::Default => None,
            })
            .collect();
        Space {
            knobs,
            op: op.clone(),
            stages,
            dtype: op.dtype,
            fusion,
            lane_packs,
        }
    }

    /// Which knobs change the code at these digits: a fusible consumer's own knobs do
    /// not while its producer's `fuse` knob is on (it is computed in that store), nor
    /// a stage's `pack` knobs while its lanes run along its reduction.
    pub fn live_knobs(&self, digits: &[usize]) -> Vec<bool> {
        let mut live = vec![true; self.knobs.len()];
        for (fuse, consumer) in &self.fusion {
            if self.knobs[*fuse].choices[digits[*fuse]] == Value::Int(1) {
                for &k in consumer {
                    live[k] = false;
                }
            }
        }
        for (vector, along, packs) in &self.lane_packs {
            if along.contains(&digits[*vector]) {
                for &k in packs {
                    live[k] = false;
                }
            }
        }
        live
    }

    /// `index` with every dead knob at its first choice, so that configs lowering to
    /// the same code share one index (and a tuner never measures one twice).
    pub fn canonical(&self, index: u128) -> u128 {
        if self.fusion.is_empty() && self.lane_packs.is_empty() {
            return index;
        }
        let mut d = self.digits(index);
        for (k, live) in self.live_knobs(&d).into_iter().enumerate() {
            if !live {
                d[k] = 0;
            }
        }
        self.from_digits(&d)
    }

    /// Number of configs.
    pub fn size(&self) -> u128 {
        self.knobs.iter().map(|k| k.choices.len() as u128).product()
    }

    /// The config at `index` (mixed radix over the knobs, first knob fastest).
    pub fn config_at(&self, mut index: u128) -> Config {
        let mut c = BTreeMap::new();
        for k in &self.knobs {
            let n = k.choices.len() as u128;
            c.insert(k.name.clone(), k.choices[(index % n) as usize].clone());
            index /= n;
        }
        Config(c)
    }

    /// Whether search tuners should consider a config: register tiles of at most
    /// 32 accumulators (the AVX-512 register file) and 256 statements in all the
    /// unrolled tiles, none with a vector wholly past its axis (or more lanes
    /// along a reduction than its innermost axis has). Every config is
    /// correct, but very large tiles spill registers and take seconds to compile,
    /// and a vector past the axis computes nothing that is kept.
    pub fn sensible(&self, config: &Config) -> bool {
        let Ok(plan) = self.plan(&self.op, config) else {
            return false;
        };
        let tiles: Vec<(usize, &TiledStage, &StagePlan)> = self
            .stages
            .iter()
            .zip(&plan)
            .enumerate()
            .filter_map(|(s, (kind, sched))| match (kind, sched) {
                (
                    StageKind::Tiled(i) | StageKind::FusibleInto { own: i, .. },
                    StageSchedule::Tiled(p),
                ) => Some((s, i, p)),
                _ => None,
            })
            .collect();
        let statements: usize = tiles
            .iter()
            .map(|(_, _, p)| p.accumulators() * p.unroll.max(1))
            .sum();
        // A merge the plan dropped, or a merged axis's own tile or block set,
        // lowers as another config does.
        let duplicate = |s: usize, i: &TiledStage, p: &StagePlan| {
            let knob = |kind| config.0.get(&KnobName::new(&i.prefix, kind));
            match p.merge {
                None => {
                    matches!(knob(KnobKind::Order), Some(Value::Name(o)) if o.contains('*'))
                }
                Some(a) => {
                    let name = &self.op.stages[s].axes[a].name;
                    knob(KnobKind::Tile(name.clone())) != Some(&Value::Int(1))
                        || knob(KnobKind::Block(name.clone())) != Some(&Value::Int(1))
                }
            }
        };
        // A tile longer than its axis (offered to the second axis of a pair
        // that may merge) computes nothing kept past the axis.
        let too_long = |i: &TiledStage, p: &StagePlan| {
            (0..i.n_spatial).any(|a| {
                let merged = p.merge.is_some_and(|m| m + 1 == a);
                !merged && p.vector.is_none_or(|(v, _)| v != a) && p.tile[a] > i.extents[a]
            })
        };
        tiles.iter().all(|&(s, i, p)| {
            p.accumulators() <= 32
                && !p.overhangs(&i.extents)
                && !p.lanes_past(&i.reduce_extents)
                && !duplicate(s, i, p)
                && !too_long(i, p)
        }) && statements <= 256
    }

    /// The choice position of every knob at `index` (mixed radix, first knob fastest).
    pub fn digits(&self, mut index: u128) -> Vec<usize> {
        self.knobs
            .iter()
            .map(|k| {
                let n = k.choices.len() as u128;
                let d = (index % n) as usize;
                index /= n;
                d
            })
            .collect()
    }

    /// The inverse of [`Space::digits`].
    pub fn from_digits(&self, digits: &[usize]) -> u128 {
        self.knobs
            .iter()
            .zip(digits)
            .rev()
            .fold(0u128, |acc, (k, d)| {
                acc * k.choices.len() as u128 + *d as u128
            })
    }

    /// The index of `config`, or why it is not in this space.
    pub fn index_of(&self, config: &Config) -> Result<u128, ConfigError> {
        if let Some(k) = config
            .0
            .keys()
            .find(|k| !self.knobs.iter().any(|kn| &kn.name == *k))
        {
            return Err(ConfigError::Unknown(k.clone()));
        }
        let mut index = 0u128;
        for k in self.knobs.iter().rev() {
            let v = config
                .0
                .get(&k.name)
                .ok_or_else(|| ConfigError::Missing(k.name.clone()))?;
            let pos =
                k.choices
                    .iter()
                    .position(|c| c == v)
                    .ok_or_else(|| ConfigError::BadValue {
                        knob: k.name.clone(),
                        value: v.clone(),
                    })?;
            index = index * k.choices.len() as u128 + pos as u128;
        }
        Ok(index)
    }

    /// A reasonable config without tuning: vectorise the last spatial axis, a
    /// register tile of about 6 × 3 vectors, blocks near 96 rows × 192 columns,
    /// reduction blocks near 512, the vector axis outermost, operands indexed by
    /// plain axes packed, epilogues fused, the outermost loop parallel. For
    /// AVX-512: [`Space::default_config_for`] gives the other levels theirs.
    pub fn default_config(&self, op: &Operator, shapes: &[i64]) -> Config {
        self.default_config_for(op, shapes, Isa::Avx512)
    }

    /// The default config for `isa`: vectors as wide as its registers, and a
    /// register tile that fits them (about 6 × 3 vectors in AVX-512's 32
    /// registers, 6 × 2 in the 16 of AVX2 and the baseline).
    pub fn default_config_for(&self, op: &Operator, shapes: &[i64], isa: Isa) -> Config {
        let mut c = BTreeMap::new();
        let (width, vectors) = (
            isa.max_lanes(self.dtype.size()) as i64,
            if isa == Isa::Avx512 { 3 } else { 2 },
        );
        let pick = |k: &Knob, want: i64| -> Value {
            // The largest numeric choice not above `want`, else the smallest.
            let mut best = k.choices[0].clone();
            for ch in &k.choices {
                if let Value::Int(v) = ch {
                    if *v <= want {
                        best = ch.clone();
                    }
                }
            }
            best
        };
        for (s, kind) in self.stages.iter().enumerate() {
            let info = match kind {
                StageKind::Tiled(i) | StageKind::FusibleInto { own: i, .. } => i,
                StageKind::Default => continue,
            };
            let stage = &op.stages[s];
            let p = &info.prefix;
            let last = info.n_spatial.checked_sub(1);
            let offered = |name: &Value| {
                self.knobs.iter().any(|k| {
                    k.name == KnobName::new(p, KnobKind::Vector) && k.choices.contains(name)
                })
            };
            // The widest vector axis `a` fills, if the space offers it.
            let widest = |a: usize| {
                let e = stage.axes[a].extent.value(shapes);
                let w = if e >= width {
                    width
                } else if e >= width / 2 {
                    width / 2
                } else {
                    return None;
                };
                let name = Value::Name(format!("{}{w}", stage.axes[a].name));
                offered(&name).then_some((name, e, w))
            };
            // Lanes along the reduction where no operand runs along the last
            // axis (a matrix times a vector) or it is narrower than a vector
            // (a GEMM with `N ≤ 4`): about 8 accumulators, the last axis's
            // whole up to 8 and the one before it for the rest, and the
            // reduction in blocks of up to 1024 (a GEMV's 560 whole ran at
            // 51–56 GFLOP/s, in blocks of 512 and 48 at 41–43). The lanes that
            // leave the fewest steps, vectors and the remainder's single steps
            // counted alike (at K = 79, 8 lanes ran at 48 GFLOP/s, 16 at 28),
            // and row tiles that divide their axis (one that overhangs reads
            // the operand from a copy made every call).
            let along = info
                .reduce_axes
                .last()
                .filter(|_| info.reduction_lanes.is_some())
                .filter(|_| {
                    last.is_some_and(|l| {
                        !unit_stride_along(stage, l) || info.extents[l] < width / 2
                    })
                })
                .and_then(|&r| {
                    let e = stage.axes[r].extent.value(shapes);
                    let steps = |w: i64| e / w + e % w;
                    let w = [width, width / 2, width / 4]
                        .into_iter()
                        .filter(|&w| w >= 2 && w <= e)
                        .min_by_key(|&w| steps(w))?;
                    let name = Value::Name(format!("{}{w}", stage.axes[r].name));
                    offered(&name).then_some(name)
                });
            if along.is_some() {
                let name_of = |a: Option<usize>| a.map(|a| &stage.axes[a].name);
                let last_tile = last.map_or(1, |l| info.extents[l].clamp(1, 8));
                // Near `want`, a divisor of the axis's extent `e` if one is offered.
                let fits = |k: &Knob, want: i64, e: i64| {
                    let near = k.choices.iter().filter_map(|c| match c {
                        Value::Int(t) if 2 * t >= want && *t <= 2 * want && e % t == 0 => Some(*t),
                        _ => None,
                    });
                    near.min_by_key(|t| ((t - want).abs(), -t))
                        .map_or_else(|| pick(k, want), Value::Int)
                };
                let before_last = last.and_then(|l| l.checked_sub(1));
                for k in self.knobs.iter().filter(|k| k.name.stage == *p) {
                    let v = match &k.name.kind {
                        KnobKind::Vector => along.clone(),
                        KnobKind::Tile(axis) if Some(axis) == name_of(last) => {
                            last.map(|l| fits(k, 8, info.extents[l]))
                        }
                        KnobKind::Tile(axis) if Some(axis) == name_of(before_last) => {
                            let want = (8 + last_tile - 1) / last_tile;
                            before_last.map(|a| fits(k, want, info.extents[a]))
                        }
                        KnobKind::Tile(_) | KnobKind::Block(_) => Some(pick(k, 1)),
                        KnobKind::Split(_) => Some(pick(k, 1024)),
                        KnobKind::Pack(_) => Some(Value::Int(0)),
                        _ => None,
                    };
                    if let Some(v) = v {
                        c.insert(k.name.clone(), v);
                    }
                }
            }
            // Else the last axis vectorised, with the widest vector it fills.
            let vector = last.and_then(widest);
            for k in self.knobs.iter().filter(|k| k.name.stage == *p) {
                if along.is_some() && c.contains_key(&k.name) {
                    continue;
                }
                let v = if k.name.kind == KnobKind::Vector {
                    vector
                        .as_ref()
                        .map_or(Value::Name("none".into()), |(name, ..)| name.clone())
                } else if let KnobKind::Tile(axis) = &k.name.kind {
                    // About 6 rows × 3 vectors: 18 accumulators, as a GEMM micro-kernel;
                    // no more vectors than the axis fills.
                    // (Within the axis: a merge's second axis is offered more.)
                    let a = stage.axes.iter().position(|x| x.name == *axis).unwrap_or(0);
                    let e = stage.axes[a].extent.value(shapes);
                    if Some(a) == last {
                        pick(
                            k,
                            vector
                                .as_ref()
                                .map_or(vectors.min(e), |(_, e, w)| vectors.min((e + w - 1) / w)),
                        )
                    } else if last.and_then(|l| l.checked_sub(1)) == Some(a) {
                        pick(k, e.min(6))
                    } else {
                        pick(k, 1)
                    }
                } else if let KnobKind::Block(axis) = &k.name.kind {
                    let a = stage.axes.iter().position(|x| x.name == *axis).unwrap_or(0);
                    let e = stage.axes[a].extent.value(shapes);
                    if Some(a) == last {
                        pick(k, e.min(4))
                    } else {
                        pick(k, e.min(16))
                    }
                } else if matches!(k.name.kind, KnobKind::Split(_)) {
                    pick(k, 512)
                } else if k.name.kind == KnobKind::Order {
                    // The vector axis outermost, the others in declaration order.
                    let mut names: Vec<&str> = stage.axes[..info.n_spatial]
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect();
                    if let Some(l) = names.pop() {
                        names.insert(0, l);
                    }
                    let want = Value::Name(names.join("-"));
                    if k.choices.contains(&want) {
                        want
                    } else {
                        k.choices[0].clone()
                    }
                } else if k.name.kind == KnobKind::Unroll {
                    pick(k, 4)
                } else if k.name.kind == KnobKind::Parallel {
                    pick(k, 1)
                } else if k.name.kind == KnobKind::Fuse {
                    Value::Int(1)
                } else if let KnobKind::Pack(site) = k.name.kind {
                    let bare = match load_sites(&stage.body).get(site) {
                        Some(Expr::Load {
                            index, pad: None, ..
                        }) => index.iter().all(|ix| ix.as_axis().is_some()),
                        _ => false,
                    };
                    Value::Int(i64::from(bare && !info.reduce_axes.is_empty()))
                } else {
                    k.choices[0].clone()
                };
                c.insert(k.name.clone(), v);
            }
        }
        Config(c)
    }

    /// Decodes a config of this space into per-stage schedules.
    pub fn plan(&self, op: &Operator, config: &Config) -> Result<Vec<StageSchedule>, ConfigError> {
        self.index_of(config)?;
        let mut out = Vec::new();
        for (s, kind) in self.stages.iter().enumerate() {
            out.push(match kind {
                StageKind::Default => StageSchedule::Default,
                StageKind::FusibleInto { producer, .. }
                    if config.int(&KnobName::new(self.prefix(*producer), KnobKind::Fuse)) == 1 =>
                {
                    StageSchedule::Fused(*producer)
                }
                StageKind::Tiled(info) | StageKind::FusibleInto { own: info, .. } => {
                    StageSchedule::Tiled(decode(&op.stages[s], info, config))
                }
            });
        }
        Ok(out)
    }

    fn prefix(&self, s: usize) -> &str {
        match &self.stages[s] {
            StageKind::Tiled(i) | StageKind::FusibleInto { own: i, .. } => &i.prefix,
            StageKind::Default => "",
        }
    }
}

fn stage_knobs(
    knobs: &mut Vec<Knob>,
    stage: &Stage,
    info: &TiledStage,
    shapes: &[i64],
    lanes: &[i64],
) {
    let p = &info.prefix;
    let ints = |xs: &[i64]| xs.iter().map(|x| Value::Int(*x)).collect::<Vec<_>>();
    let mut vector = vec![Value::Name("none".into())];
    let pairs = mergeable_pairs(&info.extents);
    for a in 0..info.n_spatial {
        let name = &stage.axes[a].name;
        let e = stage.axes[a].extent.value(shapes).max(1);
        // The second axis of a pair that may merge tiles the pair's points.
        let e = match a.checked_sub(1).filter(|p| pairs.contains(p)) {
            Some(p) => e * info.extents[p].max(1),
            None => e,
        };
        let tiles: Vec<i64> = TILES.iter().copied().filter(|t| *t <= e).collect();
        let blocks: Vec<i64> = BLOCKS
            .iter()
            .copied()
            .filter(|b| *b == 1 || b * tiles[0] <= e)
            .collect();
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Tile(name.clone())),
            choices: ints(&tiles),
        });
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Block(name.clone())),
            choices: ints(&blocks),
        });
        for w in lanes {
            vector.push(Value::Name(format!("{name}{w}")));
        }
    }
    // (After the spatial values, which keep their places.)
    if let Some(&r) = info
        .reduce_axes
        .last()
        .filter(|_| info.reduction_lanes.is_some())
    {
        for w in lanes {
            vector.push(Value::Name(format!("{}{w}", stage.axes[r].name)));
        }
    }
    for &a in &info.reduce_axes {
        let name = &stage.axes[a].name;
        let e = stage.axes[a].extent.value(shapes).max(1);
        let mut splits: Vec<i64> = SPLITS.iter().copied().filter(|s| *s < e).collect();
        splits.push(e);
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Split(name.clone())),
            choices: ints(&splits),
        });
    }
    let names = |o: &[usize]| {
        o.iter()
            .map(|a| stage.axes[*a].name.as_str())
            .collect::<Vec<_>>()
            .join("-")
    };
    let mut order_values: Vec<Value> = orders(info.n_spatial)
        .iter()
        .map(|o| Value::Name(names(o)))
        .collect();
    if !info.reduce_axes.is_empty() {
        // The reduction blocks among the outer loops, at `/`: `j/i` reads a
        // block of the operands indexed by j and the reduction once for every
        // tile of i (after every plain order, whose values keep their places).
        for o in orders(info.n_spatial) {
            for at in 0..info.n_spatial {
                order_values.push(Value::Name(format!(
                    "{}/{}",
                    names(&o[..at]),
                    names(&o[at..])
                )));
            }
        }
    }
    // Two adjacent spatial axes merged into one (`h*w`), in every order of
    // the axes that remain, the reduction blocks at each place (after the
    // values above, which keep their places).
    for a in pairs {
        let item = |x: usize| match x {
            x if x == a => format!("{}*{}", stage.axes[a].name, stage.axes[a + 1].name),
            x => stage.axes[x].name.clone(),
        };
        let merged: Vec<usize> = (0..info.n_spatial).filter(|x| *x != a + 1).collect();
        for o in orders(merged.len()) {
            let o: Vec<String> = o.iter().map(|i| item(merged[*i])).collect();
            order_values.push(Value::Name(o.join("-")));
            if !info.reduce_axes.is_empty() {
                for at in 0..o.len() {
                    order_values.push(Value::Name(format!(
                        "{}/{}",
                        o[..at].join("-"),
                        o[at..].join("-")
                    )));
                }
            }
        }
    }
    knobs.push(Knob {
        name: KnobName::new(p, KnobKind::Order),
        choices: order_values,
    });
    if info.n_spatial > 0 {
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Vector),
            choices: vector,
        });
    }
    if !info.reduce_axes.is_empty() {
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Unroll),
            choices: ints(&UNROLLS),
        });
    }
    let par: Vec<i64> = (0..=info.n_spatial.min(2) as i64).collect();
    knobs.push(Knob {
        name: KnobName::new(p, KnobKind::Parallel),
        choices: ints(&par),
    });
    if !info.reduce_axes.is_empty() {
        for site in 0..info.loads {
            let mut choices = vec![0, 1];
            if info.guardable.contains(&site) {
                choices.push(2);
            }
            if info.blockable.contains(&site) {
                choices.extend([3, 4, 5]);
            }
            knobs.push(Knob {
                name: KnobName::new(p, KnobKind::Pack(site)),
                choices: ints(&choices),
            });
        }
    }
    if info.fusible_consumer.is_some() {
        knobs.push(Knob {
            name: KnobName::new(p, KnobKind::Fuse),
            choices: ints(&[0, 1]),
        });
    }
}

/// Loop orders offered: every permutation up to three axes, rotations beyond.
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n <= 3 {
        let mut out = vec![Vec::new()];
        for _ in 0..n {
            out = out
                .into_iter()
                .flat_map(|o: Vec<usize>| {
                    (0..n)
                        .filter(|a| !o.contains(a))
                        .map(|a| {
                            let mut o = o.clone();
                            o.push(a);
                            o
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
        }
        out
    } else {
        (0..n)
            .map(|r| (0..n).map(|i| (i + r) % n).collect())
            .collect()
    }
}

/// The spatial axes `a` that may merge with `a + 1`: both longer than one,
/// and a third axis longer than one left to vectorise.
fn mergeable_pairs(extents: &[i64]) -> Vec<usize> {
    let long = |a: usize| extents[a] > 1;
    (0..extents.len().saturating_sub(1))
        .filter(|&a| long(a) && long(a + 1))
        .filter(|&a| (0..extents.len()).any(|x| x != a && x != a + 1 && long(x)))
        .collect()
}

/// The load sites of a stage (by position) under its one reduction.
fn sites_under_reduction(stage: &Stage) -> Vec<usize> {
    let under: Vec<*const Expr> = match single_reduction(&stage.body) {
        Reduction::One(Expr::Reduce { body, .. }) => load_sites(body)
            .into_iter()
            .map(|e| e as *const Expr)
            .collect(),
        _ => Vec::new(),
    };
    load_sites(&stage.body)
        .into_iter()
        .enumerate()
        .filter(|(_, e)| under.contains(&(*e as *const Expr)))
        .map(|(i, _)| i)
        .collect()
}

/// The load sites of a stage that [`Read::Guard`] applies to: padded loads
/// under its reduction (the border test wraps the reduction loops).
fn guardable_sites(stage: &Stage) -> Vec<usize> {
    let sites = load_sites(&stage.body);
    sites_under_reduction(stage)
        .into_iter()
        .filter(|&i| matches!(sites[i], Expr::Load { pad: Some(_), .. }))
        .collect()
}

/// The lanes a `vector` knob value (`k16`) puts on the axis named `axis`, if
/// it names that axis.
fn vector_lanes(value: &str, axis: &str) -> Option<usize> {
    value.strip_prefix(axis)?.parse().ok()
}

/// Whether some load of the stage reads along spatial axis `a` at unit
/// stride (in its last dimension): a vector along `a` loads it whole.
fn unit_stride_along(stage: &Stage, a: usize) -> bool {
    load_sites(&stage.body).iter().any(|site| {
        matches!(site, Expr::Load { index, .. }
            if index.last().is_some_and(|ix| ix.terms.iter().any(|&(b, c)| b == a && c == 1)))
    })
}

/// Whether the vector may run along the stage's innermost reduction axis
/// ([`StagePlan::reduce_lanes`]), and if so the load sites that then read from
/// a copy with that axis innermost. No load under the reduction is padded (no
/// border would test the lanes) and some reads along the axis. Those that read
/// it at unit stride in their last dimension only read in place (a matrix
/// times a vector); others, such as `b[k][j]`, only where the last spatial
/// axis is narrower than a vector at these `extents` (a GEMM with `N ≤ 4`,
/// whose vector along `j` would be mostly empty), through the copy.
fn reduction_lanes(stage: &Stage, extents: &[i64]) -> Option<Vec<usize>> {
    let Reduction::One(Expr::Reduce { axes, .. }) = single_reduction(&stage.body) else {
        return None;
    };
    let &r = axes.last()?;
    let reads = |ix: &Affine| ix.terms.iter().any(|(a, _)| *a == r);
    let sites = load_sites(&stage.body);
    let (mut along, mut packed) = (false, Vec::new());
    for i in sites_under_reduction(stage) {
        let Expr::Load { index, pad, .. } = sites[i] else {
            unreachable!("load sites are loads")
        };
        if pad.is_some() {
            return None;
        }
        let Some((last, outer)) = index.split_last() else {
            continue;
        };
        if !outer.iter().any(reads) && !reads(last) {
            continue;
        }
        along = true;
        if outer.iter().any(reads) || last.coefficient(r) != 1 {
            packed.push(i);
        }
    }
    let narrow = extents.last().is_some_and(|&e| e < crate::emit::NARROW);
    (along && (packed.is_empty() || narrow)).then_some(packed)
}

fn decode(stage: &Stage, info: &TiledStage, c: &Config) -> StagePlan {
    let p = info.prefix.as_str();
    let knob = |kind| KnobName::new(p, kind);
    let axis_name = |a: usize| stage.axes[a].name.as_str();
    let lanes_of = |a: usize| vector_lanes(c.name(&knob(KnobKind::Vector)), axis_name(a));
    let vector = match info.n_spatial {
        0 => None,
        n => (0..n).find_map(|a| Some((a, lanes_of(a)?))),
    };
    let reduce_lanes = match info.reduce_axes.last() {
        Some(&r) if vector.is_none() && info.n_spatial > 0 && info.reduction_lanes.is_some() => {
            lanes_of(r)
        }
        _ => None,
    };
    let order_text = c.name(&knob(KnobKind::Order));
    let axis = |n: &str| {
        (0..info.n_spatial)
            .find(|a| axis_name(*a) == n)
            .expect("order names spatial axes")
    };
    // `h*w` names both axes, in declaration order.
    let mut merge = None;
    let mut axes = |text: &str| -> Vec<usize> {
        let mut out = Vec::new();
        for item in text.split('-').filter(|s| !s.is_empty()) {
            if let Some((first, _)) = item.split_once('*') {
                let a = axis(first);
                merge = Some(a);
                out.extend([a, a + 1]);
            } else {
                out.push(axis(item));
            }
        }
        out
    };
    let (order, reduce_at) = match order_text.split_once('/') {
        Some((outside, inside)) => {
            let outside = axes(outside);
            let at = outside.len();
            ([outside, axes(inside)].concat(), at)
        }
        None => (axes(order_text), info.n_spatial),
    };
    let merge = merge.filter(|a| vector.is_none_or(|(v, _)| v != *a && v != a + 1));
    // The merged pair is tiled along its second axis alone.
    let one_on_merged = |a: usize, v: i64| if merge == Some(a) { 1 } else { v };
    let tile: Vec<i64> = (0..info.n_spatial)
        .map(|a| {
            let t = one_on_merged(a, c.int(&knob(KnobKind::Tile(axis_name(a).to_string()))));
            // On the vector axis the tile counts vectors.
            match vector {
                Some((va, w)) if va == a => t * w as i64,
                _ => t,
            }
        })
        .collect();
    StagePlan {
        tile,
        block: (0..info.n_spatial)
            .map(|a| one_on_merged(a, c.int(&knob(KnobKind::Block(axis_name(a).to_string())))))
            .collect(),
        split: info
            .reduce_axes
            .iter()
            .map(|a| c.int(&knob(KnobKind::Split(axis_name(*a).to_string()))))
            .collect(),
        order,
        reduce_at,
        merge,
        vector,
        reduce_lanes,
        unroll: if info.reduce_axes.is_empty() {
            1
        } else {
            c.int(&knob(KnobKind::Unroll)) as usize
        },
        parallel: c.int(&knob(KnobKind::Parallel)) as usize,
        reads: (0..info.loads)
            .map(|s| {
                // (Lanes along the reduction read in place or from their
                // copy: other `pack` values lower as these do, and the search
                // skips them.)
                let copied = info
                    .reduction_lanes
                    .as_ref()
                    .is_some_and(|c| c.contains(&s));
                if reduce_lanes.is_some() && copied {
                    return Read::Pack;
                }
                if info.reduce_axes.is_empty() || reduce_lanes.is_some() {
                    return Read::Direct;
                }
                match c.int(&knob(KnobKind::Pack(s))) {
                    1 => Read::Pack,
                    2 => Read::Guard,
                    3 => Read::PackBlock,
                    4 => Read::PackAhead,
                    5 => Read::PackInOrder,
                    _ => Read::Direct,
                }
            })
            .collect(),
        fuse: info.fusible_consumer.is_some() && c.int(&knob(KnobKind::Fuse)) == 1,
    }
}
