//! Every point of the schedule space is correct: random configs of every
//! operator of the language test set (`tests/src/ops.rs`), at its specialised
//! shapes and at random odd shapes (and of its padded operators, with their
//! padded reads guarded in place), compiled as the build compiles them and
//! checked against the reference; the reference itself (the generic kernel) is
//! checked against the IR interpreter.
//!
//! `AUTOTUNE_PROPTEST_CASES` sets the configs per workload (default 2),
//! `AUTOTUNE_PROPTEST_SEED` the seed; `AUTOTUNE_TUNE_ISA=avx2|baseline` runs the same
//! test on the fallback ISA levels.

use std::path::Path;

use autotune_codegen::lower::SMALL_GRAIN;
use autotune_codegen::space::StageSchedule;
use autotune_codegen::Workload;
use autotune_codegen::{Config, KnobKind, KnobName, Space, Value};
use autotune_lang::ir::{Operator, Specialization};
use autotune_tune::measure::{self, ErrorClass};
use autotune_tune::parallel::on_every_core;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod common;

fn test_ops() -> Vec<Operator> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/src");
    let text = std::fs::read_to_string(dir.join("ops.rs")).unwrap();
    let file = syn::parse_file(&text).expect("the test set parses");
    // With the blocked variants of operators that declare `blocked(...)`.
    autotune_lang::find_tensor_ops(&file)
        .into_iter()
        .map(|f| autotune_lang::parse_operator(f.attr, f.item).expect("the test set parses"))
        .flat_map(|op| {
            let variants = op.blocked_variants().into_iter().map(|v| v.op);
            std::iter::once(op.clone()).chain(variants)
        })
        .collect()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether the wrapper accepts `op` at `values`: shapes whose unpadded reads
/// may leave their tensors are refused (`Operator::read_out_of_bounds`, the
/// bounds the wrapper checks), so the tests skip them. So are shapes too large
/// to interpret in a test's time (every size 47 of a conv's six axes is 10¹⁰
/// steps: CI's seed 1251427437 drew one). (Running the interpreter on zeros
/// instead took most of a minute of one core per test in CI's debug build.)
fn reads_stay_inside(op: &Operator, values: &[i64]) -> bool {
    const STEPS: i64 = 1 << 24;
    let steps = op.stages.iter().try_fold(0i64, |sum, stage| {
        let points = stage
            .axes
            .iter()
            .try_fold(1i64, |n, a| n.checked_mul(a.extent.value(values).max(1)))?;
        sum.checked_add(points)
    });
    steps.is_some_and(|n| n <= STEPS) && op.read_out_of_bounds(values).is_none()
}

/// The op with one more specialisation at random odd sizes (1..=40).
fn with_random_shape(op: &Operator, rng: &mut StdRng) -> Option<Operator> {
    for _ in 0..20 {
        let given: Vec<(usize, i64)> = op
            .input_shape_vars()
            .map(|(v, _)| (v, [1, 3, 5, 7, 9, 17, 19, 33][rng.gen_range(0..8)]))
            .collect();
        if let Some(values) = op.resolve_shapes(&given) {
            if values.iter().all(|v| *v > 0) && reads_stay_inside(op, &values) {
                let mut op = op.clone();
                op.specializations.push(Specialization::exact(values));
                return Some(op);
            }
        }
    }
    None
}

/// The op with one more specialisation at random sizes from `sizes`, the
/// interpreter's inputs valid (a shape whose reads leave their tensors is
/// refused by the wrapper) and no size negative.
fn with_shape_from(op: &Operator, sizes: &[i64], rng: &mut StdRng) -> Option<Operator> {
    for _ in 0..40 {
        let given: Vec<(usize, i64)> = op
            .input_shape_vars()
            .map(|(v, _)| (v, sizes[rng.gen_range(0..sizes.len())]))
            .collect();
        let Some(values) = op.resolve_shapes(&given) else {
            continue;
        };
        if values.iter().all(|v| *v >= 0) && reads_stay_inside(op, &values) {
            let mut op = op.clone();
            op.specializations.push(Specialization::exact(values));
            return Some(op);
        }
    }
    None
}

/// The generic kernel with a schedule is correct at every shape: random
/// sensible configs of each operator's space at its first specialisation (or
/// at a random shape), lowered for symbolic shapes, called at random shapes
/// (0, 1, primes, just below and above tile multiples), on two threads,
/// against the default-schedule reference.
#[test]
fn scheduled_generic_kernels_match_the_reference_at_random_shapes() {
    let cases = env_u64("AUTOTUNE_PROPTEST_CASES", 2) as usize;
    let seed = env_u64("AUTOTUNE_PROPTEST_SEED", 2026);
    println!("generic kernels: AUTOTUNE_PROPTEST_SEED={seed} AUTOTUNE_PROPTEST_CASES={cases}");
    let mut rng = StdRng::seed_from_u64(seed);
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("generic-{}", common::target().isa));
    const SIZES: [i64; 12] = [0, 1, 2, 3, 7, 13, 15, 16, 17, 31, 33, 47];
    // Every draw first, in order (the seed fixes them), then the checks on
    // every core.
    let mut jobs = Vec::new();
    for op in test_ops() {
        let anchor = match op.specializations.first() {
            Some(s) => s.values.clone(),
            None => match with_random_shape(&op, &mut rng) {
                Some(o) => o.specializations[0].values.clone(),
                None => continue,
            },
        };
        let space = Space::new(&op, &anchor);
        let mut configs = vec![space.default_config(&op, &anchor)];
        // The configs a tuner proposes (a generic kernel's config is a tuned one).
        configs.extend(
            (0..cases * 50)
                .map(|_| space.config_at(rng.gen_range(0..space.size())))
                .filter(|c| space.sensible(c))
                .take(cases),
        );
        // And the default with its operands packed per block.
        configs.extend(with_reads(&space, &configs[..1], BLOCK_PACKED));
        let Some(at) = with_shape_from(&op, &SIZES, &mut rng) else {
            continue;
        };
        let w = Workload {
            spec: at.specializations.len() - 1,
            op: at,
        };
        let dir = root.join(&op.name);
        jobs.push((w, anchor, configs, dir));
    }
    let empty = jobs.iter().filter(|j| j.0.shapes().contains(&0)).count();
    println!("generic kernels: {empty} shapes with a 0");
    let tallies = on_every_core(&jobs, |(w, anchor, configs, dir)| {
        check_generic(w, anchor, configs, dir, seed)
    });
    report("generic kernels", &tallies);
}

