//! Register-tile starts: configs of the reducing stage shaped as a
//! hand-written micro-kernel, for a search to measure before the configs a
//! model ranks.
//!
//! A model learns only what its records hold, and random and model-guided
//! searches of 48–72 trials rarely meet this family: the corpus's best 3×3
//! conv at C160 20×20 ran at 180 GFLOP/s where such a config ran at 302. Its
//! shape is what oneDNN's and the `gemm` crate's kernels share: one spatial
//! axis in whole vectors (one or two; where no axis fills one, a vector
//! partly filled), a register tile over the innermost other axes that fills
//! most of the register file with accumulators, the operands the vector
//! reads copied in tile order with the next slice prefetched where the
//! vector gathers them or other tiles read them again (the others read in
//! place; a GEMM's B one block at a time, as GotoBLAS packs it), the
//! reduction whole, the epilogue fused, the vector axis's tiles outermost
//! and run in parallel, the next loop's with them where they are fewer than
//! the threads (a GEMM's too where B is not copied a block at a time).

use autotune_lang::analysis::load_sites;
use autotune_lang::ir::{Affine, Expr};

use super::{Config, KnobKind, KnobName, Space, TiledStage, Value, BLOCK_PACK_BYTES, TILES};
use crate::loopnest::Stmt;
use crate::target::Isa;

/// Register tiles kept per vector axis and vector count (the caller ranks
/// them; those with the least overhang, the longest along the innermost axis
/// and nearest the register target first).
const TILES_PER_SHAPE: usize = 3;

