//! The code generator of autotune: from an operator's IR, a workload and a
//! config of its schedule space to the C source of a kernel. **Internal crate**:
//! its API serves `autotune-tune` and `autotune-build` and is not stable.
//!
//! It is pure: no environment variable, no file, no process, no clock. The same
//! inputs give the same bytes on every machine, which is what makes a cache hit
//! reproducible and what lets the tuner time exactly the kernel that ships.
//!
//! The pipeline, in the order data flows:
//! 1. [`workload`]: an operator at one specialisation, and its exact identity;
//! 2. [`space`]: the schedule space of a workload, its knobs and configs, and a
//!    config decoded into per-stage plans;
//! 3. [`lower`]: IR + plans → [`loopnest`] (the default schedule, and the tiled
//!    one in `lower::tiled`);
//! 4. [`emit`]: loop nest → C, one clone per [`Isa`] level behind a dispatcher;
//! 5. [`runtime`]: the C runtime the kernels call, and the fixed C flags.
//!
//! [`kernel_c`] is the one path from (operator, variant, config, ISA levels) to
//! C: the build and the measurement harness both call it.

pub mod emit;
pub mod loopnest;
pub mod lower;
pub mod runtime;
pub mod space;
pub mod target;
mod text;
pub mod workload;

use autotune_lang::ir::Specialization;
use autotune_lang::mangle::{self, Package, Variant};
use autotune_lang::Operator;

pub use space::carry::Reducing;
use space::StageSchedule;
pub use space::{Config, ConfigError, Knob, KnobKind, KnobName, Space, Value};
pub use target::{CpuId, Isa, Selector, Target};
pub use workload::{Workload, WorkloadId};

/// Version of the schedule space and the lowering: a config (a cache entry, a
/// record) of another version may mean other code, so it is not applied as
/// current unless its [`KernelFingerprint`] shows the same kernel. Bump it
/// with any change to the knobs or to the C a config lowers to.
pub const GENERATOR_VERSION: u32 = 18;

/// What a config of a workload ships as at one ISA level, hashed: its
/// kernel's C under fixed names, the file header and the compile flags. A
/// cache entry records the fingerprint of the kernel it timed; an entry of an
/// older [`GENERATOR_VERSION`] whose config still has that fingerprint is the
/// same kernel, so a generator change re-tunes only the kernels it changed.
/// The runtime (`pool.c`, `isa.c`) is not part of it: it is shared by every
/// kernel and changes none of their code, so a change to how the pool
/// schedules chunks, or to how the memory a kernel works in is allocated
/// (`P_alloc`: 64-byte aligned since generator 8, `malloc` before), is judged
/// by benchmarks, as a compiler upgrade is, rather than by staling every entry
/// of every CPU. Written as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelFingerprint(pub u64);

impl KernelFingerprint {
    /// The fingerprint of `config` of `w` at `isa` (a bucket's: its generic
    /// kernel with that one schedule, as it is timed).
    pub fn of(w: &Workload, config: &Config, isa: Isa) -> Result<KernelFingerprint, CodegenError> {
        let (symbol, prefix) = ("k".to_string(), "rt".to_string());
        let op = &w.op;
        // The header's first line names autotune's version, which is not code.
        let header = emit::file_header("fingerprint", op.dtype, &prefix);
        let mut text = header.split_once('\n').map_or("", |h| h.1).to_string();
        text += &match w.bucket() {
            Some(_) => {
                let at = op.specializations[w.spec].clone();
                let config = config.clone();
                generic_c(
                    op,
                    &[GenericSchedule { at, config }],
                    &[isa],
                    isa,
                    symbol,
                    prefix.clone(),
                )?
            }
            None => kernel_c(
                op,
                Variant::Specialized(w.spec),
                Some(config),
                &[isa],
                symbol,
                prefix.clone(),
            )?,
        };
        // Where a kernel's memory comes from is the runtime's (its allocator),
        // spelled as the `malloc` kernels called before generator 8.
        let text = text
            .replace(&emit::alloc_decl(&prefix), "")
            .replace(&format!("{}(", emit::alloc_fn(&prefix)), "malloc(");
        let flags = format!("-O{} {}", runtime::OPT_LEVEL, runtime::C_FLAGS.join(" "));
        Ok(KernelFingerprint(mangle::fnv1a((text + &flags).as_bytes())))
    }

    /// Whether `recorded` (a cache entry's or a record's) is the kernel
    /// `config` of `w` makes at `isa` today.
    pub fn still_made(recorded: Option<Self>, w: &Workload, config: &Config, isa: Isa) -> bool {
        recorded.is_some_and(|k| KernelFingerprint::of(w, config, isa).is_ok_and(|now| now == k))
    }
}

