//! Fuzzing the operator language: random mutations of the test set's operator
//! definitions (tokens deleted, duplicated, swapped, identifiers and numbers
//! replaced) must give a `syn::Error` or a kernel that compiles, never a panic
//! of the parser or the code generator; mutants that still parse, with small
//! specialisations, are also compiled and checked against the reference.
//!
//! `AUTOTUNE_FUZZ_CASES` sets the number of mutants (default 64) and
//! `AUTOTUNE_FUZZ_SEED` the seed (default: fixed); a failure prints both.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use autotune_codegen::runtime::{C_FLAGS, RUNTIME_C};
use autotune_codegen::{Isa, Workload};
use autotune_lang::mangle::Package;
use autotune_tune::measure::{Candidate, Harness, MeasureError, TimingOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

mod common;

/// The test set's operators, each as its own source text (attribute and fn).
fn seeds() -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/src/ops.rs"))
            .unwrap();
    text.split("#[tensor_op")
        .skip(1)
        .map(|chunk| {
            let end = chunk.find("\n}\n").map_or(chunk.len(), |e| e + 3);
            format!("#[tensor_op{}", &chunk[..end])
        })
        .collect()
}

/// Tokens of a source: identifiers, numbers, single punctuation, whitespace.
fn tokens(src: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        let mut t = c.to_string();
        let word = |x: char| x.is_alphanumeric() || x == '_';
        if word(c) {
            while let Some(&n) = chars.peek().filter(|n| word(**n)) {
                t.push(n);
                chars.next();
            }
        }
        out.push(t);
    }
    out
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize),
    /// Replace a word by another word of the same source.
    Word(usize, usize),
    /// Replace a number by one of a few edge values.
    Number(usize, usize),
}

const NUMBERS: [&str; 6] = ["0", "1", "2", "7", "65536", "9223372036854775807"];

fn mutate(src: &str, ms: &[Mutation]) -> String {
    let mut t = tokens(src);
    for m in ms {
        if t.is_empty() {
            break;
        }
        let at = |i: usize| i % t.len();
        match *m {
            Mutation::Delete(i) => {
                let i = at(i);
                t.remove(i);
            }
            Mutation::Duplicate(i) => {
                let i = at(i);
                t.insert(i, t[i].clone());
            }
            Mutation::Swap(i) => {
                let i = at(i);
                let j = (i + 1) % t.len();
                t.swap(i, j);
            }
            Mutation::Word(i, j) => {
                let words: Vec<String> = t
                    .iter()
                    .filter(|w| w.chars().next().is_some_and(char::is_alphabetic))
                    .cloned()
                    .collect();
                let i = at(i);
                if !words.is_empty() && t[i].chars().next().is_some_and(char::is_alphabetic) {
                    t[i] = words[j % words.len()].clone();
                }
            }
            Mutation::Number(i, j) => {
                if let Some(k) = (0..t.len())
                    .map(|k| (at(i) + k) % t.len())
                    .find(|&k| t[k].chars().all(|c| c.is_ascii_digit()))
                {
                    t[k] = NUMBERS[j % NUMBERS.len()].to_string();
                }
            }
        }
    }
    t.concat()
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Duplicate),
        any::<usize>().prop_map(Mutation::Swap),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Word(i, j)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Number(i, j)),
    ]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Mutants compiled and checked against the reference (each costs a batch build).
static CHECKED: AtomicUsize = AtomicUsize::new(0);
/// Mutants that parsed into an operator (the rest were refused with an error).
static PARSED: AtomicUsize = AtomicUsize::new(0);
const MAX_CHECKED: usize = 6;

