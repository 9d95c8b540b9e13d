//! What the build script tells cargo and the user.

/// A warning cargo shows after the build (`cargo:warning`).
pub(crate) fn warn(msg: &str) {
    println!("cargo:warning=autotune: {msg}");
}