impl std::fmt::Display for KernelFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Text that is not 16 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a kernel fingerprint (expected 16 hex digits)")]
pub struct BadFingerprint(pub String);

impl std::str::FromStr for KernelFingerprint {
    type Err = BadFingerprint;

    fn from_str(s: &str) -> Result<KernelFingerprint, BadFingerprint> {
        match u64::from_str_radix(s, 16) {
            Ok(v) if s.len() == 16 => Ok(KernelFingerprint(v)),
            _ => Err(BadFingerprint(s.to_string())),
        }
    }
}

text::text_serde!(KernelFingerprint);

/// A config that does not belong to its workload's space.
#[derive(Debug, thiserror::Error)]
#[error("operator `{op}`, kernel {variant}: the config is not a point of its schedule space")]
pub struct CodegenError {
    pub op: String,
    pub variant: String,
    #[source]
    pub source: Box<ConfigError>,
}

/// The configs a specialisation is built with: `config` (`None`: the space's
/// default config), and configs tuned for particular CPUs or kernel thread
/// counts, which the kernel picks over it at run time: the first variant whose
/// [`Selector`] matches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Choice {
    pub config: Option<Config>,
    pub variants: Vec<(Selector, Config)>,
}

impl From<Option<Config>> for Choice {
    fn from(config: Option<Config>) -> Choice {
        Choice {
            config,
            variants: Vec::new(),
        }
    }
}

/// A schedule of an operator's generic kernel: `config`, a point of the
/// operator's space at the shapes of `at` (its anchor: those it was tuned
/// at), lowered for symbolic shapes. A generic kernel may carry several
/// (shape buckets): a call runs the first whose `at` is a declared bucket
/// holding its shapes, else the one whose anchor is nearest them. Without any
/// it runs the default schedule, as the reference always does.
#[derive(Clone, Debug, PartialEq)]
pub struct GenericSchedule {
    pub at: Specialization,
    pub config: Config,
}

impl GenericSchedule {
    /// The schedules a build gives `op`'s generic kernel: the config chosen
    /// for each declared bucket, in their order; then the config chosen for
    /// each exact specialisation at its shapes, largest (by flops) first, a
    /// config that repeats one already listed left out (`choices` by
    /// specialisation, `None` meaning the space's default for `isa`, the level
    /// the tiled kernels are compiled for); without any, the space's default
    /// config at nominal shapes (every input size 64, else the largest power
    /// of two down to 8 that makes every size positive).
    pub fn for_operator(op: &Operator, choices: &[Choice], isa: Isa) -> Vec<GenericSchedule> {
        let specs = &op.specializations;
        let config = |i: usize| {
            let anchor = &specs[i].values;
            choices
                .get(i)
                .and_then(|c| c.config.clone())
                .unwrap_or_else(|| Space::new(op, anchor).default_config_for(op, anchor, isa))
        };
        let mut out: Vec<GenericSchedule> = (0..specs.len())
            .filter(|&i| specs[i].bucket.is_some())
            .map(|i| GenericSchedule {
                at: specs[i].clone(),
                config: config(i),
            })
            .collect();
        let mut exact: Vec<usize> = (0..specs.len())
            .filter(|&i| specs[i].bucket.is_none())
            .collect();
        let flops = |i: usize| op.flops(&specs[i].values);
        exact.sort_by(|a, b| flops(*b).total_cmp(&flops(*a)).then(a.cmp(b)));
        for i in exact {
            let config = config(i);
            if !out.iter().any(|g| g.config == config) {
                out.push(GenericSchedule {
                    at: specs[i].clone(),
                    config,
                });
            }
        }
        if out.is_empty() {
            let nominal = [64, 32, 16, 8].into_iter().find_map(|n| {
                let given: Vec<_> = op.input_shape_vars().map(|(v, _)| (v, n)).collect();
                op.resolve_shapes(&given)
                    .filter(|values| values.iter().all(|x| *x > 0))
            });
            if let Some(anchor) = nominal {
                let config = Space::new(op, &anchor).default_config_for(op, &anchor, isa);
                out.push(GenericSchedule {
                    at: Specialization::exact(anchor),
                    config,
                });
            }
        }
        out
    }
}

