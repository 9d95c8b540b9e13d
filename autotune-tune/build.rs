// Records the target triple this crate is compiled for: when it runs (in a build
// script or the `cargo autotune` command) that is the host, whose C compiler
// measures candidate kernels.
fn main() {
    println!(
        "cargo:rustc-env=AUTOTUNE_HOST_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
}