impl Space {
    /// Configs of the one reducing stage shaped as a micro-kernel for `isa`
    /// and `threads` (see the module), every other knob as in `base`; each
    /// [sensible](Space::sensible), none twice. Empty where the space has no
    /// one reducing stage.
    pub fn register_tile_starts(&self, base: &Config, isa: Isa, threads: usize) -> Vec<Config> {
        let Some((s, info)) = self.reducing_stage() else {
            return Vec::new();
        };
        let stage = &self.op.stages[s];
        let name = |a: usize| stage.axes[a].name.clone();
        let knob = |kind| KnobName::new(&info.prefix, kind);
        let width = isa.max_lanes(self.dtype.size()) as i64;
        // Accumulators: most of the register file, leaving room for the
        // vector of the packed operand and the broadcasts.
        let registers = if isa == Isa::Avx512 { 32 } else { 16 };
        let (fewest, most, aim) = (registers * 3 / 8, registers * 7 / 8 - 2, registers / 2);
        let sites = load_sites(&stage.body);
        // Axes that fill a vector. Where none does (12 output channels of
        // 11-pixel rows), those that fill half of one, their vector's unused
        // lanes counted as the tiles' overhang is, so the start that wastes
        // least comes first: 16 pixels (11 used) × 12 channels ran a
        // 44-channel conv at 83 GFLOP/s, 16 channels (12 used) × 2 × 6
        // pixels at 66, and a 96-trial search without them found 54
        // (Intel Xeon, 1 thread).
        let narrow = (0..info.n_spatial).all(|a| info.extents[a] < width);
        // The axes other than the vector's, and of them the innermost two,
        // which the register tile spans.
        let others = |a: usize| -> Vec<usize> { (0..info.n_spatial).filter(|&x| x != a).collect() };
        let tiled = |others: &[usize]| others[others.len().saturating_sub(2)..].to_vec();
        // Where the reduction is short, a tile whose vector's lanes are
        // strided in the output stores them lane by lane at a visible share
        // of its time (`width` stores for every `steps` FMAs), unless it
        // holds a power of two of elements, at most a vector, along the
        // output's last axis: then it stores rows (`Stmt::StoreRows`). So
        // those come first there: the stem's 147 steps ran 1.12-1.26x and a
        // stride-2 1x1 conv's 64 steps 1.32x so, a 3x3 conv's 576 1.02x
        // (Intel Xeon, 1 thread).
        // There, too, two vectors come first: each broadcast of the input
        // feeds both (oneDNN's shape), where one vector is load-bound (the
        // stem 197 against 164 GFLOP/s for one vector of 16 pixels; every
        // such entry ResNet-18 tuned has two).
        let steps: i64 = info.reduce_extents.iter().product();
        let last = info.n_spatial.saturating_sub(1);
        let short = |a: usize| a != last && steps < 32 * width;
        let rows = |a: usize, t: &[i64]| {
            short(a) && t.last().is_some_and(|&x| Stmt::stores_rows(x, width))
        };
        let mut tiles: Vec<(usize, i64, Vec<i64>, f64)> = Vec::new();
        // Where the tile spans one other axis (a GEMM's rows), the
        // hand-written kernel's shape (measured on GEMMs, Intel Xeon): the
        // vector along the output's innermost axis, which reads B's rows and
        // stores C's whole (96×1500×640: 290-360 GFLOP/s against 151-175
        // down A's columns); two vectors of it (below); B copied one block
        // at a time (below).
        let gemm = is_gemm(info);
        // A GEMM's vector down C's columns (lanes a row apart in C, A copied
        // transposed) ran 0.60-0.87× the best start along its rows at every
        // shape and thread count swept (`gemm-start-order-20261206-154032.log`).
        let strided = |a: usize| if gemm && a != last { STRIDED_GEMM } else { 1.0 };
        let mut axes: Vec<usize> = (0..info.n_spatial).collect();
        if gemm {
            axes.reverse();
        }
        for a in axes {
            let e = info.extents[a];
            if e < width && !(narrow && 2 * e >= width) {
                continue;
            }
            let tiled = &tiled(&others(a));
            // So they do in a GEMM: two vectors of 8-12 rows ran 1.05-1.15×
            // one of 12-16 on 8 of 10 shapes and thread counts, 256³ to
            // 96×1500×640 (all but 127×255×511; `gemm-starts-20261206-134632.log`).
            let mut counts = if short(a) || gemm {
                vec![2, 1]
            } else {
                vec![1, 2]
            };
            // Over a short reduction, three vectors first where their tiles
            // split over the threads with less overhang and imbalance than
            // two's: 96 channels in two tiles of 48 for two threads ran a 1×1
            // stride-2 conv 1.32–1.35× three tiles of 32 (305–319 against
            // 225–242 GFLOP/s, `sweep-1x1-parallel-xeon-20261206-190757.log`);
            // on 64–512 channels, which two vectors split evenly, three ran
            // 0.57–0.97× (`sweep-1x1-three-vectors-xeon-20261206-185628.log`).
            // How many tiles of `v` vectors the axis takes, and their overhang.
            let along = |v: i64| (e + v * width - 1) / (v * width);
            let unused = |v: i64| (along(v) * v * width) as f64 / e as f64;
            let split = |v: i64| unused(v) * balance(along(v), threads);
            if short(a) && !gemm && 3 * width <= e && split(3) < split(2) {
                counts.insert(0, 3);
            }
            for vectors in counts.into_iter().filter(|v| v * width <= e.max(width)) {
                let unused = unused(vectors);
                let mut shapes: Vec<(Vec<i64>, f64, i64)> = tile_shapes(tiled.len())
                    .into_iter()
                    .filter(|t| {
                        let acc = vectors * t.iter().product::<i64>();
                        (fewest..=most).contains(&acc)
                            && t.iter().zip(tiled).all(|(t, &x)| *t <= info.extents[x])
                    })
                    .map(|t| {
                        // Work past the axes' ends, then the longest tile
                        // along the innermost axis (a row of 14 pixels ran a
                        // 3×3 conv at 14×14 at 288–301 GFLOP/s, 7×2 at 216
                        // and 4×4 at 247–254), then distance from the aim.
                        let waste: f64 = t
                            .iter()
                            .zip(tiled)
                            .map(|(t, &x)| {
                                let e = info.extents[x];
                                ((e + t - 1) / t * t) as f64 / e as f64
                            })
                            .product();
                        let acc = vectors * t.iter().product::<i64>();
                        (t, waste * unused, (acc - aim).abs())
                    })
                    .collect();
                let inner = |t: &[i64]| t.last().copied().unwrap_or(1);
                shapes.sort_by(|x, y| {
                    x.1.total_cmp(&y.1)
                        .then(rows(a, &y.0).cmp(&rows(a, &x.0)))
                        .then(inner(&y.0).cmp(&inner(&x.0)))
                        .then(x.2.cmp(&y.2))
                });
                let kept = shapes.into_iter().take(TILES_PER_SHAPE);
                tiles.extend(kept.map(|(t, waste, _)| {
                    let cost = waste * load_bound(vectors, &t) * strided(a);
                    (a, vectors, t, cost)
                }));
            }
        }
        // With their cost per useful FMA, once the parallel loops are known.
        let mut out: Vec<(Config, f64, usize)> = Vec::new();
        for (a, vectors, t, cost) in tiles {
            let others = others(a);
            let tiled = &tiled(&others);
            let mut c = base.clone();
            let mut set = |kind, v: Value| {
                c.0.insert(knob(kind), v);
            };
            set(KnobKind::Vector, Value::Name(format!("{}{width}", name(a))));
            // Each spatial axis's tile (the vector axis's in vectors).
            let tile: Vec<i64> = (0..info.n_spatial)
                .map(|x| match tiled.iter().position(|&y| y == x) {
                    Some(i) => t[i],
                    None if x == a => vectors,
                    None => 1,
                })
                .collect();
            for (x, &t) in tile.iter().enumerate() {
                set(KnobKind::Tile(name(x)), Value::Int(t));
                set(KnobKind::Block(name(x)), Value::Int(1));
            }
            for (&r, &e) in info.reduce_axes.iter().zip(&info.reduce_extents) {
                set(KnobKind::Split(name(r)), Value::Int(e));
            }
            // `pack` 3: copied one block at a time (`Read::PackBlock`); 4:
            // copied, the next slice prefetched (`Read::PackAhead`); 5:
            // copied in the order it reads (`Read::PackInOrder`); all three
            // under the reduction only; 1: copied (`Read::Pack`); 0: read in
            // place.
            let reads: Vec<i64> = sites
                .iter()
                .enumerate()
                .map(|(site, load)| {
                    let Expr::Load { tensor, index, .. } = load else {
                        return 0;
                    };
                    match (
                        copied(index, a, info, &tile),
                        info.blockable.contains(&site),
                    ) {
                        (Copied::Reread, true)
                            if gemm
                                && !self.op.is_constant(*tensor)
                                && self.block_bytes(index, a, info, &tile, width)
                                    <= BLOCK_PACK_BYTES =>
                        {
                            3
                        }
                        (Copied::No, _) => 0,
                        (_, true) => 4,
                        (_, false) => 1,
                    }
                })
                .collect();
            // A block's copy is reused by the tiles of the loops inside the
            // one it depends on: with the reduction's blocks outermost and
            // only the vector axis's tiles parallel, a GEMM's panel of B
            // (not a constant, whose copy a handle keeps) is copied once per
            // column block and read from cache by every block of rows
            // (GotoBLAS's packing). The start so ran 1.02-1.23× the one
            // before it (one vector, B copied whole with its next slice
            // prefetched, two loops parallel) on 5 GEMM shapes at 1 and 2
            // threads (`gemm-starts-20261206-134632.log`).
            let per_block = reads.contains(&3);
            let loops: Vec<usize> = std::iter::once(a).chain(others).collect();
            let order: Vec<String> = loops.iter().map(|&x| name(x)).collect();
            let slash = if per_block { "/" } else { "" };
            set(
                KnobKind::Order,
                Value::Name(format!("{slash}{}", order.join("-"))),
            );
            // A conv's vector axis's tiles alone where they are more than the
            // threads over a short reduction (a 1×1 conv's), as many over one
            // of at most 8 vectors of steps, or at least 8 a thread over a
            // long one; else the rows' tiles collapsed in too. On 2 threads,
            // the 12 conv starts swept of more tiles than threads that this
            // runs on one loop ran 0.99–1.42× (geometric mean 1.13) so,
            // against both: the 1×1 convs of 3–16 tiles 0.99–1.42×, the 3×3
            // convs of 16–32 tiles 1.02–1.12× (on one thread, where only the
            // C gcc makes differs, 1.10–1.33×); two tiles on two threads, the
            // 1×1 convs over 48–96 channels 1.07–1.59×
            // (`sweep-1x1-parallel-xeon-20261206-190757.log`). Both loops stay
            // where one loses: two tiles over the stem's 147
            // steps (0.93×) and a 3×3 conv's 288 (0.92×), 3×3 convs of 4–12
            // tiles (0.96–1.00×), one tile (0.56–0.58×)
            // (`start-parallel-20261206-175840.log`, `-175950.log`). A GEMM's
            // one loop where B is copied a block at a time (above), else two.
            // Each loop's tiles (the vector axis's in vectors), outermost first.
            let tiles_per_loop: Vec<i64> = loops
                .iter()
                .map(|&x| {
                    let t = if x == a { tile[x] * width } else { tile[x] };
                    (info.extents[x] + t - 1) / t
                })
                .collect();
            let outer = tiles_per_loop[0];
            let enough = if short(a) {
                outer > threads as i64 || (outer == threads as i64 && steps <= 8 * width)
            } else {
                outer >= 8 * threads as i64
            };
            let parallel = if per_block || (!gemm && enough) {
                1
            } else {
                info.n_spatial.min(2)
            };
            set(KnobKind::Parallel, Value::Int(parallel as i64));
            // The parallel loops' iterations (one tile each, blocks of one).
            let chunks: i64 = tiles_per_loop[..parallel].iter().product();
            if info.fusible_consumer.is_some() {
                set(KnobKind::Fuse, Value::Int(1));
            }
            for (site, read) in reads.into_iter().enumerate() {
                set(KnobKind::Pack(site), Value::Int(read));
            }
            if self.index_of(&c).is_ok() && self.sensible(&c) && !out.iter().any(|o| o.0 == c) {
                out.push((c, cost * balance(chunks, threads), a));
            }
        }
        if narrow || gemm {
            // The least time per useful FMA first (a GEMM's 48 columns: one
            // vector, not two; 300 columns: two vectors of 8 rows, not one of
            // 12); on a tie the inner axis, whose lanes lie side by side.
            out.sort_by(|x, y| x.1.total_cmp(&y.1).then(y.2.cmp(&x.2)));
        }
        out.into_iter().map(|o| o.0).collect()
    }

