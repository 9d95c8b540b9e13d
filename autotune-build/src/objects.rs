//! Compiling the generated C into the static library cargo links, with each
//! kernel file's object kept by content in the target directory
//! (`<target>/autotune-objects/`).
//!
//! Why: kernels are always compiled at `-O3`, whatever the profile, and a large
//! operator file takes a core tens of seconds. Without this, `cargo check`,
//! `cargo build`, `cargo build --release` and `cargo test` each compile every
//! kernel again, and so does any build after the package moves or its build
//! script reruns for an unrelated reason. An object is found by a hash of its
//! C text and of the compiler's identity (path, `--version`, every argument
//! `cc` passes, environment flags included), so a changed kernel, compiler or
//! flag is a miss, never a stale object. Objects are written to a temporary
//! name and renamed into place, so concurrent builds never see half of one.
//! Misses are compiled by `cc`, in parallel within cargo's jobserver, largest
//! first.

use std::path::{Path, PathBuf};

use autotune_codegen::runtime::{C_FLAGS, OPT_LEVEL};
use autotune_lang::mangle::fnv1a;

use crate::error::Error;

/// Where compiled kernel objects are kept: in the target directory that
/// `out_dir` belongs to, found as the first ancestor holding cargo's
/// `CACHEDIR.TAG`; none outside one (then every build compiles).
pub fn cache_dir(out_dir: &Path) -> Option<PathBuf> {
    out_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(|d| d.join("autotune-objects"))
}

/// Compiles `files` into `lib<name>.a` and tells cargo to link it, taking the
/// object of a file from `cache` where an identical compile left one. The
/// flags are fixed here, not taken from the profile: kernels are always
/// optimised.
pub fn compile(files: &[PathBuf], name: &str, cache: Option<&Path>) -> Result<(), Error> {
    compile_with(cc::Build::new(), files, name, cache)
}

/// [`compile`] with `build` (where the tests set the target and output
/// directory that cargo's environment gives a build script).
fn compile_with(
    mut build: cc::Build,
    files: &[PathBuf],
    name: &str,
    cache: Option<&Path>,
) -> Result<(), Error> {
    build.opt_level(OPT_LEVEL).warnings(true);
    for f in C_FLAGS {
        build.flag(f);
    }
    let compiler = build.try_get_compiler().map_err(|e| Error::NoCompiler {
        detail: e.to_string(),
    })?;
    let version = compiler
        .to_command()
        .arg("--version")
        .output()
        .map_err(|e| Error::NoCompiler {
            detail: format!("`{}`: {e}", compiler.path().display()),
        })?;
    let identity = format!(
        "{:?} {:?} {}",
        compiler.path(),
        compiler.args(),
        String::from_utf8_lossy(&version.stdout)
    );
    let dir = files
        .first()
        .and_then(|f| f.parent())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let compile_err = |source| Error::Compile {
        dir: dir.clone(),
        source,
    };

    // Per file, decided once: its kept object (Ok), or a miss, its size and
    // where to keep its object once compiled (Err).
    let mut found = Vec::with_capacity(files.len());
    for file in files {
        let text = std::fs::read(file).map_err(|source| Error::Read {
            path: file.clone(),
            source,
        })?;
        found.push(match cache.map(|c| c.join(object_name(&identity, &text))) {
            Some(k) if k.is_file() => Ok(k),
            k => Err((text.len(), k)),
        });
    }
    // Misses largest first: `cc` starts them in order as cores free up, and
    // one large operator file started last would run alone at the end.
    let mut misses: Vec<usize> = (0..files.len()).filter(|&i| found[i].is_err()).collect();
    misses.sort_by_key(|&i| std::cmp::Reverse(found[i].as_ref().err().map_or(0, |m| m.0)));
    let mut objects: Vec<Option<PathBuf>> = vec![None; files.len()];
    if !misses.is_empty() {
        let mut fresh = build.clone();
        fresh.files(misses.iter().map(|&i| &files[i]));
        // `cc` returns the objects in the order of its files.
        let compiled = fresh.try_compile_intermediates().map_err(compile_err)?;
        for (&i, object) in misses.iter().zip(compiled) {
            if let Err((_, Some(kept))) = &found[i] {
                keep(&object, kept);
            }
            objects[i] = Some(object);
        }
    }
    let objects: Vec<PathBuf> = found
        .into_iter()
        .zip(objects)
        .map(|(f, compiled)| match f {
            Ok(kept) => kept,
            Err(_) => compiled.expect("one object per compiled file"),
        })
        .collect();
    let library = build
        .try_create_archive(name, &objects)
        .map_err(compile_err)?;
    cc::try_emit_link_directives(&build, &library).map_err(compile_err)
}

