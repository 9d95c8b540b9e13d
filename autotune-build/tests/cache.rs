//! The tuning cache: round trip, sorted stable output, stale entries, entries
//! of several CPUs, a corrupt file reported with its line and never
//! overwritten, concurrent writers.

use std::path::{Path, PathBuf};

use autotune_build::cache::{self, Cpu, Entry, Lookup, Stored};
use autotune_codegen::{Config, Isa, KernelFingerprint, Space, Workload};

/// The CPU the entries of `entry` are tuned on.
fn test_cpu() -> Cpu {
    cpu("test cpu", Some("GenuineIntel-6-143"))
}

fn cpu(name: &str, id: Option<&str>) -> Cpu {
    Cpu {
        name: name.to_string(),
        id: id.map(|i| i.parse().unwrap()),
    }
}

fn on(cpu: &Cpu, mut e: Entry) -> Entry {
    e.cpu = cpu.name.clone();
    e.cpu_id = cpu.id.clone();
    e
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cache-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A distinct workload id per readable name.
fn id(workload: &str) -> autotune_codegen::WorkloadId {
    let n = workload
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!("mm:{n:016x}:1").parse().unwrap()
}

fn target(text: &str) -> autotune_codegen::Target {
    text.parse().unwrap()
}

fn entry(workload: &str, gflops: f64) -> Entry {
    Entry {
        workload: workload.to_string(),
        workload_id: id(workload),
        target: target("x86_64-unknown-linux-gnu/avx512"),
        generator: cache::GENERATOR_VERSION,
        gflops,
        trials: 10,
        tuner: "genetic".to_string(),
        cpu: "test cpu".to_string(),
        cpu_id: Some("GenuineIntel-6-143".parse().unwrap()),
        compiler: "cc 1".to_string(),
        threads: Some(2),
        date: "2026-11-29".to_string(),
        config: "output.tile.i=8 output.order=j-i"
            .parse::<Config>()
            .unwrap(),
        kernel: None,
    }
}

/// A run whose winner is the entry's own kernel leaves the entry as it was
/// (its search's trials, tuner and date), rather than restating it with the
/// re-timing's figures, whichever generator wrote it (an older one's entry
/// whose kernel this one still makes is current); a new kernel, or an entry
/// that records none, is replaced. So is an older generator's entry whose
/// recorded kernel another config makes now (its own config lowers to
/// another kernel, so it is stale): at generator 18, GEMM 512³'s entry
/// (`pack.1=3`, whose block had been copied whole) kept its stale config
/// when the same config copying B whole won its re-timing.
#[test]
fn storing_the_entry_own_kernel_keeps_the_entry() {
    let dir = scratch("store-same-kernel");
    let with = |gflops: f64, kernel: u64| Entry {
        kernel: Some(KernelFingerprint(kernel)),
        ..entry("mm[M1]", gflops)
    };
    assert_eq!(
        cache::store(&dir, "mm", with(2.0, 7)).unwrap(),
        Stored::Added
    );
    let mut again = with(1.5, 7);
    again.trials = 3;
    assert_eq!(cache::store(&dir, "mm", again).unwrap(), Stored::Kept);
    assert_eq!(cache::load(&dir, "mm").unwrap(), vec![with(2.0, 7)]);
    assert_eq!(
        cache::store(&dir, "mm", with(2.5, 8)).unwrap(),
        Stored::Replaced
    );
    assert_eq!(cache::load(&dir, "mm").unwrap(), vec![with(2.5, 8)]);
    assert_eq!(
        cache::store(&dir, "mm", entry("mm[M1]", 3.0)).unwrap(),
        Stored::Replaced
    );
    // An older generator's entry of the kernel the run's winner makes.
    let dir = scratch("store-same-kernel-older");
    let older = Entry {
        generator: cache::GENERATOR_VERSION - 1,
        ..with(2.0, 7)
    };
    cache::store(&dir, "mm", older.clone()).unwrap();
    assert_eq!(
        cache::store(&dir, "mm", with(1.5, 7)).unwrap(),
        Stored::Kept
    );
    assert_eq!(cache::load(&dir, "mm").unwrap(), vec![older.clone()]);
    let other_config = Entry {
        config: "output.tile.i=4 output.order=j-i"
            .parse::<Config>()
            .unwrap(),
        ..with(1.5, 7)
    };
    assert_eq!(
        cache::store(&dir, "mm", other_config.clone()).unwrap(),
        Stored::Replaced
    );
    assert_eq!(cache::load(&dir, "mm").unwrap(), vec![other_config]);
}

#[test]
fn round_trip_sorted_and_replaced() {
    let dir = scratch("roundtrip");
    cache::store(&dir, "mm", entry("mm[M2]", 2.0)).unwrap();
    cache::store(&dir, "mm", entry("mm[M1]", 1.0)).unwrap();
    cache::store(&dir, "mm", entry("mm[M2]", 3.0)).unwrap();
    let entries = cache::load(&dir, "mm").unwrap();
    assert_eq!(entries, vec![entry("mm[M1]", 1.0), entry("mm[M2]", 3.0)]);
    let text = std::fs::read_to_string(cache::file_of(&dir, "mm")).unwrap();
    cache::store(&dir, "mm", entry("mm[M1]", 1.0)).unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(cache::file_of(&dir, "mm")).unwrap(),
        "stable output"
    );
    assert_eq!(
        cache::lookup(
            &entries,
            &id("mm[M1]"),
            &target("x86_64-unknown-linux-gnu/avx512"),
            &test_cpu(),
            2
        ),
        Lookup::Hit(entry("mm[M1]", 1.0))
    );
    assert_eq!(
        cache::lookup(
            &entries,
            &id("mm[M1]"),
            &target("aarch64/baseline"),
            &test_cpu(),
            2
        ),
        Lookup::Miss
    );
    let mut old = entry("mm[M3]", 1.0);
    old.generator = 0;
    assert!(matches!(
        cache::lookup(&[old.clone()], &id("mm[M3]"), &old.target, &test_cpu(), 2),
        Lookup::Stale(_)
    ));
}