/// The small-call schedule (what a generic kernel runs where no tiled kernel
/// fits a call: vectors along the last axis, masked at its end, and rows
/// clamped to the last one) is correct at every shape: each operator of the
/// test set that takes it, called directly at random shapes (0, 1, primes,
/// just below and above a vector's lanes and the rows of its tiles), and once
/// at a shape large enough for its row tiles to run in chunks on two
/// threads, against the default-schedule reference. CI runs it again capped
/// at AVX2 or at the baseline, whose masked loads and stores are other code.
#[test]
fn small_call_kernels_match_the_reference_at_random_shapes() {
    let seed = env_u64("AUTOTUNE_PROPTEST_SEED", 2026);
    println!("small-call kernels: AUTOTUNE_PROPTEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("small-{}", common::target().isa));
    const SIZES: [i64; 14] = [0, 1, 2, 3, 4, 5, 6, 7, 13, 15, 16, 17, 33, 47];
    const LARGE: [i64; 9] = [3, 5, 17, 37, 61, 67, 97, 131, 257];
    let mut jobs = Vec::new();
    for op in test_ops() {
        let Some(anchor) = op.specializations.first().map(|s| s.values.clone()) else {
            continue;
        };
        let config = Space::new(&op, &anchor).default_config(&op, &anchor);
        let c = autotune_codegen::generic_c(
            &op,
            &[autotune_codegen::GenericSchedule {
                at: Specialization::exact(anchor),
                config: config.clone(),
            }],
            &[common::target().isa],
            common::target().isa,
            "CANDIDATE__generic".to_string(),
            measure::RUNTIME_PREFIX.to_string(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", op.name));
        if !c.contains("CANDIDATE__generic__small(") {
            continue;
        }
        // Three small calls on one thread, and one whose chunks of row tiles
        // run on two.
        let mut shapes: Vec<(Option<Operator>, usize)> = (0..3)
            .map(|_| (with_shape_from(&op, &SIZES, &mut rng), 1))
            .collect();
        let chunked = (0..50).find_map(|_| {
            with_shape_from(&op, &LARGE, &mut rng)
                .filter(|at| (2 * SMALL_GRAIN..1 << 20).contains(&most_iterations(at)))
        });
        shapes.push((chunked, 2));
        for (i, (at, threads)) in shapes.into_iter().enumerate() {
            let Some(at) = at else { continue };
            let w = Workload {
                spec: at.specializations.len() - 1,
                op: at,
            };
            let call = measure::call_at_shapes(&w, "CANDIDATE", "CANDIDATE__generic__small");
            let dir = root.join(format!("{}-{i}", op.name));
            jobs.push((w, c.clone() + &call, config.clone(), dir, threads));
        }
    }
    let ops: std::collections::BTreeSet<&str> = jobs.iter().map(|j| j.0.op.name.as_str()).collect();
    let parallel = jobs.iter().filter(|j| j.4 > 1).count();
    println!(
        "small-call kernels: {} shapes of {} operators, {parallel} of them in chunks on two threads",
        jobs.len(),
        ops.len()
    );
    assert!(ops.len() >= 5, "only {ops:?} take the small-call schedule");
    assert!(
        parallel >= 5,
        "only {parallel} calls run chunks in parallel"
    );
    let tallies = on_every_core(&jobs, |(w, c, config, dir, threads)| {
        let harness = tuning_harness(w, dir, seed);
        let timing = measure::TimingOptions {
            threads: *threads,
            ..Default::default()
        };
        let candidates = [measure::Candidate::Source(c.clone())];
        let t = check_batch(
            &harness,
            &candidates,
            std::slice::from_ref(config),
            dir,
            &timing,
            |_| format!("{} (the small-call schedule, seed {seed})", w.key()),
        );
        report_workload(w, &t, 1);
        t
    });
    let checked: usize = tallies.iter().map(|t| t.checked).sum();
    assert_eq!(checked, jobs.len(), "every shape is checked");
}

/// The iterations of `op`'s largest stage at its last specialisation.
fn most_iterations(op: &Operator) -> i64 {
    let values = &op.specializations.last().expect("a shape").values;
    op.stages
        .iter()
        .map(|s| s.axes.iter().map(|a| a.extent.value(values)).product())
        .max()
        .unwrap_or(0)
}

/// A harness for `w` in `dir` with tuning's limits. Correctness is checked
/// here, not compile time: a config of huge unrolled tiles (which the search
/// never proposes) is skipped and counted at those limits, as tuning records
/// and skips it.
fn tuning_harness(w: &Workload, dir: &Path, seed: u64) -> measure::Harness {
    let opts = autotune_tune::TuneOptions {
        seed,
        target: common::target(),
        ..Default::default()
    };
    // The objects kept across runs: most of these tests check the same
    // configs every run.
    let store = Path::new(env!("CARGO_TARGET_TMPDIR")).join("objects");
    autotune_tune::session::prepare_sharing(w, &opts, dir, &store)
        .unwrap_or_else(|e| panic!("{}: {e}", w.key()))
}

/// What checking a batch of configs found: how many were checked, how many
/// were skipped at tuning's limits (over its source size, or past its compile
/// time), and how many the C compiler miscompiled.
#[derive(Default)]
struct Tally {
    checked: usize,
    skipped: usize,
    miscompiled: usize,
}

/// Builds `candidates` (made from `configs`) with `harness` in `dir` and
/// checks each that compiled, on `timing`'s threads; a config over the source
/// limit or past the compile limit is skipped and counted, as tuning records
/// and skips it. A wrong result, or a crash (a read past an input faults),
/// fails the test unless the same C is right compiled without loop
/// if-conversion: then the compiler miscompiled it
/// (`Harness::without_if_conversion`; GCC 12 turned a border block's tested
/// copy into whole-vector loads past its input's end), which is counted and
/// printed, as tuning would skip it too. `what` names a config in a failure's
/// message.
fn check_batch(
    harness: &measure::Harness,
    candidates: &[measure::Candidate],
    configs: &[Config],
    dir: &Path,
    timing: &measure::TimingOptions,
    what: impl Fn(&Config) -> String,
) -> Tally {
    let batch = harness
        .build(candidates, dir)
        .unwrap_or_else(|e| panic!("{}: {e}", harness.workload.key()));
    let mut tally = Tally::default();
    for (i, c) in configs.iter().enumerate() {
        if let Some((ErrorClass::SourceTooLarge | ErrorClass::CompileTimeout, e)) = &batch.failed[i]
        {
            println!("{}: {e}, skipped", what(c));
            tally.skipped += 1;
            continue;
        }
        match batch.check(i, timing) {
            Ok(()) => tally.checked += 1,
            Err(e @ (measure::MeasureError::WrongResult(_) | measure::MeasureError::Crash(_))) => {
                let again = &dir.join("again");
                let without = common::right_without(harness, &e, &candidates[i..=i], again, timing)
                    .unwrap_or_else(|again| panic!("{}: {e} ({again})", what(c)));
                println!(
                    "{}: {e}, but right without {without}: miscompiled by {}, skipped",
                    what(c),
                    measure::compiler_version()
                );
                tally.miscompiled += 1;
            }
            Err(e) => panic!("{}: {e}", what(c)),
        }
    }
    tally
}

/// Sums the tallies of a test's workloads. How many configs hit the compile
/// time limit depends on the machine and its load, so it is printed, not
/// asserted; a test that checked almost nothing fails.
fn report(test: &str, tallies: &[Tally]) {
    let checked: usize = tallies.iter().map(|t| t.checked).sum();
    let skipped: usize = tallies.iter().map(|t| t.skipped).sum();
    let miscompiled: usize = tallies.iter().map(|t| t.miscompiled).sum();
    println!(
        "{test}: {checked} configs checked, {skipped} skipped at tuning's limits, \
         {miscompiled} miscompiled by the C compiler"
    );
    assert!(checked > 50, "{test}: only {checked} configs checked");
}

/// One workload's tally, printed; fewer than `at_least` configs checked fails
/// it (the configs a test names must be; random ones may pass a loaded
/// machine's compile limit).
fn report_workload(w: &Workload, t: &Tally, at_least: usize) {
    println!(
        "{}: {} configs checked, {} skipped at tuning's limits, {} miscompiled",
        w.key(),
        t.checked,
        t.skipped,
        t.miscompiled
    );
    assert!(
        t.checked >= at_least,
        "{}: too few configs checked",
        w.key()
    );
}

/// Checks the generic kernel of `w`'s operator with each of `configs` (of the
/// space at `anchor`) at `w`'s shapes, on two threads.
fn check_generic(w: &Workload, anchor: &[i64], configs: &[Config], dir: &Path, seed: u64) -> Tally {
    let timing = measure::TimingOptions {
        threads: 2,
        ..Default::default()
    };
    let harness = tuning_harness(w, dir, seed);
    // The generic kernel's tiled path, called directly: at these sizes its
    // dispatcher would mostly pick the default schedule.
    let candidates: Vec<measure::Candidate> = configs
        .iter()
        .map(|config| {
            let g = autotune_codegen::GenericSchedule {
                at: Specialization::exact(anchor.to_vec()),
                config: config.clone(),
            };
            let c = autotune_codegen::generic_c(
                &w.op,
                &[g],
                &[common::target().isa],
                common::target().isa,
                "CANDIDATE__generic".to_string(),
                measure::RUNTIME_PREFIX.to_string(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", w.op.name));
            measure::Candidate::Source(
                c + &measure::call_at_shapes(w, "CANDIDATE", "CANDIDATE__generic__t0"),
            )
        })
        .collect();
    check_batch(&harness, &candidates, configs, dir, &timing, |c| {
        format!(
            "{} (generic, config {c} of the space at {anchor:?}, seed {seed})",
            w.key()
        )
    })
}

#[test]
fn config_index_bijection_and_text_roundtrip() {
    let mut rng = StdRng::seed_from_u64(7);
    for op in test_ops() {
        for spec in &op.specializations {
            let space = Space::new(&op, &spec.values);
            assert!(space.size() > 1, "{}: the space has choices", op.name);
            for _ in 0..50 {
                let i = rng.gen_range(0..space.size());
                let c = space.config_at(i);
                assert_eq!(space.index_of(&c), Ok(i), "{}", op.name);
                let text = c.to_string();
                assert_eq!(text.parse::<Config>().unwrap(), c, "{}: {text}", op.name);
                space
                    .plan(&op, &c)
                    .expect("every config of the space decodes");
            }
            let d = space.default_config(&op, &spec.values);
            space
                .index_of(&d)
                .expect("the default config is in the space");
        }
    }
}

/// Each ISA level's default config fits its registers: vectors as wide as the
/// level's, and a register tile (in them) of at most 18 accumulators in
/// AVX-512's 32 registers, 12 in the 16 of AVX2 and the baseline. (The
/// AVX-512 default, 6 × 3 vectors of 16 floats, was 36 vectors of 8 in an
/// AVX2 clone: spilled, half the speed of 6 × 2 on matmul 1024³.)
#[test]
fn default_configs_fit_their_levels_registers() {
    use autotune_codegen::space::StageSchedule;
    use autotune_codegen::Isa;
    for op in test_ops() {
        for spec in &op.specializations {
            let space = Space::new(&op, &spec.values);
            for (isa, most) in [(Isa::Avx512, 18), (Isa::Avx2, 12), (Isa::Baseline, 12)] {
                let d = space.default_config_for(&op, &spec.values, isa);
                space
                    .index_of(&d)
                    .expect("the default config is in the space");
                assert!(space.sensible(&d), "{} at {isa}: default {d}", op.name);
                let lanes = isa.max_lanes(op.dtype.size());
                for s in space.plan(&op, &d).unwrap() {
                    let StageSchedule::Tiled(p) = s.narrowed(lanes) else {
                        continue;
                    };
                    assert!(
                        p.accumulators() <= most,
                        "{} at {isa}: default {d} has {} accumulators",
                        op.name,
                        p.accumulators()
                    );
                    if let Some((_, w)) = p.vector {
                        assert!(w <= lanes, "{} at {isa}: default {d}", op.name);
                    }
                }
            }
        }
    }
}

/// A vector wholly past the end of its axis computes nothing that is kept: no
/// config with one is sensible (so no search proposes it), and no default
/// config has one.
#[test]
fn sensible_configs_keep_every_vector_on_its_axis() {
    use autotune_codegen::space::StageKind;
    let (mut past, mut lanes_past) = (0, 0);
    for op in test_ops() {
        for spec in &op.specializations {
            let space = Space::new(&op, &spec.values);
            let default = space.default_config(&op, &spec.values);
            assert!(space.sensible(&default), "{}: default {default}", op.name);
            for (s, kind) in space.stages.iter().enumerate() {
                let (StageKind::Tiled(info) | StageKind::FusibleInto { own: info, .. }) = kind
                else {
                    continue;
                };
                let knob = |name: String| space.knobs.iter().find(|k| k.name.to_string() == name);
                let Some(vector) = knob(format!("{}.vector", info.prefix)) else {
                    continue;
                };
                // Lanes along the reduction beyond its innermost axis: only the
                // remainder's single steps would run.
                if let Some(&r) = info.reduce_axes.last() {
                    let e = *info.reduce_extents.last().unwrap();
                    let name = &op.stages[s].axes[r].name;
                    for choice in &vector.choices {
                        let Value::Name(v) = choice else { continue };
                        let Some(w) = v
                            .strip_prefix(name.as_str())
                            .and_then(|w| w.parse::<i64>().ok())
                        else {
                            continue;
                        };
                        let mut c = default.clone();
                        c.0.insert(vector.name.clone(), choice.clone());
                        if w > e {
                            lanes_past += 1;
                            assert!(
                                !space.sensible(&c),
                                "{}: {c} has lanes past its reduction",
                                op.name
                            );
                        }
                    }
                }
                for (a, axis) in op.stages[s].spatial_axes().iter().enumerate() {
                    let tile = knob(format!("{}.tile.{}", info.prefix, axis.name)).unwrap();
                    for choice in &vector.choices {
                        let Value::Name(v) = choice else { continue };
                        let Some(w) = v
                            .strip_prefix(axis.name.as_str())
                            .and_then(|w| w.parse::<i64>().ok())
                        else {
                            continue;
                        };
                        for t in &tile.choices {
                            let Value::Int(t) = t else { continue };
                            let mut c = default.clone();
                            c.0.insert(vector.name.clone(), choice.clone());
                            c.0.insert(tile.name.clone(), Value::Int(*t));
                            let tiled = matches!(
                                space.plan(&op, &c).unwrap()[s],
                                autotune_codegen::space::StageSchedule::Tiled(_)
                            );
                            if tiled && (t - 1) * w >= info.extents[a] {
                                past += 1;
                                assert!(
                                    !space.sensible(&c),
                                    "{}: {c} has a vector past its axis",
                                    op.name
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(past > 0, "the test set has tiles that could overhang");
    assert!(
        lanes_past > 0,
        "the test set has reductions shorter than some lanes"
    );
}

/// Dead knobs: a fused epilogue's own, and the `pack` knobs of a stage whose
/// lanes run along its reduction (its operands are read in place).
#[test]
fn canonical_index_ignores_dead_knobs() {
    let op = test_ops()
        .into_iter()
        .find(|o| o.name == "dense_bias_relu")
        .unwrap();
    let spec = op.specializations[0].values.clone();
    let space = Space::new(&op, &spec);
    let c_of = |i: u128| {
        autotune_codegen::kernel_c(
            &op,
            autotune_lang::mangle::Variant::Specialized(0),
            Some(&space.config_at(i)),
            &[common::target().isa],
            "k".into(),
            "p".into(),
        )
        .unwrap()
    };
    let mut rng = StdRng::seed_from_u64(3);
    let (mut fused, mut along, mut neither) = (0, 0, 0);
    for _ in 0..300 {
        let i = rng.gen_range(0..space.size());
        let canon = space.canonical(i);
        assert_eq!(space.canonical(canon), canon, "idempotent");
        let c = space.config_at(i);
        let live = space.live_knobs(&space.digits(i));
        let dead_in = |stage: &str| {
            space
                .knobs
                .iter()
                .zip(&live)
                .any(|(k, l)| !l && k.name.stage == stage)
        };
        let is = |knob: &str, v: &str| c.get(knob).map(|v| v.to_string()).as_deref() == Some(v);
        let fuses = is("y.fuse", "1");
        let lanes = c
            .get("y.vector")
            .is_some_and(|v| v.to_string().starts_with('k'));
        if fuses {
            fused += 1;
            assert!(dead_in("output"));
        }
        if lanes {
            along += 1;
            let packs_dead = space.knobs.iter().zip(&live).all(|(k, &l)| {
                let pack = k.name.stage == "y" && matches!(k.name.kind, KnobKind::Pack(_));
                !(pack && l)
            });
            assert!(packs_dead, "y's pack knobs are dead with lanes along k");
        }
        if (fuses && fused <= 5) || (lanes && along <= 5) {
            assert_eq!(c_of(i), c_of(canon), "dead knobs do not change the code");
        }
        if !fuses && !lanes {
            neither += 1;
            assert!(live.iter().all(|&l| l));
            assert_eq!(canon, i, "with the epilogue unfused every knob counts");
        }
    }
    assert!(
        fused > 0 && along > 0 && neither > 0,
        "{fused} {along} {neither}"
    );
}

/// A matrix times a vector reads no operand along its output: its default
/// runs the lanes along the reduction, where both operands are rows. A GEMM
/// is not offered them (`b[k][j]` runs along `j`).
#[test]
fn a_matrix_times_a_vector_defaults_to_lanes_along_its_reduction() {
    let plan_of = |name: &str| {
        let op = test_ops().into_iter().find(|o| o.name == name).unwrap();
        let shapes = op.specializations[0].values.clone();
        let space = Space::new(&op, &shapes);
        let c = space.default_config(&op, &shapes);
        let plan = space.plan(&op, &c).unwrap();
        let StageSchedule::Tiled(p) = &plan[0] else {
            panic!("{name} is tiled")
        };
        (p.clone(), c)
    };
    let (gemv, c) = plan_of("gemv");
    assert!(gemv.reduce_lanes.is_some() && gemv.vector.is_none(), "{c}");
    let (gemm, c) = plan_of("matmul");
    assert!(gemm.reduce_lanes.is_none() && gemm.vector.is_some(), "{c}");
}

#[test]
fn gemm_1024_space_is_large() {
    let op = test_ops().into_iter().find(|o| o.name == "matmul").unwrap();
    let values = op
        .resolve_shapes(
            &op.input_shape_vars()
                .map(|(v, _)| (v, 1024))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let space = Space::new(&op, &values);
    assert!(space.size() >= 1_000_000, "{} configs", space.size());
}

#[test]
fn random_configs_match_the_reference() {
    let cases = env_u64("AUTOTUNE_PROPTEST_CASES", 2) as usize;
    let seed = env_u64("AUTOTUNE_PROPTEST_SEED", 2026);
    // The seed reproduces a failure: AUTOTUNE_PROPTEST_SEED=<seed> AUTOTUNE_PROPTEST_CASES=<n>.
    println!("random configs: AUTOTUNE_PROPTEST_SEED={seed} AUTOTUNE_PROPTEST_CASES={cases}");
    let mut rng = StdRng::seed_from_u64(seed);
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("space-{}", common::target().isa));
    // Every draw first, in order (the seed fixes them), then the checks on
    // every core.
    let mut jobs = Vec::new();
    let (mut guarded_configs, mut block_configs, mut merged_configs) = (0, 0, 0);
    let (mut ahead_configs, mut in_order_configs) = (0, 0);
    let mut lane_configs = 0;
    for op in test_ops() {
        let Some(op) = with_random_shape(&op, &mut rng) else {
            continue;
        };
        for spec in 0..op.specializations.len() {
            let w = Workload {
                op: op.clone(),
                spec,
            };
            let space = Space::new(&op, w.shapes());
            let mut configs = vec![space.default_config(&op, w.shapes())];
            configs.extend((0..cases).map(|_| space.config_at(rng.gen_range(0..space.size()))));
            // The default and the first draw again with every padded read
            // guarded in place, where the space offers it, and again with every
            // operand under the reduction packed per block, and packed whole
            // with its next slice prefetched (or in the order it reads).
            let first = &configs[..2.min(configs.len())];
            let with_guards = with_reads(&space, first, GUARDED);
            let with_blocks = with_reads(&space, first, BLOCK_PACKED);
            let with_ahead = with_reads(&space, first, AHEAD);
            // (Only the first draw copied in read order: that copy is the
            // copy in tile order with its loops reordered.)
            let with_in_order = with_reads(&space, &first[first.len() - 1..], IN_ORDER);
            let mut with_merges = with_merged_axes(&space, &op, first, &mut rng);
            with_merges.extend(with_reads(&space, &with_merges, PACKED));
            with_merges.extend(with_reads(
                &space,
                &with_merges[..1.min(with_merges.len())],
                BLOCK_PACKED,
            ));
            with_merges.extend(with_reads(
                &space,
                &with_merges[..1.min(with_merges.len())],
                GUARDED,
            ));
            let with_lanes = with_lanes_on_reduction(&space, &op, first, &mut rng);
            lane_configs += with_lanes.len();
            configs.extend(with_lanes);
            guarded_configs += with_guards.len();
            block_configs += with_blocks.len();
            ahead_configs += with_ahead.len();
            in_order_configs += with_in_order.len();
            merged_configs += with_merges.len();
            configs.extend(with_guards);
            configs.extend(with_blocks);
            configs.extend(with_ahead);
            configs.extend(with_in_order);
            configs.extend(with_merges);
            let dir = root.join(format!("{}-{spec}", op.name));
            jobs.push((w, configs, dir));
        }
    }
    println!(
        "random configs: {guarded_configs} with guarded border tiles, {block_configs} packed per block, \
         {ahead_configs} prefetching ahead, {in_order_configs} copied in read order, \
         {merged_configs} with two spatial axes merged, {lane_configs} with lanes along a reduction"
    );
    assert!(
        lane_configs >= 10,
        "{lane_configs} configs with lanes along a reduction"
    );
    assert!(guarded_configs >= 10, "{guarded_configs} guarded configs");
    assert!(block_configs >= 20, "{block_configs} block-packed configs");
    assert!(
        ahead_configs >= 20,
        "{ahead_configs} configs prefetching ahead"
    );
    assert!(
        in_order_configs >= 20,
        "{in_order_configs} configs copied in read order"
    );
    assert!(merged_configs >= 10, "{merged_configs} merged configs");
    let tallies = on_every_core(&jobs, |(w, configs, dir)| {
        check_configs(w, configs, dir, seed)
    });
    report("random configs", &tallies);
}

/// Checks `configs` of `w` in `dir` against its reference, and the reference
/// against the interpreter.
fn check_configs(w: &Workload, configs: &[Config], dir: &Path, seed: u64) -> Tally {
    let op = &w.op;
    let harness = tuning_harness(w, dir, seed);
    let candidates: Vec<measure::Candidate> = configs
        .iter()
        .cloned()
        .map(measure::Candidate::Config)
        .collect();
    // The harness's reference (the generic kernel) against the interpreter.
    let inputs: Vec<Vec<f64>> = (0..op.inputs.len())
        .map(|i| measure::read_output(&dir.join(format!("in{i}.bin")), op.dtype).unwrap())
        .collect();
    let want = autotune_lang::eval::evaluate(op, w.shapes(), &inputs).unwrap();
    let got = measure::read_output(&dir.join("reference.bin"), op.dtype).unwrap();
    measure::compare(&got, &want, op.dtype)
        .unwrap_or_else(|e| panic!("{} reference: {e}", w.key()));
    check_batch(
        &harness,
        &candidates,
        configs,
        dir,
        &Default::default(),
        |c| format!("{} with config {c} (seed {seed})", w.key()),
    )
}

/// `pack.N` values: packed whole; read in place with guarded border tiles;
/// packed per block.
const PACKED: i64 = 1;
const GUARDED: i64 = 2;
const BLOCK_PACKED: i64 = 3;
/// Packed whole, the copy's next slice prefetched.
const AHEAD: i64 = 4;
/// Packed whole, the copy's loops in the order it reads its operand.
const IN_ORDER: i64 = 5;

/// The configs of `space` with every load site that the space lets read as
/// `pack.N = read` set to do so; none if it has no such site.
fn with_reads(space: &Space, configs: &[Config], read: i64) -> Vec<Config> {
    let knobs: Vec<_> = space
        .knobs
        .iter()
        .filter(|k| {
            k.choices.contains(&Value::Int(read)) && matches!(k.name.kind, KnobKind::Pack(_))
        })
        .map(|k| k.name.clone())
        .collect();
    if knobs.is_empty() {
        return Vec::new();
    }
    configs
        .iter()
        .map(|c| {
            let mut c = c.clone();
            for k in &knobs {
                c.0.insert(k.clone(), Value::Int(read));
            }
            c
        })
        .collect()
}

/// The configs of `space` with a random order that merges two spatial axes
/// (`h*w`) and no vector on them, where the space offers one: only those whose
/// plan keeps the merge.
fn with_merged_axes(
    space: &Space,
    op: &Operator,
    configs: &[Config],
    rng: &mut StdRng,
) -> Vec<Config> {
    let mut out = Vec::new();
    for c in configs {
        let mut c = c.clone();
        for k in space
            .knobs
            .iter()
            .filter(|k| k.name.kind == KnobKind::Order)
        {
            let merged: Vec<&Value> = k
                .choices
                .iter()
                .filter(|v| matches!(v, Value::Name(o) if o.contains('*')))
                .collect();
            if merged.is_empty() {
                continue;
            }
            c.0.insert(
                k.name.clone(),
                merged[rng.gen_range(0..merged.len())].clone(),
            );
            // The vector on an axis outside the pair, or none.
            let vector = KnobName::new(&k.name.stage, KnobKind::Vector);
            c.0.insert(vector, Value::Name("none".into()));
        }
        let keeps = |c: &Config| {
            space.plan(op, c).is_ok_and(|plan| {
                plan.iter()
                    .any(|s| matches!(s, StageSchedule::Tiled(p) if p.merge.is_some()))
            })
        };
        if keeps(&c) {
            out.push(c);
        }
    }
    out
}

/// The configs of `space` with the vector of every stage that may have it
/// along its innermost reduction there (random lanes of those offered), its
/// operands read in place: only those whose plan has such lanes.
fn with_lanes_on_reduction(
    space: &Space,
    op: &Operator,
    configs: &[Config],
    rng: &mut StdRng,
) -> Vec<Config> {
    let lanes = |c: &Config| -> usize {
        space.plan(op, c).map_or(0, |plan| {
            plan.iter()
                .filter(|s| matches!(s, StageSchedule::Tiled(p) if p.reduce_lanes.is_some()))
                .count()
        })
    };
    let mut out = Vec::new();
    for c in configs {
        let mut c = c.clone();
        for k in space
            .knobs
            .iter()
            .filter(|k| k.name.kind == KnobKind::Vector)
        {
            let along: Vec<&Value> = k
                .choices
                .iter()
                .filter(|v| {
                    let mut with = c.clone();
                    with.0.insert(k.name.clone(), (*v).clone());
                    lanes(&with) > lanes(&c)
                })
                .collect();
            if along.is_empty() {
                continue;
            }
            c.0.insert(k.name.clone(), along[rng.gen_range(0..along.len())].clone());
            for p in space.knobs.iter().filter(|p| {
                p.name.stage == k.name.stage && matches!(p.name.kind, KnobKind::Pack(_))
            }) {
                c.0.insert(p.name.clone(), Value::Int(0));
            }
        }
        if lanes(&c) > 0 {
            out.push(c);
        }
    }
    out
}

/// The invariant the tiled lowering keeps (ARCHITECTURE.md): the inner
/// reduction loops of a register tile never test bounds, except in a border
/// tile's code, which a tile runs only when its reads may leave their tensor,
/// and in the one masked step that ends a block of lanes along a reduction.
/// Random configs of every operator of the test set, lowered, walked.
#[test]
fn only_border_tiles_test_bounds_in_the_inner_loops() {
    use autotune_codegen::loopnest::{opens_border_tile, opens_masked_rest, Stmt, VExpr};
    use autotune_lang::mangle::Variant;

    /// Guarded loads in `e`.
    fn guarded_loads(e: &VExpr) -> usize {
        match e {
            VExpr::Load { guard, .. } | VExpr::MaskedLoad { guard, .. } => {
                usize::from(!guard.is_empty())
            }
            VExpr::Splat(a, _) | VExpr::Unary(_, a) | VExpr::Horizontal(_, a) => guarded_loads(a),
            VExpr::Binary(_, a, b) => guarded_loads(a) + guarded_loads(b),
            VExpr::Horizontals(_, vs) => vs.iter().map(guarded_loads).sum(),
            VExpr::Const(_) | VExpr::FromIndex(_) | VExpr::Local(_) | VExpr::Lane(..) => 0,
        }
    }
    /// Where a guarded load may be: in a border tile's code or a masked step.
    #[derive(Clone, Copy)]
    enum Exempt {
        Border,
        MaskedRest,
    }
    /// Guarded loads in the inner reduction loops (`ri__*`) of `body`: in
    /// border tiles, elsewhere, in masked steps.
    fn walk(body: &[Stmt], in_ri: bool, exempt: Option<Exempt>, found: &mut [usize; 3]) {
        for s in body {
            let value = match s {
                Stmt::For { var, body, .. } => {
                    walk(body, in_ri || var.starts_with("ri__"), exempt, found);
                    continue;
                }
                Stmt::Parallel { body, .. } => {
                    walk(body, in_ri, exempt, found);
                    continue;
                }
                Stmt::If {
                    then, otherwise, ..
                } => {
                    let masked = opens_masked_rest(then).then_some(Exempt::MaskedRest);
                    walk(then, in_ri, exempt.or(masked), found);
                    let border = opens_border_tile(otherwise).then_some(Exempt::Border);
                    walk(otherwise, in_ri, exempt.or(border), found);
                    continue;
                }
                Stmt::Local { init: v, .. }
                | Stmt::Assign { value: v, .. }
                | Stmt::SetLane { value: v, .. }
                | Stmt::Store { value: v, .. }
                | Stmt::MaskedStore { value: v, .. } => v,
                Stmt::Let { .. }
                | Stmt::Comment(_)
                | Stmt::Array { .. }
                | Stmt::StoreRows { .. }
                | Stmt::Prefetch { .. } => continue,
            };
            if in_ri {
                let at = match exempt {
                    Some(Exempt::Border) => 0,
                    None => 1,
                    Some(Exempt::MaskedRest) => 2,
                };
                found[at] += guarded_loads(value);
            }
        }
    }

    let mut rng = StdRng::seed_from_u64(env_u64("AUTOTUNE_PROPTEST_SEED", 2026));
    let mut found = [0; 3];
    for op in test_ops() {
        for spec in 0..op.specializations.len() {
            let w = Workload {
                op: op.clone(),
                spec,
            };
            let space = Space::new(&op, w.shapes());
            let drawn: Vec<Config> = (0..20)
                .map(|_| space.config_at(rng.gen_range(0..space.size())))
                .collect();
            let with_guards = with_reads(&space, &drawn, GUARDED);
            let with_blocks = with_reads(&space, &drawn, BLOCK_PACKED);
            for config in drawn.iter().chain(&with_guards).chain(&with_blocks) {
                let plan = space.plan(&op, config).unwrap();
                let kernel = autotune_codegen::lower::lower(
                    &op,
                    Variant::Specialized(spec),
                    Some(&plan),
                    "k".to_string(),
                    "rt".to_string(),
                );
                let before = found[1];
                walk(&kernel.body, false, None, &mut found);
                assert_eq!(
                    found[1],
                    before,
                    "{}: config {config} tests bounds in its inner loops outside a border tile",
                    w.key()
                );
            }
        }
    }
    // (The walk sees the border tiles' and masked steps' tests: it would see
    // any other.)
    assert!(found[0] > 0, "no border tile tested a read");
    assert!(found[2] > 0, "no masked step tested a read");
}

/// A block of lanes along a reduction that is not a whole number of vectors
/// ends in one step with its reads masked where masked lanes add nothing to
/// the sum (`a[i][k] * x[k]`: at 424×3×79 the single steps it replaced took a
/// third of a GEMM's call), and in single steps into a scalar where they
/// might (`(a[i][k] + 1) * x[k]`, a max); each, generic at lengths around a
/// vector's lanes, against the reference. (Whole tiles of rows read their
/// operands in place, so a lane read past the end faults; 7 rows read copies.)
#[test]
fn lanes_along_a_reduction_end_in_one_masked_step_where_masked_lanes_add_nothing() {
    use autotune_codegen::loopnest::MASKED_REST;
    let ops = [
        ("sum(|k| a[i][k] * x[k])", true),
        ("sum(|k| (a[i][k] + 1.0) * x[k])", false),
        ("max(|k| a[i][k] * x[k])", false),
    ];
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("masked-rest-{}", common::target().isa));
    let mut jobs = Vec::new();
    for (i, (body, masked)) in ops.iter().enumerate() {
        let w = common::workload(
            "specialize(M = 8, K = 64), specialize(M = 8, K = 1), specialize(M = 16, K = 15), \
             specialize(M = 8, K = 17), specialize(M = 16, K = 79), specialize(M = 7, K = 33)",
            &format!(
                "pub fn gemv(a: Tensor<f32, (M, K)>, x: Tensor<f32, K>) -> Tensor<f32, M> {{
                    compute(|i| {body})
                }}"
            ),
        );
        let anchor = w.op.specializations[0].values.clone();
        let space = Space::new(&w.op, &anchor);
        let config = space.default_config(&w.op, &anchor);
        let plan = space.plan(&w.op, &config).unwrap();
        assert!(
            matches!(&plan[0], StageSchedule::Tiled(p) if p.reduce_lanes.is_some()),
            "{body}: {config} runs no lanes along the reduction"
        );
        let at_79 = &w.op.specializations[4].values;
        let at_79_config = Space::new(&w.op, at_79).default_config(&w.op, at_79);
        for c in [
            generic_at_anchor(&w, config.clone()),
            autotune_codegen::kernel_c(
                &w.op,
                autotune_lang::mangle::Variant::Specialized(4),
                Some(&at_79_config),
                &[autotune_codegen::Isa::Avx512],
                "k".to_string(),
                "rt".to_string(),
            )
            .unwrap(),
        ] {
            assert_eq!(c.contains(MASKED_REST), *masked, "{body}");
            assert_eq!(!c.contains("rest__0"), *masked, "{body}");
        }
        // And with half a vector's lanes at the widest level (AVX-512's
        // masked loads of 256 bits).
        let half = (common::target().isa.max_lanes(4) / 2).max(4);
        let narrow = config_with(&w, &[("output.vector", &format!("k{half}"))]);
        for spec in 1..w.op.specializations.len() {
            for (c, config) in [&config, &narrow].into_iter().enumerate() {
                let at = Workload {
                    op: w.op.clone(),
                    spec,
                };
                let dir = root.join(format!("{i}-{spec}-{c}"));
                jobs.push((at, anchor.clone(), config.clone(), dir));
            }
        }
    }
    let tallies = on_every_core(&jobs, |(w, anchor, config, dir)| {
        let t = check_generic(w, anchor, std::slice::from_ref(config), dir, 2026);
        report_workload(w, &t, 1);
        t
    });
    assert_eq!(tallies.iter().map(|t| t.checked).sum::<usize>(), jobs.len());
}

/// With lanes along a reduction, a register tile's accumulators combine their
/// lanes in groups of a power of two, one tree of shuffles a group
/// (`VExpr::Horizontals`): tiles of 1 to 32 accumulators (3 = 2 + 1,
/// 15 = 8 + 4 + 2 + 1, 32 = two or four whole vectors' worth), in one block of
/// the reduction or several (partial sums stored between), sums (one masked
/// step) and a max (single steps), in `f32` and `f64` (a vector of 512 bits
/// combined whole, a narrower one halved first), at a vector's lanes and half
/// of them, generic at sizes around the tiles, against the reference. A lane of the
/// wrong accumulator, or of a half-combined block, fails the check.
#[test]
fn a_tiles_accumulators_along_a_reduction_combine_their_lanes_together() {
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lane-sums-{}", common::target().isa));
    let mut jobs = Vec::new();
    for (b, (body, t)) in [
        ("sum(|k| a[i][k] * b[j][k])", "f32"),
        ("max(|k| a[i][k] * b[j][k])", "f32"),
        ("sum(|k| a[i][k] * b[j][k])", "f64"),
    ]
    .iter()
    .enumerate()
    {
        let w = common::workload(
            "specialize(M = 16, N = 4, K = 64), specialize(M = 7, N = 3, K = 79), \
             specialize(M = 13, N = 5, K = 17), specialize(M = 1, N = 1, K = 1), \
             specialize(M = 33, N = 7, K = 130)",
            &format!(
                "pub fn dots(a: Tensor<{t}, (M, K)>, b: Tensor<{t}, (N, K)>) -> Tensor<{t}, (M, N)> {{
                    compute(|i, j| {body})
                }}"
            ),
        );
        let anchor = w.op.specializations[0].values.clone();
        let lanes = common::target().isa.max_lanes(w.op.dtype.size());
        let mut configs = Vec::new();
        for vector in [lanes.max(4), (lanes / 2).max(4)] {
            for (ti, tj, split) in [(1, 1, 64), (1, 3, 64), (5, 3, 16), (4, 4, 64), (8, 4, 16)] {
                let config = config_with(
                    &w,
                    &[
                        ("output.vector", &format!("k{vector}")),
                        ("output.tile.i", &ti.to_string()),
                        ("output.tile.j", &tj.to_string()),
                        ("output.split.k", &split.to_string()),
                    ],
                );
                let c = generic_at_anchor(&w, config.clone());
                assert_eq!(c.contains("at_hreds_"), ti * tj > 1, "{body}: {config}");
                configs.push(config);
            }
        }
        for spec in 1..w.op.specializations.len() {
            let at = Workload {
                op: w.op.clone(),
                spec,
            };
            let dir = root.join(format!("{b}-{spec}"));
            jobs.push((at, anchor.clone(), configs.clone(), dir));
        }
    }
    let tallies = on_every_core(&jobs, |(w, anchor, configs, dir)| {
        let t = check_generic(w, anchor, configs, dir, 2026);
        report_workload(w, &t, configs.len());
        t
    });
    let want: usize = jobs.iter().map(|j| j.2.len()).sum();
    assert_eq!(tallies.iter().map(|t| t.checked).sum::<usize>(), want);
}

/// The generic kernel of `w` with one schedule, `config` at its first
/// specialisation's shapes, for AVX-512.
fn generic_at_anchor(w: &Workload, config: Config) -> String {
    autotune_codegen::generic_c(
        &w.op,
        &[autotune_codegen::GenericSchedule {
            at: w.op.specializations[0].clone(),
            config,
        }],
        &[autotune_codegen::Isa::Avx512],
        autotune_codegen::Isa::Avx512,
        "k".to_string(),
        measure::RUNTIME_PREFIX.to_string(),
    )
    .unwrap()
}

/// A 3×3 conv (`R = 3, S = 3` fixed by the attribute) specialised at C = K = 16.
fn conv3x3_16() -> Workload {
    common::workload(
        "R = 3, S = 3, specialize(C = 16, H = 8, W = 8, K = 16)",
        "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>) -> Tensor<f32, (K, H, W)> {
            compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]))
        }",
    )
}

/// The generic kernel of [`conv3x3_16`] with its space's default config at
/// its anchor.
fn conv3x3_16_generic() -> String {
    let w = conv3x3_16();
    let at = &w.op.specializations[0].values;
    let config = Space::new(&w.op, at).default_config(&w.op, at);
    generic_at_anchor(&w, config)
}

/// A size the attribute fixes (`R = 3`) is a constant in the generic kernel's
/// loops, as in a specialisation's: as a run-time variable it reached the
/// reduction's bounds and indices, and the generic 3×3 conv ran at 0.6× its
/// specialisation at the same shapes and config.
#[test]
fn sizes_the_attribute_fixes_are_constants_in_the_generic_kernel() {
    let c = conv3x3_16_generic();
    let loops: Vec<&str> = c
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("for (int64_t ri__r = 0;") || l.starts_with("for (int64_t r = 0;")
        })
        .collect();
    assert!(!loops.is_empty(), "no loop over r");
    for l in loops {
        assert!(l.contains(" < 3;"), "{l}");
    }
}

/// A generic kernel's load whose index steps along the innermost reduction
/// in its last dimension (a 3×3 window's `v + s`) adds that loop's variable
/// after the symbolic row stride: `origin + stride + s + 1` and
/// `origin + stride + (s + 1)` are then one element to GCC once it unrolls
/// `s`, loaded once. With `s` in the origin they were two loads (the generic
/// conv at C6's shapes and config: 134 GFLOP/s, 154 since).
#[test]
fn a_generic_window_load_adds_the_inner_step_after_the_row_stride() {
    let c = conv3x3_16_generic();
    // Site 0 is x, the window.
    let origins: Vec<&str> = c
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("const int64_t ix__0 ="))
        .collect();
    assert!(!origins.is_empty(), "no origin index of x");
    for l in origins {
        assert!(!l.contains("ri__s"), "{l}");
    }
    assert!(
        c.lines()
            .any(|l| l.contains("[ix__0 + ") && l.contains(" + ri__s + ")),
        "no load of x adds the step"
    );
    // Not without a window: a GEMM's `a[i][k]`, read in place, keeps `k` in
    // its origin (moved out, it cost the 127×255×511 kernel a sixth).
    let gemm = generic_at_anchor(
        &common::gemm(127, 255, 511),
        PACKED_PER_BLOCK_127.parse().unwrap(),
    );
    let a = gemm
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("const int64_t ix__0 ="))
        .expect("the origin index of a");
    assert!(a.contains("ri__k"), "{a}");
}

