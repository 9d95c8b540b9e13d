//! The way a user uses autotune: an out-of-tree crate, depending on the
//! project's crates by path, built and run with cargo in a temporary directory.
//! Also checks what a user sees when the build script fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

const OPS: &str = r#"use autotune::tensor_op;

/// relu(a·b + bias)
#[tensor_op(specialize(M = 8, N = 16, K = 32))]
pub fn mm_bias_relu(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>, bias: Tensor<f32, N>) -> Tensor<f32, (M, N)> {
    let y: Tensor<f32, (M, N)> = compute(|i, j| sum(|k| a[i][k] * b[k][j]));
    compute(|i, j| max(y[i][j] + bias[j], 0.0))
}
"#;

const MAIN: &str = r#"mod ops;

fn main() {
    for (m, n, k) in [(8, 16, 32), (3, 5, 7)] {
        let a: Vec<f32> = (0..m * k).map(|x| ((x * 7 % 11) as f32 - 5.0) / 4.0).collect();
        let b: Vec<f32> = (0..k * n).map(|x| ((x * 5 % 13) as f32 - 6.0) / 8.0).collect();
        let bias: Vec<f32> = (0..n).map(|x| x as f32 / 10.0 - 0.5).collect();
        let got = ops::mm_bias_relu((&a, [m, k]), (&b, [k, n]), (&bias, [n])).unwrap();
        let want = ops::mm_bias_relu_reference((&a, [m, k]), (&b, [k, n]), (&bias, [n])).unwrap();
        let err = got.data().iter().zip(want.data()).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
        assert!(err < 1e-4, "max error {err}");
        println!("fixture ok {m}x{n}x{k}");
    }
    let bad = ops::mm_bias_relu((&[0.0f32; 6][..], [2, 3]), (&[0.0f32; 8][..], [4, 2]), (&[0.0f32; 2][..], [2]));
    println!("{}", bad.unwrap_err());
}
"#;

const BUILD: &str = r#"fn main() {
    autotune_build::Builder::new().file("src/ops.rs").compile();
}
"#;

fn write_crate(dir: &Path, ops: &str) {
    write_crate_with(dir, ops, MAIN);
}

fn write_crate_with(dir: &Path, ops: &str, main: &str) {
    let ws = workspace();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"fixture-user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nautotune = {{ path = {:?} }}\n\n\
         [build-dependencies]\nautotune-build = {{ path = {:?} }}\n\n[workspace]\n",
        ws.join("runtime"),
        ws.join("autotune-build"),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    // The workspace's lock file pins the same dependency versions (and lets the
    // build run without the network once they are downloaded).
    std::fs::copy(ws.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("build.rs"), BUILD).unwrap();
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
    std::fs::write(dir.join("src/ops.rs"), ops).unwrap();
}

/// An operator with constant weights, called through `autotune::Constant`
/// handles and with plain tensors, from several threads, and at a shape no
/// kernel is specialised for.
const CONSTANT_OPS: &str = r#"use autotune::tensor_op;

autotune::kernel_threads!();

/// relu(a·b + bias), with `b` and `bias` constant.
#[tensor_op(constant(b, bias), specialize(M = 8, N = 64, K = 64))]
pub fn mm_const(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>, bias: Tensor<f32, N>) -> Tensor<f32, (M, N)> {
    let y: Tensor<f32, (M, N)> = compute(|i, j| sum(|k| a[i][k] * b[k][j]));
    compute(|i, j| max(y[i][j] + bias[j], 0.0))
}
"#;

const CONSTANT_MAIN: &str = r#"mod ops;
use autotune::{Constant, Tensor};

fn tensor<const R: usize>(dims: [usize; R], seed: usize) -> Tensor<f32, R> {
    let n: usize = dims.iter().product();
    let data = (0..n).map(|x| ((x * 7 + seed) % 13) as f32 / 8.0 - 0.75).collect();
    Tensor::from_vec(data, dims).unwrap()
}

fn check(a: &Tensor<f32, 2>, b: &Constant<f32, 2>, bias: &Constant<f32, 1>) {
    let kept = ops::mm_const(a, b, bias).unwrap();
    let plain = ops::mm_const(a, b.tensor(), bias.tensor()).unwrap();
    let want = ops::mm_const_reference(a, b.tensor(), bias.tensor()).unwrap();
    assert_eq!(kept, plain, "through the handles and plain tensors differ");
    let err = kept.data().iter().zip(want.data()).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    assert!(err < 1e-4, "max error {err}");
}

