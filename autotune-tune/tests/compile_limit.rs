//! A candidate whose compile runs past the limit is recorded as a compile
//! timeout and the rest of its batch is still measured. (Its own test binary:
//! it points `CC` at a wrapper that stalls on one candidate's source.)

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use autotune_tune::measure::{Candidate, ErrorClass};
use autotune_tune::session::measure_candidates;

mod common;

const SIG: &str = "int32_t CANDIDATE(const float *restrict in_x, float *restrict out)";

#[test]
fn a_compile_past_its_limit_is_recorded_and_the_batch_goes_on() {
    let w = common::workload(
        "specialize(N = 16)",
        "pub fn copy(x: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| x[i]) }",
    );
    let dir = common::scratch("compile-limit");
    // A compiler that stalls on any source holding STALL_HERE.
    let wrapper = dir.join("slow-cc");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *.c) grep -q STALL_HERE \"$a\" && sleep 60;; esac; done\nexec cc \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY (of the test's premise): this binary's only test sets it.
    std::env::set_var("CC", &wrapper);
    let mut opts = common::options(&dir);
    opts.compile_timeout = Duration::from_secs(2);
    let copy = |extra: &str| {
        Candidate::Source(format!(
            "{SIG} {{ {extra} for (int i = 0; i < 16; ++i) out[i] = in_x[i]; return 0; }}"
        ))
    };
    let start = Instant::now();
    let records =
        measure_candidates(&w, &[copy(""), copy("/* STALL_HERE */"), copy("")], &opts).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the stalled compile was not cut off"
    );
    assert_eq!(records[0].error, None, "{:?}", records[0]);
    assert_eq!(records[2].error, None, "{:?}", records[2]);
    let e = records[1]
        .error
        .as_ref()
        .expect("the stalled candidate fails");
    assert_eq!(e.class, ErrorClass::CompileTimeout, "{e:?}");
}
