//! End-to-end tests of autotune: the operator test set in [`ops`] is compiled by
//! this crate's build script exactly as a user's would be; the tests under
//! `tests/` compare every kernel with its reference, check the macro's errors,
//! and build an out-of-tree fixture crate with cargo.

pub mod ops;