/// The C source of one variant of `op` under any symbol and runtime prefix:
/// the generic kernel with the default schedule (the reference), or a
/// specialisation with `config` (`None`: the space's default config). One
/// clone per level of `isas`.
pub fn kernel_c(
    op: &Operator,
    variant: Variant,
    config: Option<&Config>,
    isas: &[Isa],
    symbol: String,
    runtime: String,
) -> Result<String, CodegenError> {
    let clones = lower_clones(op, variant, config, isas, symbol, runtime)?;
    Ok(clones_c(&clones))
}

/// [`emit::clones_c`], after the helpers of kept scratch where the kernel
/// keeps it (they define themselves once per file).
fn clones_c(clones: &[(Isa, loopnest::Kernel)]) -> String {
    let mut c = String::new();
    if let Some((_, k)) = clones.iter().find(|(_, k)| k.keeps_scratch) {
        c.push_str(&emit::kept_scratch_c(&k.runtime));
    }
    if let Some((_, k)) = clones.iter().find(|(_, k)| k.keeps_blocks()) {
        c.push_str(&emit::kept_blocks_c(&k.runtime));
    }
    let borrowed: Vec<(Isa, &loopnest::Kernel)> = clones.iter().map(|(isa, k)| (*isa, k)).collect();
    c.push_str(&emit::clones_c(&borrowed));
    c
}

/// The C source of `op`'s generic kernel with `schedules` (none: the default
/// schedule) under any symbol and runtime prefix: one tiled kernel per
/// schedule (`<symbol>__t<i>`), the default-schedule one (`<symbol>__naive`)
/// and a dispatcher on the call's sizes. The tiled kernels are compiled for
/// one level, `tiled` (the level their configs were tuned at), which keeps a
/// build's compile time near what its specialisations cost; a CPU below it
/// runs the default schedule, whose clones are those of `isas`.
pub fn generic_c(
    op: &Operator,
    schedules: &[GenericSchedule],
    isas: &[Isa],
    tiled: Isa,
    symbol: String,
    runtime: String,
) -> Result<String, CodegenError> {
    let lower = |plan: Option<&[space::StageSchedule]>, symbol| {
        lower::lower(op, Variant::Generic, plan, symbol, runtime.clone())
    };
    if schedules.is_empty() {
        return Ok(emit::kernel_c(&lower(None, symbol), isas));
    }
    let naive = lower(None, format!("{symbol}__naive"));
    let mut c = String::new();
    let mut buckets = Vec::new();
    let (mut helpers, mut block_helpers) = (false, false);
    for (i, g) in schedules.iter().enumerate() {
        let at = &g.at.values;
        let space = Space::new(op, at);
        let mut plan = plan(op, &space, Variant::Generic, at, Some(&g.config), tiled)?;
        stretch_whole_reductions(&space, &mut plan);
        let mut kernel = lower(Some(&plan), format!("{symbol}__t{i}"));
        // Its calls at odd and small shapes pad-copy: scratch kept per thread.
        kernel.keeps_scratch = !kernel.scratch.is_empty();
        if kernel.keeps_scratch && !helpers {
            c.push_str(&emit::kept_scratch_c(&runtime));
            helpers = true;
        }
        if kernel.keeps_blocks() && !block_helpers {
            c.push_str(&emit::kept_blocks_c(&runtime));
            block_helpers = true;
        }
        c.push_str(&emit::kernel_c(&kernel, &[tiled]));
        let anchor: Vec<(String, i64)> = op
            .input_shape_vars()
            .map(|(v, var)| (lower::c_ident(&var.name), g.at.values[v]))
            .collect();
        let range = g.at.bucket.as_ref().map(|_| {
            op.input_shape_vars()
                .map(|(v, var)| {
                    let (lo, hi) = g.at.range(v);
                    (lower::c_ident(&var.name), lo, hi)
                })
                .collect()
        });
        buckets.push(emit::Bucket {
            anchor,
            setup: kernel.setup.clone(),
            kernel: kernel.symbol,
            range,
            fit: tile_fit(op, &space, &plan, tiled),
        });
    }
    c.push_str(&emit::kernel_c(&naive, isas));
    // Calls no tiled kernel fits run the small-call schedule at the tiled
    // kernels' level (the default schedule below it).
    let lanes = tiled.max_lanes(op.dtype.size());
    let small = lower::lower_small(op, lanes, format!("{symbol}__small"), runtime.clone());
    if let Some(small) = &small {
        c.push_str(&emit::kernel_c(small, &[tiled]));
    }
    // What a call costs the default schedule: its loops and its buffers.
    let work = lower::iterations(op).plus(naive.setup.clone());
    let min_isa = (isas.last() != Some(&tiled)).then_some(tiled);
    let small = small.as_ref().map(|kernel| emit::Small {
        kernel,
        lanes,
        fit: lower::small_fit(op),
    });
    c.push_str(&emit::generic_dispatcher(
        &naive,
        small.as_ref(),
        &symbol,
        &work,
        &buckets,
        min_isa,
    ));
    Ok(c)
}