/// A generic kernel's overhanging tile stores (and reloads) each vector whose
/// row and lanes lie inside the output whole, testing lanes one by one only
/// in the vector that crosses the edge: lane by lane throughout, a 14×359×14
/// GEMM (every tile over its 16 rows) ran at 41 GFLOP/s, 47 since.
#[test]
fn a_generic_border_tile_stores_whole_vectors_inside_the_output() {
    let w = common::gemm(127, 255, 511);
    let c = generic_at_anchor(&w, PACKED_PER_BLOCK_127.parse().unwrap());
    let lines: Vec<&str> = c.lines().map(str::trim).collect();
    let whole = lines.windows(3).any(|l| {
        l[0] == "if (base__i + 1 < M) {"
            && l[1] == "if (base__j + 15 < N) {"
            && l[2].starts_with("*(at_v16u *)&out[(base__i + 1) * N + base__j] = ")
    });
    assert!(whole, "no whole-vector store of the tile's second row");
}

/// A reduction a config runs whole at its anchor runs whole in the generic
/// kernel up to twice the anchor's extent: a conv tuned at C = 64 and called at
/// C = 68 had run a second block of 4 channels (68,64,226: 71 GFLOP/s, 101 since).
#[test]
fn a_reduction_run_whole_at_the_anchor_is_not_split_just_above_it() {
    let w = conv3x3_16();
    let at = &w.op.specializations[0].values;
    let config = Space::new(&w.op, at).default_config(&w.op, at);
    assert_eq!(
        config.get("output.split.c"),
        Some(&Value::Int(16)),
        "{config}"
    );
    let c = generic_at_anchor(&w, config);
    let stage = c
        .lines()
        .find(|l| l.contains("/* stage output: tiled"))
        .expect("the tiled stage's comment");
    assert!(stage.contains("split c=32;"), "{stage}");
}

