/*
 * isa.c: run-time instruction-set detection, so a kernel library built with several
 * instruction-set variants can pick the best one the machine supports.
 *
 * Like pool.c, its exported name contains the placeholder AUTOTUNE_POOL_PREFIX, which the
 * build helper replaces textually by the crate's prefix; everything else is static.
 *
 *   int32_t P_isa_level(void);
 *       2 = AVX-512 (avx512f, avx512vl, avx512bw and avx512dq, and the OS saves zmm
 *           state), 1 = AVX2 + FMA (and the OS saves ymm state), 0 = baseline.
 *       The environment variable AUTOTUNE_ISA, if set to "avx512", "avx2" or "baseline",
 *       caps the level: it can lower the detected level, never raise it. Other values are
 *       ignored. The result is computed on the first call and cached.
 *
 * On x86, __builtin_cpu_supports (GCC, clang) reports AVX/AVX2/FMA only if the OS has
 * enabled ymm state in XCR0, and AVX-512 features only if it has also enabled opmask and
 * zmm state (libgcc and compiler-rt check XGETBV), so no separate XGETBV check is needed.
 * On other architectures the level is always 0.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int32_t isa_cached = -1; /* -1 = not computed yet; accessed with __atomic_* */

static int32_t isa_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq");
    return avx512 ? 2 : avx2 ? 1 : 0;
#else
    return 0;
#endif
}

int32_t AUTOTUNE_POOL_PREFIX_isa_level(void) {
    int32_t level = __atomic_load_n(&isa_cached, __ATOMIC_RELAXED);
    if (level >= 0) return level;

    level = isa_detect();
    const char *cap = getenv("AUTOTUNE_ISA");
    if (cap != 0) {
        int32_t max = level;
        if (strcmp(cap, "avx512") == 0) max = 2;
        else if (strcmp(cap, "avx2") == 0) max = 1;
        else if (strcmp(cap, "baseline") == 0) max = 0;
        if (max < level) level = max;
    }
    /* Racing first calls compute the same value, so a plain store is enough. */
    __atomic_store_n(&isa_cached, level, __ATOMIC_RELAXED);
    return level;
}