    /// Whether [`Space::register_tile_starts`] trusts its own order: a
    /// GEMM's starts (a reducing stage of two spatial axes) are ranked by
    /// their estimated time per useful FMA, and the first two held the best
    /// start at 13 of 14 shapes and thread counts swept
    /// (`gemm-start-order-20261206-154032.log`); a conv's come grouped by
    /// vector axis, and a model's pick among them is worth a measurement.
    pub fn starts_ranked_by_cost(&self) -> bool {
        self.reducing_stage().is_some_and(|(_, info)| is_gemm(info))
    }

    /// The bytes of one block's copy (`Read::PackBlock`) of the operand read
    /// at `index` by a start of `tile[a]` vectors of `width` lanes along axis
    /// `a` and `tile[x]` elements along the others, one tile a block and the
    /// reduction whole: what the tile reads of it.
    fn block_bytes(
        &self,
        index: &[Affine],
        a: usize,
        info: &TiledStage,
        tile: &[i64],
        width: i64,
    ) -> i64 {
        let reads = |x: usize| index.iter().any(|ix| ix.coefficient(x) != 0);
        let spatial: i64 = (0..info.n_spatial)
            .filter(|&x| reads(x))
            .map(|x| if x == a { tile[x] * width } else { tile[x] })
            .product();
        let reduction: i64 = info
            .reduce_axes
            .iter()
            .zip(&info.reduce_extents)
            .filter(|(&r, _)| reads(r))
            .map(|(_, &e)| e)
            .product();
        spatial * reduction * self.dtype.size() as i64
    }
}

