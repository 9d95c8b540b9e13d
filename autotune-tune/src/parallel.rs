//! Work spread over the cores this process may use: the candidates' compiles
//! and, between batches, the search's featurisation and sizing of the configs
//! it scores, when nothing else runs on the machine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The cores this process may use (looked up once: the lookup reads the
/// cgroup's quota, and the search asks for every annealing step).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `f` of each item, in order, computed by as many workers as the process may
/// use cores, each taking the next item when it is done. A panic in `f` is
/// passed on.
pub fn on_every_core<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = cores().min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|d| d.0);
    done.into_iter().map(|d| d.1).collect()
}

/// As [`on_every_core`], but on this thread where there are fewer than
/// `at_least` items: starting the workers costs tens of microseconds, more
/// than a few cheap items do.
pub fn on_every_core_from<T: Sync, R: Send>(
    items: &[T],
    at_least: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    match items.len() < at_least {
        true => items.iter().map(f).collect(),
        false => on_every_core(items, f),
    }
}

/// The configs of `points` that `known` does not hold, each once, in order:
/// what a caller has yet to compute of them (before computing them on every
/// core).
pub fn unknown(points: &[u128], known: impl Fn(u128) -> bool) -> Vec<u128> {
    let mut seen = std::collections::HashSet::new();
    points
        .iter()
        .copied()
        .filter(|&i| !known(i) && seen.insert(i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_mapped_once_in_order() {
        let items: Vec<u64> = (0..100).collect();
        // Uneven work, so the workers finish out of order.
        let out = on_every_core(&items, |&i| {
            std::thread::sleep(std::time::Duration::from_micros((i * 37) % 200));
            i * i
        });
        assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        assert!(on_every_core(&[] as &[u8], |_| 0).is_empty());
        assert_eq!(on_every_core_from(&items, 1000, |&i| i + 1)[99], 100);
        assert_eq!(unknown(&[5, 3, 5, 8, 3, 1], |i| i == 8), [5, 3, 1]);
    }

    #[test]
    #[should_panic(expected = "item 7")]
    fn a_panic_in_a_worker_is_passed_on() {
        let items: Vec<u32> = (0..10).collect();
        on_every_core(&items, |&i| assert!(i != 7, "item {i}"));
    }
}
