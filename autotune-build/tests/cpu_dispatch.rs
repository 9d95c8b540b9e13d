//! Kernels carrying the configs of several CPUs pick theirs at run time: the
//! runtime's CPUID check agrees with `CpuId::detect` (or a config tuned here
//! would never be picked here), and a kernel with configs of several CPUs and
//! thread counts dispatches on them and computes the right product, compiled
//! and called as a package would.

use std::path::{Path, PathBuf};
use std::process::Command;

use autotune_codegen::runtime::{runtime_c, C_FLAGS, OPT_LEVEL, RUNTIME_C};
use autotune_codegen::{Choice, CpuId, Isa, Selector, Space};
use autotune_lang::mangle::{self, Package, Variant};

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cpu-dispatch-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `sources` (name, text) with the kernels' flags, runs the program
/// and returns its output.
fn run_c(dir: &Path, sources: &[(&str, String)]) -> String {
    let mut cc = Command::new("cc");
    cc.arg(format!("-O{OPT_LEVEL}")).args(C_FLAGS);
    for (name, text) in sources {
        std::fs::write(dir.join(name), text).unwrap();
        cc.arg(dir.join(name));
    }
    let exe = dir.join("prog");
    let out = cc
        .arg("-lpthread")
        .arg("-lm")
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout).unwrap()
}

/// A matrix product `mm` with the attribute `attr`.
fn mm(attr: &str) -> autotune_lang::Operator {
    let item: syn::ItemFn = syn::parse_str(
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    )
    .unwrap();
    autotune_lang::parse_operator(attr.parse().unwrap(), &item).unwrap()
}

fn runtime(prefix: &str) -> Vec<(&'static str, String)> {
    RUNTIME_C
        .iter()
        .map(|(name, text)| (*name, runtime_c(prefix, text)))
        .collect()
}

#[test]
fn the_runtime_knows_this_cpu_as_cpu_id_does() {
    let Some(id) = CpuId::detect() else {
        return; // not x86: the check is always false, and nothing dispatches
    };
    let dir = scratch("check");
    let (v, f, m) = (&id.vendor, id.family, id.model);
    let main = format!(
        "#include <stdio.h>\n#include <stdint.h>\n\
         int32_t t_cpu_is(const char *vendor, int32_t family, int32_t model);\n\
         int main(void) {{\n  printf(\"%d %d %d %d\\n\", t_cpu_is(\"{v}\", {f}, {m}), \
         t_cpu_is(\"{v}\", {f}, {}), t_cpu_is(\"{v}\", {}, {m}), t_cpu_is(\"Other{v}\", {f}, {m}));\n  return 0;\n}}\n",
        m + 1,
        f + 1
    );
    let mut sources = runtime("t");
    sources.push(("main.c", main));
    assert_eq!(run_c(&dir, &sources).trim(), "1 0 0 0", "this CPU is {id}");
}

