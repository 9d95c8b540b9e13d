/* Times each tiled kernel of a generic kernel alone, its default schedule and its
 * dispatcher, at the GEMM shapes read from stdin ("M N K" lines), 1 thread: what
 * the dispatcher chose against the best it could have chosen (bench/dispatch.sh).
 * Built with -DSYM=<generic kernel symbol> -DBUCKETS=<n>; prints per shape
 * "M N K" then GFLOP/s of t0 .. t<n-1>, the default schedule and the dispatcher.
 * Each is the best of at least 5 samples and argv[1] seconds (default 0.03). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
typedef int32_t (*kernel_fn)(const float *restrict, const float *restrict, float *restrict,
                             int64_t, int64_t, int64_t);
#define DECL(x) int32_t CAT(SYM, x)(const float *restrict, const float *restrict, float *restrict, \
                                    int64_t, int64_t, int64_t);
DECL(__t0) DECL(__t1) DECL(__t2) DECL(__t3) DECL(__t4) DECL(__t5) DECL(__t6) DECL(__t7)
DECL(__naive) DECL()
void autotune1_measure_set_num_threads(int32_t n);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const double min_seconds = argc > 1 ? atof(argv[1]) : 0.03;
  kernel_fn all[] = {CAT(SYM, __t0), CAT(SYM, __t1), CAT(SYM, __t2), CAT(SYM, __t3),
                     CAT(SYM, __t4), CAT(SYM, __t5), CAT(SYM, __t6), CAT(SYM, __t7)};
  kernel_fn ks[BUCKETS + 2];
  for (int b = 0; b < BUCKETS; b++) ks[b] = all[b];
  ks[BUCKETS] = CAT(SYM, __naive);
  ks[BUCKETS + 1] = SYM;
  autotune1_measure_set_num_threads(1);
  long m, n, k;
  while (scanf("%ld %ld %ld", &m, &n, &k) == 3) {
    float *a = malloc(4 * m * k + 64), *b = malloc(4 * k * n + 64), *c = malloc(4 * m * n + 64);
    for (long i = 0; i < m * k; i++) a[i] = (i % 7) * 0.1f;
    for (long i = 0; i < k * n; i++) b[i] = (i % 5) * 0.1f;
    double flop = 2.0 * m * n * k;
    int inner = flop < 2e6 ? (int)(2e6 / flop) + 1 : 1; /* calls per sample: about 2 MFLOP */
    printf("%ld %ld %ld", m, n, k);
    for (int i = 0; i < BUCKETS + 2; i++) {
      double best = 1e30, total = 0;
      for (int r = 0; (r < 5 || total < min_seconds) && r < 1000000; r++) {
        double t = now();
        for (int q = 0; q < inner; q++) ks[i](a, b, c, m, k, n);
        t = now() - t;
        total += t;
        if (t / inner < best) best = t / inner;
      }
      printf(" %.2f", flop / best * 1e-9);
    }
    printf("\n");
    fflush(stdout);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
