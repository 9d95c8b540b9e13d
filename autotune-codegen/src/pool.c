/*
 * pool.c: the thread pool that generated kernels use to run parallel loops.
 *
 * Why C: generated kernels are C, and they call the pool through this small C ABI
 * (four functions, below). The same source is compiled into every user crate's kernel
 * library and into the measurement executables the tuner times, so what is timed is what
 * ships: there is no second, Rust-side implementation whose overheads could differ.
 *
 * Symbol names: every exported name contains the placeholder AUTOTUNE_POOL_PREFIX, which
 * the build helper replaces textually (not with the preprocessor) by a per-crate prefix
 * such as autotune1_mycrate_0_1_0, so two crates' pools never clash at link time.
 * Everything else is static.
 *
 * API (P = the substituted prefix):
 *
 *   int32_t P_parallel_for(int64_t n, void (*body)(void *ctx, int64_t begin, int64_t end),
 *                          void *ctx);
 *       Runs body(ctx, begin, end) over disjoint contiguous chunks covering [0, n) and
 *       returns when all are done, on up to t = min(n, P_num_threads()) threads, the
 *       caller included. Chunks are claimed in order, each of max(1, r / (2t)) iterations
 *       where r is what is left unclaimed (a guided schedule). n <= 0 calls nothing;
 *       n == 1 or one thread calls body(ctx, 0, n) on the caller. It never fails and
 *       always returns 0 (the int32_t return matches the kernel ABI and leaves room for
 *       errors): if worker threads cannot be started, the chunks run on the threads that
 *       exist, at worst all on the caller.
 *       - Nested calls (body calling P_parallel_for) run serially on the calling thread,
 *         as body(ctx, 0, n); they never deadlock.
 *       - Concurrent calls from different threads are safe: the pool serves one call at
 *         a time, and a call that finds it busy runs serially on its caller rather than
 *         waiting (so no call ever blocks on another).
 *
 *   int32_t P_num_threads(void);
 *       The number of threads calls use: the environment variable AUTOTUNE_NUM_THREADS if
 *       it is a positive integer, else the number of online CPUs, at least 1, at most
 *       POOL_MAX_THREADS. The environment is read once, on the first call of any function
 *       here.
 *
 *   void P_set_num_threads(int32_t n);
 *       Overrides the thread count for later calls (clamped to [1, POOL_MAX_THREADS]). Used by
 *       benchmarks to compare thread counts in one process.
 *
 *   void *P_alloc(size_t bytes);
 *       The memory a kernel works in (its copies and packs, a constant's block): aligned
 *       to 64 bytes, NULL when there is none, freed with free(). A vector load from a copy
 *       then never straddles two cache lines, whatever state the heap is in; malloc's 16
 *       bytes ran a GEMM's packed panels 8-12% slower at three of its four offsets, so a
 *       kernel's speed depended on the caller's earlier allocations.
 *
 * Design. Workers are started lazily, by the first call that needs them, and live for the
 * rest of the process (they are detached and never joined; nothing is allocated per
 * call). Between calls they sleep on a condition variable, after a short spin that lets
 * back-to-back calls skip the sleep/wake round trip. A call publishes a job (body, ctx, n,
 * t) under `pool_mutex` and bumps the generation counter; workers that see the new
 * generation join the job under the same mutex, and then everyone, the caller included,
 * claims chunks from an atomic counter until none are left. Chunks shrink as the loop
 * runs out (guided): the first are large, so claiming costs nothing against the work, and
 * the last are single iterations, so threads finish together even when one of them runs
 * slower. That happens on shared VMs, where one vCPU can run at half speed for seconds:
 * with one fixed chunk per thread, a 2-thread ResNet-18 pass ran at the slow vCPU's pace,
 * slower than on one thread (docs/performance.md). A late-waking worker costs nothing
 * either: the caller simply runs more chunks itself. The parallel loops of kernels are
 * spatial (each iteration writes its own outputs), so chunk boundaries, which now depend
 * on timing, never change a result.
 *
 * Memory ordering. Job fields are written and read only under `pool_mutex`. A worker
 * leaves a job by decrementing `pool_active` with release semantics after its last body
 * call; the caller waits until it reads `pool_active == 0` with acquire semantics, so all
 * writes made by bodies happen-before parallel_for returns. Before returning, the caller
 * closes the job under the mutex, so no worker can join (and claim chunks of) a job whose
 * caller has returned.
 *
 * fork(): the child of a process with workers has none; pthread_atfork handlers reset the
 * pool there (fresh mutexes and condition variables, no workers), and the child's first
 * parallel call starts its own. Forking from inside a body is not supported.
 */

#if defined(__linux__) && !defined(_GNU_SOURCE)
/* -std=gnu99 may still hide POSIX and the affinity calls on glibc/musl unless asked for. */
#define _GNU_SOURCE
#endif