/// Entries of one CPU at several kernel thread counts: a build uses the one of
/// its thread count and carries the others for the pool sizes they were tuned
/// at; a store replaces only the entry of its own thread count.
#[test]
fn entries_of_several_thread_counts_live_side_by_side() {
    let dir = scratch("threads");
    let at = |threads: usize, tile: &str| {
        let mut e = entry("mm[M1]", threads as f64);
        e.threads = Some(threads);
        e.config = format!("output.tile.i={tile} output.order=i-j")
            .parse()
            .unwrap();
        e
    };
    cache::store(&dir, "mm", at(2, "8")).unwrap();
    cache::store(&dir, "mm", at(1, "4")).unwrap();
    cache::store(&dir, "mm", at(2, "6")).unwrap();
    let entries = cache::load(&dir, "mm").unwrap();
    assert_eq!(entries, vec![at(1, "4"), at(2, "6")]);
    let t = target("x86_64-unknown-linux-gnu/avx512");
    let look = |threads| cache::lookup(&entries, &id("mm[M1]"), &t, &test_cpu(), threads);
    assert_eq!(look(1), Lookup::Hit(at(1, "4")));
    assert_eq!(look(2), Lookup::Hit(at(2, "6")));
    assert!(
        matches!(look(4), Lookup::Hit(_)),
        "another count's entry still hits"
    );
    let threads = |n| cache::Selector {
        cpu: None,
        threads: Some(n),
    };
    assert_eq!(
        cache::variants(
            &entries,
            &id("mm[M1]"),
            &t,
            &test_cpu(),
            2,
            Some(&at(2, "6").config)
        ),
        vec![(threads(1), at(1, "4").config)]
    );
    // Another CPU's entries at two counts: one per count on that CPU, the
    // build's count's for any other count there, before this CPU's counts.
    let amd = cpu("AMD EPYC 9R14", Some("AuthenticAMD-25-17"));
    let mut more = entries.clone();
    more.push(on(&amd, at(1, "2")));
    more.push(on(&amd, at(2, "3")));
    let on_amd = |n: Option<usize>| cache::Selector {
        cpu: amd.id.clone(),
        threads: n,
    };
    assert_eq!(
        cache::variants(
            &more,
            &id("mm[M1]"),
            &t,
            &test_cpu(),
            2,
            Some(&at(2, "6").config)
        ),
        vec![
            (on_amd(Some(1)), at(1, "2").config),
            (on_amd(None), at(2, "3").config),
            (threads(1), at(1, "4").config),
        ]
    );
}