#[test]
fn a_kernel_with_configs_of_several_cpus_and_thread_counts_dispatches_on_them() {
    let Some(here) = CpuId::detect() else {
        return;
    };
    let op = mm("specialize(M = 5, N = 7, K = 3)");
    let space = Space::new(&op, &op.specializations[0].values);
    let config = |i: u128| space.config_at(i);
    let elsewhere = CpuId {
        vendor: "ElsewhereInc".into(),
        family: 99,
        model: 1,
    };
    let on = |cpu: &CpuId, threads| Selector {
        cpu: Some(cpu.clone()),
        threads,
    };
    let choice = Choice {
        config: Some(config(0)),
        variants: vec![
            (on(&elsewhere, None), config(1)),
            (on(&here, Some(1)), config(2)),
            (
                Selector {
                    cpu: None,
                    threads: Some(3),
                },
                config(3),
            ),
        ],
    };
    let pkg = Package {
        name: "dispatch".into(),
        version: "0.0.0".into(),
    };
    let c = autotune_codegen::operator_c(
        &pkg,
        &op,
        &[choice],
        &[],
        &Isa::levels("x86_64"),
        Isa::Avx512,
    )
    .unwrap();
    let symbol = mangle::kernel_symbol(&pkg, &op, Variant::Specialized(0));
    let runtime_prefix = mangle::runtime_prefix(&pkg);
    assert!(
        c.contains(&format!(
            "_cpu_is(\"ElsewhereInc\", 99, 1)) return {symbol}__v0("
        )),
        "{c}"
    );
    assert!(
        c.contains(&format!(
            "_cpu_is(\"{}\", {}, {}) && {runtime_prefix}_num_threads() == 1) return {symbol}__v1(",
            here.vendor, here.family, here.model
        )),
        "{c}"
    );
    assert!(
        c.contains(&format!(
            "if ({runtime_prefix}_num_threads() == 3) return {symbol}__v2("
        )),
        "{c}"
    );
    // The dispatcher runs at 1, 2 and 3 threads (this CPU's config, the
    // default, the 3-thread one) and computes the product each time.
    let main = format!(
        "#include <stdio.h>\n#include <stdint.h>\n#include <math.h>\n\
         int32_t {symbol}(const float *a, const float *b, float *out);\n\
         void {runtime_prefix}_set_num_threads(int32_t n);\n\
         int main(void) {{\n\
           float a[15], b[21], x[35];\n\
           for (int i = 0; i < 15; ++i) a[i] = 0.1f * (float)i - 0.7f;\n\
           for (int i = 0; i < 21; ++i) b[i] = 0.3f - 0.05f * (float)i;\n\
           for (int n = 1; n <= 3; ++n) {{\n\
           {runtime_prefix}_set_num_threads(n);\n\
           if ({symbol}(a, b, x)) return 1;\n\
           for (int i = 0; i < 5; ++i) for (int j = 0; j < 7; ++j) {{\n\
             float r = 0;\n\
             for (int k = 0; k < 3; ++k) r += a[i * 3 + k] * b[k * 7 + j];\n\
             if (fabsf(r - x[i * 7 + j]) > 1e-5f) {{ printf(\"wrong at %d %d\\n\", i, j); return 0; }}\n\
           }}\n\
           }}\n\
           printf(\"correct\\n\");\n\
           return 0;\n}}\n"
    );
    let dir = scratch("kernel");
    let mut sources = runtime(&runtime_prefix);
    sources.push(("mm.c", c));
    sources.push(("main.c", main));
    let out = run_c(&dir, &sources);
    assert_eq!(out.trim(), "correct");
}

/// What the dispatcher of `mm`'s generic kernel over `buckets` (stub kernels
/// `t<i>` that return 10 + i; the default schedule returns 0) returns at each
/// call's `(M, K, N)`, space-separated; built in scratch directory `name`.
fn dispatched(
    name: &str,
    buckets: &[autotune_codegen::emit::Bucket],
    calls: &[(i64, i64, i64)],
) -> String {
    dispatched_with(name, buckets, calls, false)
}

/// [`dispatched`], with a small-call schedule of 16 lanes (a stub that
/// returns 99) where `small`.
fn dispatched_with(
    name: &str,
    buckets: &[autotune_codegen::emit::Bucket],
    calls: &[(i64, i64, i64)],
    small: bool,
) -> String {
    use autotune_codegen::emit;
    use autotune_codegen::loopnest::IExpr;
    let op = mm("");
    let rt = "rt";
    let naive = autotune_codegen::lower::lower(
        &op,
        Variant::Generic,
        None,
        "mm__naive".to_string(),
        rt.to_string(),
    );
    let naive_c = emit::kernel_c(&naive, &[Isa::Baseline]);
    // Stub kernels with the naive one's signature, each returning its number.
    let head = naive_c
        .lines()
        .find(|l| l.starts_with("int32_t mm__naive("))
        .unwrap();
    let mut stubs: String = (0..buckets.len())
        .map(|i| {
            head.replace("mm__naive(", &format!("t{i}(")) + &format!(" return {}; }}\n", 10 + i)
        })
        .collect();
    let small_kernel = autotune_codegen::loopnest::Kernel {
        symbol: "mm__small".to_string(),
        ..naive.clone()
    };
    let small = small.then(|| {
        stubs += &(head.replace("mm__naive(", "mm__small(") + " return 99; }\n");
        emit::Small {
            kernel: &small_kernel,
            lanes: 16,
            fit: autotune_codegen::lower::small_fit(&op),
        }
    });
    let work = IExpr::Mul(
        Box::new(IExpr::Mul(
            Box::new(IExpr::var("M")),
            Box::new(IExpr::var("N")),
        )),
        Box::new(IExpr::var("K")),
    );
    let dispatcher = emit::generic_dispatcher(&naive, small.as_ref(), "mm", &work, buckets, None);
    let header = emit::file_header("a test", naive.dtype, rt);
    let c = format!("{header}{naive_c}{stubs}{dispatcher}");
    let proto = dispatcher
        .lines()
        .find(|l| l.starts_with("int32_t mm("))
        .unwrap()
        .trim_end_matches(" {");
    let calls: String = calls
        .iter()
        .map(|(m, k, n)| format!("  printf(\"%d \", mm(a, b, x, {m}, {k}, {n}));\n"))
        .collect();
    let main = format!(
        "#include <stdio.h>\n#include <stdint.h>\n\
         {proto};\n\
         static float a[1 << 16], b[1 << 16], x[1 << 16];\n\
         int main(void) {{\n{calls}  return 0;\n}}\n"
    );
    let dir = scratch(name);
    let mut sources = runtime(rt);
    sources.push(("mm.c", c));
    sources.push(("main.c", main));
    run_c(&dir, &sources).trim().to_string()
}

