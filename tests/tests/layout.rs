//! The layout's invariants (ARCHITECTURE.md), checked on the source:
//! - no import cycle of any length between the modules of a crate;
//! - `autotune-codegen` is pure: no environment, file, process or clock;
//! - only `autotune-build`'s `settings` module and the CLI read the environment
//!   (`autotune-tune` takes what they read as arguments).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path inside its crate: `[]` is the crate root, `["lower", "tiled"]`
/// is `crate::lower::tiled`.
type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `src` with its module path.
fn modules(src: &Path) -> Vec<(Module, String)> {
    fn walk(dir: &Path, prefix: &Module, out: &mut Vec<(Module, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            if p.is_dir() {
                let mut m = prefix.clone();
                m.push(name);
                walk(&p, &m, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let mut m = prefix.clone();
                if !(["lib", "main", "mod"].contains(&name.as_str())) {
                    m.push(name);
                }
                out.push((m, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(src, &Vec::new(), &mut out);
    out
}

/// The paths a file refers to that start at `crate`, `super` or `self`, made
/// absolute (`crate::a::b::Item` → `["a", "b", "Item"]`). Test modules are skipped.
struct Refs<'a> {
    /// The module being read (inline modules included).
    here: Module,
    known: &'a BTreeSet<Module>,
    out: Vec<Vec<String>>,
}

impl Refs<'_> {
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let mut base = match segments.first()?.as_str() {
            "crate" => Vec::new(),
            "self" => self.here.clone(),
            "super" => self.here.clone(),
            // A path may also start at a child module (`use child::Item`).
            first => {
                let mut child = self.here.clone();
                child.push(first.to_string());
                let inline = !self.here.is_empty() && !self.known.contains(&self.here);
                if !self.known.contains(&child) && !inline {
                    return None;
                }
                let mut p = self.here.clone();
                p.extend(segments.iter().cloned());
                return Some(p);
            }
        };
        let mut rest = &segments[1..];
        if segments[0] == "super" {
            base.pop();
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                let mut v = prefix;
                v.push(p.ident.to_string());
                self.use_tree(v, &p.tree);
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix;
                v.push(n.ident.to_string());
                self.push(v);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix;
                v.push(r.ident.to_string());
                self.push(v);
            }
            syn::UseTree::Glob(_) => self.push(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix.clone(), t);
                }
            }
        }
    }

    fn push(&mut self, segments: Vec<String>) {
        if let Some(p) = self.absolute(&segments) {
            self.out.push(p);
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let is_test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && quote::ToTokens::to_token_stream(&a.meta)
                    .to_string()
                    .contains("test")
        });
        if !is_test {
            self.here.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.here.pop();
        }
    }

    /// `pub(crate)` names no dependency.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.push(segments);
        syn::visit::visit_path(self, p);
    }
}

/// Edges between the modules of one crate: a module depends on the module a
/// path it uses resolves to (the longest known module prefix).
fn graph(files: &[(Module, String)]) -> BTreeMap<Module, BTreeSet<Module>> {
    let known: BTreeSet<Module> = files.iter().map(|f| f.0.clone()).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, text) in files {
        let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        let mut refs = Refs {
            here: m.clone(),
            known: &known,
            out: Vec::new(),
        };
        refs.visit_file(&file);
        for path in refs.out {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p))
                .unwrap_or_default();
            if target != *m {
                edges.entry(m.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// A cycle of the graph, if it has one.
fn find_cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn dfs(
        n: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for next in edges.get(n).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|x| x == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = dfs(next, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = dfs(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn show(cycle: &[Module]) -> String {
    cycle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".to_string()
            } else {
                m.join("::")
            }
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

const CRATES: &[&str] = &[
    "autotune-lang",
    "autotune-macros",
    "autotune-codegen",
    "autotune-tune",
    "autotune-build",
    "cargo-autotune",
    "runtime",
];

#[test]
fn no_module_imports_another_that_imports_it_back() {
    for krate in CRATES {
        let files = modules(&workspace().join(krate).join("src"));
        if let Some(cycle) = find_cycle(&graph(&files)) {
            panic!("{krate}: import cycle {}", show(&cycle));
        }
    }
}

#[test]
fn the_checker_sees_cycles() {
    let m = |p: &str| {
        p.split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let files = vec![
        (m(""), "mod a; mod b; pub use a::X;".to_string()),
        (m("a"), "use crate::b::Y; pub struct X;".to_string()),
        (
            m("b"),
            "pub struct Y; fn f() -> super::a::X { todo!() }".to_string(),
        ),
    ];
    let cycle = find_cycle(&graph(&files)).expect("a → b → a");
    assert_eq!(show(&cycle), "a → b → a");
    // A root item used by a module whose items the root re-exports is a cycle too.
    let files = vec![
        (
            m(""),
            "mod a; pub use a::X; pub const N: u32 = 1;".to_string(),
        ),
        (m("a"), "pub struct X([u8; crate::N as usize]);".to_string()),
    ];
    assert!(find_cycle(&graph(&files)).is_some());
    let files = vec![
        (m(""), "mod a; pub use a::X;".to_string()),
        (
            m("a"),
            "pub struct X; #[cfg(test)] mod tests { use super::*; }".to_string(),
        ),
    ];
    assert_eq!(find_cycle(&graph(&files)), None);
}

/// Lines of the crate's source (outside comments) that contain any of `needles`.
fn offending(krate: &str, needles: &[&str], allowed_files: &[&str]) -> Vec<String> {
    let src = workspace().join(krate).join("src");
    let mut out = Vec::new();
    for (m, text) in modules(&src) {
        let name = m.join("::");
        if allowed_files.contains(&name.as_str()) {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|n| code.contains(n)) {
                out.push(format!("{krate}/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    out
}

#[test]
fn the_code_generator_is_pure() {
    let bad = offending(
        "autotune-codegen",
        &[
            "std::env",
            "env::var",
            "std::fs",
            "fs::",
            "std::process",
            "Command",
            "SystemTime",
            "Instant",
            "File",
        ],
        &[],
    );
    assert!(
        bad.is_empty(),
        "autotune-codegen must be pure:\n{}",
        bad.join("\n")
    );
}

#[test]
fn only_the_settings_and_the_cli_read_the_environment() {
    let reads = ["env::var", "env::vars"];
    let mut bad = offending("autotune-tune", &reads, &[]);
    bad.extend(offending("autotune-build", &reads, &["settings"]));
    assert!(
        bad.is_empty(),
        "environment read outside autotune-build's settings and the CLI:\n{}",
        bad.join("\n")
    );
}