/// The register tile of `plan`'s main stage, the tiled stage with the most
/// iterations at the space's shapes (the first of equals), that a generic
/// kernel's dispatcher weighs a call against; compiled for `isa`.
fn tile_fit(
    op: &Operator,
    space: &Space,
    plan: &[space::StageSchedule],
    isa: Isa,
) -> emit::TileFit {
    let mut main: Option<(f64, usize, &space::TiledStage, &space::StagePlan)> = None;
    for (s, (kind, schedule)) in space.stages.iter().zip(plan).enumerate() {
        let (
            space::StageKind::Tiled(info) | space::StageKind::FusibleInto { own: info, .. },
            space::StageSchedule::Tiled(p),
        ) = (kind, schedule)
        else {
            continue;
        };
        let iterations: f64 = info
            .extents
            .iter()
            .chain(&info.reduce_extents)
            .map(|e| *e as f64)
            .product();
        if main.is_none_or(|(most, ..)| iterations > most) {
            main = Some((iterations, s, info, p));
        }
    }
    let Some((_, s, info, p)) = main else {
        return emit::TileFit::default();
    };
    let extents = lower::generic_extents(op, s);
    // Its accumulators at this ISA's width, one row of the vector operand
    // beside them, and the broadcast operand.
    let narrowed = p.narrowed(isa.max_lanes(op.dtype.size()));
    let row = narrowed
        .vector
        .map_or(1, |(v, w)| (narrowed.tile[v] / w as i64).max(1) as usize);
    // Lanes along the reduction that read an operand through a copy serve
    // only calls whose last spatial axis is narrow, as the space offers them.
    let copies = info.reduction_lanes.as_ref().is_some_and(|c| !c.is_empty());
    let narrow = info
        .n_spatial
        .checked_sub(1)
        .filter(|_| p.reduce_lanes.is_some() && copies)
        .map(|l| extents[l].clone());
    emit::TileFit {
        narrow,
        spills: narrowed.accumulators() + row + 1 > isa.vector_registers(),
        spatial: (0..info.n_spatial)
            .map(|a| (extents[a].clone(), p.tile[a]))
            .collect(),
        reduce: info
            .reduce_axes
            .iter()
            .zip(&p.split)
            .map(|(&a, &split)| (extents[a].clone(), split))
            .collect(),
    }
}

/// In a generic kernel, a reduction that its config runs whole at the anchor
/// stays whole up to twice the anchor's extent, instead of splitting a few
/// steps off into a second block: a conv tuned at C = 64, called at C = 68,
/// ran a second block of 4 channels whose accumulators reloaded lane by lane
/// from the NCHW output, a third of the call. Not under per-block packs,
/// whose arrays the split sizes.
fn stretch_whole_reductions(space: &Space, plan: &mut [space::StageSchedule]) {
    for (kind, schedule) in space.stages.iter().zip(plan.iter_mut()) {
        let (space::StageKind::Tiled(info) | space::StageKind::FusibleInto { own: info, .. }) =
            kind
        else {
            continue;
        };
        let space::StageSchedule::Tiled(p) = schedule else {
            continue;
        };
        if p.reads.contains(&space::Read::PackBlock) {
            continue;
        }
        for (split, &whole) in p.split.iter_mut().zip(&info.reduce_extents) {
            if *split >= whole {
                *split = 2 * whole;
            }
        }
    }
}

/// `variant` of `op` with `config` lowered for each level of `isas`, its
/// vectors no wider than the level's registers ([`plan`]); levels whose
/// schedules agree share one lowering.
fn lower_clones(
    op: &Operator,
    variant: Variant,
    config: Option<&Config>,
    isas: &[Isa],
    symbol: String,
    runtime: String,
) -> Result<Vec<(Isa, loopnest::Kernel)>, CodegenError> {
    // One space for every level: only the plan's vectors (and the default) differ.
    let space = match variant {
        Variant::Generic => None,
        Variant::Specialized(i) => {
            let shapes = &op.specializations[i].values;
            Some((Space::new(op, shapes), shapes))
        }
    };
    let mut out: Vec<(Isa, Option<Vec<StageSchedule>>, loopnest::Kernel)> = Vec::new();
    for &isa in isas {
        let schedule = match &space {
            None => None,
            Some((space, shapes)) => Some(plan(op, space, variant, shapes, config, isa)?),
        };
        let kernel = match out.iter().find(|(_, s, _)| *s == schedule) {
            Some((_, _, k)) => k.clone(),
            None => lower::lower(
                op,
                variant,
                schedule.as_deref(),
                symbol.clone(),
                runtime.clone(),
            ),
        };
        out.push((isa, schedule, kernel));
    }
    Ok(out.into_iter().map(|(isa, _, k)| (isa, k)).collect())
}