/// Whether the reducing stage is a GEMM's for the starts: two spatial axes,
/// so that the register tile spans one axis besides the vector's.
fn is_gemm(info: &TiledStage) -> bool {
    info.n_spatial == 2
}

/// How much longer than its FMAs a register tile of `vectors` vectors by
/// `tile` elements takes a reduction step where loads issue at the rate FMAs
/// do (two a cycle on the x86 cores measured): it loads each vector and
/// broadcasts each element. One vector of 12 rows (13 loads, 12 FMAs) ran a
/// GEMM 200×300×400 at 0.80× two of 8 (10 loads, 16 FMAs) on 2 threads, and
/// one of 16 rows 1000³ at 0.82×, where overhang alone ranked them first
/// (`gemm-start-order-20261206-154032.log`).
fn load_bound(vectors: i64, tile: &[i64]) -> f64 {
    let elements: i64 = tile.iter().product();
    let fmas = vectors * elements;
    ((vectors + elements) as f64 / fmas as f64).max(1.0)
}

/// How much longer than an even split `chunks` parallel iterations of equal
/// work take on `threads` threads: the busiest runs `ceil(chunks / threads)`.
/// On 2 threads a GEMM 333³ ran 11 column tiles of 32 at 0.82× 21 of 16, and
/// 300×100×700 seven tiles of 16 at 0.68× four of 32 (whose overhang is 28%),
/// where they ran level or ahead on 1 (`gemm-start-order-20261206-152434.log`).
fn balance(chunks: i64, threads: usize) -> f64 {
    let threads = threads.max(1) as i64;
    let busiest = (chunks + threads - 1) / threads;
    (busiest * threads) as f64 / chunks.max(1) as f64
}

