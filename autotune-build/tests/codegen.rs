//! Snapshots of the generated C (refresh with `cargo insta review` or
//! `INSTA_UPDATE=always`), and the build helper's file-level errors.

use std::path::{Path, PathBuf};

use autotune_build::{load_operators, Error};
use autotune_codegen::Isa;
use autotune_lang::mangle::Package;

fn pkg() -> Package {
    Package {
        name: "snap".to_string(),
        version: "0.0.0".to_string(),
    }
}

fn operator_c(pkg: &Package, op: &autotune_lang::Operator) -> String {
    let configs = vec![autotune_codegen::Choice::default(); op.specializations.len()];
    // The generic kernel as a build schedules it.
    let generic = autotune_codegen::GenericSchedule::for_operator(op, &configs, Isa::Avx2);
    autotune_codegen::operator_c(
        pkg,
        op,
        &configs,
        &generic,
        &[Isa::Avx2, Isa::Baseline],
        Isa::Avx2,
    )
    .unwrap()
}

fn ops_from(source: &str) -> Result<Vec<autotune_build::SourceOp>, Error> {
    let dir = tempdir();
    std::fs::write(dir.join("ops.rs"), source).unwrap();
    load_operators(&dir, &[PathBuf::from("ops.rs")])
}

fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "codegen-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const MATMUL_64: &str = r#"
    #[tensor_op(specialize(M = 64, N = 64, K = 64))]
    pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
        compute(|i, j| sum(|k| a[i][k] * b[k][j]))
    }
"#;

#[test]
fn matmul_c() {
    let ops = ops_from(MATMUL_64).unwrap();
    insta::assert_snapshot!(operator_c(&pkg(), &ops[0].op));
}

/// Each ISA clone computes on vectors its level's registers hold: a config's
/// 16-float vectors run as 8-float ones in the AVX2 clone and 4-float ones in
/// the baseline clone (GCC keeps a wider vector in memory: a tenth the speed).
#[test]
fn each_clone_uses_vectors_its_level_holds() {
    let ops = ops_from(MATMUL_64).unwrap();
    let op = &ops[0].op;
    let shapes = &op.specializations[0].values;
    let mut config = autotune_codegen::Space::new(op, shapes).default_config(op, shapes);
    for (knob, value) in [
        ("output.vector", autotune_codegen::Value::Name("j16".into())),
        ("output.tile.j", autotune_codegen::Value::Int(2)),
        ("output.tile.i", autotune_codegen::Value::Int(4)),
    ] {
        config.0.insert(knob.parse().unwrap(), value);
    }
    let clone = |isa: Isa| {
        autotune_codegen::kernel_c(
            op,
            autotune_lang::mangle::Variant::Specialized(0),
            Some(&config),
            &[isa],
            "k".into(),
            "rt".into(),
        )
        .unwrap()
    };
    for (isa, lanes) in [(Isa::Avx512, 16), (Isa::Avx2, 8), (Isa::Baseline, 4)] {
        let c = clone(isa);
        let used: Vec<usize> = [2, 4, 8, 16]
            .into_iter()
            .filter(|w| c.contains(&format!("at_v{w} ")) || c.contains(&format!("at_v{w}u ")))
            .collect();
        assert_eq!(used, vec![lanes], "{isa}: vectors of {used:?} floats");
    }
    // Together, each clone is the one its level makes alone.
    let all = autotune_codegen::kernel_c(
        op,
        autotune_lang::mangle::Variant::Specialized(0),
        Some(&config),
        &[Isa::Avx512, Isa::Avx2, Isa::Baseline],
        "k".into(),
        "rt".into(),
    )
    .unwrap();
    let avx2 = clone(Isa::Avx2);
    let body = |c: &str, isa: &str| {
        let start = c.find(&format!("k__{isa}(")).unwrap();
        c[start..].split("\n}\n").next().unwrap().to_string()
    };
    assert_eq!(body(&all, "avx2"), body(&avx2, "avx2"));
}

/// A constant input that the config packs: the copies are made into a block the
/// handle's slot keeps (or, without a handle, one the call frees).
#[test]
fn constant_copies_c() {
    let ops = ops_from(
        r#"
        #[tensor_op(constant(b), specialize(M = 8, N = 32, K = 16))]
        pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }
        "#,
    )
    .unwrap();
    let op = &ops[0].op;
    let shapes = &op.specializations[0].values;
    let space = autotune_codegen::Space::new(op, shapes);
    let mut config = space.default_config(op, shapes);
    config.0.insert(
        "output.pack.1".parse().unwrap(),
        autotune_codegen::Value::Int(1),
    );
    let choice = autotune_codegen::Choice {
        config: Some(config),
        ..Default::default()
    };
    let c =
        autotune_codegen::operator_c(&pkg(), op, &[choice], &[], &[Isa::Avx2], Isa::Avx2).unwrap();
    insta::assert_snapshot!(c);
}

