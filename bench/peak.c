// The FP32 FMA peak of this CPU at its widest vector: zmm where it has AVX-512F, else
// ymm (AVX2 + FMA). The peers' probe (../shared/peers/c/peak.c) runs zmm FMAs
// unconditionally, so it neither builds nor runs on an AVX2-only CPU; this one picks at
// run time. Each thread pinned to the core of its index; median of 9 reps.
// Build: gcc -O2 -pthread bench/peak.c -o peak        Usage: ./peak [threads]
// Prints the clock (a chain of dependent adds) and one line
//   threads=N fma512_zmm GFLOP/s total min=.. median=.. max=..  per_core=..  FLOP/cycle/core=..
// (fma256_ymm on AVX2), the format the bench scripts and reports read.
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// 10 dependent adds per iteration: one a cycle.
static uint64_t adds(uint64_t iters) {
  uint64_t x = 0;
  for (uint64_t i = 0; i < iters; i++)
    __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                     "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                     : "+r"(x));
  return x;
}

// 12 independent accumulators in registers hide a 4-5 cycle FMA latency on 2 ports;
// the asm keeps the compiler from folding the chains.
#define FMA6(c0, c1, c2, c3, c4, c5)                                                    \
  __asm__ volatile("vfmadd231ps %[a], %[b], %[x0]\n\tvfmadd231ps %[a], %[b], %[x1]\n\t" \
                   "vfmadd231ps %[a], %[b], %[x2]\n\tvfmadd231ps %[a], %[b], %[x3]\n\t" \
                   "vfmadd231ps %[a], %[b], %[x4]\n\tvfmadd231ps %[a], %[b], %[x5]"     \
                   : [x0] "+v"(c0), [x1] "+v"(c1), [x2] "+v"(c2), [x3] "+v"(c3),        \
                     [x4] "+v"(c4), [x5] "+v"(c5)                                      \
                   : [a] "v"(a), [b] "v"(b))
#define FMA12(T, SET, ADD)                                                              \
  T a = SET(0.999999f), b = SET(1e-7f);                                                 \
  T c0 = SET(0.f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;                         \
  T c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;                             \
  for (uint64_t i = 0; i < iters; i++) {                                                \
    FMA6(c0, c1, c2, c3, c4, c5);                                                       \
    FMA6(c6, c7, c8, c9, c10, c11);                                                     \
  }                                                                                     \
  T s = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));              \
  s = ADD(s, ADD(ADD(c8, c9), ADD(c10, c11)));                                          \
  float o[sizeof(T) / 4];                                                               \
  __builtin_memcpy(o, &s, sizeof o);                                                    \
  return o[0];

__attribute__((target("avx512f"), noinline)) static float fma_zmm(uint64_t iters) {
  FMA12(__m512, _mm512_set1_ps, _mm512_add_ps)
}

__attribute__((target("avx2,fma"), noinline)) static float fma_ymm(uint64_t iters) {
  FMA12(__m256, _mm256_set1_ps, _mm256_add_ps)
}

typedef struct {
  int id, which;  // 0: adds, 1: zmm FMAs, 2: ymm FMAs
  uint64_t iters;
  pthread_barrier_t *bar;
  double secs;
  volatile double sink;
} job_t;

static void *worker(void *p) {
  job_t *j = p;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(j->id, &s);
  sched_setaffinity(0, sizeof s, &s);
  pthread_barrier_wait(j->bar);
  double t0 = now();
  j->sink = j->which == 0 ? (double)adds(j->iters)
            : j->which == 1 ? fma_zmm(j->iters)
                            : fma_ymm(j->iters);
  j->secs = now() - t0;
  return NULL;
}

// Seconds of the slowest of `nt` threads running `which`.
static double run(int nt, int which, uint64_t iters) {
  pthread_t th[64];
  job_t jobs[64];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, nt);
  for (int i = 0; i < nt; i++) {
    jobs[i] = (job_t){.id = i, .which = which, .iters = iters, .bar = &bar};
    pthread_create(&th[i], NULL, worker, &jobs[i]);
  }
  double mx = 0;
  for (int i = 0; i < nt; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].secs > mx) mx = jobs[i].secs;
  }
  pthread_barrier_destroy(&bar);
  return mx;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

// Rates (work per second) over 9 reps after a warm-up: min, median, max.
static void rates(int nt, int which, uint64_t iters, double work, double r[3]) {
  double s[9];
  run(nt, which, iters / 4);
  for (int i = 0; i < 9; i++) s[i] = work * iters / run(nt, which, iters);
  qsort(s, 9, sizeof s[0], cmp);
  r[0] = s[0], r[1] = s[4], r[2] = s[8];
}

int main(int argc, char **argv) {
  int nt = argc > 1 ? atoi(argv[1]) : 1;
  if (nt < 1 || nt > 64) {
    fprintf(stderr, "usage: peak [threads 1..64]\n");
    return 2;
  }
  __builtin_cpu_init();
  int zmm = __builtin_cpu_supports("avx512f");
  if (!zmm && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    fprintf(stderr, "peak: this CPU has neither AVX-512F nor AVX2 with FMA\n");
    return 1;
  }
  double r[3];
  rates(nt, 0, 120000000, 10.0, r);
  double ghz = r[1] / 1e9;
  printf("threads=%d clock_GHz(dep-add chain, per thread) min=%.3f median=%.3f max=%.3f\n", nt,
         r[0] / 1e9, r[1] / 1e9, r[2] / 1e9);
  // 12 FMAs x lanes x 2 FLOP per iteration and thread.
  double flop = 12.0 * (zmm ? 16 : 8) * 2 * nt;
  rates(nt, zmm ? 1 : 2, zmm ? 40000000 : 80000000, flop, r);
  printf("threads=%d %s GFLOP/s total min=%.1f median=%.1f max=%.1f  per_core=%.1f  "
         "FLOP/cycle/core=%.1f\n",
         nt, zmm ? "fma512_zmm" : "fma256_ymm", r[0] / 1e9, r[1] / 1e9, r[2] / 1e9,
         r[1] / 1e9 / nt, r[1] / 1e9 / nt / ghz);
  return 0;
}