#include <pthread.h>
#ifdef __linux__
#include <sched.h>
#endif
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* Upper bound on threads, so a silly AUTOTUNE_NUM_THREADS cannot start thousands. */
#define POOL_MAX_THREADS 256
/* How many times an idle worker, or a caller waiting for workers, polls before it sleeps
   on a condition variable: some tens of microseconds on current x86 (a pause is 10-40 ns),
   enough for back-to-back kernel calls to skip the sleep/wake round trip (which costs
   more than a whole small kernel), short enough not to burn a core when idle. */
#define POOL_SPIN 2000

typedef void (*pool_body_fn)(void *ctx, int64_t begin, int64_t end);

/* Thread count, set once from the environment (pool_init) or by set_num_threads. */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int32_t pool_threads = 1; /* accessed with __atomic_* */

/* Held by the one caller the pool is serving; other callers run serially. */
static pthread_mutex_t pool_call_mutex = PTHREAD_MUTEX_INITIALIZER;

/* Protects the job and the generation; workers sleep on pool_work_cond, the caller on
   pool_done_cond. */
static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done_cond = PTHREAD_COND_INITIALIZER;

/* The current job. Written by the caller under pool_mutex; workers copy it under
   pool_mutex when they join. */
static uint64_t pool_generation = 0; /* written under pool_mutex, also polled atomically */
static int pool_job_open = 0;        /* workers may join only while this is set */
static pool_body_fn pool_job_body = 0;
static void *pool_job_ctx = 0;
static int64_t pool_job_n = 0;
static int64_t pool_job_threads = 0;
static int pool_job_slots = 0; /* workers that may still join (threads - 1 at most) */

static int64_t pool_next = 0; /* first iteration not claimed yet; __atomic_* */
static int pool_active = 0;         /* workers inside the job; __atomic_* */

/* Worker threads started so far (only touched by the caller holding pool_call_mutex). */
static int pool_workers = 0;
static int pool_spawn_failed = 0;

/* Set on pool workers, and on a caller while it runs chunks: a parallel_for called with
   this set is nested and runs serially. */
static __thread int pool_inside = 0;

static void pool_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* fork() handlers: the child must not inherit a pool_mutex held by a thread that does not
   exist there, nor condition variables with waiters that do not exist there. */
static void pool_atfork_prepare(void) {
    pthread_mutex_lock(&pool_mutex);
}

static void pool_atfork_parent(void) {
    pthread_mutex_unlock(&pool_mutex);
}

static void pool_atfork_child(void) {
    pthread_mutex_unlock(&pool_mutex);
    /* Another thread may have been serving a call: only the forking thread exists here. */
    pthread_mutex_init(&pool_call_mutex, 0);
    pthread_cond_init(&pool_work_cond, 0);
    pthread_cond_init(&pool_done_cond, 0);
    pool_job_open = 0;
    pool_job_slots = 0;
    __atomic_store_n(&pool_active, 0, __ATOMIC_RELAXED);
    pool_workers = 0;
    pool_spawn_failed = 0;
}

static void pool_init(void) {
    /* Runs before any worker exists (every public function calls it first). If
       registration fails, forking while workers exist may leave the child's pool stuck. */
    pthread_atfork(pool_atfork_prepare, pool_atfork_parent, pool_atfork_child);

    long t = 0;
    const char *env = getenv("AUTOTUNE_NUM_THREADS");
    if (env != 0 && *env != '\0') {
        char *end = 0;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0) t = v;
    }
    /* The CPUs this process may run on (its affinity mask): the count autotune's
       tuner times kernels with (`autotune_build::settings::shipped_threads`). */
#ifdef __linux__
    if (t <= 0) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) t = CPU_COUNT(&set);
    }
#endif
#ifdef _SC_NPROCESSORS_ONLN
    if (t <= 0) t = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    if (t < 1) t = 1;
    if (t > POOL_MAX_THREADS) t = POOL_MAX_THREADS;
    __atomic_store_n(&pool_threads, (int32_t)t, __ATOMIC_RELAXED);
}

/* Claims and runs chunks of the current job, of n iterations on t threads, until none are
   left: each chunk is 1/(2t) of what is left, at least one iteration. */
