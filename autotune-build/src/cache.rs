//! The tuning cache: `tuning-cache/<operator>.toml` beside a crate's manifest,
//! meant to be committed. One file per operator keeps diffs small; entries are
//! sorted, so a file changes only where a result changed.
//!
//! An entry is keyed by the exact workload ([`WorkloadId`]: operator IR
//! fingerprint and shapes), the target (triple and ISA level), the CPU it was
//! tuned on ([`Cpu`]), the kernel thread count it was timed at and the
//! generator version of the schedule space; it records the config (knob →
//! value), its throughput, how it was found, with which compiler, and when.
//!
//! Entries of several CPUs and kernel thread counts live side by side: a
//! lookup prefers this CPU's at this thread count, and replays another CPU's
//! ([`Lookup::Foreign`], which callers announce) when this one has none; a
//! store replaces only the entry of its own CPU and thread count; the others
//! ship as [`variants`] the kernel picks at run time. Entries of another
//! generator version are stale: reported and used as seeds, never applied,
//! and kept (whoever has that CPU re-tunes them) -- unless the entry records
//! the [`KernelFingerprint`] of the kernel it timed and this generator still
//! makes that kernel from its config: then [`load_for`] carries it over as
//! current, so a generator change re-tunes only the kernels it changed.
//!
//! Writes merge into the file under a lock and replace it atomically, so two
//! builds writing at once lose nothing; a file that does not parse is reported
//! with its line and never overwritten.

use std::fs::File;
use std::path::{Path, PathBuf};

use autotune_codegen::{Config, CpuId, KernelFingerprint, Target, Workload, WorkloadId};
use autotune_lang::Operator;
use serde::{Deserialize, Serialize};

pub use autotune_codegen::{Selector, GENERATOR_VERSION};

/// Version of the cache file's format: 2 added `format` and each entry's
/// `threads`, 3 each entry's `cpu_id`, 4 each entry's `kernel`. Files of older
/// versions read as before; they gain the keys when next written.
pub const FORMAT_VERSION: u32 = 4;

/// The CPU an entry was tuned on: the model name, and the CPUID identity
/// where it was recorded (format 3 on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub name: String,
    pub id: Option<CpuId>,
}

impl Cpu {
    /// This machine's CPU.
    pub fn host() -> Cpu {
        Cpu {
            name: cpu_model(),
            id: CpuId::detect(),
        }
    }

    /// Whether two descriptions name the same CPU: by CPUID where both have
    /// one (model names are often generic: a VM's "Intel Xeon Processor"
    /// spans generations), else by model name, as entries were told apart
    /// before ids were recorded.
    pub fn same(&self, other: &Cpu) -> bool {
        match (&self.id, &other.id) {
            (Some(a), Some(b)) => a == b,
            _ => self.name == other.name,
        }
    }