fn main() {
    let b = Constant::new(tensor([64, 64], 1));
    let bias = Constant::new(tensor([64], 2));
    println!("copies before: {} {}", b.copies(), bias.copies());
    ops::set_num_threads(1);
    check(&tensor([8, 64], 3), &b, &bias);
    println!("b's copies after a call at 1 thread: {}", b.copies());
    std::thread::scope(|s| {
        for t in 0..4 {
            let (b, bias) = (&b, &bias);
            s.spawn(move || (0..5).for_each(|i| check(&tensor([8, 64], 10 * t + i), b, bias)));
        }
    });
    println!("b's copies after four threads' calls: {}", b.copies());
    // Another kernel (the config tuned for 2 threads): its own block.
    ops::set_num_threads(2);
    check(&tensor([8, 64], 4), &b, &bias);
    println!("b's copies after a call at 2 threads: {}", b.copies());
    // A shape no kernel is specialised for: the generic kernel's block, found
    // again at another M (its copies of b depend on K and N only). Every size
    // 64 or more: a smaller one would run the small-call schedule, which
    // copies nothing.
    check(&tensor([65, 64], 5), &b, &bias);
    println!("b's copies after a generic call: {}", b.copies());
    check(&tensor([80, 64], 6), &b, &bias);
    println!("b's copies at the end: {}", b.copies());
}
"#;

/// Cache entries of `mm_const` (the crate's only operator) on this machine for 1
/// and 2 kernel threads, with two configs that pack `b`: the kernel copies the
/// constant, and each thread count runs a kernel of its own layout.
fn constant_entries(dir: &Path) {
    use autotune_build::cache;
    use autotune_codegen::{Isa, KernelFingerprint, Space, Target, Value, Workload};
    let ops = autotune_build::load_operators(dir, &[PathBuf::from("src/ops.rs")]).unwrap();
    let w = Workload {
        op: ops[0].op.clone(),
        spec: 0,
    };
    let space = Space::new(&w.op, w.shapes());
    let default = space.default_config(&w.op, w.shapes());
    let next = space.config_at(space.index_of(&default).unwrap() + 1);
    let target = Target {
        triple: autotune_tune::HOST_TRIPLE.to_string(),
        isa: Isa::detect(),
    };
    for (threads, mut config) in [(1, default), (2, next)] {
        config.0.insert("y.pack.1".parse().unwrap(), Value::Int(1));
        space
            .index_of(&config)
            .expect("packing b is a point of the space");
        let cpu = cache::Cpu::host();
        let entry = cache::Entry {
            workload: w.key(),
            workload_id: w.id(),
            generator: cache::GENERATOR_VERSION,
            gflops: 1.0,
            trials: 1,
            tuner: "by hand".to_string(),
            cpu: cpu.name,
            cpu_id: cpu.id,
            compiler: "cc".to_string(),
            threads: Some(threads),
            date: cache::today(),
            kernel: KernelFingerprint::of(&w, &config, target.isa).ok(),
            target: target.clone(),
            config,
        };
        cache::store(&dir.join("tuning-cache"), &w.op.name, entry).unwrap();
    }
}

#[test]
fn constant_inputs_are_copied_once_per_handle() {
    let _turn = take_turn();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-constants");
    let _ = std::fs::remove_dir_all(&dir);
    write_crate_with(&dir, CONSTANT_OPS, CONSTANT_MAIN);
    constant_entries(&dir);
    let run = cargo(&dir, &["run", "--quiet"], &[("AUTOTUNE", "locked")]);
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    // One block per kernel that packs `b`, made by its first call through the
    // handle and found by every later one, at any thread count; the generic
    // kernel's by every later call whose sizes its copies read are the same.
    for line in [
        "copies before: 0 0",
        "b's copies after a call at 1 thread: 1",
        "b's copies after four threads' calls: 1",
        "b's copies after a call at 2 threads: 2",
        "b's copies after a generic call: 3",
        "b's copies at the end: 3",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

/// A two-layer conv net on blocked activations with constant weights: a 3×3
/// conv from a 3-channel image (read plain, written blocked), then a 1×1 stride-2
/// conv with a shortcut, both blocked.
const BLOCKED_OPS: &str = r#"use autotune::tensor_op;

autotune::kernel_threads!();

#[tensor_op(constant(w, b), blocked(x), R = 3, S = 3,
    specialize(C = 3, H = 10, W = 9, K = 32), specialize(C = 3, H = 6, W = 6, K = 32))]
