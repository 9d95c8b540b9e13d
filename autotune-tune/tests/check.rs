//! The tuner's correctness check of a candidate's output against the reference.

use autotune_lang::ir::DType;
use autotune_tune::measure::compare;

/// NaN where the reference has NaN, and equal infinities, are right answers
/// (an operator with `sqrt` of a negative input must still be tunable).
#[test]
fn matching_nans_and_infinities_pass() {
    let want = [1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0];
    let got = [1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0 + 1e-7];
    compare(&got, &want, DType::F32).expect("the same NaNs and infinities");
}

#[test]
fn nans_and_infinities_elsewhere_fail() {
    let want = [1.0, f64::NAN, f64::INFINITY, 3.0];
    for got in [
        [1.0, 0.0, f64::INFINITY, 3.0], // a number where the reference is NaN
        [f64::NAN, f64::NAN, f64::INFINITY, 3.0], // NaN where it is a number
        [1.0, f64::NAN, f64::NEG_INFINITY, 3.0], // the other infinity
        [1.0, f64::NAN, 1e30, 3.0],     // a large number for an infinity
        [1.0, f64::NAN, f64::INFINITY, f64::INFINITY],
    ] {
        assert!(compare(&got, &want, DType::F32).is_err(), "{got:?}");
    }
}