/// A config of GEMM 127×255×511 that packs B per block (511 × 64), as its
/// 1-thread entry on the Intel Xeon does.
const PACKED_PER_BLOCK_127: &str = "output.block.i=8 output.block.j=2 output.order=/i-j \
    output.pack.0=0 output.pack.1=3 output.parallel=0 output.split.k=511 output.tile.i=16 \
    output.tile.j=2 output.unroll=2 output.vector=j16";

/// A generic kernel's border block copies only the rows of the reduction the
/// call has: at K = 14 the 511-row block of the 127×255×511 entry had zeroed
/// 497 rows per block, and ran 14×359×14 at 7.9 GFLOP/s against 55 since.
#[test]
fn a_border_block_copies_only_the_rows_the_call_has() {
    let w = common::gemm(127, 255, 511);
    let c = generic_at_anchor(&w, PACKED_PER_BLOCK_127.parse().unwrap());
    let lines: Vec<&str> = c.lines().map(str::trim).collect();
    let pack = lines
        .iter()
        .position(|l| l.starts_with("/* pack b for this block"))
        .expect("a per-block pack of b");
    let border = pack
        + lines[pack..]
            .iter()
            .position(|l| *l == "} else {")
            .expect("the border block's copy");
    // Its loops: over k, then the block's tiles of j, then a tile's lanes,
    // each bounded as the register tile's own loops over them are.
    let (k, tiles) = (lines[border + 1], lines[border + 2]);
    // The bound of `for (init; var < bound; step) {`.
    let bound = |l: &str| -> String {
        let cond = l.split("; ").nth(1).unwrap_or_else(|| panic!("{l}"));
        cond.split_once(" < ")
            .unwrap_or_else(|| panic!("{l}"))
            .1
            .to_string()
    };
    assert!(k.starts_with("for (") && k.contains("K - k0__"), "{k}");
    let reduction = bound(
        lines
            .iter()
            .find(|l| l.starts_with("for (int64_t ri__k = (") && l.ends_with("++ri__k) {"))
            .expect("the register tile's last steps over k"),
    );
    assert_eq!(bound(k), reduction);
    let tile_loop = bound(
        lines
            .iter()
            .find(|l| l.starts_with("for (int64_t b__j = 0;"))
            .expect("the register tiles' loop over j"),
    );
    assert!(tiles.starts_with("for ("), "{tiles}");
    assert_eq!(bound(tiles), tile_loop);
}

