fn main() {
    autotune_build::Builder::new().file("src/lib.rs").compile();
}