static void pool_run_chunks(pool_body_fn body, void *ctx, int64_t n, int64_t t) {
    int64_t begin = __atomic_load_n(&pool_next, __ATOMIC_RELAXED);
    for (;;) {
        if (begin >= n) return;
        int64_t size = (n - begin) / (2 * t);
        if (size < 1) size = 1;
        /* On failure, begin is reloaded with the counter's value and we try again. */
        if (__atomic_compare_exchange_n(&pool_next, &begin, begin + size, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            body(ctx, begin, begin + size);
            begin = __atomic_load_n(&pool_next, __ATOMIC_RELAXED);
        }
    }
}

static void *pool_worker_main(void *arg) {
    /* The generation at creation: the first job this worker may join is the next one. */
    uint64_t seen = (uint64_t)(uintptr_t)arg;
    pool_inside = 1;
    for (;;) {
        /* Spin briefly for the next job, then sleep until it is posted. */
        for (int spin = 0; spin < POOL_SPIN; spin++) {
            if (__atomic_load_n(&pool_generation, __ATOMIC_RELAXED) != seen) break;
            pool_cpu_relax();
        }
        pthread_mutex_lock(&pool_mutex);
        while (__atomic_load_n(&pool_generation, __ATOMIC_RELAXED) == seen)
            pthread_cond_wait(&pool_work_cond, &pool_mutex);
        seen = __atomic_load_n(&pool_generation, __ATOMIC_RELAXED);
        if (!pool_job_open || pool_job_slots == 0) {
            /* Too late (the caller finished without us) or enough helpers already. */
            pthread_mutex_unlock(&pool_mutex);
            continue;
        }
        pool_job_slots--;
        __atomic_add_fetch(&pool_active, 1, __ATOMIC_RELAXED);
        pool_body_fn body = pool_job_body;
        void *ctx = pool_job_ctx;
        int64_t n = pool_job_n, t = pool_job_threads;
        pthread_mutex_unlock(&pool_mutex);

        pool_run_chunks(body, ctx, n, t);

        /* Release: our body writes are visible to whoever reads pool_active == 0. */
        if (__atomic_sub_fetch(&pool_active, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool_mutex);
            pthread_cond_signal(&pool_done_cond);
            pthread_mutex_unlock(&pool_mutex);
        }
    }
    return 0;
}

/* Starts workers until there are `want` (or starting one fails; then we stop trying for
   good and make do with what we have). Called with pool_call_mutex held, before the job
   is posted. Workers block all signals, so signals go to the application's threads. */
static void pool_spawn_workers(int want) {
    if (pool_workers >= want || pool_spawn_failed) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        pool_spawn_failed = 1;
    } else {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        uint64_t gen = __atomic_load_n(&pool_generation, __ATOMIC_RELAXED);
        while (pool_workers < want) {
            pthread_t thread;
            if (pthread_create(&thread, &attr, pool_worker_main, (void *)(uintptr_t)gen) != 0) {
                pool_spawn_failed = 1;
                break;
            }
            pool_workers++;
        }
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, 0);
}

int32_t AUTOTUNE_POOL_PREFIX_num_threads(void) {
    pthread_once(&pool_once, pool_init);
    return __atomic_load_n(&pool_threads, __ATOMIC_RELAXED);
}

void AUTOTUNE_POOL_PREFIX_set_num_threads(int32_t n) {
    pthread_once(&pool_once, pool_init); /* so the environment cannot override us later */
    if (n < 1) n = 1;
    if (n > POOL_MAX_THREADS) n = POOL_MAX_THREADS;
    __atomic_store_n(&pool_threads, n, __ATOMIC_RELAXED);
}

int32_t AUTOTUNE_POOL_PREFIX_parallel_for(int64_t n, pool_body_fn body, void *ctx) {
    if (n <= 0) return 0;
    int64_t t = AUTOTUNE_POOL_PREFIX_num_threads();
    if (t > n) t = n;
    /* Serial cases: one chunk, a nested call, or the pool is serving another thread. */
    if (t <= 1 || pool_inside || pthread_mutex_trylock(&pool_call_mutex) != 0) {
        body(ctx, 0, n);
        return 0;
    }

    pool_spawn_workers((int)t - 1);

    /* Post the job. */
    pthread_mutex_lock(&pool_mutex);
    pool_job_body = body;
    pool_job_ctx = ctx;
    pool_job_n = n;
    pool_job_threads = t;
    pool_job_slots = (int)t - 1;
    pool_job_open = 1;
    __atomic_store_n(&pool_next, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&pool_generation, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&pool_work_cond);
    pthread_mutex_unlock(&pool_mutex);

    /* Work alongside the workers. */
    pool_inside = 1;
    pool_run_chunks(body, ctx, n, t);
    pool_inside = 0;

    /* Every chunk is claimed; wait for the workers that claimed some to finish them. */
    for (int spin = 0; spin < POOL_SPIN; spin++) {
        if (__atomic_load_n(&pool_active, __ATOMIC_ACQUIRE) == 0) break;
        pool_cpu_relax();
    }
    pthread_mutex_lock(&pool_mutex);
    /* Close the job first: a worker that joins now would find no chunk, but it would still
       be claiming from pool_next when the next call resets it. */
    pool_job_open = 0;
    while (__atomic_load_n(&pool_active, __ATOMIC_ACQUIRE) != 0)
        pthread_cond_wait(&pool_done_cond, &pool_mutex);
    pthread_mutex_unlock(&pool_mutex);

    pthread_mutex_unlock(&pool_call_mutex);
    return 0;
}

void *AUTOTUNE_POOL_PREFIX_alloc(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) ? NULL : p;
}
