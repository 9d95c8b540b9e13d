//! Sizes at the limits: a call whose buffers cannot be allocated or addressed
//! returns an `Error`; it never panics, aborts or writes past a buffer. Each case
//! runs in a child process (this test binary, one ignored test), so that an
//! abort or a crash fails the parent test instead of killing the harness.

use autotune::{Error, Tensor};
use autotune_tests::ops;

mod common;

use common::in_child;

#[test]
fn huge_tensors_are_refused_not_aborted() {
    in_child("child_huge_tensors");
}

#[test]
#[ignore = "run by huge_tensors_are_refused_not_aborted in a child process"]
fn child_huge_tensors() {
    // 2^61 f32: the element count fits a usize, the byte count does not fit an isize.
    assert!(Tensor::<f32, 1>::zeros([1 << 61]).is_none());
    // 4 TiB: a valid size that no allocator here can give.
    assert!(Tensor::<f32, 1>::zeros([1 << 40]).is_none());
}

#[test]
fn a_huge_owned_output_is_an_error() {
    in_child("child_huge_owned_output");
}

#[test]
#[ignore = "run by a_huge_owned_output_is_an_error in a child process"]
fn child_huge_owned_output() {
    // 2^20 × 1 times 1 × 2^20: a 4 TiB output from 8 MiB of inputs.
    let a = vec![1.0f32; 1 << 20];
    let r = ops::matmul((&a[..], [1 << 20, 1]), (&a[..], [1, 1 << 20]));
    assert!(
        matches!(
            r,
            Err(Error::OutOfMemory {
                tensor: "output",
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn an_intermediate_stage_beyond_the_index_type_is_an_error() {
    in_child("child_huge_intermediate_stage");
}

#[test]
#[ignore = "run by an_intermediate_stage_beyond_the_index_type_is_an_error in a child process"]
fn child_huge_intermediate_stage() {
    // The stage `t` has 2^21 · 2^21 · 2^20 = 2^62 elements (2^64 bytes): its
    // size overflows int64 in the kernel, which must never see it.
    let (x, y, z) = (
        vec![1.0f32; 1 << 21],
        vec![1.0f32; 1 << 21],
        vec![1.0f32; 1 << 20],
    );
    let r = ops::outer3_corner(
        (&x[..], [1 << 21]),
        (&y[..], [1 << 21]),
        (&z[..], [1 << 20]),
    );
    assert!(
        r.is_err(),
        "the kernel ran with an overflowing scratch size"
    );
}
