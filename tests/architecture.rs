//! The layering of `src/`: no import cycle among modules.
//!
//! Checked level by level, as the folder tree shows the design: the top-level modules
//! (`data`, `stats`, `eval`, `model`, `gpu`, `train`, `jobs`, `page`, `cli`, ...) must not
//! import each other in a cycle, and within each folder neither may its files (siblings,
//! `mod.rs` aside: a folder's `mod.rs` declares and re-exports its files). A reference is
//! any `crate::a::b` or `super::b` path outside comments; a file's own `#[cfg(test)]` tests
//! do not count (tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module of `src/` by its path from the crate root (`["jobs", "evaluate"]`).
type ModPath = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/jobs/evaluate.rs` -> `["jobs", "evaluate"]`; `src/jobs/mod.rs` -> `["jobs"]`.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: ModPath = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The text a file's code depends with: comments and its own test module removed.
fn code_of(text: &str) -> String {
    let without_tests = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    without_tests.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Every `crate::...` and `super::...` path in `code`, as module paths from the root
/// (`super` resolved against `module`, the file's own module path).
fn references(code: &str, module: &ModPath) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue; // `my_crate::`
            }
            // `super` of a file is its folder; of a folder's mod.rs (whose module is the
            // folder), the folder's parent: one level up from the module either way.
            let mut path: ModPath = module.clone();
            if start == "crate::" {
                path.clear();
            } else {
                path.pop();
            }
            let mut rest = &code[at + start.len()..];
            // Further `super::` segments.
            while let Some(r) = rest.strip_prefix("super::") {
                path.pop();
                rest = r;
            }
            for segment in rest.split("::") {
                let name: String = segment.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if name.is_empty() {
                    break;
                }
                let whole = name.len() == segment.len();
                path.push(name);
                if !whole {
                    break; // `item(...)`, `Type {`, `{a, b}`: the path ends here
                }
            }
            out.push(path);
        }
    }
    out
}

/// Cycles among `nodes` given `edges`, each as its list of nodes (Tarjan's strongly
/// connected components of more than one node).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

/// For every folder (the crate root included), the edges among its children: `a -> b`
/// when a file under child `a` refers to something under child `b` (with the place each
/// edge comes from, for the message).
fn edges_per_folder() -> BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut per_folder: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for file in &files {
        if file.ends_with("main.rs") {
            continue; // the binary: only calls cli::main
        }
        let module = module_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let from_name = file.strip_prefix(&src).unwrap().display().to_string();
        for mut target in references(&code, &module) {
            // The deepest module the path names (the rest are items).
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            // The folder both sit in, and the child of it each is under.
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= module.len() || common >= target.len() {
                continue; // a module and its own ancestor or descendant: declaration, not a layer
            }
            let folder: ModPath = module[..common].to_vec();
            let (a, b) = (module[common].clone(), target[common].clone());
            per_folder.entry(folder).or_default().entry(a).or_default().entry(b).or_insert_with(|| from_name.clone());
        }
    }
    per_folder
}

#[test]
fn no_module_imports_another_in_a_cycle() {
    let mut found = Vec::new();
    for (folder, edges) in edges_per_folder() {
        let plain: BTreeMap<String, BTreeSet<String>> =
            edges.iter().map(|(a, bs)| (a.clone(), bs.keys().cloned().collect())).collect();
        for cycle in cycles(&plain) {
            let witnesses: Vec<String> = cycle
                .iter()
                .flat_map(|a| {
                    edges[a].iter().filter(|(b, _)| cycle.contains(b)).map(move |(b, at)| format!("{a} -> {b} ({at})"))
                })
                .collect();
            found.push(format!("in src/{}: {}", folder.join("/"), witnesses.join("; ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_cycle_and_the_layers_it_expects() {
    // The check itself: a planted cycle is found, a chain is not.
    let edges = |pairs: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    assert_eq!(cycles(&edges(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), [["a", "b", "c"]]);
    assert!(cycles(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    // And on the real tree: the page's front end and the CLI use the job layer, which uses
    // the methods and the readers, never the other way round.
    let top = &edges_per_folder()[&Vec::new()];
    for (upper, lower) in [("page", "jobs"), ("cli", "jobs"), ("jobs", "eval"), ("eval", "data"), ("gpu", "model")] {
        assert!(top.get(upper).is_some_and(|e| e.contains_key(lower)), "{upper} uses {lower}");
        assert!(!top.get(lower).is_some_and(|e| e.contains_key(upper)), "{lower} must not use {upper}");
    }
}
