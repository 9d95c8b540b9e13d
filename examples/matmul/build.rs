fn main() {
    autotune_build::Builder::new().file("src/ops.rs").compile();
}
