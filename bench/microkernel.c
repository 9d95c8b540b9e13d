/*
 * microkernel.c: how close a register tile written as autotune writes it (GCC vector
 * extensions, one accumulator per row and vector, a broadcast of the row's element times a
 * vector of the packed panel) comes to the FMA peak, with nothing else in the way: the
 * packed panels of one tile, in L1 (B reused) or streamed from L2 (B per call), with or
 * without software prefetch. Compiled with the kernels' flags and target attribute.
 *   microkernel KC PANELS    (MR, NV, VL, BSTREAM, PF set with -D; see bench/microkernel.sh)
 * Prints GFLOP/s of repeated MR x (NV*VL) x KC tile updates (best of 3).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if EMBEDDED == 2
#include <immintrin.h>
#endif

#ifndef MR
#define MR 6 /* rows of the tile: broadcasts per reduction step */
#endif
#ifndef VL
#define VL 16 /* floats per vector: 16 (AVX-512), 8 (AVX2, as the AVX2 clone lowers) */
#endif
#ifndef NV
#define NV 3 /* VL-float vectors per row */
#endif
#ifndef BSTREAM
#define BSTREAM 0 /* 1: each call reads another B panel (from L2), 0: one panel (L1) */
#endif
#ifndef PF
#define PF 0 /* prefetch distance in reduction steps (0: none) */
#endif
#ifndef EMBEDDED
#define EMBEDDED 0 /* 1: the 12x2 tile by hand, FMAs with embedded-broadcast operands;
                      2: the tile written with AVX-512 intrinsics (any MR x NV) */
#endif
#if EMBEDDED == 1 && (MR != 12 || NV != 2)
#error "the hand-written tile is 12x2"
#endif
#if EMBEDDED && VL != 16
#error "the hand-written and intrinsics tiles are AVX-512's"
#endif

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
typedef float vl __attribute__((vector_size(VL * 4)));
typedef float vlu __attribute__((vector_size(VL * 4), aligned(4)));
#if VL == 16
#define TILE_TARGET "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"
#else
#define TILE_TARGET "avx2,fma"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target(TILE_TARGET), noinline)) static void
tile(const float *restrict pa, const float *restrict pb, float *restrict c, int64_t kc) {
    vl acc[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++) acc[i][j] = *(const vlu *)&c[(i * NV + j) * VL];
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        if (PF) {
            for (int j = 0; j < NV; j++) __builtin_prefetch(&pb[(k + PF) * NV * VL + j * VL], 0, 3);
            if (k % 4 == 0) __builtin_prefetch(&pa[(k + PF) * MR], 0, 3);
        }
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NV; j++)
                acc[i][j] += pa[k * MR + i] * *(const vlu *)&pb[(k * NV + j) * VL];
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++) *(vlu *)&c[(i * NV + j) * VL] = acc[i][j];
}

#if EMBEDDED == 2
/* The same tile as an explicit-SIMD micro-kernel is usually written: one broadcast per row
 * (_mm512_set1_ps) and one _mm512_fmadd_ps per accumulator. */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), noinline)) static void
tile_intrinsics(const float *restrict pa, const float *restrict pb, float *restrict c, int64_t kc) {
    __m512 acc[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++) acc[i][j] = _mm512_loadu_ps(&c[(i * NV + j) * 16]);
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        __m512 b[NV];
        for (int j = 0; j < NV; j++) b[j] = _mm512_loadu_ps(&pb[(k * NV + j) * 16]);
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_set1_ps(pa[k * MR + i]);
            for (int j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NV; j++) _mm512_storeu_ps(&c[(i * NV + j) * 16], acc[i][j]);
}
#define TILE tile_intrinsics
#elif EMBEDDED
/* The same 12x2 tile written as a hand-written kernel would: 24 named accumulators, two
 * vector loads of B and 24 FMAs whose A operand is an embedded broadcast from memory. */