pub fn conv3x3_relu(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C, R, S)>, b: Tensor<f32, K>) -> Tensor<f32, (K, H, W)> {
    let y: Tensor<f32, (K, H, W)> =
        compute(|k, h, v| sum(|c, r, s| x.pad(0.0)[c][h + r - 1][v + s - 1] * w[k][c][r][s]));
    compute(|k, h, v| max(y[k][h][v] + b[k], 0.0))
}

#[tensor_op(constant(w, b), blocked(x, s), OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1,
    specialize(C = 32, H = 10, W = 9, K = 16))]
pub fn conv1x1s2_add(x: Tensor<f32, (C, H, W)>, w: Tensor<f32, (K, C)>, b: Tensor<f32, K>, s: Tensor<f32, (K, OH, OW)>) -> Tensor<f32, (K, OH, OW)> {
    let y: Tensor<f32, (K, OH, OW)> = compute(|k, h, v| sum(|c| x[c][h * 2][v * 2] * w[k][c]));
    compute(|k, h, v| y[k][h][v] + b[k] + s[k][h][v])
}
"#;

const BLOCKED_MAIN: &str = r#"mod ops;
use autotune::{Activation, Constant, Tensor};

fn tensor<const R: usize>(dims: [usize; R], seed: usize) -> Tensor<f32, R> {
    let n: usize = dims.iter().product();
    let data = (0..n).map(|x| ((x * 7 + seed) % 13) as f32 / 8.0 - 0.75).collect();
    Tensor::from_vec(data, dims).unwrap()
}

fn max_err(a: &Tensor<f32, 3>, b: &Tensor<f32, 3>) -> f32 {
    assert_eq!(a.dims(), b.dims());
    a.data().iter().zip(b.data()).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max)
}

fn main() {
    let (w1, b1) = (Constant::new(tensor([32, 3, 3, 3], 1)), Constant::new(tensor([32], 2)));
    let (w2, b2) = (Constant::new(tensor([16, 32], 3)), Constant::new(tensor([16], 4)));
    for (h, w) in [(10, 9), (6, 6), (7, 5)] {
        let (oh, ow) = ((h - 1) / 2 + 1, (w - 1) / 2 + 1);
        let x = Activation::new(tensor([3, h, w], 5));
        let s = Activation::new(tensor([16, oh, ow], 6));
        let y1 = ops::conv3x3_relu(&x, &w1, &b1).unwrap();
        let mut y2 = Activation::zeros([16, oh, ow]).unwrap();
        ops::conv1x1s2_add_into(&y1, &w2, &b2, &s, &mut y2).unwrap();
        let r1 = ops::conv3x3_relu_reference(&x, w1.tensor(), b1.tensor()).unwrap();
        let r2 = ops::conv1x1s2_add_reference(&r1, w2.tensor(), b2.tensor(), &s).unwrap();
        let (e1, e2) = (max_err(&y1.to_tensor(), &r1.to_tensor()), max_err(&y2.to_tensor(), &r2.to_tensor()));
        assert!(e1 < 1e-4 && e2 < 1e-4, "{h}x{w}: max errors {e1} {e2}");
        assert_eq!(r2.block(), 1, "a reference's output is plain");
        println!(
            "{h}x{w}: blocks {} {}, conversions x {} y1 {} s {}",
            y1.block(), y2.block(), x.conversions(), y1.conversions(), s.conversions()
        );
    }
    // Shapes are checked as given, whatever the layout.
    let y1 = ops::conv3x3_relu(&Activation::new(tensor([3, 10, 9], 7)), &w1, &b1).unwrap();
    let bad = ops::conv1x1s2_add(&y1, &w2, &b2, &Activation::new(tensor([16, 2, 2], 8)));
    println!("{}", bad.unwrap_err());
}
"#;

