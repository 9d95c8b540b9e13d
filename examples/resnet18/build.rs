fn main() {
    autotune_build::Builder::new()
        .file("src/ops.rs")
        // The workspace keeps the examples' caches together at its root.
        .cache_dir("../../tuning-cache")
        .compile();
}
