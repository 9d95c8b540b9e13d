//! Errors of the build helper, each naming the file (and line) it is about.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "autotune_build::Builder must run inside a build script (OUT_DIR is not set); \
         call it from build.rs"
    )]
    NotInBuildScript,
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A syntax or language error in a source file.
    #[error("{0}")]
    Source(Diagnostic),
    #[error("{var}={value:?} is not understood: expected {expected}")]
    BadEnv {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{}: {message}", path.display())]
    BadMetadata { path: PathBuf, message: String },
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    #[error(
        "AUTOTUNE=locked: the tuning cache has no entry for {}.\nFill it with `AUTOTUNE=tune cargo build` \
         (or `cargo autotune tune --save` per workload) and commit tuning-cache/",
        missing.join(", ")
    )]
    Locked { missing: Vec<String> },
    #[cfg(feature = "tune")]
    #[error("tuning {workload} failed")]
    Tune {
        workload: String,
        #[source]
        source: autotune_tune::TuneError,
    },
    /// The model file `AUTOTUNE_MODEL` names cannot be applied.
    #[cfg(feature = "tune")]
    #[error("AUTOTUNE_MODEL: the pre-trained model cannot be used")]
    Model(#[source] autotune_tune::pretrained::PretrainedError),
    #[cfg(feature = "tune")]
    #[error("tuning {workload} failed: no config ran correctly ({errors})")]
    NothingRan { workload: String, errors: String },
    #[error(transparent)]
    Config(#[from] autotune_codegen::CodegenError),
    #[error(
        "operator `{name}` is defined twice ({first} and {second}); operator names must be \
         unique within a package"
    )]
    DuplicateOperator {
        name: String,
        first: String,
        second: String,
    },
    #[error(
        "no C compiler found ({detail}).\nautotune compiles its kernels with the system C \
         compiler: install one (Debian/Ubuntu: `apt-get install gcc`; Fedora: `dnf install gcc`; \
         macOS: `xcode-select --install`) or set CC to its path"
    )]
    NoCompiler { detail: String },
    #[error(
        "the C compiler failed on the generated kernels in {}. This is a bug in \
         autotune-build; please report it with the operator that triggered it",
        dir.display()
    )]
    Compile {
        dir: PathBuf,
        #[source]
        source: cc::Error,
    },
}

/// An error and its causes, one after another (`error: cause: cause`), as a
/// build script prints it.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(":\n  {c}"));
        cause = c.source();
    }
    text
}

/// An error at a place in a source file, printed as rustc prints its own:
/// message, `--> file:line:column`, the line, and a caret under the span.
#[derive(Debug)]
pub struct Diagnostic {
    pub path: PathBuf,
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
    pub source_line: String,
    pub width: usize,
}

impl Diagnostic {
    pub fn from_syn(path: PathBuf, source: &str, err: &syn::Error) -> Diagnostic {
        let start = err.span().start();
        let end = err.span().end();
        let source_line = source
            .lines()
            .nth(start.line.saturating_sub(1))
            .unwrap_or("")
            .to_string();
        let width = if end.line == start.line && end.column > start.column {
            end.column - start.column
        } else {
            1
        };
        Diagnostic {
            path,
            line: start.line,
            column: start.column + 1,
            message: err.to_string(),
            source_line,
            width,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        let indent: String = self
            .source_line
            .chars()
            .take(self.column - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(
            f,
            "{}\n{pad}--> {}:{}:{}\n{pad} |\n{num} | {}\n{pad} | {indent}{}",
            self.message,
            self.path.display(),
            self.line,
            self.column,
            self.source_line,
            "^".repeat(self.width)
        )
    }
}
