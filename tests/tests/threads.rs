//! One definition of the thread count a kernel ships with: the pool starts with
//! as many workers as the CPUs the process may run on (its affinity mask), the
//! count build-time tuning times with.

mod common;

use common::in_child;

#[test]
fn the_pool_starts_with_the_cpus_the_process_may_use() {
    in_child("child_pool_under_one_cpu");
}

#[test]
#[ignore = "run by the_pool_starts_with_the_cpus_the_process_may_use in a child process"]
fn child_pool_under_one_cpu() {
    // Restrict this process to its first allowed CPU before the pool starts.
    // SAFETY: plain libc calls on a zeroed, correctly sized cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
            0
        );
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .unwrap();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(first, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
    }
    std::env::remove_var("AUTOTUNE_NUM_THREADS");
    assert_eq!(std::thread::available_parallelism().unwrap().get(), 1);
    assert_eq!(
        autotune_tests::ops::num_threads(),
        1,
        "the pool counts CPUs this process may not run on"
    );
}