/// A generic kernel whose config packs an operand per block keeps a whole
/// block's array: its dispatcher weighs those copies, at a whole block each,
/// against the call's work, so that a call smaller than a block runs another
/// kernel (7×82×4 had run 6× slower than the default schedule through a
/// 511 × 64 block of B).
#[test]
fn the_dispatcher_weighs_per_block_copies() {
    let w = common::gemm(127, 255, 511);
    let c = generic_at_anchor(&w, PACKED_PER_BLOCK_127.parse().unwrap());
    // The block's stack array, and the dispatcher's weight of its kernel.
    let block: i64 = c
        .lines()
        .find_map(|l| {
            let l = l.trim();
            let size = l
                .strip_prefix("float ")?
                .split_once('[')?
                .1
                .split_once(']')?
                .0;
            l.contains("__attribute__((aligned(64)))")
                .then(|| size.parse().ok())
                .flatten()
        })
        .expect("a per-block pack's array");
    assert!(block >= 511 * 64, "{block}");
    let case = c
        .lines()
        .find(|l| l.trim_start().starts_with("if (") && l.ends_with(" < work__) {"))
        .expect("the dispatcher's weighing of the tiled kernel");
    assert!(
        case.contains(&format!("{block}")),
        "the dispatcher does not weigh the {block}-element block copy: {case}"
    );
}

/// A bucket whose accumulators and a row of its vector operand need more
/// vector registers than the ISA has (16 × 2 zmm for the 127×255×511 config,
/// 35 of 32) is weighed down by its dispatcher; the default config's 6 × 3
/// (22) is not.
#[test]
fn the_dispatcher_weighs_down_a_register_tile_that_spills() {
    let w = common::gemm(127, 255, 511);
    let fit = |config: Config| -> String {
        let c = generic_at_anchor(&w, config);
        let line = c
            .lines()
            .find(|l| l.trim_start().starts_with("const double fit = "))
            .expect("the dispatcher's fit of the tiled kernel");
        line.trim().to_string()
    };
    let spills = fit(PACKED_PER_BLOCK_127.parse().unwrap());
    assert!(spills.ends_with(" * 0.8;"), "{spills}");
    let space = Space::new(&w.op, w.shapes());
    let fits = fit(space.default_config(&w.op, w.shapes()));
    assert!(!fits.contains("0.8"), "{fits}");
}

/// Generic kernels of operators with constant inputs keep their copies of
/// them in the handle's slot, found again by the sizes the copies read: a
/// GEMM with `b` constant and a 3×3 conv with its weights and bias constant,
/// each config checked at random shapes (the measurement program checks the
/// second call through the handles, which reads the first one's copies).
#[test]
fn generic_kernels_match_the_reference_through_their_kept_constant_copies() {
    let seed = env_u64("AUTOTUNE_PROPTEST_SEED", 2026);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("generic-constants");
    const SIZES: [i64; 8] = [1, 2, 3, 7, 13, 16, 17, 33];
    let ops = [gemm_constant(16, 32, 24), conv3x3_constant(8, 8, 16)];
    let mut jobs = Vec::new();
    for w in ops {
        let (op, anchor) = (&w.op, w.shapes().to_vec());
        let space = Space::new(op, &anchor);
        let mut configs = vec![space.default_config(op, &anchor)];
        configs.extend(
            (0..200)
                .map(|_| space.config_at(rng.gen_range(0..space.size())))
                .filter(|c| space.sensible(c))
                .take(2),
        );
        // Every operand packed whole: the constants' copies are kept.
        let packed = with_reads(&space, &configs[..1], 1);
        let c = generic_at_anchor(&w, packed[0].clone());
        assert!(
            c.contains("at_const_find_keyed("),
            "{}: no kept copies",
            op.name
        );
        configs.extend(packed);
        let at = with_shape_from(op, &SIZES, &mut rng).expect("a shape from SIZES");
        let w = Workload {
            spec: at.specializations.len() - 1,
            op: at,
        };
        jobs.push((w, anchor, configs, root.join(&op.name)));
    }
    let tallies = on_every_core(&jobs, |(w, anchor, configs, dir)| {
        check_generic(w, anchor, configs, dir, seed)
    });
    for (t, (w, ..)) in tallies.iter().zip(&jobs) {
        // The default and the packed config.
        report_workload(w, t, 2);
    }
}