/// A build prefers its own CPU's entry, replays another CPU's when it has none
/// (same vendor first), and a store for one CPU keeps the others' entries.
#[test]
fn entries_of_several_cpus_live_side_by_side() {
    let dir = scratch("cpus");
    let intel = cpu("Intel Xeon", Some("GenuineIntel-6-143"));
    let amd = cpu("AMD EPYC 9R14", Some("AuthenticAMD-25-17"));
    let other_intel = cpu("Intel Xeon", Some("GenuineIntel-6-207"));
    let zen5 = cpu("AMD EPYC 9R45", Some("AuthenticAMD-26-2"));
    cache::store(&dir, "mm", on(&intel, entry("mm[M1]", 1.0))).unwrap();
    cache::store(&dir, "mm", on(&amd, entry("mm[M1]", 2.0))).unwrap();
    cache::store(&dir, "mm", on(&intel, entry("mm[M1]", 3.0))).unwrap();
    let entries = cache::load(&dir, "mm").unwrap();
    assert_eq!(
        entries.len(),
        2,
        "one entry per CPU, the second store for a CPU replaces its first"
    );
    let t = target("x86_64-unknown-linux-gnu/avx512");
    let look = |cpu: &Cpu| cache::lookup(&entries, &id("mm[M1]"), &t, cpu, 2);
    assert_eq!(look(&intel), Lookup::Hit(on(&intel, entry("mm[M1]", 3.0))));
    assert_eq!(look(&amd), Lookup::Hit(on(&amd, entry("mm[M1]", 2.0))));
    // The same model name on another microarchitecture is another CPU.
    assert_eq!(
        look(&other_intel),
        Lookup::Foreign(on(&intel, entry("mm[M1]", 3.0)), None)
    );
    assert_eq!(
        look(&zen5),
        Lookup::Foreign(on(&amd, entry("mm[M1]", 2.0)), None)
    );

    // An entry written before CPU ids were recorded is this CPU's when the
    // model names agree.
    let legacy = on(&cpu("AMD EPYC", None), entry("mm[M1]", 4.0));
    let with_legacy = [legacy.clone()];
    assert_eq!(
        cache::lookup(
            &with_legacy,
            &id("mm[M1]"),
            &t,
            &Cpu {
                name: "AMD EPYC".into(),
                id: amd.id.clone()
            },
            2
        ),
        Lookup::Hit(legacy.clone())
    );
    assert_eq!(
        cache::lookup(&with_legacy, &id("mm[M1]"), &t, &intel, 2),
        Lookup::Foreign(legacy, None)
    );

    // A generator change: this CPU's stale entry is reported, not applied; a
    // current entry of another CPU is replayed instead.
    let mut stale = on(&zen5, entry("mm[M1]", 5.0));
    stale.generator = 0;
    stale.config = "output.tile.i=4 output.order=i-j".parse().unwrap();
    let mut with_stale = entries.clone();
    with_stale.push(stale.clone());
    // The replayed entry comes with this CPU's stale one, so the build's
    // warning can say which: this CPU's entry is stale, or it has none.
    assert_eq!(
        cache::lookup(&with_stale, &id("mm[M1]"), &t, &zen5, 2),
        Lookup::Foreign(
            on(&amd, entry("mm[M1]", 2.0)),
            Some(Box::new(stale.clone()))
        )
    );
    assert_eq!(
        cache::lookup(&with_stale, &id("mm[M1]"), &t, &other_intel, 2),
        Lookup::Foreign(on(&intel, entry("mm[M1]", 3.0)), None)
    );
    assert_eq!(
        cache::lookup(&[stale.clone()], &id("mm[M1]"), &t, &zen5, 2),
        Lookup::Stale(stale.clone())
    );
    // What the kernel carries besides the build's choice: the other CPUs'
    // current configs with an id (not a stale one, not one without an id).
    let mut amd_config = on(&amd, entry("mm[M1]", 2.0));
    amd_config.config = "output.tile.i=2 output.order=i-j".parse().unwrap();
    let mut several = vec![
        on(&intel, entry("mm[M1]", 3.0)),
        amd_config.clone(),
        stale.clone(),
    ];
    several.push(on(&cpu("AMD EPYC", None), entry("mm[M1]", 4.0)));
    let mine = entry("mm[M1]", 3.0).config;
    let any_threads = |cpu: &Cpu| cache::Selector {
        cpu: cpu.id.clone(),
        threads: None,
    };
    assert_eq!(
        cache::variants(&several, &id("mm[M1]"), &t, &intel, 2, Some(&mine)),
        vec![(any_threads(&amd), amd_config.config.clone())]
    );
    // The last variants are left out where they run the chosen config anyway.
    assert_eq!(
        cache::variants(
            &several,
            &id("mm[M1]"),
            &t,
            &intel,
            2,
            Some(&amd_config.config)
        ),
        vec![]
    );

    // A re-tune starts from this CPU's own config, then the others' (all the
    // workload's own: the incumbents its run re-times beside its best).
    let seeds = cache::seeds(&with_stale, &id("mm[M1]"), &t, &zen5);
    assert_eq!(seeds.incumbents.first(), Some(&stale.config));
    assert_eq!(seeds.incumbents.len(), 3);
    assert!(seeds.others.is_empty());

    // On a CPU of a lower ISA level, with no entry for it yet, the configs
    // tuned for the higher level seed the run (after any of its own level).
    let avx2 = target("x86_64-unknown-linux-gnu/avx2");
    let mut own_level = on(&zen5, entry("mm[M1]", 1.0));
    own_level.target = avx2.clone();
    own_level.config = "output.tile.i=8 output.order=i-j".parse().unwrap();
    let seeds = cache::seeds(&with_stale, &id("mm[M1]"), &avx2, &zen5);
    assert_eq!(seeds.incumbents.len(), 3);
    let mut both = with_stale.clone();
    both.push(own_level.clone());
    let seeds = cache::seeds(&both, &id("mm[M1]"), &avx2, &zen5);
    assert_eq!(seeds.incumbents.len(), 4);
    assert_eq!(seeds.incumbents.first(), Some(&own_level.config));
    // Another triple's entries are not points of this space's target.
    let arm = target("aarch64-unknown-linux-gnu/baseline");
    assert!(cache::seeds(&both, &id("mm[M1]"), &arm, &zen5)
        .incumbents
        .is_empty());
}