#[test]
fn a_net_on_blocked_activations_matches_its_references() {
    let _turn = take_turn();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-blocked");
    let _ = std::fs::remove_dir_all(&dir);
    write_crate_with(&dir, BLOCKED_OPS, BLOCKED_MAIN);
    let run = cargo(&dir, &["run", "--quiet"], &[("AUTOTUNE", "off")]);
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    for line in [
        // Both layers' kernels run blocked, the image is read as it is, and the
        // plain shortcut is blocked for the second layer (counted).
        "10x9: blocks 16 16, conversions x 0 y1 0 s 1",
        // Only the first layer is specialised here: the second converts its
        // blocked input to run the generic kernel on plain tensors.
        "6x6: blocks 16 1, conversions x 0 y1 1 s 0",
        // Neither is: plain throughout.
        "7x5: blocks 1 1, conversions x 0 y1 0 s 0",
        "conv1x1s2_add: tensor `s` dimension 1 (OH) must be 5",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

/// The fixture crates share one target directory (their dependencies build
/// once) and one binary name, so the tests take turns.
fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh fixture crate in `name`, built once, tuning with 2 trials.
fn tuned_crate(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    write_crate(&dir, OPS);
    let build = cargo(
        &dir,
        &["build"],
        &[("AUTOTUNE", "tune"), ("AUTOTUNE_TRIALS", "2")],
    );
    assert!(build.status.success(), "{}", text(&build));
    dir
}

fn cargo(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.args(args).current_dir(dir);
    // Start from a clean slate: nothing of this test process's own build leaks in.
    for (k, _) in std::env::vars() {
        if k.starts_with("AUTOTUNE_")
            || (k.starts_with("CARGO_") && k != "CARGO_HOME")
            || k == "RUSTFLAGS"
        {
            cmd.env_remove(k);
        }
    }
    cmd.env(
        "CARGO_TARGET_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-target"),
    );
    // Build-time tuning writes the per-user history store: keep it out of the home.
    cmd.env(
        "AUTOTUNE_HISTORY",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-history"),
    );
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("cargo runs")
}

fn text(o: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn out_of_tree_crate() {
    let _turn = take_turn();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    let good = root.join("good");
    let _ = std::fs::remove_dir_all(&root);
    write_crate(&good, OPS);

    let run = cargo(&good, &["run", "--quiet"], &[("AUTOTUNE", "off")]);
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    assert!(out.contains("fixture ok 8x16x32"), "{out}");
    assert!(out.contains("fixture ok 3x5x7"), "{out}");
    assert!(
        out.contains(
            "mm_bias_relu: tensor `b` dimension 0 (K) must be 3 (as `a` dimension 1), but is 4"
        ),
        "{out}"
    );

    // No C compiler: the build says what to install.
    let build = cargo(
        &good,
        &["build", "--quiet"],
        &[("CC", "/nonexistent/cc"), ("AUTOTUNE", "off")],
    );
    let out = text(&build);
    assert!(!build.status.success(), "{out}");
    assert!(out.contains("no C compiler found"), "{out}");
    assert!(out.contains("apt-get install gcc"), "{out}");

    // The tuning cache: locked fails on a miss and says how to fill it; tune fills
    // it; then locked builds replay it, byte for byte.
    let build = cargo(&good, &["build", "--quiet"], &[("AUTOTUNE", "locked")]);
    let out = text(&build);
    assert!(!build.status.success(), "{out}");
    assert!(
        out.contains("no entry for mm_bias_relu[M8 K32 N16]"),
        "{out}"
    );
    assert!(out.contains("AUTOTUNE=tune cargo build"), "{out}");
    let build = cargo(
        &good,
        &["build"],
        &[("AUTOTUNE", "tune"), ("AUTOTUNE_TRIALS", "3")],
    );
    let out = text(&build);
    assert!(build.status.success(), "{out}");
    assert!(
        out.contains("autotune: tuned mm_bias_relu[M8 K32 N16]"),
        "{out}"
    );
    let cached = std::fs::read_to_string(good.join("tuning-cache/mm_bias_relu.toml")).unwrap();
    assert!(
        cached.contains("workload = \"mm_bias_relu[M8 K32 N16]\""),
        "{cached}"
    );
    let generated = || {
        let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-target/debug/build");
        // The newest: the target directory outlives test runs, and build directories
        // of older builds (other hashes) keep their sources.
        let newest = std::fs::read_dir(build)
            .unwrap()
            .map(|e| e.unwrap().path().join("out/autotune/mm_bias_relu.c"))
            .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
            .max()
            .expect("the generated kernel source");
        std::fs::read(newest.1).unwrap()
    };
    let run = cargo(&good, &["run"], &[("AUTOTUNE", "locked")]);
    let out = text(&run);
    assert!(
        run.status.success() && out.contains("fixture ok 8x16x32"),
        "{out}"
    );
    assert!(
        !out.contains("autotune: tuned"),
        "a cache hit measures nothing: {out}"
    );
    let first = generated();
    // The kernel objects, kept by content in the target directory.
    let objects = || {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-target/autotune-objects");
        let mut kept: Vec<_> = std::fs::read_dir(dir)
            .expect("the build keeps its kernel objects")
            .map(|e| e.unwrap().path())
            .map(|p| (p.metadata().unwrap().modified().unwrap(), p))
            .collect();
        kept.sort();
        kept
    };
    let kept = objects();
    assert!(!kept.is_empty());
    let clean = cargo(&good, &["clean", "-p", "fixture-user"], &[]);
    assert!(clean.status.success(), "{}", text(&clean));
    let build = cargo(&good, &["build"], &[("AUTOTUNE", "locked")]);
    assert!(build.status.success(), "{}", text(&build));
    assert_eq!(
        first,
        generated(),
        "a replayed build generates the same source"
    );
    assert_eq!(
        kept,
        objects(),
        "the same source is not compiled again: its objects are reused, not rewritten"
    );

    // A malformed operator: the build script names the file, line and column.
    let bad = root.join("bad");
    write_crate(&bad, &OPS.replace("b[k][j]", "c[k][j]"));
    let build = cargo(&bad, &["build", "--quiet"], &[]);
    let out = text(&build);
    assert!(!build.status.success(), "{out}");
    assert!(out.contains("unknown tensor `c`"), "{out}");
    assert!(out.contains("--> src/ops.rs:6:67"), "{out}");
}

/// Every file the build reads is tracked, also one the first build did not find:
/// a cache that appears or changes after the first build (a `git pull`, `cargo
/// autotune tune --save`, a corrupted file) reruns the build script.
#[test]
fn a_cache_that_changes_after_the_first_build_is_seen() {
    let _turn = take_turn();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures-watch");
    let _ = std::fs::remove_dir_all(&dir);
    write_crate(&dir, OPS);
    let env = [("AUTOTUNE", "cached")];
    let build = cargo(&dir, &["build"], &env);
    assert!(build.status.success(), "{}", text(&build));
    // The cache appears after the first build: here, a corrupt one.
    std::fs::create_dir_all(dir.join("tuning-cache")).unwrap();
    std::fs::write(
        dir.join("tuning-cache/mm_bias_relu.toml"),
        "[[entry]]\nworkload = 3\n",
    )
    .unwrap();
    let build = cargo(&dir, &["build"], &env);
    let out = text(&build);
    assert!(
        !build.status.success() && out.contains("the tuning cache does not parse"),
        "the build did not read the new cache: {out}"
    );
}

/// A build that tunes because the cache holds this workload only for another
/// ISA level says so, naming what it has, before its final figures.
#[test]
fn tuning_for_a_cpu_the_cache_lacks_is_announced() {
    let _turn = take_turn();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures-other-isa");
    let _ = std::fs::remove_dir_all(&dir);
    write_crate(&dir, OPS);
    let tune = [("AUTOTUNE", "tune"), ("AUTOTUNE_TRIALS", "2")];
    let build = cargo(&dir, &["build"], &tune);
    assert!(build.status.success(), "{}", text(&build));
    // Move the entry to another ISA level than this machine's.
    let file = dir.join("tuning-cache/mm_bias_relu.toml");
    let cache = std::fs::read_to_string(&file).unwrap();
    let here = ["avx512", "avx2", "baseline"]
        .into_iter()
        .find(|isa| cache.contains(&format!("-gnu/{isa}\"")))
        .expect("an entry for this machine");
    let other = if here == "baseline" {
        "avx2"
    } else {
        "baseline"
    };
    std::fs::write(
        &file,
        cache.replace(&format!("-gnu/{here}\""), &format!("-gnu/{other}\"")),
    )
    .unwrap();
    let build = cargo(&dir, &["build"], &tune);
    let out = text(&build);
    assert!(build.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "has entries only for x86_64-unknown-linux-gnu/{other}"
        )),
        "the build did not say why it tuned: {out}"
    );
}

