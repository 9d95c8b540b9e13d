//! The vector loads of every other element (`emit::STRIDE2_C`), run in C: each
//! lane holds the element it names, and a load whose last lane is the last
//! element of its buffer reads nothing past it (the buffer ends where a page
//! that cannot be read begins). At -O3 as kernels are built, for `float` and
//! `double` at every vector width, with both spellings of the shuffle (GCC 12's
//! and clang's `__builtin_shufflevector`, older GCC's `__builtin_shuffle`), at
//! the baseline ISA and, where this CPU has it, AVX-512.

use std::path::Path;
use std::process::Command;

use autotune_codegen::emit::{file_header, STRIDE2_C};
use autotune_codegen::runtime::{C_FLAGS, OPT_LEVEL};
use autotune_lang::ir::DType;

/// For each width, the load at every start whose lanes fit in a buffer of
/// `N` elements placed against an unreadable page.
const DRIVER: &str = r#"
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N 40
#define CHECK(L)                                                                   \
    for (int s = 0; s + 2 * ((L) - 1) < N; s++) {                                  \
        at_v##L v = at_load_s2_v##L(&x[s]);                                        \
        for (int l = 0; l < (L); l++)                                              \
            if (v[l] != x[s + 2 * l]) {                                            \
                printf("v%d at %d: lane %d is %g, not %g\n", (L), s, l, (double)v[l], \
                       (double)x[s + 2 * l]);                                      \
                return 1;                                                          \
            }                                                                      \
    }

int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *p = mmap(0, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + page, page, PROT_NONE)) return 2;
    ELEM *x = (ELEM *)(p + page) - N;
    for (int i = 0; i < N; i++) x[i] = (ELEM)(i * 3 + 1);
    WIDTHS
    printf("ok\n");
    return 0;
}
"#;

fn check(dtype: DType, old_gcc: bool, avx512: bool) {
    let (elem, widths) = match dtype {
        DType::F32 => ("float", "CHECK(4) CHECK(8) CHECK(16)"),
        DType::F64 => ("double", "CHECK(2) CHECK(4) CHECK(8)"),
    };
    let mut helpers = STRIDE2_C.to_string();
    if old_gcc {
        helpers = helpers.replace("__GNUC__ >= 12", "0");
        assert_ne!(
            helpers, STRIDE2_C,
            "the test no longer picks the old spelling"
        );
    }
    let source = format!(
        "{}{helpers}{}",
        file_header("the stride-2 load test", dtype, "t"),
        DRIVER.replace("ELEM", elem).replace("WIDTHS", widths)
    );
    let name = format!("{elem}-{}-{}", u8::from(old_gcc), u8::from(avx512));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stride2");
    std::fs::create_dir_all(&dir).unwrap();
    let (c, exe) = (dir.join(format!("{name}.c")), dir.join(&name));
    std::fs::write(&c, source).unwrap();
    let mut cc = Command::new("cc");
    cc.arg(format!("-O{OPT_LEVEL}")).args(C_FLAGS);
    if avx512 {
        cc.args(["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"]);
    }
    let out = cc.arg(&c).arg("-o").arg(&exe).output().expect("cc runs");
    assert!(
        out.status.success(),
        "{name} does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("the driver runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.trim() == "ok",
        "{name}: {stdout} ({})",
        run.status
    );
}

#[test]
fn stride2_loads_read_their_lanes_and_nothing_past_the_last() {
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    for dtype in [DType::F32, DType::F64] {
        for old_gcc in [false, true] {
            check(dtype, old_gcc, false);
            if avx512 {
                check(dtype, old_gcc, true);
            }
        }
    }
}