    fn vendor(&self) -> Option<&str> {
        self.id.as_ref().map(|i| i.vendor.as_str())
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.id {
            Some(id) => write!(f, "{} ({id})", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Readable workload, e.g. `matmul[M1024 K1024 N1024]`.
    pub workload: String,
    pub workload_id: WorkloadId,
    /// `<target triple>/<isa level>`.
    pub target: Target,
    pub generator: u32,
    pub gflops: f64,
    pub trials: usize,
    pub tuner: String,
    /// The CPU's model name.
    pub cpu: String,
    /// The CPU's CPUID identity (none in files before format 3, or off x86).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_id: Option<CpuId>,
    pub compiler: String,
    /// The kernel thread count the config was tuned at (none in format 1 files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    pub config: Config,
    /// The fingerprint of the kernel that was timed (none before format 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFingerprint>,
}

impl Entry {
    /// Whether this entry, of another generator version, is still current for
    /// workload `w`: it records the kernel it timed, and its config makes the
    /// same kernel today.
    pub fn carried_over(&self, w: &Workload) -> bool {
        self.generator != GENERATOR_VERSION
            && KernelFingerprint::still_made(self.kernel, w, &self.config, self.target.isa)
    }

    /// The CPU this entry was tuned on.
    pub fn tuned_on(&self) -> Cpu {
        Cpu {
            name: self.cpu.clone(),
            id: self.cpu_id.clone(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct CacheFile {
    #[serde(default)]
    format: Option<u32>,
    #[serde(default, rename = "entry")]
    entries: Vec<Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot read the tuning cache {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}:{line}: the tuning cache does not parse: {message}\n(fix or delete the file; autotune \
         never overwrites a cache it cannot read)",
        path.display()
    )]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot write the tuning cache {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The cache file of an operator.
pub fn file_of(dir: &Path, op: &str) -> PathBuf {
    dir.join(format!("{op}.toml"))
}

/// The entries of an operator's cache file (none if the file does not exist).
pub fn load(dir: &Path, op: &str) -> Result<Vec<Entry>, CacheError> {
    let path = file_of(dir, op);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(CacheError::Read { path, source }),
    };
    parse(&path, &text)
}

/// [`load`], with the entries [`Entry::carried_over`] to this generator
/// stamped with its version: the same kernel, so current. (The file keeps the
/// version they were tuned with.)
pub fn load_for(dir: &Path, op: &Operator) -> Result<Vec<Entry>, CacheError> {
    let mut entries = load(dir, &op.name)?;
    for_each_workload(op, &mut entries, |w, e| {
        if e.carried_over(w) {
            e.generator = GENERATOR_VERSION;
        }
    });
    Ok(entries)
}

/// Calls `f` with each of `entries` that is of a specialisation of `op`, and
/// that workload.
fn for_each_workload(
    op: &Operator,
    entries: &mut [Entry],
    mut f: impl FnMut(&Workload, &mut Entry),
) {
    for spec in 0..op.specializations.len() {
        let w = Workload {
            op: op.clone(),
            spec,
        };
        let id = w.id();
        for e in entries.iter_mut().filter(|e| e.workload_id == id) {
            f(&w, e);
        }
    }
}

fn parse(path: &Path, text: &str) -> Result<Vec<Entry>, CacheError> {
    toml::from_str::<CacheFile>(text)
        .map(|f| f.entries)
        .map_err(|e| CacheError::Parse {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].lines().count().max(1)
            }),
            message: e.message().to_string(),
        })
}

/// What the cache holds for a workload on a target and CPU.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// This CPU's entry.
    Hit(Entry),
    /// No entry of this CPU's, but one of another CPU's (of the same vendor if
    /// there is one, else the newest): replayed, and callers say so; with this
    /// CPU's entry of another generator version, if it has one (what the
    /// replayed entry stands in for).
    Foreign(Entry, Option<Box<Entry>>),
    /// Only entries of another generator version (this CPU's if there is
    /// one): reported, never applied.
    Stale(Entry),
    Miss,
}

/// The entry of `workload_id` on `target` a build for `cpu` with kernels of
/// `threads` threads uses: this CPU's (at this thread count if it has one),
/// else another CPU's (the same vendor's first, then this thread count's, then
/// the newest).
pub fn lookup(
    entries: &[Entry],
    workload_id: &WorkloadId,
    target: &Target,
    cpu: &Cpu,
    threads: usize,
) -> Lookup {
    let (current, stale): (Vec<&Entry>, Vec<&Entry>) = entries
        .iter()
        .filter(|e| e.workload_id == *workload_id && e.target == *target)
        .partition(|e| e.generator == GENERATOR_VERSION);
    // At this thread count first, then of an unrecorded one, then any.
    let fit = |e: &Entry| match e.threads {
        Some(t) if t == threads => 2,
        None => 1,
        Some(_) => 0,
    };
    let own = |list: &[&Entry]| -> Option<Entry> {
        list.iter()
            .filter(|e| cpu.same(&e.tuned_on()))
            .max_by_key(|e| fit(e))
            .map(|e| (*e).clone())
    };
    if let Some(e) = own(&current) {
        return Lookup::Hit(e);
    }
    let foreign = current.iter().max_by(|a, b| {
        let kin = |e: &Entry| {
            e.tuned_on()
                .vendor()
                .is_some_and(|v| Some(v) == cpu.vendor())
        };
        (kin(a), fit(a), &a.date).cmp(&(kin(b), fit(b), &b.date))
    });
    let own_stale = own(&stale);
    match (foreign, own_stale) {
        (Some(e), own_stale) => Lookup::Foreign((*e).clone(), own_stale.map(Box::new)),
        (None, Some(e)) => Lookup::Stale(e),
        (None, None) => stale
            .first()
            .map_or(Lookup::Miss, |e| Lookup::Stale((*e).clone())),
    }
}

/// What a kernel carries besides the config the build chose (`default`,
/// tuned on `default_cpu` for `threads` kernel threads, or none): the current
/// configs of `workload_id` on `target` tuned on other CPUs (with a recorded
/// id: per thread count, then one for any count) and those of `default_cpu`
/// at other thread counts, in the order the kernel tries them.
pub fn variants(
    entries: &[Entry],
    workload_id: &WorkloadId,
    target: &Target,
    default_cpu: &Cpu,
    threads: usize,
    default: Option<&Config>,
) -> Vec<(Selector, Config)> {
    let current: Vec<&Entry> = entries
        .iter()
        .filter(|e| {
            e.workload_id == *workload_id && e.target == *target && e.generator == GENERATOR_VERSION
        })
        .collect();
    let mut out: Vec<(Selector, Config)> = Vec::new();
    let mut others: Vec<&CpuId> = current
        .iter()
        .filter(|e| !default_cpu.same(&e.tuned_on()))
        .filter_map(|e| e.cpu_id.as_ref())
        .collect();
    others.sort();
    others.dedup();
    for id in others {
        let mut mine: Vec<&Entry> = current
            .iter()
            .filter(|e| e.cpu_id.as_ref() == Some(id))
            .copied()
            .collect();
        mine.sort_by_key(|e| e.threads);
        // The entry for any thread count: this build's count if there is one.
        let fallback = mine
            .iter()
            .position(|e| e.threads == Some(threads))
            .unwrap_or(0);
        for (i, e) in mine.iter().enumerate() {
            if let (Some(t), false) = (e.threads, i == fallback) {
                let cpu = Some(id.clone());
                out.push((
                    Selector {
                        cpu,
                        threads: Some(t),
                    },
                    e.config.clone(),
                ));
            }
        }
        let cpu = Some(id.clone());
        out.push((
            Selector { cpu, threads: None },
            mine[fallback].config.clone(),
        ));
    }
    let mut counts: Vec<(usize, &Config)> = current
        .iter()
        .filter(|e| default_cpu.same(&e.tuned_on()))
        .filter_map(|e| e.threads.filter(|t| *t != threads).map(|t| (t, &e.config)))
        .collect();
    counts.sort_by_key(|c| c.0);
    counts.dedup_by_key(|c| c.0);
    for (t, config) in counts {
        out.push((
            Selector {
                cpu: None,
                threads: Some(t),
            },
            config.clone(),
        ));
    }
    // Trailing variants that run the default's config anyway are left out.
    while out.last().is_some_and(|(_, c)| Some(c) == default) {
        out.pop();
    }
    out
}

/// Configs a tuning run of a workload starts from ([`seeds`]).
#[derive(Clone, Debug, Default)]
pub struct Seeds {
    /// The workload's own cached configs: this CPU's first (re-tuning, or
    /// stale: the last generator's winner is still a point of the space), then
    /// its configs of other CPUs and thread counts, then those tuned for other
    /// ISA levels of the triple (the space is the same at every level).
    pub incumbents: Vec<Config>,
    /// The winners of the operator's other workloads.
    pub others: Vec<Config>,
}

/// The configs a tuning run of `workload_id` on `target` starts from.
pub fn seeds(entries: &[Entry], workload_id: &WorkloadId, target: &Target, cpu: &Cpu) -> Seeds {
    let mut on_target: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.target.triple == target.triple)
        .collect();
    on_target.sort_by_key(|e| (e.target != *target, !cpu.same(&e.tuned_on())));
    let (own, others): (Vec<&Entry>, Vec<&Entry>) = on_target
        .into_iter()
        .partition(|e| e.workload_id == *workload_id);
    let configs = |es: Vec<&Entry>| es.into_iter().map(|e| e.config.clone()).collect();
    Seeds {
        incumbents: configs(own),
        others: configs(others),
    }
}

/// What [`store`] did with an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// The first of its workload, target, CPU and thread count.
    Added,
    /// In place of the one there was.
    Replaced,
    /// Not written: the entry there has the same config and records the same
    /// kernel (whichever generator wrote it: an older one's is current while
    /// this one makes its kernel), and keeps its own figures, trials, tuner
    /// and date (a re-run whose re-timing the entry won does not restate it).
    /// Another config of the recorded kernel replaces it: the entry's own
    /// config may lower to another kernel today.
    Kept,
}

