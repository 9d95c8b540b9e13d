//! The `main` of a measurement program: reads the inputs, runs one candidate
//! (or the reference) to check it, or times it. It is compiled once per
//! harness and finds a batch's kernels in that batch's table (a few lines
//! that include `stdint.h` alone).

use std::fmt::Write as _;

use autotune_codegen::Workload;
use autotune_lang::ir::DType;

/// The kernel signature of a measurement program of `w`: the inputs, the
/// output, then a slot per constant input (the program keeps one handle per
/// constant, so its first call fills the kernel's copies and the timed calls
/// reuse them, as calls through `autotune::Constant` do).
fn params(w: &Workload) -> Vec<String> {
    let t = w.op.dtype.c_name();
    let (in_sizes, _) = w.sizes();
    (0..in_sizes.len())
        .map(|_| format!("const {t} *"))
        .chain([format!("{t} *")])
        .chain((0..w.op.constants.len()).map(|_| "void *".to_string()))
        .collect()
}

/// `items` as a C initialiser list, or `empty` where there are none (C has
/// no empty arrays).
fn c_list(items: &[String], empty: &str) -> String {
    match items.is_empty() {
        true => empty.to_string(),
        false => items.join(", "),
    }
}

/// The table of a batch holding the kernels `names` (`None`: a candidate that
/// did not build, whose slot is empty): the one part of a measurement program
/// compiled per batch, a few lines that need no header beyond `stdint.h` (the
/// driver's own `main`, [`source`], is compiled once per harness).
pub(super) fn table(w: &Workload, names: &[Option<String>]) -> String {
    let params = params(w).join(", ");
    let mut c = format!("#include <stdint.h>\ntypedef int32_t (*kernel_t)({params});\n");
    // What a timed run calls: the kernel, or a bucket's call at each shape of
    // its sweep, timed one after another.
    let parts = w.sweep().len();
    let empty_row = format!("{{{}}}", vec!["0"; parts].join(", "));
    let mut kernels = Vec::new();
    let mut timed = Vec::new();
    for n in names {
        let Some(name) = n else {
            kernels.push("0".to_string());
            timed.push(empty_row.clone());
            continue;
        };
        let row: Vec<String> = match w.bucket() {
            Some(_) => (0..parts).map(|j| format!("{name}__s{j}")).collect(),
            None => Vec::new(),
        };
        for f in std::iter::once(name).chain(&row) {
            let _ = writeln!(c, "int32_t {f}({params});");
        }
        timed.push(match row.is_empty() {
            true => format!("{{{name}}}"),
            false => format!("{{{}}}", row.join(", ")),
        });
        kernels.push(name.clone());
    }
    let _ = writeln!(
        c,
        "const int at_n_kernels = {};\nkernel_t at_kernels[] = {{{}}};\nkernel_t at_timed[][{parts}] = {{{}}};",
        names.len(),
        c_list(&kernels, "0"),
        c_list(&timed, &empty_row)
    );
    c
}

