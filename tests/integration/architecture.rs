//! The layering of `src/`: no import cycle among modules.
//!
//! Checked level by level, as the folder tree shows the design: the top-level modules
//! (`data`, `stats`, `eval`, `model`, `gpu`, `train`, `jobs`, `page`, `cli`, ...) must not
//! import each other in a cycle, and within each folder neither may its files (siblings,
//! `mod.rs` aside: a folder's `mod.rs` declares and re-exports its files). A file's own
//! `#[cfg(test)]` tests do not count (tests may reach anywhere).
//!
//! A reference is a path outside comments: `crate::a::b`, `super::b`, `self::b`, a `use`
//! declaration with its groups (`use crate::a::{self, b::C, d as e}`), and a path through a
//! name a `use` brought in (`a::f()` after `use crate::a`). Re-exports are followed to the
//! module that defines the item: `crate::jobs::Report`, where `jobs/mod.rs` says `pub use
//! evaluate::Report`, is a reference to `jobs::evaluate`; so is `Report` itself in a file
//! that glob-imports `jobs` (`use super::*`). Otherwise a folder's `mod.rs` would hide a
//! cycle between two of its files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module of `src/` by its path from the crate root (`["jobs", "evaluate"]`).
type ModPath = Vec<String>;

/// The crate's source: each module's code (comments and its own test module removed) and
/// the file it comes from.
struct Tree {
    code: BTreeMap<ModPath, (String, String)>,
}

impl Tree {
    /// `src/` as it is on disk.
    fn from_disk() -> Tree {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let texts: Vec<(String, String)> = files
            .iter()
            .map(|f| (f.strip_prefix(&src).unwrap().display().to_string(), std::fs::read_to_string(f).unwrap()))
            .collect();
        Tree::from_texts(texts.iter().map(|(p, t)| (p.as_str(), t.as_str())))
    }

    /// A tree from (path under `src/`, text) pairs: the real one, or one planted by a test.
    fn from_texts<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Tree {
        let mut code = BTreeMap::new();
        for (path, text) in files {
            if path == "main.rs" {
                continue; // the binary: only calls cli::main
            }
            code.insert(module_of(Path::new(path)), (path.to_string(), code_of(text)));
        }
        Tree { code }
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.code.contains_key(path)
    }
}

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

/// `jobs/evaluate.rs` -> `["jobs", "evaluate"]`; `jobs/mod.rs` -> `["jobs"]`; `lib.rs` -> `[]`.
fn module_of(rel: &Path) -> ModPath {
    let rel = rel.with_extension("");
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

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// One name a `use` declaration brings in: the path it names, the name it is known by in
/// the file (`None` for a glob), and whether it is re-exported (`pub use`).
#[derive(Debug, Clone)]
struct Import {
    path: Vec<String>,
    name: Option<String>,
    public: bool,
}

/// Every `use` declaration of `code`, its groups expanded.
fn imports(code: &str) -> Vec<Import> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        from = at + 4;
        let before = code[..at].trim_end();
        // `use` as a keyword: at the start of an item (after `;`, `{`, `}`, an attribute,
        // or a visibility).
        if at > 0 && code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let item_start = before.is_empty()
            || before.ends_with([';', '{', '}', ']'])
            || before.ends_with("pub")
            || (before.ends_with(')') && before.rsplit_once("pub(").is_some_and(|(_, r)| !r.contains(['(', ';'])));
        if !item_start {
            continue;
        }
        let Some(end) = code[from..].find(';') else { break };
        expand(&normalized(&code[from..from + end]), &mut Vec::new(), public, &mut out);
        from += end;
    }
    out
}

/// A use tree without white space, but for one space each side of `as`.
fn normalized(tree: &str) -> String {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        let aliasing = *w == "as" || words.get(i + 1) == Some(&"as");
        out.push_str(w);
        if aliasing {
            out.push(' ');
        }
    }
    out
}

