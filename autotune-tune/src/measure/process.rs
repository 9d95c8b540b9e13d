//! Child processes of a measurement: the C compiler (with the flags that ship)
//! and the measurement program, each with a time limit.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use autotune_codegen::runtime::{C_FLAGS, OPT_LEVEL};

use super::error::MeasureError;
use crate::parallel::on_every_core;

/// The target triple this crate was compiled for: where it runs (a build script
/// or `cargo autotune`) is the host, whose C compiler measures candidates.
pub const HOST_TRIPLE: &str = env!("AUTOTUNE_HOST_TARGET");

/// Limit for one compiler process of the harness (and the default for a
/// candidate's).
pub(super) const COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// The C compiler's own version line (`gcc (Debian 12.2.0-14) 12.2.0`).
pub fn compiler_version() -> String {
    c_compiler(&[])
        .ok()
        .and_then(|c| version_of(&c))
        .unwrap_or_else(|| "unknown".to_string())
}

fn version_of(compiler: &cc::Tool) -> Option<String> {
    let out = compiler.to_command().arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(str::to_string)
}

/// Objects kept across runs, for tests that check the same kernels every run
/// (a CI machine's runs share a target directory): each is named by the hash
/// of its C and of the compiler's identity (its path, flags and version line),
/// so only the same source under the same compiler and flags finds it. What
/// is checked is then still the object the shipping flags make of that C.
/// (The build helper keeps its objects alike, `autotune-build/src/objects.rs`;
/// neither can call the other's: the build replays without this crate, and the
/// code generator below both does no I/O.)
pub(super) struct ObjectStore {
    dir: PathBuf,
    compiler: u64,
}