/// The driver of the measurement programs of `w`, whose kernels a batch's
/// [`table`] lists, and which calls the kernel `reference` itself.
pub(super) fn source(w: &Workload, prefix: &str) -> String {
    let t = w.op.dtype.c_name();
    let (in_sizes, out_size) = w.sizes();
    let n_const = w.op.constants.len();
    let params = params(w);
    let parts = w.sweep().len();
    let mut driver = String::new();
    let _ = writeln!(
        driver,
        "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\
         #include <sys/mman.h>\n#include <unistd.h>\n\
         typedef int32_t (*kernel_t)({});\nvoid {prefix}_set_num_threads(int32_t);\n\
         extern const int at_n_kernels;\nextern kernel_t at_kernels[];\nextern kernel_t at_timed[][{parts}];",
        params.join(", ")
    );
    let shape_params: Vec<&str> = w.shapes().iter().map(|_| "int64_t").collect();
    let _ = writeln!(
        driver,
        "int32_t reference({});\nstatic int32_t run_reference({}) {{ return reference({}); }}",
        params
            .iter()
            .map(|p| p.as_str())
            .chain(shape_params)
            .collect::<Vec<_>>()
            .join(", "),
        params
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{p}p{i}"))
            .collect::<Vec<_>>()
            .join(", "),
        (0..params.len())
            .map(|i| format!("p{i}"))
            .chain(w.shapes().iter().map(|v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        driver,
        "static const size_t in_sizes[] = {{{}}};",
        in_sizes
            .iter()
            .map(|s| s.to_string())
            .chain(["0".to_string()])
            .collect::<Vec<_>>()
            .join(", ")
    );
    // A signalling NaN with a payload no arithmetic produces.
    let poison = match w.op.dtype {
        DType::F32 => ("uint32_t", "0x7FA0A5A5u"),
        DType::F64 => ("uint64_t", "0x7FF4A5A5A5A5A5A5ull"),
    };
    let args: Vec<String> = (0..in_sizes.len())
        .map(|i| format!("in[{i}]"))
        .chain(["out".to_string()])
        .chain((0..n_const).map(|i| format!("&slots[{i}]")))
        .collect();
    // The kernels' blocks of copies, which timed runs evict.
    driver.push_str(autotune_codegen::emit::CONSTANTS_C);
    driver.push_str(
        &MAIN
            .replace("ELEM_BITS", poison.0)
            .replace("POISON", poison.1)
            .replace("ELEM", t)
            .replace("N_INPUTS", &in_sizes.len().to_string())
            .replace("N_IN", &in_sizes.len().max(1).to_string())
            .replace("OUT_SIZE", &w.output_size().to_string())
            .replace("OUT_ALLOC", &out_size.to_string())
            .replace("N_PARTS", &parts.to_string())
            .replace("N_SLOTS", &n_const.max(1).to_string())
            .replace("N_CONSTANTS", &n_const.to_string())
            .replace(
                "CONST_INPUTS",
                &c_list(
                    &w.op
                        .constants
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>(),
                    "-1",
                ),
            )
            .replace("CALL_ARGS", &args.join(", "))
            .replace("PREFIX", prefix),
    );
    driver
}

/// A function `name` of the batch's kernel signature that calls the generic
/// kernel `generic` at the shapes of `w`; for a bucket also `<name>__s<j>`,
/// a call at shape `j` of its [`Workload::sweep`].
pub fn call_at_shapes(w: &Workload, name: &str, generic: &str) -> String {
    let t = w.op.dtype.c_name();
    let n = w.op.inputs.len();
    let n_const = w.op.constants.len();
    let params: Vec<String> = (0..n)
        .map(|i| format!("const {t} *p{i}"))
        .chain([format!("{t} *out")])
        .chain((0..n_const).map(|i| format!("void *c{i}")))
        .collect();
    let params = params.join(", ");
    let call = |name: &str, shapes: &[i64]| -> String {
        let args: Vec<String> = (0..n)
            .map(|i| format!("p{i}"))
            .chain(["out".to_string()])
            .chain((0..n_const).map(|i| format!("c{i}")))
            .chain(shapes.iter().map(|v| v.to_string()))
            .collect();
        format!(
            "\nint32_t {name}({params}) {{ return {generic}({}); }}\n",
            args.join(", ")
        )
    };
    let mut c = call(name, w.shapes());
    if w.bucket().is_some() {
        for (j, shapes) in w.sweep().iter().enumerate() {
            c.push_str(&call(&format!("{name}__s{j}"), shapes));
        }
    }
    c
}

/// The driver's `main` (ELEM, ELEM_BITS, POISON, N_IN, N_INPUTS, OUT_SIZE,
/// OUT_ALLOC, N_PARTS, N_SLOTS, N_CONSTANTS, CALL_ARGS and PREFIX are replaced when a batch is
/// generated). A timed run prints one line per part (a bucket's sweep shape).
///
/// Every buffer sits between two guard regions of a fixed byte pattern, checked
/// after each checked run (exit 5: a write outside a buffer). In a checked run
/// each input ends where an inaccessible page begins, so that a read past its
/// end faults (a crash), which no pattern would show. Before a checked
/// run the output is filled with a signalling-NaN pattern no computation
/// produces, and an element still holding it afterwards was never written
/// (exit 6). Both are wrong results, whatever the reference holds there.
const MAIN: &str = r#"
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define GUARD 64
#define GUARD_BYTE 0xA5
/* The most calls, and seconds, a timing warms a kernel up with. */
#define WARM_CALLS 8
#define WARM_SECS 0.05

/* A buffer of n elements between two guard regions of GUARD elements each. */
static ELEM *guarded(size_t n) {
  unsigned char *p = malloc(sizeof(ELEM) * (n + 2 * GUARD));
  if (!p) return 0;
  memset(p, GUARD_BYTE, sizeof(ELEM) * GUARD);
  memset(p + sizeof(ELEM) * (GUARD + n), GUARD_BYTE, sizeof(ELEM) * GUARD);
  return (ELEM *)p + GUARD;
}

/* A checked run's input: a guard region before it, and right after its last
 * element a page that faults when touched. (Element-aligned, which is all the
 * kernels assume of a caller's buffer.) */
static ELEM *fenced(size_t n) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t span = (sizeof(ELEM) * (n + GUARD) + page - 1) / page * page;
  unsigned char *p = mmap(0, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mprotect(p + span, page, PROT_NONE)) return 0;
  ELEM *buf = (ELEM *)(p + span) - n;
  memset(buf - GUARD, GUARD_BYTE, sizeof(ELEM) * GUARD);
  return buf;
}

/* Exits with status 5, naming the buffer, if a guard region changed (`hi`: the
 * one after it too). */
static void check_guards(const ELEM *buf, size_t n, int hi_too, const char *what) {
  const unsigned char *lo = (const unsigned char *)(buf - GUARD);
  const unsigned char *hi = (const unsigned char *)(buf + n);
  for (size_t b = 0; b < sizeof(ELEM) * GUARD; ++b) {
    if (lo[b] != GUARD_BYTE || (hi_too && hi[b] != GUARD_BYTE)) {
      fprintf(stderr, "the kernel wrote outside %s (%s its end)\n", what,
              lo[b] != GUARD_BYTE ? "before" : "after");
      exit(5);
    }
  }
}

static ELEM *read_input(const char *dir, int i, size_t n, int checked) {
  char path[4096];
  snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
  ELEM *p = checked ? fenced(n) : guarded(n);
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

/* One handle per constant input: the head of its list of copies. */
static void *slots[N_SLOTS];
/* The inputs the handles hold, by constant. */
static const int const_inputs[] = {CONST_INPUTS};

/* Constants are timed cold: a program passes them on many calls with other work
 * between them (a network's other layers stream their own weights through the
 * caches), so before each timed call the constant inputs and the copies kernels
 * keep of them leave every cache level, while the other inputs stay as the last
 * call left them. Timed warm, configs that re-read megabytes of weights per tile row
 * won, and ran 1.4-1.6x slower with their weights in memory (docs/performance.md). */
#if defined(__x86_64__) && defined(__GLIBC__)
#include <cpuid.h>
#include <malloc.h>
/* The compilers' builtins behind _mm_clflushopt, _mm_clflush and _mm_mfence
 * (gcc and clang name them alike): immintrin.h, which defines those, costs gcc
 * 0.6 s to read, more than the rest of the driver. */
/* clflushopt where the CPU has it: clflush waits for each line (50 ms for 19 MB on
 * an Intel Xeon, against 1.2 ms). */
__attribute__((target("clflushopt"))) static void evict_opt(uintptr_t a, uintptr_t end) {
  for (; a < end; a += 64) __builtin_ia32_clflushopt((void *)a);
}
static void evict(const void *p, size_t bytes) {
  static int opt = -1;
  if (opt < 0) {
    unsigned a, b, c, d;
    opt = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 23 & 1);
  }
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + bytes;
  if (opt) evict_opt(a, end);
  else
    for (; a < end; a += 64) __builtin_ia32_clflush((const void *)a);
}
static void evict_constants(ELEM **in) {
  for (int c = 0; c < N_CONSTANTS; ++c) {
    evict(in[const_inputs[c]], sizeof(ELEM) * in_sizes[const_inputs[c]]);
    for (at_const_block *b = slots[c]; b; b = b->next) evict(b, malloc_usable_size(b));
  }
  __builtin_ia32_mfence();
}
#else
/* Without clflush and the blocks' sizes: every cache, the other inputs too. */
static void evict_constants(ELEM **in) { (void)in; flush_caches(); }
#endif

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int idx = atoi(argv[1]);
  const char *dir = argv[2];
  /* A checked run writes OUT_SIZE elements; a timed one may sweep larger calls. */
  int checked = !strcmp(argv[3], "check") || !strcmp(argv[3], "reference");
  ELEM *in[N_IN];
  for (int i = 0; i < N_INPUTS; ++i) in[i] = read_input(dir, i, in_sizes[i], checked);
  size_t out_alloc = checked ? (size_t)OUT_SIZE : (size_t)OUT_ALLOC;
  ELEM *out = guarded(out_alloc);
  if (!out) return 3;
  memset(out, 0, sizeof(ELEM) * out_alloc);
  if (idx < 0 || idx >= at_n_kernels) return 4;
  kernel_t k = checked ? at_kernels[idx] : at_timed[idx][0];
  if (!k && strcmp(argv[3], "reference")) return 4;
  if (checked) {
    /* Checked at the thread count it is timed and shipped with. */
    if (argc > 5) PREFIX_set_num_threads(atoi(argv[5]));
    const ELEM_BITS poison = POISON;
    /* With constants, the second call is checked: it reads the copies the
     * first one kept in the handles. */
    for (int call = 0; call < (N_CONSTANTS ? 2 : 1); ++call) {
      for (size_t e = 0; e < (size_t)OUT_SIZE; ++e) memcpy(&out[e], &poison, sizeof poison);
      if (!strcmp(argv[3], "reference") ? run_reference(CALL_ARGS) : k(CALL_ARGS)) return 3;
    }
    check_guards(out, (size_t)OUT_SIZE, 1, "its output");
    for (int i = 0; i < N_INPUTS; ++i) check_guards(in[i], in_sizes[i], 0, "an input");
    for (size_t e = 0; e < (size_t)OUT_SIZE; ++e) {
      if (!memcmp(&out[e], &poison, sizeof poison)) {
        fprintf(stderr, "the kernel left output element %zu unwritten\n", e);
        return 6;
      }
    }
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(out, sizeof(ELEM), (size_t)OUT_SIZE, f) != (size_t)OUT_SIZE) return 2;
    fclose(f);
    return 0;
  }
  double min_sample = atof(argv[4]);
  int samples = atoi(argv[5]);
  PREFIX_set_num_threads(atoi(argv[6]));
  int flush = atoi(argv[7]);
  /* Seconds a call past which two samples are enough (0: none): a search needs to
   * know that a config is far behind, not by how much exactly. */
  double give_up = argc > 8 ? atof(argv[8]) : 0;
  if (samples < 1) samples = 1;
  if (samples > 64) samples = 64;
  for (int p = 0; p < N_PARTS; ++p) {
    k = at_timed[idx][p];
    /* The first call through a handle fills the copies of its constants. */
    if (N_CONSTANTS && k(CALL_ARGS)) return 3;
    /* Warm-up. A kernel's first calls in a process run slower than the rest
     * (a GEMM 1024^3 took 12.6 ms a call over its first 5 and 10.4 from about the
     * tenth on), and a search times a few short samples: two calls each there,
     * so its median fell among those first calls. Where a sample holds fewer
     * than WARM_CALLS calls, up to WARM_CALLS calls or WARM_SECS (elsewhere the
     * first sample takes them, and the median leaves it out), and not past a
     * call slower than give_up (a config far behind, which two samples time);
     * the last sizes the repeats of a sample. */
    double once = 0, warm = 0;
    for (int w = 0; w == 0 || (w < WARM_CALLS && warm < WARM_SECS && once * WARM_CALLS > min_sample &&
                               !(give_up > 0 && once > give_up));
         ++w) {
      double t0 = now();
      if (k(CALL_ARGS)) return 3;
      once = now() - t0;
      warm += once;
    }
    /* A sample lasts about min_sample, evictions included. */
    if (!flush && N_CONSTANTS) {
      double t0 = now();
      evict_constants(in);
      once += now() - t0;
    }
    long reps = flush ? 1 : (long)(min_sample / (once > 1e-9 ? once : 1e-9)) + 1;
    if (reps > 1000000) reps = 1000000;
    double s[64];
    for (int j = 0; j < samples; ++j) {
      double total = 0;
      if (flush || N_CONSTANTS) {
        /* Each call timed alone, after its evictions. */
        for (long r = 0; r < reps; ++r) {
          if (flush) flush_caches();
          else if (N_CONSTANTS) evict_constants(in);
          double a = now();
          if (k(CALL_ARGS)) return 3;
          total += now() - a;
        }
      } else {
        /* Back to back, as a caller's loop runs them and the peers' harness
         * times them: a clock read (~19 ns) in every call's time made a
         * 75 ns GEMM of 7x82x4 read 96. */
        double a = now();
        for (long r = 0; r < reps; ++r) {
          if (k(CALL_ARGS)) return 3;
        }
        total = now() - a;
      }
      s[j] = total / (double)reps;
      if (j == 1 && give_up > 0 && N_PARTS == 1 && s[0] > give_up && s[1] > give_up) {
        samples = 2;
        break;
      }
    }
    qsort(s, (size_t)samples, sizeof s[0], cmp_double);
    printf("median_s=%.9e min_s=%.9e max_s=%.9e reps=%ld\n", s[samples / 2], s[0], s[samples - 1], reps);
  }
  return 0;
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(attr: &str) -> Workload {
        let item: syn::ItemFn = syn::parse_str(
            "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>, c: Tensor<f32, N>) -> Tensor<f32, (M, N)> {
                compute(|i, j| sum(|k| a[i][k] * b[k][j]) + c[j])
            }",
        )
        .unwrap();
        let op = autotune_lang::parse_operator(attr.parse().unwrap(), &item).unwrap();
        Workload { op, spec: 0 }
    }

    /// Timed calls find the constants, and only them, evicted: the driver
    /// knows which inputs the handles hold, and evicts before each call.
    #[test]
    fn timed_calls_evict_the_constant_inputs() {
        let with = source(
            &workload("constant(c, b), specialize(M = 4, N = 16, K = 8)"),
            "p",
        );
        assert!(
            with.contains("static const int const_inputs[] = {1, 2};"),
            "{with}"
        );
        assert!(with.contains("else if (2) evict_constants(in);"), "{with}");
        let without = source(&workload("specialize(M = 4, N = 16, K = 8)"), "p");
        assert!(
            without.contains("else if (0) evict_constants(in);"),
            "{without}"
        );
    }

    /// A sample's calls run back to back between two clock reads, as a
    /// caller's loop runs them (a clock read, ~19 ns, in every call's time
    /// made a 75 ns call read 96), unless evictions come between them: then
    /// each call is timed alone.
    #[test]
    fn calls_without_evictions_are_timed_back_to_back() {
        let back_to_back = "double a = now();\n        for (long r = 0; r < reps; ++r) {\n          \
                            if (k(in[0], in[1], in[2], out)) return 3;\n        }\n        total = now() - a;";
        let without = source(&workload("specialize(M = 4, N = 16, K = 8)"), "p");
        assert!(without.contains("if (flush || 0) {"), "{without}");
        assert!(without.contains(back_to_back), "{without}");
        let with = source(
            &workload("constant(c, b), specialize(M = 4, N = 16, K = 8)"),
            "p",
        );
        assert!(with.contains("if (flush || 2) {"), "{with}");
    }

    /// A batch's table lists its kernels in order, a candidate that did not
    /// build as an empty slot, and its length, which the driver checks an
    /// index against; the driver itself names no candidate.
    #[test]
    fn a_batch_table_lists_its_kernels_and_their_count() {
        let w = workload("specialize(M = 4, N = 16, K = 8)");
        let table = table(&w, &[Some("cand0".into()), None, Some("cand2".into())]);
        assert!(table.contains("const int at_n_kernels = 3;"), "{table}");
        assert!(
            table.contains("kernel_t at_kernels[] = {cand0, 0, cand2};"),
            "{table}"
        );
        let driver = source(&w, "p");
        // Read by gcc, immintrin.h alone took 0.6 s, most of the driver's compile.
        assert!(!driver.contains("#include <immintrin.h>"), "{driver}");
        assert!(!driver.contains("cand0"), "{driver}");
        assert!(driver.contains("idx >= at_n_kernels"), "{driver}");
    }
}