/// A stub bucket of `mm` for [`dispatched`]: kernel `t<i>`, anchored at `at`
/// for every size, filling `setup` elements, with register tiles of
/// `tile = (M, N)` and reduction blocks of 512.
fn stub_bucket(
    i: usize,
    at: i64,
    setup: autotune_codegen::loopnest::IExpr,
    tile: (i64, i64),
) -> autotune_codegen::emit::Bucket {
    use autotune_codegen::loopnest::IExpr;
    autotune_codegen::emit::Bucket {
        anchor: ["M", "K", "N"].map(|v| (v.to_string(), at)).to_vec(),
        setup,
        kernel: format!("t{i}"),
        range: None,
        fit: autotune_codegen::emit::TileFit {
            spatial: vec![(IExpr::var("M"), tile.0), (IExpr::var("N"), tile.1)],
            reduce: vec![(IExpr::var("K"), 512)],
            spills: false,
            narrow: None,
        },
    }
}

/// The generic kernel's dispatcher runs a bucket whose buffers a call
/// outweighs, before the default schedule: a call too small for the nearest
/// bucket's packs runs a farther bucket (9×66×44 had run the scalar default
/// beside six tiled kernels).
#[test]
fn a_call_too_small_for_the_nearest_buckets_packs_runs_a_farther_one() {
    use autotune_codegen::loopnest::IExpr;
    // Bucket 0 is nearest to a 16³ call, and packs 1000 M elements.
    let per_row = IExpr::Mul(Box::new(IExpr::var("M")), Box::new(IExpr::Const(1000)));
    let buckets = [
        stub_bucket(0, 16, per_row, (4, 4)),
        stub_bucket(1, 1024, IExpr::Const(0), (4, 4)),
        stub_bucket(2, 2048, IExpr::Const(0), (4, 4)),
    ];
    // 4³: below any tiled kernel (the default, 0); 16³: bucket 0's 16,000
    // elements outweigh its 4,096 iterations, so the next nearest; 64³: bucket 0.
    let calls = [(4, 4, 4), (16, 16, 16), (64, 64, 64)];
    assert_eq!(dispatched("packs", &buckets, &calls), "0 11 10");
}

/// Of the buckets, a call runs the one whose register tiles it fills best
/// (a generic kernel computes whole tiles), the nearer one where two fill it
/// alike, and the default schedule where none keeps a twentieth of what it
/// computes: the nearest anchor alone ran 42×41×64 in 16-row tiles at two
/// thirds of what 6-row ones reached, and 17×1×44 in tiles 128 wide at a
/// twentieth of the default schedule's speed.
#[test]
fn a_call_runs_the_bucket_whose_tiles_it_fills() {
    use autotune_codegen::loopnest::IExpr;
    let buckets = [
        stub_bucket(0, 16, IExpr::Const(0), (16, 32)),
        stub_bucket(1, 1024, IExpr::Const(0), (4, 4)),
    ];
    // (M, K, N). 16×16×32 fills bucket 0's tiles: the nearer, 10. 20³ keeps
    // 39% of bucket 0's tiles, all of bucket 1's: 11, though farther. 2048×1×1
    // keeps 1/32 and 1/4 of their tile columns, and one step of each
    // reduction block: the default, 0.
    let calls = [(16, 16, 32), (20, 20, 20), (2048, 1, 1)];
    assert_eq!(dispatched("fit", &buckets, &calls), "10 11 0");
}