/// `config` (`None`: the default for `isa`) of `space`, the space of `op` at
/// `shapes`, decoded into per-stage plans for `variant` at `isa`: no vector
/// wider than its registers hold of `op`'s elements
/// ([`StageSchedule::narrowed`]).
fn plan(
    op: &Operator,
    space: &Space,
    variant: Variant,
    shapes: &[i64],
    config: Option<&Config>,
    isa: Isa,
) -> Result<Vec<space::StageSchedule>, CodegenError> {
    let default;
    let config = match config {
        Some(c) => c,
        None => {
            default = space.default_config_for(op, shapes, isa);
            &default
        }
    };
    let lanes = isa.max_lanes(op.dtype.size());
    let plan = space.plan(op, config).map_err(|source| CodegenError {
        op: op.name.clone(),
        variant: mangle::variant_name(op, variant),
        source: Box::new(source),
    })?;
    Ok(plan.iter().map(|s| s.narrowed(lanes)).collect())
}

/// The C source of one variant of a package's operator, under its real symbol
/// (without the file header).
pub fn variant_c(
    pkg: &Package,
    op: &Operator,
    variant: Variant,
    config: Option<&Config>,
    isas: &[Isa],
) -> Result<String, CodegenError> {
    kernel_c(
        op,
        variant,
        config,
        isas,
        mangle::kernel_symbol(pkg, op, variant),
        mangle::runtime_prefix(pkg),
    )
}

/// A specialisation with its choice of configs: [`variant_c`] of its config,
/// or, with variants, one kernel per config behind a dispatcher that asks the
/// runtime which CPU this is and how many threads the pool runs.
fn specialisation_c(
    pkg: &Package,
    op: &Operator,
    spec: usize,
    choice: &Choice,
    isas: &[Isa],
) -> Result<String, CodegenError> {
    let variant = Variant::Specialized(spec);
    if choice.variants.is_empty() {
        return variant_c(pkg, op, variant, choice.config.as_ref(), isas);
    }
    let symbol = mangle::kernel_symbol(pkg, op, variant);
    let runtime = mangle::runtime_prefix(pkg);
    let any = lower_clones(
        op,
        variant,
        choice.config.as_ref(),
        isas,
        format!("{symbol}__any"),
        runtime.clone(),
    )?;
    let mut c = clones_c(&any);
    let mut dispatch = Vec::new();
    for (i, (selector, config)) in choice.variants.iter().enumerate() {
        let clones = lower_clones(
            op,
            variant,
            Some(config),
            isas,
            format!("{symbol}__v{i}"),
            runtime.clone(),
        )?;
        c.push_str(&clones_c(&clones));
        dispatch.push((selector, clones[0].1.symbol.clone()));
    }
    c.push_str(&emit::dispatcher(&any[0].1, &symbol, &dispatch));
    Ok(c)
}

/// The C file of one operator of a package: the header, each specialisation
/// with its choice of configs, and the generic kernel with `generic`, its
/// tiled kernels compiled for `tiled` (see [`generic_c`]).
pub fn operator_c(
    pkg: &Package,
    op: &Operator,
    choices: &[Choice],
    generic: &[GenericSchedule],
    isas: &[Isa],
    tiled: Isa,
) -> Result<String, CodegenError> {
    let runtime = mangle::runtime_prefix(pkg);
    let mut c = emit::file_header(&format!("operator `{}`", op.name), op.dtype, &runtime);
    // A bucket has no kernel of its own: it is a schedule of the generic one; a
    // specialisation a blocked variant serves has none either (the variant's).
    let served = op.served_blocked();
    for (i, spec) in op.specializations.iter().enumerate() {
        if spec.bucket.is_none() && !served[i] {
            let choice = choices.get(i).cloned().unwrap_or_default();
            c.push_str(&specialisation_c(pkg, op, i, &choice, isas)?);
        }
    }
    c.push_str(&generic_c(
        op,
        generic,
        isas,
        tiled,
        mangle::kernel_symbol(pkg, op, Variant::Generic),
        runtime,
    )?);
    Ok(c)
}