impl ObjectStore {
    pub(super) fn new(dir: &Path, compiler: &cc::Tool) -> Result<ObjectStore, MeasureError> {
        std::fs::create_dir_all(dir).map_err(|source| MeasureError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut h = DefaultHasher::new();
        compiler.path().hash(&mut h);
        compiler.args().hash(&mut h);
        C_FLAGS.hash(&mut h);
        version_of(compiler).hash(&mut h);
        // Once per process and directory: a test makes a harness per workload,
        // and a scan of a full store (some 15,000 files) takes about 40 ms.
        static PRUNED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        let mut pruned = PRUNED.lock().unwrap_or_else(|e| e.into_inner());
        if !pruned.iter().any(|d| d == dir) {
            prune(dir, STORE_BUDGET);
            pruned.push(dir.to_path_buf());
        }
        drop(pruned);
        Ok(ObjectStore {
            dir: dir.to_path_buf(),
            compiler: h.finish(),
        })
    }

    /// Where the object of `source` is kept.
    fn object(&self, source: &[u8]) -> PathBuf {
        let mut h = DefaultHasher::new();
        self.compiler.hash(&mut h);
        source.hash(&mut h);
        self.dir.join(format!("{:016x}.o", h.finish()))
    }

    /// Marks a kept object as just used, so that [`prune`] takes it last.
    fn used(kept: &Path) {
        let now = std::time::SystemTime::now();
        let _ = std::fs::File::options()
            .write(true)
            .open(kept)
            .and_then(|f| f.set_modified(now));
    }

    /// Keeps `object` as `kept`: copied beside it, then renamed, so a reader
    /// never finds half an object. A failure only costs a later compile.
    fn keep(object: &Path, kept: &Path) {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let part = kept.with_extension(format!("{}-{n}.part", std::process::id()));
        if std::fs::copy(object, &part).is_ok() && std::fs::rename(&part, kept).is_err() {
            let _ = std::fs::remove_file(&part);
        }
    }
}

/// The most a store keeps. A CI run of the tests that share one reads or adds
/// about 36 MB of objects: about 20 MB of them new, mostly the space tests'
/// random configs, which no later run asks for again.
const STORE_BUDGET: u64 = 256 << 20;

/// Where a store's files take more than `budget` bytes, removes the least
/// recently used (by modification time, which a hit renews) until they take
/// three quarters of it, so a CI machine's store stays bounded. Another
/// process may be reading one of them: its copy then fails, and it compiles,
/// as on any miss.
fn prune(dir: &Path, budget: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= budget {
        return;
    }
    files.sort();
    for (_, len, path) in files {
        if total <= budget / 4 * 3 {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// The host's C compiler at the shipping optimisation level, with `extra`
/// flags (none but in tests: what is timed is what ships).
pub(super) fn c_compiler(extra: &[&str]) -> Result<cc::Tool, MeasureError> {
    let mut build = cc::Build::new();
    for flag in extra {
        build.flag(flag);
    }
    build
        .target(HOST_TRIPLE)
        .host(HOST_TRIPLE)
        .opt_level(OPT_LEVEL)
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| MeasureError::Harness(format!("no C compiler: {e}")))
}

/// Compiles each file to an object with the shipping flags, each within
/// `limit`, on every core ([`on_every_core`]), so a slow file does not hold up
/// the rest. The largest files start first: gcc's time grows with the source,
/// and a large file taken last would leave the other cores idle while it
/// compiles alone. With a `store`, a file whose object it keeps is not
/// compiled, and each object compiled is kept there. The results are in the
/// order of `files`.
pub(super) fn compile_objects(
    compiler: &cc::Tool,
    files: &[PathBuf],
    limit: Duration,
    store: Option<&ObjectStore>,
) -> Vec<Result<PathBuf, MeasureError>> {
    let mut order: Vec<(u64, usize)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (std::fs::metadata(f).map_or(0, |m| m.len()), i))
        .collect();
    order.sort_by(|a, b| b.cmp(a));
    let compiled = on_every_core(&order, |&(_, i)| {
        let f = &files[i];
        let o = f.with_extension("o");
        let kept = store.and_then(|s| std::fs::read(f).ok().map(|text| s.object(&text)));
        if let Some(k) = kept.as_ref().filter(|k| std::fs::copy(k, &o).is_ok()) {
            ObjectStore::used(k);
            return Ok(o);
        }
        let mut cmd = compiler.to_command();
        cmd.args(C_FLAGS).arg("-c").arg(f).arg("-o").arg(&o);
        run_compiler(cmd, limit)?;
        if let Some(k) = kept {
            ObjectStore::keep(&o, &k);
        }
        Ok(o)
    });
    let mut out: Vec<Option<Result<PathBuf, MeasureError>>> = files.iter().map(|_| None).collect();
    for ((_, i), r) in order.into_iter().zip(compiled) {
        out[i] = Some(r);
    }
    out.into_iter().flatten().collect()
}

pub(super) fn run_compiler(cmd: Command, limit: Duration) -> Result<(), MeasureError> {
    match run_limited(cmd, limit) {
        Ok(_) => Ok(()),
        Err(MeasureError::Timeout(d)) => Err(MeasureError::CompileTimeout(d)),
        Err(MeasureError::Crash(text)) => {
            // The first errors say what went wrong; keep the record short.
            let head: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("error"))
                .take(5)
                .collect();
            Err(MeasureError::Compile(if head.is_empty() {
                text
            } else {
                head.join("\n")
            }))
        }
        Err(e) => Err(e),
    }
}

/// Runs a command with a time limit, returning its stdout. Both pipes are
/// drained while it runs (a full pipe would block it), and it runs in a process
/// group of its own, which a timeout kills whole (a compiler's own children, or
/// a candidate's, do not run on into later timings).
pub(super) fn run_limited(mut cmd: Command, limit: Duration) -> Result<String, MeasureError> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| MeasureError::Crash(format!("cannot start the measurement program: {e}")))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > limit => {
                // Not reaped yet, so the group id cannot have been reused.
                kill_group(child.id());
                let _ = child.wait();
                // The pipes close once the whole group is gone.
                let _ = (stdout.join(), stderr.join());
                return Err(MeasureError::Timeout(limit));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(MeasureError::Crash(e.to_string()));
            }
        }
    };
    let out = std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    match out.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(3) => Err(MeasureError::Alloc),
        // The driver's checks of guard regions and unwritten elements.
        Some(5 | 6) => Err(MeasureError::WrongResult(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )),
        code => {
            use std::os::unix::process::ExitStatusExt;
            let why = match (code, out.status.signal()) {
                (_, Some(sig)) => format!("killed by signal {sig}"),
                (Some(c), _) => format!("exit status {c}"),
                _ => "unknown".to_string(),
            };
            Err(MeasureError::Crash(format!(
                "{why}; {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

/// Kills the process group `pgid` (a child started with `process_group(0)`).
fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; a
        // group that is already gone makes it fail with ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{c_compiler, compile_objects, prune, ObjectStore, COMPILE_TIMEOUT};
    use crate::measure::MeasureError;

    /// Files compile largest first, and each result is still its own file's:
    /// the broken small file's error at its place, the others' objects at theirs.
    #[test]
    fn compiled_objects_come_back_in_the_files_order() {
        let dir = std::env::temp_dir().join(format!("autotune-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big: String = (0..200)
            .map(|i| format!("int f{i}(int x) {{ return x * {i} + 1; }}\n"))
            .collect();
        let files: Vec<_> = [
            ("small.c", "int g(void) { return 1; }\n"),
            ("big.c", &big),
            ("broken.c", "int h(void) { return }\n"),
        ]
        .iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
        let out = compile_objects(&c_compiler(&[]).unwrap(), &files, COMPILE_TIMEOUT, None);
        assert_eq!(out[0].as_ref().unwrap(), &dir.join("small.o"));
        assert_eq!(out[1].as_ref().unwrap(), &dir.join("big.o"));
        assert!(
            matches!(out[2], Err(MeasureError::Compile(_))),
            "{:?}",
            out[2]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store hands back the object of the same C under the same compiler
    /// and flags, and only that: the stored object is replaced by a marker,
    /// which the same file then gets back; other C, or other flags, compile.
    #[test]
    fn a_store_gives_back_an_object_only_for_the_same_source_and_compiler() {
        let dir = std::env::temp_dir().join(format!("autotune-store-{}", std::process::id()));
        let store_dir = dir.join("store");
        std::fs::create_dir_all(&dir).unwrap();
        let compiler = c_compiler(&[]).unwrap();
        let store = ObjectStore::new(&store_dir, &compiler).unwrap();
        let file = dir.join("f.c");
        std::fs::write(&file, "int f(int x) { return x + 1; }\n").unwrap();
        let compile = |c: &cc::Tool, s: &ObjectStore| {
            let o =
                compile_objects(c, std::slice::from_ref(&file), COMPILE_TIMEOUT, Some(s)).remove(0);
            std::fs::read(o.unwrap()).unwrap()
        };
        let first = compile(&compiler, &store);
        let kept: Vec<_> = std::fs::read_dir(&store_dir).unwrap().flatten().collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::read(kept[0].path()).unwrap(), first);
        std::fs::write(kept[0].path(), b"marker").unwrap();
        assert_eq!(compile(&compiler, &store), b"marker");
        let other = c_compiler(&["-fno-inline"]).unwrap();
        assert_ne!(
            compile(&other, &ObjectStore::new(&store_dir, &other).unwrap()),
            b"marker"
        );
        std::fs::write(&file, "int f(int x) { return x + 2; }\n").unwrap();
        assert_ne!(compile(&compiler, &store), b"marker");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Over its budget, a store loses its least recently used objects first,
    /// down to three quarters of the budget; an object used since it was kept
    /// counts as recent.
    #[test]
    fn a_store_over_its_budget_drops_the_least_recently_used_objects() {
        let dir = std::env::temp_dir().join(format!("autotune-prune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let start = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        // Kept a minute apart, oldest first: a, b, c, d; then a is used.
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            let path = dir.join(format!("{name}.o"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(start + std::time::Duration::from_secs(60 * i as u64))
                .unwrap();
        }
        ObjectStore::used(&dir.join("a.o"));
        prune(&dir, 400);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4, "within budget");
        prune(&dir, 300);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["a.o", "d.o"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