/// The cost factor of a GEMM start whose vector runs down C's columns.
const STRIDED_GEMM: f64 = 4.0 / 3.0;

/// Whether and why a start copies an operand in tile order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Copied {
    /// Read in place.
    No,
    /// The vector gathers its lanes.
    Gather,
    /// Read contiguously along the vector, and again by other tiles.
    Reread,
}

/// Whether a start copies the operand read at `index` in tile order, with its
/// vector along axis `a` and tiles of `tile[x]` elements along the others: an
/// operand read along the vector is copied where the vector gathers its lanes
/// (a conv's weights along output channels, a stride-2 conv's input), or where
/// the tiles of an axis it does not vary with read it again (a GEMM's B for
/// each block of rows); else a vector load reads it in place (a narrow conv's
/// input, its 12 channels all in one tile, ran at 81 GFLOP/s so and at 43–48
/// copied).
fn copied(index: &[Affine], a: usize, info: &TiledStage, tile: &[i64]) -> Copied {
    let along = index.iter().any(|ix| ix.coefficient(a) != 0);
    let contiguous = index.split_last().is_some_and(|(last, outer)| {
        last.coefficient(a) == 1 && outer.iter().all(|ix| ix.coefficient(a) == 0)
    });
    let reread = (0..info.n_spatial).any(|x| {
        x != a && index.iter().all(|ix| ix.coefficient(x) == 0) && tile[x] < info.extents[x]
    });
    match (along, contiguous, reread) {
        (false, _, _) | (true, true, false) => Copied::No,
        (true, false, _) => Copied::Gather,
        (true, true, true) => Copied::Reread,
    }
}

/// Every register tile over `n` axes (at most two) from the sizes a tile knob
/// offers.
fn tile_shapes(n: usize) -> Vec<Vec<i64>> {
    match n {
        0 => vec![vec![]],
        1 => TILES.iter().map(|&t| vec![t]).collect(),
        _ => TILES
            .iter()
            .flat_map(|&x| TILES.iter().map(move |&y| vec![x, y]))
            .collect(),
    }
}
