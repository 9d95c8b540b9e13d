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

mod common;

use autotune_tune::measure::{Candidate, ErrorClass};
use autotune_tune::session::measure_candidates;

const RELU_SIG: &str = "int32_t CANDIDATE(const float *restrict in_x, float *restrict out)";

/// A kernel that skips elements, or writes one past its output, is wrong even
/// where what it left behind happens to equal the reference (the zeros of a
/// ReLU): outputs are poisoned before the check, and guarded.
#[test]
fn unwritten_and_overrun_outputs_are_wrong_results() {
    let w = common::workload(
        "specialize(N = 64)",
        "pub fn relu(x: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| max(x[i], 0.0)) }",
    );
    let dir = common::scratch("check-poison");
    let opts = common::options(&dir);
    let candidates = vec![
        Candidate::Source(format!(
            "{RELU_SIG} {{ for (int i = 0; i < 64; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0; }}"
        )),
        // Skips the elements whose result is 0.
        Candidate::Source(format!(
            "{RELU_SIG} {{ for (int i = 0; i < 64; ++i) if (in_x[i] > 0) out[i] = in_x[i]; return 0; }}"
        )),
        // Right, and then one element past the end.
        Candidate::Source(format!(
            "{RELU_SIG} {{ for (int i = 0; i < 64; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; \
             out[64] = 0.0f; return 0; }}"
        )),
    ];
    let records = measure_candidates(&w, &candidates, &opts).unwrap();
    let classes: Vec<Option<ErrorClass>> = records
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.class))
        .collect();
    assert_eq!(
        classes,
        vec![
            None,
            Some(ErrorClass::WrongResult),
            Some(ErrorClass::WrongResult)
        ],
        "{records:#?}"
    );
}

/// A bucket is checked at its anchor and timed over its sweep, into buffers
/// sized for the sweep's largest call: a checked run that writes past the
/// anchor's output is still caught, a sweep that writes the larger calls'
/// outputs is not an overrun, and a config of the bucket (a schedule of the
/// generic kernel) measures.
#[test]
fn buckets_are_checked_at_their_anchor_and_timed_over_their_sweep() {
    let w = common::workload(
        "specialize(N = 1..=4096)",
        "pub fn relu(x: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| max(x[i], 0.0)) }",
    );
    assert_eq!(w.shapes(), &[64]);
    assert_eq!(w.sizes(), (vec![4096], 4096));
    let relu = |n: i64| {
        format!("for (int i = 0; i < {n}; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0;")
    };
    let sweep = |name: &str, check: &str| {
        format!(
            "{RELU_SIG} {{ {check} }}\n{} {{ {} }}",
            RELU_SIG.replace("CANDIDATE", &format!("{name}__sweep")),
            relu(4096)
        )
    };
    let dir = common::scratch("check-bucket");
    let opts = common::options(&dir);
    let space = autotune_codegen::Space::new(&w.op, w.shapes());
    let candidates = vec![
        Candidate::Source(sweep("CANDIDATE", &relu(64))),
        Candidate::Source(sweep("CANDIDATE", &relu(65))),
        Candidate::Config(space.default_config(&w.op, w.shapes())),
    ];
    let records = measure_candidates(&w, &candidates, &opts).unwrap();
    let classes: Vec<Option<ErrorClass>> = records
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.class))
        .collect();
    assert_eq!(
        classes,
        vec![None, Some(ErrorClass::WrongResult), None],
        "{records:#?}"
    );
}