/// Expands one use tree (`a::b::{c, d::*, e as f, self}`) under `prefix`.
fn expand(tree: &str, prefix: &mut Vec<String>, public: bool, out: &mut Vec<Import>) {
    let tree = tree.trim_start_matches("::");
    if let Some(group) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        for part in split_top_level(group) {
            expand(part, prefix, public, out);
        }
        return;
    }
    // Leading segments up to a group, a glob or the last name.
    let mut rest = tree;
    let depth = prefix.len();
    loop {
        if rest == "*" {
            out.push(Import { path: prefix.clone(), name: None, public });
            break;
        }
        if rest.starts_with('{') {
            expand(rest, prefix, public, out);
            break;
        }
        match rest.find("::") {
            Some(i) if !rest[..i].contains('{') => {
                prefix.push(rest[..i].to_string());
                rest = &rest[i + 2..];
            }
            _ => {
                let (segment, alias) = match rest.split_once(" as ") {
                    Some((s, a)) => (s, Some(a)),
                    None => (rest, None),
                };
                if segment == "self" {
                    let name = alias.map(String::from).or_else(|| prefix.last().cloned());
                    out.push(Import { path: prefix.clone(), name, public });
                } else if !segment.is_empty() {
                    let mut path = prefix.clone();
                    path.push(segment.to_string());
                    let name = alias.unwrap_or(segment).to_string();
                    out.push(Import { path, name: Some(name), public });
                }
                break;
            }
        }
    }
    prefix.truncate(depth);
}

