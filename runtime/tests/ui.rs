//! Compile errors of `#[tensor_op]`: each mistake in `ui/` must fail with the
//! message and span pinned in its `.stderr` (refresh with `TRYBUILD=overwrite`).

#[test]
fn macro_errors() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