/// Knobs of [`conv3x3_constant`]`(16, 7, 64)` whose nest reads the weights'
/// copy one tile of 16 output channels at a time, for every pair of rows (as
/// C12's 1-thread entry does).
const SLICE_BY_SLICE: [(&str, &str); 9] = [
    ("y.order", "k-v-h"),
    ("y.vector", "k16"),
    ("y.tile.k", "1"),
    ("y.tile.h", "2"),
    ("y.tile.v", "7"),
    ("y.block.k", "1"),
    ("y.block.h", "1"),
    ("y.block.v", "1"),
    ("y.parallel", "1"),
];

/// `w`'s default config with `knobs` set (text values), checked to be a
/// config of its space.
fn config_with(w: &Workload, knobs: &[(&str, &str)]) -> Config {
    let space = Space::new(&w.op, w.shapes());
    let mut config = space.default_config(&w.op, w.shapes());
    for (knob, value) in knobs {
        let value = value
            .parse()
            .map_or(Value::Name(value.to_string()), Value::Int);
        config.0.insert(knob.parse().unwrap(), value);
    }
    space.index_of(&config).expect("a config of the space");
    config
}

/// A GEMM whose `b` is a constant, at M×N×K.
fn gemm_constant(m: i64, n: i64, k: i64) -> Workload {
    common::workload(
        &format!("constant(b), specialize(M = {m}, N = {n}, K = {k})"),
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    )
}

/// A 3×3 conv + bias + ReLU whose weights and bias are constants, `c`
/// channels of `hw` × `hw` pixels in, `k` out.
fn conv3x3_constant(c: i64, hw: i64, k: i64) -> Workload {
    common::workload(
        &format!("constant(w, b), R = 3, S = 3, specialize(C = {c}, H = {hw}, W = {hw}, K = {k})"),
        common::CONV3X3_BIAS_RELU,
    )
}

/// Random configs of operators with constant inputs, each also with every
/// constant's copy prefetching its next slice ([`AHEAD`]), match the
/// reference (prefetches never change a result: what this checks is that
/// their code compiles and that nothing else of the kernel changed).
#[test]
fn copies_prefetching_their_next_slice_match_the_reference() {
    let seed = env_u64("AUTOTUNE_PROPTEST_SEED", 2026);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ahead");
    let mut jobs = Vec::new();
    // Each with a config whose nest reads the copy slice by slice (the GEMM's
    // B in four panels of 16 columns, the conv's weights in four tiles of 16
    // output channels), beside the default and random ones, which may not.
    let gemm = [
        ("output.order", "i-j"),
        ("output.vector", "j16"),
        ("output.tile.i", "4"),
        ("output.tile.j", "1"),
        ("output.block.i", "1"),
        ("output.block.j", "1"),
        ("output.parallel", "0"),
    ];
    let ops = [
        (gemm_constant(16, 64, 24), &gemm[..]),
        (conv3x3_constant(16, 7, 64), &SLICE_BY_SLICE[..]),
    ];
    for (w, slices) in ops {
        let (op, shapes) = (&w.op, w.shapes());
        let space = Space::new(op, shapes);
        let mut configs = vec![config_with(&w, slices), space.default_config(op, shapes)];
        configs.extend(
            (0..400)
                .map(|_| space.config_at(rng.gen_range(0..space.size())))
                .filter(|c| space.sensible(c))
                .take(3),
        );
        let ahead = with_reads(&space, &configs, AHEAD);
        assert_eq!(
            ahead.len(),
            configs.len(),
            "{}: no copy may prefetch",
            op.name
        );
        let prefetching = ahead
            .iter()
            .filter(|c| trace_copy(&w, c).prefetches > 0)
            .count();
        println!(
            "{}: {prefetching} of {} configs prefetch",
            op.name,
            ahead.len()
        );
        assert!(
            trace_copy(&w, &ahead[0]).prefetches > 0,
            "{}: a config reading the copy slice by slice does not prefetch",
            op.name
        );
        let dir = root.join(&op.name);
        jobs.push((w, ahead, dir));
    }
    let tallies = on_every_core(&jobs, |(w, configs, dir)| {
        check_configs(w, configs, dir, seed)
    });
    for (t, (w, ..)) in tallies.iter().zip(&jobs) {
        // The one reading the copy slice by slice, and the default.
        report_workload(w, t, 2);
    }
}

/// How a kernel's nest reads the copy of its first constant input, run as
/// index arithmetic (no values).
struct CopyTrace {
    /// Elements of the copy.
    elems: i64,
    prefetches: usize,
    /// Prefetches outside the copy.
    outside: usize,
    /// Cache lines of the copy the nest loads, and of those the ones it
    /// prefetched before its first load of them.
    lines_loaded: usize,
    lines_ahead: usize,
}

/// [`CopyTrace`] of `config` of `w` (a specialisation).
fn trace_copy(w: &Workload, config: &Config) -> CopyTrace {
    use autotune_codegen::loopnest::{IExpr, Stmt, VExpr};
    use std::collections::{HashMap, HashSet};

    fn eval(e: &IExpr, env: &HashMap<String, i64>) -> i64 {
        let (a, b) = match e {
            IExpr::Const(c) => return *c,
            IExpr::Var(v) => return *env.get(v).unwrap_or_else(|| panic!("{v} unbound")),
            IExpr::Add(a, b)
            | IExpr::Mul(a, b)
            | IExpr::Min(a, b)
            | IExpr::Max(a, b)
            | IExpr::Div(a, b)
            | IExpr::Mod(a, b) => (eval(a, env), eval(b, env)),
        };
        match e {
            IExpr::Add(..) => a + b,
            IExpr::Mul(..) => a * b,
            IExpr::Min(..) => a.min(b),
            IExpr::Max(..) => a.max(b),
            IExpr::Div(..) => a.div_euclid(b),
            _ => a.rem_euclid(b),
        }
    }
    struct Walk<'a> {
        buf: &'a str,
        env: HashMap<String, i64>,
        /// Per cache line: prefetched (and not yet loaded), loaded.
        prefetched: HashSet<i64>,
        loaded: HashSet<i64>,
        t: CopyTrace,
    }
    impl Walk<'_> {
        fn line(&self, index: i64) -> i64 {
            index.div_euclid(16)
        }
        fn load(&mut self, e: &VExpr) {
            match e {
                VExpr::Load { buf, index, .. } if buf == self.buf => {
                    let line = self.line(eval(index, &self.env));
                    if self.loaded.insert(line) {
                        self.t.lines_loaded += 1;
                        self.t.lines_ahead += usize::from(self.prefetched.contains(&line));
                    }
                }
                VExpr::Splat(a, _) | VExpr::Unary(_, a) | VExpr::Horizontal(_, a) => self.load(a),
                VExpr::Binary(_, a, b) => {
                    self.load(a);
                    self.load(b);
                }
                _ => {}
            }
        }
        fn run(&mut self, body: &[Stmt]) {
            for s in body {
                match s {
                    Stmt::For {
                        var,
                        start,
                        end,
                        step,
                        body,
                        ..
                    } => {
                        let (start, end) = (eval(start, &self.env), eval(end, &self.env));
                        for i in (start..end).step_by(*step as usize) {
                            self.env.insert(var.clone(), i);
                            self.run(body);
                        }
                    }
                    Stmt::Parallel { var, extent, body } => {
                        for i in 0..eval(extent, &self.env) {
                            self.env.insert(var.clone(), i);
                            self.run(body);
                        }
                    }
                    Stmt::Let { name, value } => {
                        let v = eval(value, &self.env);
                        self.env.insert(name.clone(), v);
                    }
                    Stmt::If {
                        conds,
                        then,
                        otherwise,
                    } => {
                        let holds = conds
                            .iter()
                            .all(|(a, b)| eval(a, &self.env) < eval(b, &self.env));
                        self.run(if holds { then } else { otherwise });
                    }
                    Stmt::Prefetch { buf, index } if buf == self.buf => {
                        let i = eval(index, &self.env);
                        self.t.prefetches += 1;
                        self.t.outside += usize::from(i < 0 || i >= self.t.elems);
                        self.prefetched.insert(self.line(i));
                    }
                    Stmt::Local { init: v, .. }
                    | Stmt::Assign { value: v, .. }
                    | Stmt::SetLane { value: v, .. }
                    | Stmt::Store { value: v, .. } => self.load(v),
                    _ => {}
                }
            }
        }
    }

    let kernel = lowered(w, config);
    let copy = &kernel.constants[0].buffers[0];
    let mut walk = Walk {
        buf: &copy.name,
        env: HashMap::new(),
        prefetched: HashSet::new(),
        loaded: HashSet::new(),
        t: CopyTrace {
            elems: copy.elems.as_const().expect("a specialisation's copy"),
            prefetches: 0,
            outside: 0,
            lines_loaded: 0,
            lines_ahead: 0,
        },
    };
    walk.run(&kernel.body);
    walk.t
}

/// A conv whose weights' copy is read slice by slice (four tiles of 16
/// output channels, each reused for every row of pixels): with `pack` 4,
/// every line of the three slices after the first is prefetched before the
/// nest first loads it, and no prefetch leaves the copy; with `pack` 1
/// (the same copy) nothing is.
#[test]
fn a_constant_copy_is_prefetched_a_slice_ahead_of_its_loads() {
    let w = conv3x3_constant(16, 7, 64);
    let mut config = config_with(&w, &SLICE_BY_SLICE);
    config
        .0
        .insert("y.pack.1".parse().unwrap(), Value::Int(AHEAD));
    let ahead = trace_copy(&w, &config);
    assert_eq!(ahead.outside, 0, "prefetches outside the copy");
    assert_eq!(ahead.lines_loaded as i64, ahead.elems / 16);
    assert_eq!(
        ahead.lines_ahead,
        ahead.lines_loaded * 3 / 4,
        "lines prefetched before their first load, of {}",
        ahead.lines_loaded
    );
    config.0.insert("y.pack.1".parse().unwrap(), Value::Int(1));
    let plain = trace_copy(&w, &config);
    assert_eq!((plain.prefetches, plain.lines_ahead), (0, 0));
    assert_eq!(plain.lines_loaded, ahead.lines_loaded);
}

/// A whole copy of a specialisation holds the tiles its extents need, not a
/// block's nominal count: blocks of 16 tiles of 6 rows over 16 rows are 3
/// tiles. (It held all 16, 6× the operand; a random conv config's copy came
/// to 14 GB and ran past the test's time limit, CI seed 1415832539.)
#[test]
fn a_whole_copy_holds_no_more_tiles_than_the_extent_needs() {
    let w = common::gemm(16, 64, 32);
    let config: Config = "output.block.i=16 output.block.j=1 output.order=i-j output.pack.0=1 \
                          output.pack.1=0 output.parallel=0 output.split.k=32 output.tile.i=6 \
                          output.tile.j=1 output.unroll=1 output.vector=j16"
        .parse()
        .unwrap();
    let kernel = lowered(&w, &config);
    let elems: Vec<i64> = kernel
        .scratch
        .iter()
        .map(|s| s.elems.as_const().expect("a specialisation's copy"))
        .collect();
    // A's copy: 3 tiles of 6 rows by K = 32.
    assert_eq!(elems, [3 * 6 * 32], "{:?}", kernel.scratch);
}

/// The loop nest of `config` of the specialisation `w`.
fn lowered(w: &Workload, config: &Config) -> autotune_codegen::loopnest::Kernel {
    let plan = Space::new(&w.op, w.shapes()).plan(&w.op, config).unwrap();
    autotune_codegen::lower::lower(
        &w.op,
        autotune_lang::mangle::Variant::Specialized(w.spec),
        Some(&plan),
        "k".to_string(),
        "rt".to_string(),
    )
}

