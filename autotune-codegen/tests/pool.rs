//! The runtime's contract (`pool.c`), run in C: `parallel_for` calls its body
//! over disjoint chunks that cover `[0, n)` exactly once, at every thread count
//! and size, and splits a loop finer than one chunk per thread (no chunk above
//! 1/(2t) of the loop), so one slow thread cannot hold a call up for a whole
//! thread's share; `alloc` hands out cache-line-aligned memory that `free`
//! takes back.

use std::path::Path;
use std::process::Command;

use autotune_codegen::runtime::{runtime_c, C_FLAGS, RUNTIME_C};

const DRIVER: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int32_t t_parallel_for(int64_t n, void (*body)(void *, int64_t, int64_t), void *ctx);
void t_set_num_threads(int32_t n);

#define MAX_N 5000
static int visits[MAX_N];
static int64_t largest, bad;

static void body(void *ctx, int64_t begin, int64_t end) {
    (void)ctx;
    if (begin < 0 || end <= begin || end > MAX_N) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    for (int64_t i = begin; i < end && i >= 0 && i < MAX_N; i++)
        __atomic_add_fetch(&visits[i], 1, __ATOMIC_RELAXED);
    int64_t size = end - begin, seen = __atomic_load_n(&largest, __ATOMIC_RELAXED);
    while (size > seen &&
           !__atomic_compare_exchange_n(&largest, &seen, size, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

int main(void) {
    static const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 56, 64, 97, 128, 1000, 4999};
    for (int t = 1; t <= 4; t++) {
        t_set_num_threads(t);
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            for (int rep = 0; rep < 20; rep++) {
                int64_t n = sizes[s];
                for (int64_t i = 0; i < MAX_N; i++) visits[i] = 0;
                largest = 0, bad = 0;
                t_parallel_for(n, body, 0);
                for (int64_t i = 0; i < MAX_N; i++) {
                    if (visits[i] != (i < n)) {
                        printf("t=%d n=%lld: iteration %lld ran %d times\n", t, (long long)n,
                               (long long)i, visits[i]);
                        return 1;
                    }
                }
                if (bad) {
                    printf("t=%d n=%lld: a chunk out of [0, n)\n", t, (long long)n);
                    return 1;
                }
                /* Below 2t iterations every chunk is one iteration; one thread runs one. */
                int64_t limit = t == 1 || n < 2 * t ? n : n / (2 * t);
                if (largest > limit) {
                    printf("t=%d n=%lld: a chunk of %lld iterations (at most %lld)\n", t,
                           (long long)n, (long long)largest, (long long)limit);
                    return 1;
                }
            }
        }
    }
    printf("ok\n");
    return 0;
}
"#;

const ALLOC_DRIVER: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *t_alloc(size_t bytes);

int main(void) {
    static const size_t sizes[] = {0, 1, 3, 4, 17, 64, 100, 4096, 4100, 100000, 1 << 20, 3 << 20};
    for (int rep = 0; rep < 50; rep++) {
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            /* A heap in any state: malloc's blocks of odd sizes between. */
            void *odd = malloc(1 + (size_t)rep * 24 + s * 8);
            unsigned char *p = t_alloc(sizes[s]);
            if (!p || (uintptr_t)p % 64) {
                printf("alloc(%zu) returned %p\n", sizes[s], (void *)p);
                return 1;
            }
            memset(p, 0xA5, sizes[s]);
            free(p);
            free(odd);
        }
    }
    printf("ok\n");
    return 0;
}
"#;

/// Compiles `driver` (C) with the runtime under the prefix `t` in `dir` and
/// runs it: it must print `ok`.
fn run_with_runtime(dir: &str, driver: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut sources = vec![dir.join("driver.c")];
    std::fs::write(&sources[0], driver).unwrap();
    for (name, source) in RUNTIME_C {
        let path = dir.join(name);
        std::fs::write(&path, runtime_c("t", source)).unwrap();
        sources.push(path);
    }
    let exe = dir.join("driver");
    let out = Command::new("cc")
        .args(C_FLAGS)
        .args(&sources)
        .arg("-o")
        .arg(&exe)
        .arg("-pthread")
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "the runtime does not compile:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("the driver runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success() && stdout.trim() == "ok", "{stdout}");
}

#[test]
fn parallel_for_covers_the_loop_once_in_guided_chunks() {
    run_with_runtime("pool", DRIVER);
}

#[test]
fn alloc_returns_cache_line_aligned_memory_that_free_releases() {
    run_with_runtime("alloc", ALLOC_DRIVER);
}