/// One mutant: parse, generate, compile; check it if it is small.
fn one(src: &str, dir: &Path) -> Result<(), TestCaseError> {
    let Ok(file) = syn::parse_file(src) else {
        return Ok(()); // not Rust: the build reports syn's error
    };
    let found = autotune_lang::find_tensor_ops(&file);
    for f in found {
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            autotune_lang::parse_operator(f.attr.clone(), f.item)
        }));
        let op = match parsed {
            Err(_) => {
                return Err(TestCaseError::fail(format!(
                    "the parser panicked on:\n{src}"
                )))
            }
            Ok(Err(_)) => continue, // a syn::Error: what the user sees
            Ok(Ok(op)) => op,
        };
        PARSED.fetch_add(1, Ordering::Relaxed);
        let pkg = Package {
            name: "fuzz".into(),
            version: "0.0.0".into(),
        };
        let configs = vec![autotune_codegen::Choice::default(); op.specializations.len()];
        let c = catch_unwind(AssertUnwindSafe(|| {
            let generic =
                autotune_codegen::GenericSchedule::for_operator(&op, &configs, Isa::Avx512);
            autotune_codegen::operator_c(
                &pkg,
                &op,
                &configs,
                &generic,
                &Isa::levels("x86_64"),
                Isa::Avx512,
            )
        }))
        .map_err(|_| TestCaseError::fail(format!("the code generator panicked on:\n{src}")))?
        .map_err(|e| TestCaseError::fail(format!("no C for a parsed operator ({e}):\n{src}")))?;
        // The C compiles, with the flags that ship.
        let path = dir.join("mutant.c");
        let runtime = dir.join("pool.c");
        std::fs::write(&path, &c).unwrap();
        std::fs::write(&runtime, RUNTIME_C[0].1).unwrap();
        let out = Command::new("cc")
            .args(C_FLAGS)
            .args(["-fsyntax-only", "-Werror=implicit-function-declaration"])
            .arg(&path)
            .output()
            .unwrap();
        prop_assert!(
            out.status.success(),
            "the generated C does not compile:\n{}\nfor:\n{src}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Small enough to run: the default schedule against the reference.
        let small = op.specializations.first().is_some_and(|s| {
            op.tensors()
                .all(|t| op.tensor_bytes(t, &s.values).is_some_and(|b| b <= 1 << 20))
        });
        if small && CHECKED.fetch_add(1, Ordering::Relaxed) < MAX_CHECKED {
            let w = Workload { op, spec: 0 };
            let space = autotune_codegen::Space::new(&w.op, w.shapes());
            let config = space.default_config(&w.op, w.shapes());
            let fail = |e: MeasureError| TestCaseError::fail(format!("{e}:\n{src}"));
            let harness =
                Harness::new(&w, common::target().isa, &dir.join("batch"), 1).map_err(fail)?;
            let candidate = [Candidate::Config(config)];
            let checked = harness
                .build(&candidate, &dir.join("batch"))
                .and_then(|b| b.check(0, &Default::default()));
            match checked {
                // A read past an input that only GCC's vector code makes (as
                // in tests/space.rs): the compiler's, which tuning skips too.
                Err(e @ MeasureError::Crash(_)) => {
                    let timing = TimingOptions::default();
                    let again = &dir.join("again");
                    let pass = common::right_without(&harness, &e, &candidate, again, &timing)
                        .map_err(|again| TestCaseError::fail(format!("{e} ({again}):\n{src}")))?;
                    println!("{e}, but right without {pass}: miscompiled, for:\n{src}");
                }
                other => other.map_err(fail)?,
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_operators_give_an_error_or_a_correct_kernel() {
    let seeds = seeds();
    assert!(seeds.len() >= 10, "the test set's operators are found");
    let cases = env_u64("AUTOTUNE_FUZZ_CASES", 64) as u32;
    let seed = env_u64("AUTOTUNE_FUZZ_SEED", 11);
    println!("fuzzing {cases} mutants, AUTOTUNE_FUZZ_SEED={seed}");
    let dir = common::scratch("fuzz");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let strategy = (0..seeds.len(), prop::collection::vec(mutation(), 1..4));
    let result = runner.run(&strategy, |(s, ms)| one(&mutate(&seeds[s], &ms), &dir));
    if let Err(e) = result {
        panic!("{e} (AUTOTUNE_FUZZ_SEED={seed}, AUTOTUNE_FUZZ_CASES={cases})");
    }
    println!(
        "{} mutants parsed and their C compiled; {} small ones checked against the reference",
        PARSED.load(Ordering::Relaxed),
        CHECKED.load(Ordering::Relaxed).min(MAX_CHECKED)
    );
}
