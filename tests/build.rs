fn main() {
    // The operator tests check the default schedules; tuned configs are covered by
    // autotune-build's schedule-space tests. AUTOTUNE=… still overrides this.
    autotune_build::Builder::new()
        .file("src/ops.rs")
        .default_mode(autotune_build::Mode::Off)
        .compile();
}