/// A cache tuned on another CPU is replayed, and the build says so; a re-tune
/// here adds this CPU's entry beside the other CPU's instead of replacing it,
/// and the kernel then carries both configs.
#[test]
fn another_cpus_entry_is_replayed_and_kept() {
    let _turn = take_turn();
    let dir = tuned_crate("fixtures-other-cpu");
    // Make the entry another CPU's.
    let file = dir.join("tuning-cache/mm_bias_relu.toml");
    let cache = std::fs::read_to_string(&file).unwrap();
    let (cpu_line, id_line) = {
        let line = |key: &str| {
            cache
                .lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_else(|| panic!("no `{key}` in {cache}"))
                .to_string()
        };
        (line("cpu = "), line("cpu_id = "))
    };
    let foreign = cache
        .replace(&cpu_line, "cpu = \"Elsewhere CPU\"")
        .replace(&id_line, "cpu_id = \"ElsewhereInc-99-1\"");
    std::fs::write(&file, &foreign).unwrap();
    let build = cargo(&dir, &["build"], &[("AUTOTUNE", "locked")]);
    let out = text(&build);
    assert!(build.status.success(), "a foreign entry is an entry: {out}");
    assert!(
        out.contains("replaying the config tuned on Elsewhere CPU (ElsewhereInc-99-1)"),
        "the build did not say it replays another CPU's config: {out}"
    );
    let build = cargo(
        &dir,
        &["build"],
        &[("AUTOTUNE", "retune"), ("AUTOTUNE_TRIALS", "2")],
    );
    assert!(build.status.success(), "{}", text(&build));
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("ElsewhereInc-99-1") && after.contains(&id_line),
        "both CPUs' entries are kept: {after}"
    );
    assert_eq!(after.matches("[[entry]]").count(), 2, "{after}");
    // Both configs ship, where they differ: the kernel picks the other CPU's
    // there (CPUID). The re-tune started from the other CPU's config, so it
    // may have kept it: make that one pack `a` the other way.
    let at = after.find("cpu_id = \"ElsewhereInc-99-1\"").unwrap();
    let knob = at + after[at..].find("\"y.pack.0\" = ").unwrap() + "\"y.pack.0\" = ".len();
    let toggled = if &after[knob..knob + 1] == "0" {
        "1"
    } else {
        "0"
    };
    let mut edited = after.clone();
    edited.replace_range(knob..knob + 1, toggled);
    std::fs::write(&file, &edited).unwrap();
    let run = cargo(&dir, &["run"], &[("AUTOTUNE", "locked")]);
    let out = text(&run);
    assert!(run.status.success() && out.contains("fixture ok"), "{out}");
    let newest_c = walk(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixture-target"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "mm_bias_relu.c"))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .expect("the build's C");
    let c = std::fs::read_to_string(&newest_c).unwrap();
    assert!(
        c.contains("_cpu_is(\"ElsewhereInc\", 99, 1)) return "),
        "no dispatch to the other CPU's config in {}",
        newest_c.display()
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `AUTOTUNE=retune` measures its budget of new trials, even where the crate's
/// record log already holds more trials than the budget.
#[test]
fn retune_measures_again() {
    let _turn = take_turn();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures-retune");
    let _ = std::fs::remove_dir_all(&dir);
    write_crate(&dir, OPS);
    let records = dir.join("tuning-cache/records/mm_bias_relu.jsonl");
    let lines = || std::fs::read_to_string(&records).unwrap().lines().count();
    let build = cargo(
        &dir,
        &["build"],
        &[("AUTOTUNE", "tune"), ("AUTOTUNE_TRIALS", "3")],
    );
    assert!(build.status.success(), "{}", text(&build));
    assert_eq!(lines(), 3);
    let build = cargo(
        &dir,
        &["build"],
        &[("AUTOTUNE", "retune"), ("AUTOTUNE_TRIALS", "2")],
    );
    assert!(build.status.success(), "{}", text(&build));
    assert_eq!(lines(), 5, "retune measured nothing: {}", text(&build));
}

/// `AUTOTUNE_ISA` is a run-time cap on what the kernels dispatch to: it does not
/// change the build (no other cache key, nothing tuned or written).
#[test]
fn the_run_time_isa_cap_does_not_change_the_build() {
    let _turn = take_turn();
    let dir = tuned_crate("fixtures-isa-cap");
    let file = dir.join("tuning-cache/mm_bias_relu.toml");
    let before = std::fs::read_to_string(&file).unwrap();
    // Locked: a different cache key would be a miss, and fail.
    let run = cargo(
        &dir,
        &["run"],
        &[("AUTOTUNE", "locked"), ("AUTOTUNE_ISA", "baseline")],
    );
    let out = text(&run);
    assert!(run.status.success(), "the cap changed the build: {out}");
    assert!(out.contains("fixture ok 8x16x32"), "{out}");
    assert_eq!(before, std::fs::read_to_string(&file).unwrap());
}
