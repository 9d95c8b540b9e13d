//! The measurement's child processes: output is drained while they run (a
//! chatty compiler or candidate must not block on a full pipe), and a timeout
//! kills the whole process group (nothing keeps running into later timings).

use autotune_tune::measure::{Candidate, ErrorClass};
use autotune_tune::session::measure_candidates;

mod common;

const SIG: &str = "int32_t CANDIDATE(const float *restrict in_x, float *restrict out)";

fn copy_workload() -> autotune_codegen::Workload {
    common::workload(
        "specialize(N = 16)",
        "pub fn copy(x: Tensor<f32, N>) -> Tensor<f32, N> { compute(|i| x[i]) }",
    )
}

#[test]
fn a_candidate_that_writes_over_a_pipe_buffer_runs_to_the_end() {
    let w = copy_workload();
    let dir = common::scratch("process-chatty");
    let opts = common::options(&dir);
    // 256 KiB on stderr, then the right answer.
    let chatty = Candidate::Source(format!(
        "#include <stdio.h>\n{SIG} {{ for (int i = 0; i < 262144; ++i) fputc('x', stderr); \
         for (int i = 0; i < 16; ++i) out[i] = in_x[i]; return 0; }}"
    ));
    let records = measure_candidates(&w, &[chatty], &opts).unwrap();
    assert_eq!(records[0].error, None, "{:?}", records[0]);
}

#[test]
fn a_timeout_kills_the_candidates_children_too() {
    let w = copy_workload();
    let dir = common::scratch("process-group");
    let opts = common::options(&dir);
    let pid_file = dir.join("child.pid");
    // Forks a child that sleeps (and records its pid), then hangs.
    let hang = Candidate::Source(format!(
        "#include <stdio.h>\n#include <unistd.h>\n{SIG} {{ (void)in_x; (void)out; \
         pid_t c = fork(); if (c == 0) {{ sleep(60); _exit(0); }} \
         FILE *f = fopen(\"{}\", \"w\"); fprintf(f, \"%d\", (int)c); fclose(f); \
         for (;;) {{ __asm__ volatile(\"\"); }} }}",
        pid_file.display()
    ));
    let started = std::time::Instant::now();
    let records = measure_candidates(&w, &[hang], &opts).unwrap();
    assert_eq!(
        records[0].error.as_ref().map(|e| e.class),
        Some(ErrorClass::RunTimeout)
    );
    // A surviving child holds the output pipes open, so the measurement
    // would wait out its 60 s sleep: a bound far above the 3 s timeout, not a
    // timing, tells the two apart.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the measurement waited {:?} for the candidate's child",
        started.elapsed()
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed (and reaped by init, or a zombie until then): not sleeping on.
    // SIGKILL is delivered asynchronously, so on a loaded machine the child
    // may still be on its way out (state R) right after the kill: give it a
    // few seconds, far less than the 60 it would sleep if it had survived.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let alive = state
            .split(") ")
            .nth(1)
            .is_some_and(|rest| !rest.starts_with('Z'));
        if !alive {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the candidate's child {pid} outlived its timeout: {state}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