/// Adds `entry` to the operator's file, replacing the entry of the same
/// workload, target, CPU and thread count unless that one is of the same
/// config and kernel ([`Stored::Kept`]); other CPUs' and thread counts'
/// entries stay.
pub fn store(dir: &Path, op: &str, entry: Entry) -> Result<Stored, CacheError> {
    let cpu = entry.tuned_on();
    let mut stored = Stored::Added;
    rewrite(dir, op, |entries| {
        let same = |e: &Entry| {
            e.workload_id == entry.workload_id
                && e.target == entry.target
                && cpu.same(&e.tuned_on())
                && e.threads == entry.threads
        };
        if entries.iter().any(|e| {
            same(e) && e.kernel.is_some() && e.kernel == entry.kernel && e.config == entry.config
        }) {
            stored = Stored::Kept;
            return;
        }
        let before = entries.len();
        entries.retain(|e| !same(e));
        if entries.len() < before {
            stored = Stored::Replaced;
        }
        entries.push(entry);
    })?;
    Ok(stored)
}

/// Keeps the entries of an operator's file for which `keep` holds; returns how
/// many were dropped. A file left empty is removed.
pub fn retain(dir: &Path, op: &str, keep: impl Fn(&Entry) -> bool) -> Result<usize, CacheError> {
    let mut dropped = 0;
    rewrite(dir, op, |entries| {
        let before = entries.len();
        entries.retain(|e| keep(e));
        dropped = before - entries.len();
    })?;
    Ok(dropped)
}