/// `a, b::{c, d}, e` -> [`a`, `b::{c, d}`, `e`].
fn split_top_level(group: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&group[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// A path as written in `module` (`crate::a`, `super::a`, `self::a`, or a child module's
/// name), made absolute; `None` for another crate's path.
fn absolute(tree: &Tree, module: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut out = module.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            out.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                out.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // `use evaluate::X` in a `mod.rs`: a child module (2018 paths); else another crate.
            let mut child = module.clone();
            child.push(first.to_string());
            if !tree.is_module(&child) {
                return None;
            }
        }
        None => return None,
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

/// What every module exports beyond its own items: its `pub use` names (name -> absolute
/// path) and its glob re-exports (modules whose names it passes on).
#[derive(Default)]
struct Exports {
    named: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    globs: BTreeMap<ModPath, Vec<ModPath>>,
    /// Every `use` of a module, public or not: what a child's `use super::*` takes.
    all_named: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
}

fn exports(tree: &Tree) -> Exports {
    let mut e = Exports::default();
    for (module, (_, code)) in &tree.code {
        for import in imports(code) {
            let Some(path) = absolute(tree, module, &import.path) else { continue };
            match &import.name {
                Some(name) => {
                    e.all_named.entry(module.clone()).or_default().insert(name.clone(), path.clone());
                    if import.public {
                        e.named.entry(module.clone()).or_default().insert(name.clone(), path);
                    }
                }
                None if import.public => e.globs.entry(module.clone()).or_default().push(path),
                None => {}
            }
        }
    }
    e
}

/// The module a path refers to, re-exports followed: the deepest module it names, or the
/// module that defines the item it ends with.
fn resolve(tree: &Tree, exports: &Exports, path: &[String], depth: usize) -> ModPath {
    let mut module: ModPath = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let mut child = module.clone();
        child.push(segment.clone());
        if tree.is_module(&child) {
            module = child;
            continue;
        }
        // Not a module: an item of `module`, defined there or re-exported from elsewhere.
        if depth < 16 {
            if let Some(target) = exports.named.get(&module).and_then(|n| n.get(segment)) {
                let mut target = target.clone();
                target.extend(path[i + 1..].iter().cloned());
                return resolve(tree, exports, &target, depth + 1);
            }
            for source in exports.globs.get(&module).into_iter().flatten() {
                if defines(tree, exports, source, segment, depth + 1) {
                    let mut target = source.clone();
                    target.extend(path[i..].iter().cloned());
                    return resolve(tree, exports, &target, depth + 1);
                }
            }
        }
        break;
    }
    module
}

/// Whether `module` defines or re-exports `name`.
fn defines(tree: &Tree, exports: &Exports, module: &ModPath, name: &str, depth: usize) -> bool {
    if exports.named.get(module).is_some_and(|n| n.contains_key(name)) {
        return true;
    }
    let Some((_, code)) = tree.code.get(module) else { return false };
    let declared = ["struct", "enum", "fn", "trait", "type", "const", "static", "mod", "union"].iter().any(|kw| {
        let needle = format!("{kw} {name}");
        code.match_indices(&needle).any(|(at, _)| {
            let after = code[at + needle.len()..].chars().next();
            !after.is_some_and(is_ident) && (at == 0 || !code[..at].chars().next_back().is_some_and(is_ident))
        })
    });
    declared
        || (depth < 16
            && exports.globs.get(module).into_iter().flatten().any(|s| defines(tree, exports, s, name, depth + 1)))
}

/// Whether `word` stands in `code` as a whole identifier.
fn mentions(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Every path `code` (the code of `module`) writes out from `start` (`crate::`, `super::`,
/// `self::`, or a name a `use` brought in), as the segments after the start.
fn written_paths(code: &str, start: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let needle = format!("{start}::");
    let mut from = 0;
    while let Some(found) = code[from..].find(&needle) {
        let at = from + found;
        from = at + needle.len();
        if code[..at].chars().next_back().is_some_and(|c| is_ident(c) || c == ':') {
            continue; // `my_crate::`, or the middle of a longer path
        }
        let mut path = vec![start.to_string()];
        for segment in code[from..].split("::") {
            let name: String = segment.chars().take_while(|c| is_ident(*c)).collect();
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
    out
}

/// Every module `module`'s code refers to (re-exports followed).
fn references(tree: &Tree, exports: &Exports, module: &ModPath, code: &str) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    let imports = imports(code);
    for import in &imports {
        let Some(path) = absolute(tree, module, &import.path) else { continue };
        let target = resolve(tree, exports, &path, 0);
        out.insert(target.clone());
        match &import.name {
            // A name brought in, then used as a path's start (`jobs::f()` after `use crate::jobs`).
            Some(name) => {
                for written in written_paths(code, name) {
                    let mut full = path.clone();
                    full.extend(written[1..].iter().cloned());
                    out.insert(resolve(tree, exports, &full, 0));
                }
            }
            // A glob takes the module's own items and what it re-exports (a child's
            // `use super::*` its parent's private imports too): each one the code uses.
            None => {
                let is_parent = module.len() == target.len() + 1 && module.starts_with(&target);
                let names = if is_parent { exports.all_named.get(&target) } else { exports.named.get(&target) };
                for (name, source) in names.into_iter().flatten() {
                    if mentions(code, name) {
                        out.insert(resolve(tree, exports, source, 0));
                    }
                }
                for source in exports.globs.get(&target).into_iter().flatten() {
                    let mut words: BTreeSet<&str> = BTreeSet::new();
                    for w in code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()) {
                        words.insert(w);
                    }
                    if words.iter().any(|w| defines(tree, exports, source, w, 0)) {
                        out.insert(source.clone());
                    }
                }
            }
        }
    }
    for start in ["crate", "super", "self"] {
        for written in written_paths(code, start) {
            if let Some(path) = absolute(tree, module, &written) {
                out.insert(resolve(tree, exports, &path, 0));
            }
        }
    }
    out
}

/// For every folder (the crate root included), the edges among its children: `a -> b`
/// when a file under child `a` refers to something under child `b` (with the file each
/// edge comes from, for the message).
fn edges_per_folder(tree: &Tree) -> BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> {
    let exports = exports(tree);
    let mut per_folder: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for (module, (file, code)) in &tree.code {
        for target in references(tree, &exports, module, code) {
            // The folder both sit in, and the child of it each is under.
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= module.len() || common >= target.len() {
                continue; // a module and its own ancestor or descendant: declaration, not a layer
            }
            let folder: ModPath = module[..common].to_vec();
            let (a, b) = (module[common].clone(), target[common].clone());
            per_folder.entry(folder).or_default().entry(a).or_default().entry(b).or_insert_with(|| file.clone());
        }
    }
    per_folder
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

/// Every cycle of `tree`, each said with the edges that make it and the files they come from.
fn import_cycles(tree: &Tree) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, edges) in edges_per_folder(tree) {
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
    found
}

#[test]
fn no_module_imports_another_in_a_cycle() {
    let found = import_cycles(&Tree::from_disk());
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_job_layer_re_exports_by_name_only() {
    // A glob re-export (`pub use evaluate::*`) lets a file add to another's types unseen and
    // hides which file a name comes from: the job layer names what it passes on.
    let tree = Tree::from_disk();
    for (module, (file, code)) in &tree.code {
        if module.first().is_some_and(|m| m == "jobs") {
            let globs: Vec<Vec<String>> =
                imports(code).into_iter().filter(|i| i.name.is_none()).map(|i| i.path).collect();
            assert!(globs.is_empty(), "{file}: glob imports {globs:?}");
        }
    }
}

#[test]
fn the_wasm_boundary_only_converts() {
    // ARCHITECTURE.md: `src/wasm.rs` converts between JS and the page layer; a job is a row
    // of `jobs::JOBS` reached through `run`, never an entry point of its own. Its size is the
    // check that logic has not crept back in (it was 353 lines with one function per job).
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wasm.rs")).unwrap();
    let lines = text.lines().count();
    assert!(lines < 250, "src/wasm.rs has {lines} lines: move what is not conversion into src/page/");
    for job in medrank::jobs::JOBS {
        let entry = format!("pub fn {}(", job.name.replace('-', "_"));
        let entry_async = format!("pub async fn {}(", job.name.replace('-', "_"));
        assert!(
            !text.contains(&entry) && !text.contains(&entry_async),
            "src/wasm.rs has an entry point for the job {:?}: jobs go through `run`",
            job.name
        );
    }
}

/// A crate `a` of two files, `x` and `y`, that reach each other only through what `a/mod.rs`
/// re-exports, in each way a path can be written.
fn planted(x_uses: &str, y_uses: &str, mod_rs: &str) -> Tree {
    let lib = "pub mod a;\npub mod b;";
    let x = format!("{x_uses}\npub struct Thing;\npub fn make() -> Thing {{ Thing }}");
    let y = format!("{y_uses}\npub fn helper() {{}}");
    Tree::from_texts([
        ("lib.rs", lib),
        ("a/mod.rs", mod_rs),
        ("a/x.rs", x.as_str()),
        ("a/y.rs", y.as_str()),
        ("b.rs", "use crate::a::{self, Thing};\npub fn f() -> Thing { a::make() }"),
    ])
}

#[test]
fn a_cycle_through_a_re_export_is_found() {
    let mod_rs = "mod x;\nmod y;\npub use x::{make, Thing};\npub use y::helper as help;";
    let cycle = |x_uses: &str, y_uses: &str| import_cycles(&planted(x_uses, y_uses, mod_rs));
    let expected = |found: Vec<String>| {
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("in src/a: x -> y (a/x.rs); y -> x (a/y.rs)"), "{found:?}");
    };
    // x reaches y by the alias its parent re-exports; y reaches x by the parent's name for it,
    // in a group with `self`, by an inline path, and through a glob of the parent.
    expected(cycle("use super::help;", "use crate::a::Thing;"));
    expected(cycle("use crate::a::{self as parent, help};", "use super::{self, make};"));
    expected(cycle("fn g() { super::help() }", "fn h() -> crate::a::Thing { crate::a::make() }"));
    expected(cycle("use crate::a;\nfn g() { a::help() }", "use super::*;\nfn h() -> Thing { make() }"));
    // Without the way back there is none; and a glob re-export is followed too.
    assert!(cycle("use super::help;", "").is_empty());
    let globbed = planted(
        "use super::help;",
        "use crate::a::Thing;",
        "mod x;\nmod y;\npub use x::*;\npub use y::*;\npub use y::helper as help;",
    );
    expected(import_cycles(&globbed));
    // The same cycle written straight between the files was always found.
    expected(cycle("use super::y::helper;", "use super::x::Thing;"));
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
    let tree = Tree::from_disk();
    let top = &edges_per_folder(&tree)[&Vec::new()];
    for (upper, lower) in [("page", "jobs"), ("cli", "jobs"), ("jobs", "eval"), ("eval", "data"), ("gpu", "model")] {
        assert!(top.get(upper).is_some_and(|e| e.contains_key(lower)), "{upper} uses {lower}");
        assert!(!top.get(lower).is_some_and(|e| e.contains_key(upper)), "{lower} must not use {upper}");
    }
}
