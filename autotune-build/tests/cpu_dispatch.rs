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
    let item: syn::ItemFn = syn::parse_str(
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    )
    .unwrap();
    let op =
        autotune_lang::parse_operator("specialize(M = 5, N = 7, K = 3)".parse().unwrap(), &item)
            .unwrap();
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