/// A whole copy in the order it reads (`pack.1=5`) walks GEMM's B row after
/// row: its loops run over k outermost, then over the blocks and tiles of
/// columns, a tile's 32 columns innermost, where the copy in tile order runs
/// over the column blocks outermost. GEMM 1024³'s 1-thread entry ran 1–4%
/// faster so on the Intel Xeon (docs/performance.md).
#[test]
fn a_copy_in_read_order_walks_its_operand_row_after_row() {
    use autotune_codegen::loopnest::{IExpr, Stmt};
    let w = common::gemm(64, 256, 256);
    let copy_loops = |pack: &str| -> Vec<i64> {
        let config: Config = format!(
            "output.block.i=8 output.block.j=4 output.order=/j-i output.pack.0=0 \
             output.pack.1={pack} output.parallel=0 output.split.k=256 output.tile.i=8 \
             output.tile.j=2 output.unroll=4 output.vector=j16"
        )
        .parse()
        .unwrap();
        let kernel = lowered(&w, &config);
        let at = kernel
            .body
            .iter()
            .position(|s| matches!(s, Stmt::Comment(c) if c == "pack b in tile order"))
            .unwrap_or_else(|| panic!("pack.1={pack}: no copy of b"));
        let mut extents = Vec::new();
        let mut next = kernel.body.get(at + 1);
        while let Some(Stmt::For { end, body, .. }) = next {
            extents.push(match end {
                IExpr::Const(e) => *e,
                e => panic!("a specialisation's copy loop to {e:?}"),
            });
            next = body.first();
        }
        extents
    };
    // Blocks of 128 columns, the reduction's one block, tiles of 32 columns
    // in a block, k, a tile's columns.
    assert_eq!(copy_loops("1"), [2, 1, 4, 256, 32]);
    assert_eq!(copy_loops("5"), [256, 1, 2, 4, 32]);
}

/// A block's copy over the stack's limit (`pack.1=3`, GEMM's B per panel of
/// 128 columns over a reduction of 1024: 512 KiB) is made per block into the
/// thread's kept block buffer, taken once by the function that runs the nest
/// (the parallel body, or the kernel itself where no loop is parallel),
/// rather than copied whole before the nest; and the kernel matches the
/// reference at 1 and 2 threads. GEMM 1024³'s 1-thread entry ran 1.7-7.7%
/// faster so on the Intel Xeon (docs/performance.md).
#[test]
fn a_block_copy_over_the_stacks_limit_is_kept_per_thread() {
    use autotune_codegen::loopnest::Stmt;
    let w = common::gemm(16, 256, 1024);
    let configs: Vec<Config> = ["1", "0"]
        .iter()
        .map(|parallel| {
            format!(
                "output.block.i=1 output.block.j=4 output.order=/j-i output.pack.0=0 \
                 output.pack.1=3 output.parallel={parallel} output.split.k=1024 \
                 output.tile.i=8 output.tile.j=2 output.unroll=4 output.vector=j16"
            )
            .parse()
            .unwrap()
        })
        .collect();
    for config in &configs {
        let kernel = lowered(&w, config);
        assert!(
            kernel.scratch.is_empty(),
            "{config}: a whole copy: {:?}",
            kernel.scratch
        );
        assert_eq!(
            Stmt::kept_arrays(&kernel.body, true),
            [("pk__0_1", 4 * 32 * 1024)],
            "{config}: the block's copy"
        );
        let c = autotune_codegen::kernel_c(
            &w.op,
            autotune_lang::mangle::Variant::Specialized(w.spec),
            Some(config),
            &[autotune_codegen::Isa::Baseline],
            "k".to_string(),
            "rt".to_string(),
        )
        .unwrap();
        assert_eq!(
            c.matches("at_block_scratch(524288)").count(),
            1,
            "{config}: {c}"
        );
        assert!(
            !c.contains("pk__0_1[131072]"),
            "{config}: a stack array: {c}"
        );
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kept-block");
    let jobs: Vec<_> = [1, 2]
        .into_iter()
        .map(|threads| (threads, root.join(format!("t{threads}"))))
        .collect();
    let tallies = on_every_core(&jobs, |(threads, dir)| {
        let harness = tuning_harness(&w, dir, 2026);
        let timing = measure::TimingOptions {
            threads: *threads,
            ..Default::default()
        };
        let candidates: Vec<_> = configs
            .iter()
            .cloned()
            .map(measure::Candidate::Config)
            .collect();
        check_batch(&harness, &candidates, &configs, dir, &timing, |c| {
            format!("{} with config {c} at {threads} threads", w.key())
        })
    });
    for t in &tallies {
        report_workload(&w, t, 2);
    }
}

/// A 3×3 conv + bias + ReLU at C = 32, 10 × 10 pixels, K = 24: with a config
/// whose reduction runs in four blocks of 8 channels and whose vectors run
/// along the output channels (16 lanes 100 elements apart in the output, the
/// last vector over its edge), register tiles of 3 rows (over the edge of 10).
fn conv_split_along_k() -> (Workload, Config) {
    let w = common::workload(
        "R = 3, S = 3, specialize(C = 32, H = 10, W = 10, K = 24)",
        common::CONV3X3_BIAS_RELU,
    );
    let config = config_with(
        &w,
        &[
            ("y.vector", "k16"),
            ("y.split.c", "8"),
            ("y.tile.k", "1"),
            ("y.tile.h", "3"),
            ("y.tile.v", "5"),
            ("y.fuse", "1"),
        ],
    );
    (w, config)
}

/// A reduction split into blocks whose accumulators' lanes are strided in
/// the output keeps its partial sums apart, lanes innermost, and stores and
/// reloads each as one vector; the result still matches the reference, full
/// and overhanging tiles alike. Lane by lane through the output, that code
/// was most of such a candidate's C: a 256-channel conv's compiled in
/// 0.68–0.93 s, 0.42–0.46 since, and ran at 125–127 GFLOP/s, 136–143 since.
#[test]
fn split_reductions_keep_strided_partial_sums_apart_as_whole_vectors() {
    let (w, config) = conv_split_along_k();
    let c = autotune_codegen::kernel_c(
        &w.op,
        autotune_lang::mangle::Variant::Specialized(0),
        Some(&config),
        &[autotune_codegen::Isa::Avx512],
        "k".to_string(),
        measure::RUNTIME_PREFIX.to_string(),
    )
    .unwrap();
    let lines: Vec<&str> = c.lines().map(str::trim).collect();
    assert!(
        lines.iter().any(|l| l.starts_with("*(at_v16u *)&ps__")),
        "no partial sums stored whole"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("acc__0 = (*(const at_v16u *)&ps__")),
        "no partial sums reloaded whole"
    );
    // Only the final store writes the output (lane by lane: its lanes are
    // 100 elements apart), after the last block.
    let reloads = lines
        .iter()
        .filter(|l| l.starts_with("acc__") && l.contains("out["))
        .count();
    assert_eq!(reloads, 0, "partial sums reloaded from the output");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("partial-sums");
    let tally = check_configs(&w, &[config], &dir, 1);
    assert_eq!(tally.checked, 1, "checked: {}", tally.checked);
}

/// Where the reduction is short (a stride-2 1×1 conv's 64 channels), the
/// starts whose vector runs along the output channels take a power of two of
/// pixels along the row, which store by rows, and two vectors of channels
/// first (ResNet-18's C5 entry, 1.31× its earlier one); a 3×3 conv over 128
/// channels (1152 steps) keeps one vector and its longest row.
#[test]
fn short_reductions_start_from_tiles_that_store_rows() {
    use autotune_codegen::Isa;
    let starts = |attr: &str, src: &str| {
        let w = common::workload(attr, src);
        let space = Space::new(&w.op, w.shapes());
        let base = space.default_config(&w.op, w.shapes());
        space.register_tile_starts(&base, Isa::Avx512, 1)
    };
    // Vectors × rows × pixels per tile of the starts whose reducing stage
    // (whatever its name) has its vector along the output channels.
    let along_k = |cs: Vec<Config>| -> Vec<String> {
        cs.iter()
            .filter_map(|c| {
                let (vector, _) = c
                    .0
                    .iter()
                    .find(|(k, v)| k.to_string().ends_with(".vector") && v.to_string() == "k16")?;
                let stage = vector.to_string().replace(".vector", "");
                let tile = |axis: &str| {
                    c.get(&format!("{stage}.tile.{axis}"))
                        .map(|v| v.to_string())
                };
                Some(format!("{}x{}x{}", tile("k")?, tile("h")?, tile("v")?))
            })
            .collect()
    };
    let pointwise = along_k(starts(
        "OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1, specialize(C = 64, H = 56, W = 56, K = 128)",
        "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>) -> Tensor<f32, (K, OH, OW)> {
            compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c]))
        }",
    ));
    assert_eq!(
        pointwise.first().map(String::as_str),
        Some("2x2x4"),
        "{pointwise:?}"
    );
    let conv3x3 = along_k(starts(
        "R = 3, S = 3, specialize(C = 128, H = 28, W = 28, K = 128)",
        common::CONV3X3_BIAS_RELU,
    ));
    assert_eq!(
        conv3x3.first().map(String::as_str),
        Some("1x1x14"),
        "{conv3x3:?}"
    );
}

/// A tile whose vectors run along a conv's output channels (lanes strided in
/// NCHW) and that holds a power of two of pixels along the output row stores
/// them transposed: one `at_store_rows` per vector of channels, a row of
/// pixels per channel, where lane by lane each lane was an extract and a
/// store. Full tiles only (the row's last tile here overhangs W = 20 and
/// stores element-wise), and not for 5 pixels; every config matches the
/// reference. The stem's kernel (k16, 2 × 8 pixels) ran 180 → 205 GFLOP/s.
#[test]
fn tiles_along_a_strided_vector_store_rows_of_pixels() {
    let w = common::workload(
        "R = 3, S = 3, specialize(C = 16, H = 6, W = 20, K = 32)",
        common::CONV3X3_BIAS_RELU,
    );
    let c_of = |config: &Config, isa| {
        autotune_codegen::kernel_c(
            &w.op,
            autotune_lang::mangle::Variant::Specialized(0),
            Some(config),
            &[isa],
            "k".to_string(),
            measure::RUNTIME_PREFIX.to_string(),
        )
        .unwrap()
    };
    let mut configs = Vec::new();
    for (vector, lanes, pixels) in [
        ("k16", 16, 2),
        ("k16", 16, 4),
        ("k16", 16, 8),
        ("k16", 16, 16),
        ("k8", 8, 8),
        ("k16", 16, 5),
    ] {
        let config = config_with(
            &w,
            &[
                ("y.vector", vector),
                ("y.tile.k", "1"),
                ("y.tile.h", "2"),
                ("y.tile.v", &pixels.to_string()),
                ("y.fuse", "1"),
            ],
        );
        let call = format!("at_store_rows_v{lanes}x{pixels}(&out[");
        let c = c_of(&config, autotune_codegen::Isa::Avx512);
        let stored_by_rows = c.lines().any(|l| l.trim().starts_with(&call));
        assert_eq!(stored_by_rows, pixels != 5, "{config}");
        configs.push(config);
    }
    // AVX2's 8 lanes take the same store from its clone.
    let avx2 = c_of(&configs[4], autotune_codegen::Isa::Avx2);
    assert!(avx2.contains("at_store_rows_v8x8(&out["), "AVX2 clone");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("store-rows");
    let tally = check_configs(&w, &configs, &dir, 3);
    assert_eq!(tally.checked, configs.len(), "checked: {}", tally.checked);
}