/// The file name of an object: a hash of the compiler's identity and the C
/// text, and the text's length.
fn object_name(identity: &str, text: &[u8]) -> String {
    let mut key = identity.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(text);
    format!("{:016x}-{}.o", fnv1a(&key), text.len())
}

/// Copies a fresh object into the cache (to a temporary name, then renamed, so
/// a concurrent build sees all of it or none). A cache that cannot be written
/// costs only the next build's compile, so failures are ignored.
fn keep(object: &Path, kept: &Path) {
    let Some(dir) = kept.parent() else { return };
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        kept.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let ok = std::fs::create_dir_all(dir).is_ok()
        && std::fs::copy(object, &tmp).is_ok()
        && std::fs::rename(&tmp, kept).is_ok();
    if !ok {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_named_by_its_text_and_compiler() {
        let name = object_name("gcc -O3", b"int f(void);");
        assert_eq!(name, object_name("gcc -O3", b"int f(void);"));
        assert_ne!(name, object_name("gcc -O3", b"int g(void);"));
        assert_ne!(name, object_name("gcc -O2", b"int f(void);"));
        // The boundary between identity and text is part of the key.
        assert_ne!(object_name("ab", b"c"), object_name("a", b"bc"));
    }

    #[test]
    fn objects_live_in_the_target_directory() {
        let target = std::env::temp_dir().join(format!("autotune-objects-{}", std::process::id()));
        let out = target.join("release/build/pkg-0123/out");
        std::fs::create_dir_all(&out).unwrap();
        assert_eq!(cache_dir(&out), None, "no target directory, no cache");
        std::fs::write(
            target.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55",
        )
        .unwrap();
        assert_eq!(cache_dir(&out), Some(target.join("autotune-objects")));
        std::fs::remove_dir_all(&target).unwrap();
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn misses_compiled_out_of_order_keep_each_files_object() {
        let dir = std::env::temp_dir().join(format!("autotune-misses-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (out, cache) = (dir.join("out"), dir.join("cache"));
        std::fs::create_dir_all(&out).unwrap();
        // Small, large, small: compiled large first, so out of file order.
        let mut files = Vec::new();
        for (name, body) in [
            ("a_small", "return x;".to_string()),
            (
                "b_large",
                "int s = 0;\n".to_string() + &"s += x * 3;\n".repeat(400) + "return s;",
            ),
            ("c_small", "return x + 1;".to_string()),
        ] {
            let file = dir.join(format!("{name}.c"));
            std::fs::write(&file, format!("int {name}_fn(int x) {{\n{body}\n}}\n")).unwrap();
            files.push(file);
        }
        let host = "x86_64-unknown-linux-gnu";
        let mut build = cc::Build::new();
        build
            .target(host)
            .host(host)
            .out_dir(&out)
            .cargo_metadata(false);
        // Twice: misses, then every object from the cache.
        for _ in 0..2 {
            compile_with(build.clone(), &files, "misses", Some(&cache)).unwrap();
        }
        let kept: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(kept.len(), 3, "{kept:?}");
        for object in kept {
            let bytes = std::fs::read(&object).unwrap();
            let has = |sym: &str| bytes.windows(sym.len()).any(|w| w == sym.as_bytes());
            let len: usize = object
                .to_string_lossy()
                .rsplit('-')
                .next()
                .unwrap()
                .trim_end_matches(".o")
                .parse()
                .unwrap();
            let name = files
                .iter()
                .find(|f| std::fs::metadata(f).unwrap().len() as usize == len)
                .unwrap()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            for other in ["a_small", "b_large", "c_small"] {
                assert_eq!(
                    has(&format!("{other}_fn")),
                    other == name,
                    "{object:?} holds {name}'s object only"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