#[test]
fn padded_pool_and_stages_c() {
    let ops = ops_from(
        r#"
        mod inner {
            #[autotune::tensor_op(OH = (H + 2 - 3) / 2 + 1)]
            pub fn pool_relu(x: Tensor<f64, (C, H)>, b: Tensor<f64, C>) -> Tensor<f64, (C, OH)> {
                let p: Tensor<f64, (C, OH)> = compute(|c, o| max(|r @ 0..3| x.pad(f64::NEG_INFINITY)[c][o * 2 + r - 1]));
                compute(|c, o| max(p[c][o] + b[c], 0.0))
            }
        }
        "#,
    )
    .unwrap();
    insta::assert_snapshot!(operator_c(&pkg(), &ops[0].op));
}

#[test]
fn generated_source_is_deterministic() {
    let src =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/src/ops.rs"))
            .unwrap();
    let a: Vec<String> = ops_from(&src)
        .unwrap()
        .iter()
        .map(|o| operator_c(&pkg(), &o.op))
        .collect();
    let b: Vec<String> = ops_from(&src)
        .unwrap()
        .iter()
        .map(|o| operator_c(&pkg(), &o.op))
        .collect();
    assert_eq!(a, b);
    assert!(a.len() >= 15);
}

#[test]
fn language_error_names_file_line_and_column() {
    let err = ops_from(
        "#[tensor_op]\npub fn t(a: Tensor<f32, (M, N)>) -> Tensor<f32, (N, M)> {\n    compute(|j, i| a[i][j][0])\n}\n",
    )
    .err()
    .expect("wrong rank is an error");
    let text = err.to_string();
    assert!(
        text.starts_with("wrong rank: `a` has 2 dimension(s) but is indexed with 3"),
        "{text}"
    );
    assert!(text.contains("--> ops.rs:3:20"), "{text}");
    assert!(text.contains("^^^^^^^^^^"), "{text}");
}

#[test]
fn rust_syntax_error_and_duplicates() {
    let err = ops_from("fn broken( {").err().expect("syntax error");
    assert!(err.to_string().contains("--> ops.rs:1:"), "{err}");
    let op = "#[tensor_op]\npub fn t(a: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| a[i]) }\n";
    let err = ops_from(&format!("{op}mod m {{\n{op}}}\n"))
        .err()
        .expect("duplicate");
    assert_eq!(
        err.to_string(),
        "operator `t` is defined twice (ops.rs:2 and ops.rs:5); operator names must be unique within a package"
    );
}

#[test]
fn missing_file() {
    let err = load_operators(Path::new("/nonexistent"), &[PathBuf::from("ops.rs")])
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("cannot read /nonexistent/ops.rs"),
        "{err}"
    );
}

/// A bucket is a schedule of the generic kernel, dispatched on its ranges
/// before any nearest anchor; it has no kernel of its own, while an exact
/// shape inside it keeps one.
#[test]
fn buckets_dispatch_on_their_ranges() {
    let ops = ops_from(
        r#"
        #[tensor_op(
            specialize(M = 1..=4096, N = 1024, K = 1024),
            specialize(M = 512, N = 1024, K = 1024),
            specialize(M = 8..16, N = 2..=3, K = 5)
        )]
        pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }
        "#,
    )
    .unwrap();
    let op = &ops[0].op;
    // A bucket's anchor: the top of every range.
    assert_eq!(op.specializations[0].values, vec![4096, 1024, 1024]);
    assert_eq!(op.specializations[2].values, vec![15, 5, 3]);
    // Tuned over its range: timed at shapes spaced evenly in log size.
    let w = |spec| autotune_codegen::Workload {
        op: op.clone(),
        spec,
    };
    let ms: Vec<i64> = w(0).sweep().iter().map(|s| s[0]).collect();
    assert_eq!(ms, vec![1, 8, 64, 512, 4096]);
    assert!(w(0).sweep().iter().all(|s| s[1..] == [1024, 1024]));
    assert_eq!(w(0).sizes(), (vec![4096 * 1024, 1024 * 1024], 4096 * 1024));
    assert_eq!(w(0).output_size(), 4096 * 1024);
    assert_eq!(w(1).sweep(), vec![vec![512, 1024, 1024]]);
    assert_eq!(w(0).id().to_string().split(':').nth(3), Some("0=1..=4096"));
    let c = operator_c(&pkg(), op);
    for (test, chosen) in [
        (
            "if (best__ < 0 && 1 <= M && M <= 4096 && K == 1024 && N == 1024 && ",
            ") best__ = 0;",
        ),
        (
            "if (best__ < 0 && 8 <= M && M <= 15 && K == 5 && 2 <= N && N <= 3 && ",
            ") best__ = 1;",
        ),
    ] {
        assert!(
            c.lines()
                .any(|l| l.trim().starts_with(test) && l.ends_with(chosen)),
            "missing `{test}…{chosen}`"
        );
    }
    let kernels: Vec<&str> = c
        .lines()
        .filter_map(|l| l.strip_prefix("int32_t "))
        .filter_map(|l| l.split('(').next())
        .filter(|s| s.contains("_matmul_") && !s.contains("__"))
        .collect();
    assert_eq!(kernels.len(), 2, "{kernels:?}");
    assert!(kernels[0].ends_with("_M512_K1024_N1024"), "{kernels:?}");
    assert!(kernels[1].ends_with("_generic"), "{kernels:?}");
}
