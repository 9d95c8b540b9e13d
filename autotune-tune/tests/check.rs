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

/// The first specialisation of a ReLU over `N` floats with attribute `attr`.
fn relu_workload(attr: &str) -> autotune_codegen::Workload {
    common::workload(
        attr,
        "pub fn relu(x: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| max(x[i], 0.0)) }",
    )
}

/// Each record's error class (`None`: measured).
fn error_classes(records: &[autotune_tune::record::Record]) -> Vec<Option<ErrorClass>> {
    records
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.class))
        .collect()
}

/// A kernel that skips elements, or writes one past its output, is wrong even
/// where what it left behind happens to equal the reference (the zeros of a
/// ReLU): outputs are poisoned before the check, and guarded.
#[test]
fn unwritten_and_overrun_outputs_are_wrong_results() {
    let w = relu_workload("specialize(N = 64)");
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
    let classes = error_classes(&records);
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

/// A kernel whose result is right but that reads past the end of an input
/// (as a copy whose bounds are one off would, for an element it then never
/// uses) is caught: a checked run's inputs end at a page that faults.
#[test]
fn a_read_past_an_input_is_caught() {
    let w = relu_workload("specialize(N = 64)");
    let dir = common::scratch("check-fence");
    let opts = common::options(&dir);
    let relu = |last: i64| {
        Candidate::Source(format!(
            "{RELU_SIG} {{ volatile float seen = 0; for (int i = 0; i < {last}; ++i) seen = in_x[i]; \
             (void)seen; for (int i = 0; i < 64; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0; }}"
        ))
    };
    let records = measure_candidates(&w, &[relu(64), relu(65)], &opts).unwrap();
    assert_eq!(
        error_classes(&records),
        vec![None, Some(ErrorClass::RuntimeCrash)],
        "{records:#?}"
    );
}

/// A bucket is checked at its anchor (the top of its range) and timed at
/// each shape of its sweep: a checked run that runs past the anchor's
/// sizes is caught (its read past the input faults before its write past the
/// output shows), and a config of the bucket (a schedule of the generic
/// kernel) measures.
#[test]
fn buckets_are_checked_at_their_anchor_and_timed_over_their_sweep() {
    let w = relu_workload("specialize(N = 1..=4096)");
    assert_eq!(w.shapes(), &[4096]);
    assert_eq!(
        w.sweep(),
        vec![vec![1], vec![8], vec![64], vec![512], vec![4096]]
    );
    assert_eq!(w.sizes(), (vec![4096], 4096));
    let relu = |name: String, n: i64| {
        format!(
            "{} {{ for (int i = 0; i < {n}; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0; }}\n",
            RELU_SIG.replace("CANDIDATE", &name)
        )
    };
    let with_sweep = |check: i64| {
        let parts: String = w
            .sweep()
            .iter()
            .enumerate()
            .map(|(j, s)| relu(format!("CANDIDATE__s{j}"), s[0]))
            .collect();
        relu("CANDIDATE".to_string(), check) + &parts
    };
    let dir = common::scratch("check-bucket");
    let opts = common::options(&dir);
    let space = autotune_codegen::Space::new(&w.op, w.shapes());
    let candidates = vec![
        Candidate::Source(with_sweep(4096)),
        Candidate::Source(with_sweep(4097)),
        Candidate::Config(space.default_config(&w.op, w.shapes())),
    ];
    let records = measure_candidates(&w, &candidates, &opts).unwrap();
    let classes = error_classes(&records);
    assert_eq!(
        classes,
        vec![None, Some(ErrorClass::RuntimeCrash), None],
        "{records:#?}"
    );
}

/// A sweep's timing is the time its calls take at their geometric mean rate.
#[test]
fn a_sweep_is_timed_at_its_geometric_mean_rate() {
    use autotune_tune::measure::Timing;
    let t = |s: f64| Timing {
        median: s,
        min: s,
        max: s,
    };
    // 1 and 100 flops at 1 flop/s and 100 flop/s: a mean rate of 10 flop/s.
    let got = Timing::of_sweep(&[1.0, 100.0], &[t(1.0), t(1.0)]);
    assert!((got.median - 10.1).abs() < 1e-9, "{got:?}");
    assert_eq!(Timing::of_sweep(&[5.0], &[t(2.0)]), t(2.0));
}

/// A kernel's first calls in a process can run slower than the rest (a GEMM
/// 1024³ took 12.6 ms a call over its first five and 10.4 from about the
/// tenth on), and a search times few, short samples: the timing warms the
/// kernel up with several calls first, so that its median is the steady
/// state's. The candidate sleeps 2 ms in each of its first six calls.
#[test]
fn a_timing_warms_the_kernel_up_before_its_samples() {
    let w = relu_workload("specialize(N = 64)");
    let dir = common::scratch("check-warm-up");
    let source = format!(
        "#include <time.h>\nstatic long calls;\n\
         {RELU_SIG} {{ if (calls++ < 6) {{ struct timespec d = {{0, 2000000}}; nanosleep(&d, 0); }} \
         for (int i = 0; i < 64; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0; }}"
    );
    let (batch, timing) = one_call_a_sample(&w, &dir, source, 5);
    let t = batch.time_unless_behind(0, &timing, None).unwrap();
    assert!(t.median < 1e-3, "the slow first calls were timed: {t:?}");
}

/// `source` built as the one candidate of a batch in `dir`, and timing
/// options of `samples` samples of one call each.
fn one_call_a_sample(
    w: &autotune_codegen::Workload,
    dir: &std::path::Path,
    source: String,
    samples: usize,
) -> (
    autotune_tune::measure::Batch,
    autotune_tune::measure::TimingOptions,
) {
    let opts = common::options(dir);
    let batch = autotune_tune::session::prepare(w, &opts, &dir.join("harness"))
        .unwrap()
        .build(&[Candidate::Source(source)], &dir.join("batch"))
        .unwrap();
    let timing = autotune_tune::measure::TimingOptions {
        min_sample_secs: 0.0,
        samples,
        ..opts.timing
    };
    (batch, timing)
}

/// A config far behind the search's best is timed with two samples instead
/// of all of them (`Batch::time_unless_behind`); one that is not, in full.
/// The candidate counts its calls: with one call a sample, a full timing
/// makes eight warm-up calls and seven samples; a config whose first call
/// is already past the limit is not warmed up further, and timed with two.
#[test]
fn a_config_far_behind_is_timed_with_two_samples() {
    let w = relu_workload("specialize(N = 64)");
    let dir = common::scratch("check-give-up");
    let counts = dir.join("calls.txt");
    let source = format!(
        "#include <stdio.h>\n#include <stdlib.h>\nstatic long calls;\n\
         static void report(void) {{ FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fprintf(f, \"%ld\", calls); fclose(f); }} }}\n\
         {RELU_SIG} {{ if (!calls++) atexit(report); \
         for (int i = 0; i < 64; ++i) out[i] = in_x[i] > 0 ? in_x[i] : 0.0f; return 0; }}",
        counts.display()
    );
    let (batch, timing) = one_call_a_sample(&w, &dir, source, 7);
    let calls = |give_up: Option<f64>| {
        batch.time_unless_behind(0, &timing, give_up).unwrap();
        std::fs::read_to_string(&counts).unwrap()
    };
    assert_eq!(calls(None), "15");
    assert_eq!(calls(Some(1e3)), "15", "not behind: timed in full");
    assert_eq!(calls(Some(1e-12)), "3", "behind: two samples");
}