/// What [`prune`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Per operator's file that lost entries: its name and how many.
    pub dropped: Vec<(String, usize)>,
    /// The operators' files left alone: the source given does not define them.
    pub not_defined: Vec<String>,
}

/// Drops the entries of shapes that `ops` no longer specialise, in the files of
/// the operators `ops` define, or in `only`'s file alone where it is named (a
/// removed operator's, too). Other operators' files are left alone: a cache
/// shared by several crates (`Builder::cache_dir`) holds operators one crate's
/// source does not define, and pruning from that crate must not empty them.
pub fn prune(dir: &Path, ops: &[Operator], only: Option<&str>) -> Result<Pruned, CacheError> {
    let mut pruned = Pruned::default();
    for name in operators(dir)? {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let ids: Vec<WorkloadId> = match ops.iter().find(|o| o.name == name) {
            Some(op) => (0..op.specializations.len())
                .map(|spec| {
                    Workload {
                        op: op.clone(),
                        spec,
                    }
                    .id()
                })
                .collect(),
            // Named, an operator the source lost: all its entries go.
            None if only.is_some() => Vec::new(),
            None => {
                pruned.not_defined.push(name);
                continue;
            }
        };
        let dropped = retain(dir, &name, |e| ids.contains(&e.workload_id))?;
        if dropped > 0 {
            pruned.dropped.push((name, dropped));
        }
    }
    Ok(pruned)
}

/// Records the kernel fingerprint of `op`'s entries of this generator version
/// that lack one (their kernel is this generator's, by version); returns how
/// many. Entries of other versions are left as they are: what they timed is
/// not known.
pub fn stamp(dir: &Path, op: &Operator) -> Result<usize, CacheError> {
    let mut stamped = 0;
    if !file_of(dir, &op.name).exists() {
        return Ok(0);
    }
    rewrite(dir, &op.name, |entries| {
        for_each_workload(op, entries, |w, e| {
            if e.generator == GENERATOR_VERSION && e.kernel.is_none() {
                e.kernel = KernelFingerprint::of(w, &e.config, e.target.isa).ok();
                stamped += usize::from(e.kernel.is_some());
            }
        });
    })?;
    Ok(stamped)
}

/// Changes an operator's file under an exclusive lock: re-read, `change`, then
/// replace it atomically (temp file + rename).
fn rewrite(dir: &Path, op: &str, change: impl FnOnce(&mut Vec<Entry>)) -> Result<(), CacheError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    let lock_path = dir.join(".lock");
    let lock = File::create(&lock_path).map_err(write_err(&lock_path))?;
    lock.lock().map_err(write_err(&lock_path))?;
    let mut entries = load(dir, op)?;
    change(&mut entries);
    let path = file_of(dir, op);
    if entries.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(write_err(&path)(e)),
            _ => Ok(()),
        };
    }
    // Sorted by the text of each key, as the file shows them.
    entries.sort_by_cached_key(|e| {
        (
            e.workload.clone(),
            e.target.to_string(),
            e.workload_id.to_string(),
            e.tuned_on().to_string(),
            e.threads,
        )
    });
    let text = format!(
        "# Tuning cache of `{op}`, written by autotune (commit it; see `cargo autotune show`).\n\n{}",
        toml::to_string(&CacheFile {
            format: Some(FORMAT_VERSION),
            entries
        })
        .expect("cache entries serialise")
    );
    let tmp = dir.join(format!(".{op}.toml.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(write_err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(write_err(&path))?;
    drop(lock);
    Ok(())
}

/// The operators that have a cache file in `dir`, sorted.
pub fn operators(dir: &Path) -> Result<Vec<String>, CacheError> {
    let read = std::fs::read_dir(dir).map_err(|source| CacheError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut ops: Vec<String> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    ops.sort();
    Ok(ops)
}

/// Today's date, `YYYY-MM-DD` in UTC.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The CPU model of this machine (from `/proc/cpuinfo` where there is one).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