#[test]
fn corrupt_cache_is_reported_and_kept() {
    let dir = scratch("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let path = cache::file_of(&dir, "mm");
    let broken = "[[entry]]\nworkload = \"mm\"\ngflops = \"fast\"\n";
    std::fs::write(&path, broken).unwrap();
    let err = cache::load(&dir, "mm").unwrap_err().to_string();
    assert!(
        err.contains("mm.toml:3: the tuning cache does not parse"),
        "{err}"
    );
    let err = cache::store(&dir, "mm", entry("mm[M1]", 1.0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not parse"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        broken,
        "never overwritten"
    );
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = scratch("concurrent");
    std::thread::scope(|s| {
        for t in 0..4 {
            let dir = dir.clone();
            s.spawn(move || {
                for i in 0..15 {
                    cache::store(&dir, "mm", entry(&format!("mm[T{t} I{i:02}]"), i as f64))
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(cache::load(&dir, "mm").unwrap().len(), 60);
}

/// Run by `two_processes_lose_nothing` in child processes (ignored on its own).
#[test]
#[ignore]
fn writer_process() {
    let (Ok(dir), Ok(who)) = (
        std::env::var("CACHE_TEST_DIR"),
        std::env::var("CACHE_TEST_WRITER"),
    ) else {
        return;
    };
    for i in 0..20 {
        cache::store(
            Path::new(&dir),
            "mm",
            entry(&format!("mm[P{who} I{i:02}]"), i as f64),
        )
        .unwrap();
    }
}

#[test]
fn two_processes_lose_nothing() {
    let dir = scratch("processes");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|who| {
            std::process::Command::new(&exe)
                .args(["--exact", "writer_process", "--ignored", "--quiet"])
                .env("CACHE_TEST_DIR", &dir)
                .env("CACHE_TEST_WRITER", who.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(cache::load(&dir, "mm").unwrap().len(), 40);
}

/// A 4×16×8 matmul workload and two configs of its space that make different
/// kernels.
fn matmul() -> (Workload, Config, Config) {
    let item: syn::ItemFn = syn::parse_str(
        "pub fn mm(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
            compute(|i, j| sum(|k| a[i][k] * b[k][j]))
        }",
    )
    .unwrap();
    let attr = "specialize(M = 4, N = 16, K = 8)".parse().unwrap();
    let op = autotune_lang::parse_operator(attr, &item).unwrap();
    let w = Workload { op, spec: 0 };
    let space = Space::new(&w.op, w.shapes());
    let default = space.default_config(&w.op, w.shapes());
    let other = space.config_at(space.index_of(&default).unwrap() + 1);
    (w, default, other)
}

#[test]
fn a_kernel_fingerprint_names_the_config_and_the_isa() {
    let (w, a, b) = matmul();
    let fp = |c, isa| KernelFingerprint::of(&w, c, isa).unwrap();
    assert_eq!(fp(&a, Isa::Avx2), fp(&a, Isa::Avx2));
    assert_ne!(fp(&a, Isa::Avx2), fp(&b, Isa::Avx2));
    assert_ne!(fp(&a, Isa::Avx2), fp(&a, Isa::Avx512));
    let text = fp(&a, Isa::Avx2).to_string();
    assert_eq!(
        text.parse::<KernelFingerprint>().unwrap(),
        fp(&a, Isa::Avx2)
    );
    assert!("12345".parse::<KernelFingerprint>().is_err());
}

/// An entry of an older generator version is current only when it recorded the
/// kernel it timed and its config still makes that kernel; one whose kernel
/// changed, or that recorded none, stays stale. The file keeps what it was.
#[test]
fn an_older_generators_entry_is_current_only_while_its_kernel_is_unchanged() {
    let (w, config, other) = matmul();
    let dir = scratch("carried");
    let isa = Isa::Avx2;
    let old = |who: &str, kernel: Option<KernelFingerprint>| {
        let mut e = on(&cpu(who, None), entry("mm[M4 K8 N16]", 1.0));
        e.workload_id = w.id();
        e.target = target("x86_64-unknown-linux-gnu/avx2");
        e.generator = cache::GENERATOR_VERSION - 1;
        e.config = config.clone();
        e.kernel = kernel;
        e
    };
    let same = KernelFingerprint::of(&w, &config, isa).unwrap();
    let changed = KernelFingerprint::of(&w, &other, isa).unwrap();
    cache::store(&dir, "mm", old("same", Some(same))).unwrap();
    cache::store(&dir, "mm", old("changed", Some(changed))).unwrap();
    cache::store(&dir, "mm", old("unrecorded", None)).unwrap();
    let entries = cache::load_for(&dir, &w.op).unwrap();
    let current: Vec<&str> = entries
        .iter()
        .filter(|e| e.generator == cache::GENERATOR_VERSION)
        .map(|e| e.cpu.as_str())
        .collect();
    assert_eq!(current, ["same"]);
    let look = |who| {
        cache::lookup(
            &entries,
            &w.id(),
            &target("x86_64-unknown-linux-gnu/avx2"),
            &cpu(who, None),
            2,
        )
    };
    assert!(matches!(look("same"), Lookup::Hit(e) if e.cpu == "same"));
    assert!(
        matches!(look("changed"), Lookup::Foreign(e, Some(stale)) if e.cpu == "same" && stale.cpu == "changed")
    );
    assert!(cache::load(&dir, "mm")
        .unwrap()
        .iter()
        .all(|e| e.generator == cache::GENERATOR_VERSION - 1));
}

/// `stamp` records the kernel of this generator's entries that lack one, and
/// leaves older generators' entries alone.
#[test]
fn stamping_records_the_kernel_of_current_entries_only() {
    let (w, config, _) = matmul();
    let dir = scratch("stamp");
    let at = |who: &str, generator| {
        let mut e = on(&cpu(who, None), entry("mm[M4 K8 N16]", 1.0));
        e.workload_id = w.id();
        e.target = target("x86_64-unknown-linux-gnu/avx2");
        e.generator = generator;
        e.config = config.clone();
        e
    };
    cache::store(&dir, "mm", at("now", cache::GENERATOR_VERSION)).unwrap();
    cache::store(&dir, "mm", at("before", cache::GENERATOR_VERSION - 1)).unwrap();
    assert_eq!(cache::stamp(&dir, &w.op).unwrap(), 1);
    assert_eq!(cache::stamp(&dir, &w.op).unwrap(), 0);
    let kernels: Vec<(String, Option<KernelFingerprint>)> = cache::load(&dir, "mm")
        .unwrap()
        .into_iter()
        .map(|e| (e.cpu, e.kernel))
        .collect();
    let want = KernelFingerprint::of(&w, &config, Isa::Avx2).unwrap();
    assert_eq!(
        kernels,
        [
            ("before".to_string(), None),
            ("now".to_string(), Some(want))
        ]
    );
}

/// Pruning against one crate's source drops the entries of shapes its
/// operators lost, and leaves alone the files of operators it does not
/// define: a cache shared by several crates (this workspace's examples)
/// holds those, and pruning from one crate emptied the other's files. A
/// removed operator's file goes only when it is named.
#[test]
fn pruning_leaves_the_operators_another_source_defines() {
    let dir = scratch("prune-shared");
    let (w, config, _) = matmul();
    let kept = Entry {
        workload: w.key(),
        workload_id: w.id(),
        config: config.clone(),
        ..entry("mm[M4 K8 N16]", 2.0)
    };
    let lost = entry("mm[M2]", 1.0);
    cache::store(&dir, "mm", kept.clone()).unwrap();
    cache::store(&dir, "mm", lost).unwrap();
    let other = Entry {
        workload: "conv[C8]".to_string(),
        ..entry("conv[C8]", 3.0)
    };
    cache::store(&dir, "conv", other.clone()).unwrap();
    let ops = [w.op.clone()];
    let pruned = cache::prune(&dir, &ops, None).unwrap();
    assert_eq!(pruned.dropped, vec![("mm".to_string(), 1)]);
    assert_eq!(pruned.not_defined, vec!["conv".to_string()]);
    assert_eq!(cache::load(&dir, "mm").unwrap(), vec![kept]);
    assert_eq!(cache::load(&dir, "conv").unwrap(), vec![other]);
    let named = cache::prune(&dir, &ops, Some("conv")).unwrap();
    assert_eq!(named.dropped, vec![("conv".to_string(), 1)]);
    assert!(cache::load(&dir, "conv").unwrap().is_empty());
}
