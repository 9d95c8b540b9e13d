//! The `main` of a measurement program: reads the inputs, runs one candidate
//! (or the reference) to check it, or times it.

/// The driver's `main` (ELEM, N_IN, N_INPUTS, OUT_SIZE, CALL_ARGS and PREFIX are
/// replaced when a batch is generated).
pub(super) const MAIN: &str = r#"
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static ELEM *read_input(const char *dir, int i, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
  ELEM *p = malloc(sizeof(ELEM) * (n + 1));
  FILE *f = fopen(path, "rb");
  if (!p || !f || fread(p, sizeof(ELEM), n, f) != n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  return p;
}

/* Evicts the caches by writing a buffer larger than the last-level cache. */
static void flush_caches(void) {
  static char *junk;
  const size_t size = (size_t)256 << 20;
  if (!junk) junk = malloc(size);
  if (junk) memset(junk, (int)(now() * 1000) & 0xff, size);
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int idx = atoi(argv[1]);
  const char *dir = argv[2];
  ELEM *in[N_IN];
  for (int i = 0; i < N_INPUTS; ++i) in[i] = read_input(dir, i, in_sizes[i]);
  ELEM *out = calloc((size_t)OUT_SIZE + 1, sizeof(ELEM));
  if (!out) return 3;
  kernel_t k = kernels[idx];
  if (!k && strcmp(argv[3], "reference")) return 4;
  if (!strcmp(argv[3], "check") || !strcmp(argv[3], "reference")) {
    if (!strcmp(argv[3], "reference") ? run_reference(CALL_ARGS) : k(CALL_ARGS)) return 3;
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(out, sizeof(ELEM), (size_t)OUT_SIZE, f) != (size_t)OUT_SIZE) return 2;
    fclose(f);
    return 0;
  }
  double min_sample = atof(argv[4]);
  int samples = atoi(argv[5]);
  PREFIX_set_num_threads(atoi(argv[6]));
  int flush = atoi(argv[7]);
  if (samples < 1) samples = 1;
  if (samples > 64) samples = 64;
  /* Warm-up, which also sizes the repeats of a sample. */
  double t0 = now();
  if (k(CALL_ARGS)) return 3;
  double once = now() - t0;
  long reps = flush ? 1 : (long)(min_sample / (once > 1e-9 ? once : 1e-9)) + 1;
  if (reps > 1000000) reps = 1000000;
  double s[64];
  for (int j = 0; j < samples; ++j) {
    double total = 0;
    for (long r = 0; r < reps; ++r) {
      if (flush) flush_caches();
      double a = now();
      if (k(CALL_ARGS)) return 3;
      total += now() - a;
    }
    s[j] = total / (double)reps;
  }
  qsort(s, (size_t)samples, sizeof s[0], cmp_double);
  printf("median_s=%.9e min_s=%.9e max_s=%.9e reps=%ld\n", s[samples / 2], s[0], s[samples - 1], reps);
  return 0;
}
"#;
