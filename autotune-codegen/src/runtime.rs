//! The C runtime compiled with every package's kernels and into every
//! measurement program (the thread pool and CPU detection), and the fixed
//! flags all kernel C is compiled with. What is measured is what ships: the
//! build and the harness take both from here.

/// The C source of the runtime (file name, text), with `AUTOTUNE_POOL_PREFIX`
/// standing for the package's prefix ([`autotune_lang::mangle::runtime_prefix`]).
pub const RUNTIME_C: [(&str, &str); 2] = [
    ("pool.c", include_str!("pool.c")),
    ("isa.c", include_str!("isa.c")),
];

/// The runtime's C source for a package.
pub fn runtime_c(prefix: &str, source: &str) -> String {
    source.replace("AUTOTUNE_POOL_PREFIX", prefix)
}

/// The optimisation level of every kernel, in the build and when measured.
/// (`-O2` compiles in half the time but ran the best GEMM and conv kernels
/// 20–30% slower: measured 157 vs 230 GFLOP/s on 1024³.)
pub const OPT_LEVEL: u32 = 3;

/// The flags every kernel is compiled with, in the build and when measured.
pub const C_FLAGS: [&str; 4] = [
    "-std=gnu99",
    "-fno-math-errno",
    "-ffp-contract=fast",
    // Generated nests define every tile index, whether or not a schedule reads it.
    "-Wno-unused-variable",
];