/// The register-tile starts of a 3×3 conv include oneDNN's kernel shape:
/// output channels in one vector, a pixel tile of most of AVX-512's 32
/// registers, the weights copied with the next slice prefetched, the input
/// broadcast in place, the reduction whole and the epilogue fused; AVX2's
/// fit its 16 registers; a GEMM's first runs two vectors along its columns,
/// with the matrix it reads along them copied one block at a time inside
/// the reduction's blocks and only the columns' tiles parallel (GotoBLAS's
/// shape), or with the next slice prefetched where that matrix is a
/// constant, whose copy a handle keeps. Every start matches the reference.
#[test]
fn register_tile_starts_take_the_shape_of_a_hand_written_micro_kernel() {
    use autotune_codegen::Isa;
    let w = common::workload(
        "R = 3, S = 3, specialize(C = 24, H = 9, W = 10, K = 32)",
        common::CONV3X3_BIAS_RELU,
    );
    let space = Space::new(&w.op, w.shapes());
    let base = space.default_config(&w.op, w.shapes());
    let knob = |c: &Config, k: &str| c.get(k).map(|v| v.to_string()).unwrap_or_default();
    let int = |c: &Config, k: &str| knob(c, k).parse::<usize>().unwrap();
    let starts = space.register_tile_starts(&base, Isa::Avx512, 1);
    let onednn = starts.iter().find(|c| {
        knob(c, "y.vector") == "k16"
            && knob(c, "y.tile.k") == "1"
            && (12..=26).contains(&(int(c, "y.tile.h") * int(c, "y.tile.v")))
            && knob(c, "y.split.c") == "24"
            && knob(c, "y.pack.0") == "0"
            && knob(c, "y.pack.1") == AHEAD.to_string()
            && knob(c, "y.fuse") == "1"
            && knob(c, "y.order") == "k-h-v"
    });
    assert!(onednn.is_some(), "{}", listed(&starts));
    let avx2 = space.register_tile_starts(&base, Isa::Avx2, 1);
    assert!(!avx2.is_empty());
    for c in &avx2 {
        let acc = int(c, "y.tile.k") * int(c, "y.tile.h") * int(c, "y.tile.v");
        assert!((6..=12).contains(&acc), "{c}");
    }
    assert!(
        avx2.iter().any(|c| knob(c, "y.vector") == "k8"),
        "{}",
        listed(&avx2)
    );
    let gemm = common::gemm(24, 64, 40);
    let gspace = Space::new(&gemm.op, gemm.shapes());
    let gbase = gspace.default_config(&gemm.op, gemm.shapes());
    let gstarts = gspace.register_tile_starts(&gbase, Isa::Avx512, 1);
    let first = |starts: &[Config], pack: i64, order: &str, parallel: &str| {
        let c = starts.first().unwrap_or_else(|| panic!("no GEMM start"));
        assert_eq!(
            ["vector", "tile.j", "pack.0", "pack.1", "order", "parallel"]
                .map(|k| knob(c, &format!("output.{k}"))),
            ["j16", "2", "0", &pack.to_string(), order, parallel],
            "{}",
            listed(starts)
        );
    };
    first(&gstarts, BLOCK_PACKED, "/j-i", "1");
    let constant = common::workload(
        "constant(b), specialize(M = 24, N = 64, K = 40)",
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    );
    let cspace = Space::new(&constant.op, constant.shapes());
    let cbase = cspace.default_config(&constant.op, constant.shapes());
    first(
        &cspace.register_tile_starts(&cbase, Isa::Avx512, 1),
        AHEAD,
        "j-i",
        "2",
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("register-tile-starts");
    let tally = check_configs(&w, &starts, &dir, 1);
    assert_eq!(tally.checked, starts.len(), "checked: {}", tally.checked);
    let gdir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("register-tile-starts-gemm");
    let tally = check_configs(&gemm, &gstarts, &gdir, 1);
    assert_eq!(tally.checked, gstarts.len(), "checked: {}", tally.checked);
}

/// A GEMM's starts are ranked by their time per useful FMA, not by overhang
/// alone: one vector of rows loads a broadcast for each of its FMAs, so at
/// 200×300×400 two vectors of 10 or 8 rows (300 columns in 320) come before
/// one of 12 (in 304), which ran 0.80× them on 2 threads; and a vector down
/// C's columns (0.70–0.87× along its rows at every shape swept) comes after
/// the rows' even where its tiles fit exactly (96×1500×640). Where two
/// vectors overhang far more (64×200×300: 224 of 200 columns), one of 16
/// rows still comes first, as it ran 1.06–1.11× faster. On 2 threads the
/// columns' tiles, which run in parallel, count as well: at 333³, 11 tiles
/// of two vectors leave a thread a tile behind where 21 of one vector leave
/// it half a tile, and the one vector ran 1.22× faster.
#[test]
fn gemm_starts_rank_tiles_by_their_time_per_useful_fma() {
    use autotune_codegen::Isa;
    let first = |m, n, k, threads| {
        let g = common::gemm(m, n, k);
        let space = Space::new(&g.op, g.shapes());
        let base = space.default_config(&g.op, g.shapes());
        let starts = space.register_tile_starts(&base, Isa::Avx512, threads);
        let c = starts.first().cloned().expect("GEMM starts");
        let knob = |k: &str| c.get(k).map(|v| v.to_string()).unwrap_or_default();
        (
            knob("output.vector"),
            knob("output.tile.j"),
            listed(&starts),
        )
    };
    for (m, n, k, threads, vectors) in [
        (200, 300, 400, 1, "2"),
        (96, 1500, 640, 1, "2"),
        (64, 200, 300, 1, "1"),
        (333, 333, 333, 1, "2"),
        (333, 333, 333, 2, "1"),
    ] {
        let (vector, tile_j, all) = first(m, n, k, threads);
        assert_eq!(
            (vector.as_str(), tile_j.as_str()),
            ("j16", vectors),
            "{m}x{n}x{k}, {threads} threads:\n{all}"
        );
    }
}

/// A conv's start runs the vector axis's tiles alone in parallel where they
/// are more than the threads over a short reduction (a 1×1 conv's), as many
/// over one of at most 8 vectors of steps, or at least 8 a thread over a long
/// one; else the rows' tiles too. On 2 threads that ran ResNet-18's 1×1
/// stride-2 convs 1.18–1.42× and its 3×3 convs of 16–32 tiles 1.02–1.12×
/// faster, two tiles of a 1×1 conv over 48–96 channels 1.07–1.59×, where both
/// loops ran 3×3 convs of 4–12 tiles 1.00–1.04× faster, two tiles over the
/// stem's 147 steps 1.08× and a 3×3's 288 1.09×, and one tile 1.7–1.8×. Over
/// a short reduction, three vectors of channels come first where their tiles
/// split over the threads better than two's (96 channels: two tiles of 48
/// for two threads, 1.32–1.35× three tiles of 32).
#[test]
fn a_convs_start_runs_the_vector_axis_tiles_alone_in_parallel_where_they_are_enough() {
    use autotune_codegen::Isa;
    let conv1x1s2 = "pub fn conv(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>) -> Tensor<f32, (K, OH, OW)> {
        compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c]))
    }";
    let first = |attr: String, src: &str, threads: usize| {
        let w = common::workload(&attr, src);
        let space = Space::new(&w.op, w.shapes());
        let base = space.default_config(&w.op, w.shapes());
        let starts = space.register_tile_starts(&base, Isa::Avx512, threads);
        let s = starts.first().cloned().expect("conv starts");
        // The reducing stage's knobs, whatever its name.
        let knob = |k: &str| {
            s.0.iter()
                .find(|(n, _)| n.to_string().ends_with(k) && !n.to_string().starts_with("output."))
                .or_else(|| s.0.iter().find(|(n, _)| n.to_string().ends_with(k)))
                .map(|(_, v)| v.to_string())
                .unwrap_or_default()
        };
        (
            format!("{} x{}", knob(".vector"), knob(".tile.k")),
            knob(".parallel"),
            listed(&starts),
        )
    };
    // Each workload as its attribute and source.
    let conv3x3 = |c: i64, hw: i64, k: i64| {
        (
            format!("R = 3, S = 3, specialize(C = {c}, H = {hw}, W = {hw}, K = {k})"),
            common::CONV3X3_BIAS_RELU,
        )
    };
    let pointwise = |c: i64, hw: i64, k: i64| {
        (
            format!(
                "OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1, specialize(C = {c}, H = {hw}, W = {hw}, K = {k})"
            ),
            conv1x1s2,
        )
    };
    for ((attr, src), threads, vectors, parallel) in [
        (conv3x3(256, 14, 256), 2, "k16 x1", "1"),
        (conv3x3(128, 28, 128), 2, "k16 x1", "2"),
        (conv3x3(128, 28, 128), 1, "k16 x1", "1"),
        (conv3x3(16, 32, 32), 2, "k16 x2", "2"),
        (conv3x3(32, 32, 64), 2, "k16 x2", "2"),
        (pointwise(48, 40, 96), 2, "k16 x3", "1"),
        (pointwise(48, 40, 96), 1, "k16 x2", "1"),
        (pointwise(192, 20, 384), 2, "k16 x2", "1"),
        (pointwise(64, 56, 64), 2, "k16 x2", "1"),
        (pointwise(256, 28, 64), 2, "k16 x2", "2"),
    ] {
        let (vector, got, all) = first(attr.clone(), src, threads);
        assert_eq!(
            (vector.as_str(), got.as_str()),
            (vectors, parallel),
            "{attr}, {threads} threads:\n{all}"
        );
    }
}

/// Where no axis fills a vector (12 output channels of 11-pixel rows), the
/// starts put one in the axis whose tiles waste least with it: 16 pixels of
/// a row (11 used) times all 12 channels, its input read in place, which
/// ran a 44-channel conv at 81–83 GFLOP/s (43–48 with the input copied)
/// where a 96-trial search without it found 54. Every start matches the
/// reference.
#[test]
fn a_narrow_workload_starts_from_a_partly_filled_vector() {
    use autotune_codegen::Isa;
    let w = common::workload(
        "R = 3, S = 3, specialize(C = 20, H = 11, W = 11, K = 12)",
        common::CONV3X3_BIAS_RELU,
    );
    let space = Space::new(&w.op, w.shapes());
    let base = space.default_config(&w.op, w.shapes());
    let knob = |c: &Config, k: &str| c.get(k).map(|v| v.to_string()).unwrap_or_default();
    let starts = space.register_tile_starts(&base, Isa::Avx512, 1);
    let first = starts.first().expect("starts for a narrow workload");
    let tile: Vec<String> = ["k", "h", "v"]
        .map(|a| knob(first, &format!("y.tile.{a}")))
        .into();
    // The input, read along the vector, side by side and by no other tile
    // of channels, in place; the weights broadcast in place.
    assert_eq!(
        (
            knob(first, "y.vector").as_str(),
            tile.join("x").as_str(),
            knob(first, "y.pack.0").as_str(),
            knob(first, "y.pack.1").as_str()
        ),
        ("v16", "12x1x1", "0", "0"),
        "{}",
        listed(&starts)
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("register-tile-starts-narrow");
    let tally = check_configs(&w, &starts, &dir, 1);
    assert_eq!(tally.checked, starts.len(), "checked: {}", tally.checked);
}

fn listed(configs: &[Config]) -> String {
    configs.iter().map(|c| format!("{c}\n")).collect()
}
