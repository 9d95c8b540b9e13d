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
 *   int32_t P_cpu_is(const char *vendor, int32_t family, int32_t model);
 *       1 if this CPU is the one named: its CPUID vendor string (letters and digits
 *       only) and display family and model (the extended family added to family 15,
 *       the extended model prefixed to the model of families 6 and 15, as Linux prints
 *       them and autotune's CpuId records them), else 0 (always 0 off x86). Kernels
 *       tuned on several CPUs pick their config with it on every call; CPUID is read
 *       and decoded once.
 *
 * On x86, __builtin_cpu_supports (GCC, clang) reports AVX/AVX2/FMA only if the OS has
 * enabled ymm state in XCR0, and AVX-512 features only if it has also enabled opmask and
 * zmm state (libgcc and compiler-rt check XGETBV), so no separate XGETBV check is needed.
 * On other architectures the level is always 0.
 */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

/* This CPU's vendor (letters and digits), display family and model: read once, since
 * CPUID is slow (in a VM it traps to the hypervisor) and dispatchers ask on every call. */
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char cpu_vendor[13];
static int32_t cpu_family = -1, cpu_model = -1; /* -1: not x86, or CPUID failed */

static void cpu_read(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned int eax, ebx, ecx, edx, sig;
    char raw[12];
    int n = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx) || !__get_cpuid(1, &sig, &eax, &eax, &eax)) return;
    memcpy(raw, &ebx, 4);
    memcpy(raw + 4, &edx, 4);
    memcpy(raw + 8, &ecx, 4);
    for (int i = 0; i < 12; ++i) {
        char c = raw[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) cpu_vendor[n++] = c;
    }
    cpu_vendor[n] = 0;
    unsigned int base = (sig >> 8) & 0xf;
    unsigned int mod = (sig >> 4) & 0xf;
    if (base == 0x6 || base == 0xf) mod |= ((sig >> 16) & 0xf) << 4;
    cpu_family = (int32_t)(base == 0xf ? base + ((sig >> 20) & 0xff) : base);
    cpu_model = (int32_t)mod;
#endif
}

int32_t AUTOTUNE_POOL_PREFIX_cpu_is(const char *vendor, int32_t family, int32_t model) {
    pthread_once(&cpu_once, cpu_read);
    return cpu_family >= 0 && cpu_family == family && cpu_model == model &&
           strcmp(cpu_vendor, vendor) == 0;
}