/// Of two buckets whose tiles a call fills alike, a farther one runs rather
/// than one whose register tile spills: in the generic kernel the
/// 127×255×511 config's 16 × 2 accumulators ran a 64³ call at 118 GFLOP/s,
/// a farther config's 8 × 2 at 163.
#[test]
fn a_call_runs_a_farther_bucket_before_one_whose_tile_spills() {
    use autotune_codegen::loopnest::IExpr;
    let mut near = stub_bucket(0, 64, IExpr::Const(0), (16, 32));
    near.fit.spills = true;
    let buckets = [near, stub_bucket(1, 128, IExpr::Const(0), (8, 32))];
    assert_eq!(dispatched("spills", &buckets, &[(64, 64, 64)]), "11");
    // Without the spill, the nearer bucket: 10.
    let buckets = [
        stub_bucket(0, 64, IExpr::Const(0), (16, 32)),
        stub_bucket(1, 128, IExpr::Const(0), (8, 32)),
    ];
    assert_eq!(dispatched("spills-not", &buckets, &[(64, 64, 64)]), "10");
}

/// A bucket of lanes along the reduction that reads `b` through a copy
/// serves only calls with few columns (`N` under 8), however well its small
/// tile fills others: at `N = 3` it runs, at `N = 48` a bucket with 32-wide
/// vectors does, though its tiles keep only three quarters of their work.
#[test]
fn lanes_that_read_through_a_copy_serve_only_narrow_calls() {
    use autotune_codegen::loopnest::IExpr;
    let mut lanes = stub_bucket(1, 64, IExpr::Const(0), (4, 2));
    lanes.fit.narrow = Some(IExpr::var("N"));
    let buckets = [stub_bucket(0, 64, IExpr::Const(0), (8, 32)), lanes];
    assert_eq!(
        dispatched("narrow", &buckets, &[(64, 64, 3), (64, 64, 48)]),
        "11 10"
    );
    // Without the rule, the small tile's fit takes the wide call too: 11 11.
    let buckets = [
        stub_bucket(0, 64, IExpr::Const(0), (8, 32)),
        stub_bucket(1, 64, IExpr::Const(0), (4, 2)),
    ];
    assert_eq!(
        dispatched("narrow-not", &buckets, &[(64, 64, 3), (64, 64, 48)]),
        "11 11"
    );
}

/// A thread's call at the sizes of its previous call runs what that one ran
/// without weighing the buckets again; a call at other sizes, even in one
/// size only, weighs them: every call of a sequence runs what it runs alone.
#[test]
fn a_repeated_call_runs_what_the_same_sizes_ran() {
    use autotune_codegen::loopnest::IExpr;
    let buckets = [
        stub_bucket(0, 16, IExpr::Const(0), (16, 32)),
        stub_bucket(1, 1024, IExpr::Const(0), (4, 4)),
    ];
    // (M, K, N): each differs from the one before in N, or in M and K.
    let shapes = [(16, 16, 32), (16, 16, 4), (4, 4, 4 << 10), (16, 16, 32)];
    let alone: Vec<String> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| dispatched(&format!("memo{i}"), &buckets, &[*s]))
        .collect();
    let calls: Vec<_> = shapes.iter().flat_map(|s| [*s, *s]).collect();
    let want: Vec<&str> = alone
        .iter()
        .flat_map(|r| [r.as_str(), r.as_str()])
        .collect();
    assert_eq!(dispatched("memo", &buckets, &calls), want.join(" "));
    assert_ne!(
        alone[0], alone[1],
        "the shapes should run different kernels"
    );
}

/// The small-call schedule (99) runs a call too small for the tiled kernels
/// (under 512 iterations), and a call with a size below 64 whose tiles it fits
/// better than the best tiled kernel's score, unless more than two rows of its
/// tiles would each read again what does not stay in L2: at 38×4×8 the tiled
/// kernels ran at a third of its speed, at 34×949×737 (2.8 MB of B) it ran at
/// 0.6× theirs.
#[test]
fn a_small_call_runs_the_small_call_schedule_where_its_tiles_fit_it_better() {
    use autotune_codegen::loopnest::IExpr;
    let buckets = [stub_bucket(0, 512, IExpr::Const(0), (8, 32))];
    // (M, K, N): 38×8×4 (4 × 16 tiles keep 24%, 8 × 32 ones 6%): 99; 333³ (no
    // size below 64): 10; 34×737×949 (six rows of tiles, 2.8 MB of B): 10;
    // 12×764×459 (two rows of 6-row tiles): 99; 4³: 99.
    let calls = [
        (38, 8, 4),
        (333, 333, 333),
        (34, 737, 949),
        (12, 764, 459),
        (4, 4, 4),
    ];
    assert_eq!(
        dispatched_with("small", &buckets, &calls, true),
        "99 10 10 99 99"
    );
    // Without it, the tiled kernel where it fits by a twentieth, else the default.
    assert_eq!(dispatched("small-not", &buckets, &calls), "10 10 10 10 0");
}