#define ROW(i, u, v)                                                                       \
    __asm__("vfmadd231ps %2%{1to16%}, %3, %0\n\tvfmadd231ps %2%{1to16%}, %4, %1"          \
            : "+v"(u), "+v"(v)                                                             \
            : "m"(p[i]), "v"(x), "v"(y))
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), noinline)) static void
tile_by_hand(const float *restrict pa, const float *restrict pb, float *restrict c, int64_t kc) {
    v16 a0 = *(const v16u *)&c[0], a1 = *(const v16u *)&c[16], a2 = *(const v16u *)&c[32],
        a3 = *(const v16u *)&c[48], a4 = *(const v16u *)&c[64], a5 = *(const v16u *)&c[80],
        a6 = *(const v16u *)&c[96], a7 = *(const v16u *)&c[112], a8 = *(const v16u *)&c[128],
        a9 = *(const v16u *)&c[144], a10 = *(const v16u *)&c[160], a11 = *(const v16u *)&c[176];
    v16 b0 = *(const v16u *)&c[192], b1 = *(const v16u *)&c[208], b2 = *(const v16u *)&c[224],
        b3 = *(const v16u *)&c[240], b4 = *(const v16u *)&c[256], b5 = *(const v16u *)&c[272],
        b6 = *(const v16u *)&c[288], b7 = *(const v16u *)&c[304], b8 = *(const v16u *)&c[320],
        b9 = *(const v16u *)&c[336], b10 = *(const v16u *)&c[352], b11 = *(const v16u *)&c[368];
    for (int64_t k = 0; k < kc; k++) {
        const float *p = pa + k * MR;
        v16 x = *(const v16u *)&pb[k * 32], y = *(const v16u *)&pb[k * 32 + 16];
        ROW(0, a0, b0); ROW(1, a1, b1); ROW(2, a2, b2); ROW(3, a3, b3);
        ROW(4, a4, b4); ROW(5, a5, b5); ROW(6, a6, b6); ROW(7, a7, b7);
        ROW(8, a8, b8); ROW(9, a9, b9); ROW(10, a10, b10); ROW(11, a11, b11);
    }
    v16 all[24] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11,
                   b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11};
    for (int i = 0; i < 24; i++) *(v16u *)&c[i * 16] = all[i];
}
#define TILE tile_by_hand
#else
#define TILE tile
#endif

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int64_t kc = atoll(argv[1]), panels = atoll(argv[2]);
    float *pa = malloc(sizeof(float) * (kc + PF + 1) * MR * panels);
    float *pb = malloc(sizeof(float) * (kc + PF + 1) * NV * VL * panels);
    float c[MR * NV * VL] = {0};
    if (!pa || !pb) return 1;
    for (int64_t i = 0; i < (kc + PF + 1) * MR * panels; i++) pa[i] = 1e-3f * (float)(i % 7);
    for (int64_t i = 0; i < (kc + PF + 1) * NV * VL * panels; i++) pb[i] = 1e-3f * (float)(i % 5);
    int64_t reps = 400000000 / (kc * MR * NV * VL) + 1;
    double best = 0;
    for (int t = 0; t < 3; t++) {
        double t0 = now();
        for (int64_t r = 0; r < reps; r++) {
            int64_t p = r % panels;
            TILE(pa + p * kc * MR, pb + (BSTREAM ? p * kc * NV * VL : 0), c, kc);
        }
        double g = 2.0 * kc * MR * NV * VL * reps / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("tile %dx%d (x%d) kc=%lld %s prefetch=%d%s: %.1f GFLOP/s (check %g)\n", MR, NV, VL,
           (long long)kc, BSTREAM ? "B from L2" : "B in L1", PF,
           EMBEDDED == 1 ? " by hand, embedded broadcasts" : EMBEDDED == 2 ? " intrinsics" : "", best, (double)c[0]);
    free(pa);
    free(pb);
    return 0;
}
