//! The shape of the source tree (#22): no import circle in any crate, and imports that run from
//! the systems (`delay/`, `stream/`, `leader/`, `room/`, `schedule/`) down to the shared parts,
//! never from one system into another (but `schedule/` onto `delay/`, see `BUILDS_ON`) or
//! from a shared part up into a system.
//!
//! Run alone: `cargo test -p delayq-dev --test direct code_layout`. It reads the sources as
//! text: every path that starts with `crate::`, `super::` or `self::` (in `use` items and
//! inline, braces expanded) is an edge from the file it stands in to the module file it names.
//! A `pub use` re-export is not an edge of its own: a path through it is followed to the module
//! that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module folders that are systems; everything else below the crate root is a shared part,
/// except the crate's top layer (named per crate below), which may import anything.
const SYSTEMS: &[&str] = &["delay", "stream", "leader", "room", "schedule", "workflow"];

/// The systems built on another: a schedule's ticks are delay-queue messages (API.md,
/// "Schedules"), and so are a flow's steps, so `schedule/` and `workflow/` may import
/// `delay/`; no other crossing is allowed.
const BUILDS_ON: &[(&str, &str)] = &[("schedule", "delay"), ("workflow", "delay")];

type ModPath = Vec<String>;

struct Crate {
    /// module path -> file
    files: BTreeMap<ModPath, PathBuf>,
    /// module path -> (exported name -> full path it re-exports)
    exports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    /// module path -> full paths it uses (not re-exports)
    uses: BTreeMap<ModPath, Vec<ModPath>>,
}

fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read src")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if prefix.is_empty() && name == "bin" {
                    continue; // separate binaries
                }
                let mut p = prefix.clone();
                p.push(name);
                walk(&path, &p, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut p = prefix.clone();
                if !(stem == "mod" || (prefix.is_empty() && (stem == "lib" || stem == "main"))) {
                    p.push(stem.to_string());
                }
                out.insert(p, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &Vec::new(), &mut out);
    out
}

/// The text without comments (string literals stay; none of ours holds a `crate::` path).
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let (mut out, mut i) = (String::with_capacity(b.len()), 0);
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            if b[i] == b'\\' {
                i += 2;
                continue;
            }
            if b[i] == b'"' {
                in_str = false;
            }
            out.push(' ');
            i += 1;
        } else if b[i] == b'"' && !(i > 0 && b[i - 1] == b'\'' && b.get(i + 1) == Some(&b'\'')) {
            in_str = true;
            out.push(' ');
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Parses a use tree at `i` (after a leading `crate::` etc. was consumed into `prefix`), adding
/// every full path; returns where it stopped.
fn parse_tree(b: &[u8], mut i: usize, prefix: ModPath, out: &mut Vec<ModPath>) -> usize {
    let mut path = prefix;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            i += 1;
            loop {
                i = parse_tree(b, i, path.clone(), out);
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b'}') => return i + 1,
                    _ => return i,
                }
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if b.get(i) == Some(&b'}') {
                    return i + 1;
                }
            }
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        if start == i {
            if i < b.len() && b[i] == b'*' {
                i += 1;
            }
            out.push(path);
            return i;
        }
        path.push(String::from_utf8_lossy(&b[start..i]).to_string());
        if b[i..].starts_with(b"::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// Turns a path as written in module `here` into a full path from the crate root: `crate::`,
/// `self::`, `super::`, or (in a `use` item) a child module of `here`; `None` for another crate.
fn absolute(
    raw: &[String],
    here: &ModPath,
    modules: &BTreeSet<ModPath>,
    in_use: bool,
) -> Option<ModPath> {
    let first = raw.first()?;
    let (mut base, mut rest) = match first.as_str() {
        "crate" => (Vec::new(), &raw[1..]),
        "self" => (here.clone(), &raw[1..]),
        "super" => (here.clone(), raw),
        _ if in_use => {
            let mut child = here.clone();
            child.push(first.clone());
            if !modules.contains(&child) {
                return None;
            }
            (here.clone(), raw)
        }
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The paths `text` (the file of module `here`) names, as full module paths, split into plain
/// uses and `pub use` re-exports (name -> path).
fn paths_in(
    text: &str,
    here: &ModPath,
    modules: &BTreeSet<ModPath>,
) -> (Vec<ModPath>, Vec<(String, ModPath)>) {
    let mut text = strip_comments(text);
    // A file's unit tests (an inline `mod tests` at its end) are not its imports.
    if let Some(at) = text.find("#[cfg(test)]\nmod ") {
        text.truncate(at);
    }
    let b = text.as_bytes();
    let (mut uses, mut exports) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        let rest = &b[i..];
        let use_item = boundary
            && rest.starts_with(b"use")
            && rest.get(3).is_some_and(|c| c.is_ascii_whitespace());
        // An inline path from the crate root or this module, or from a child module by its bare
        // name (`commands::run(..)` in main.rs).
        let child = boundary && !use_item && {
            let len = rest.iter().take_while(|c| is_ident(**c)).count();
            len > 0 && rest[len..].starts_with(b"::") && {
                let mut m = here.clone();
                m.push(String::from_utf8_lossy(&rest[..len]).to_string());
                modules.contains(&m)
            }
        };
        let inline = boundary
            && (child
                || rest.starts_with(b"crate::")
                || rest.starts_with(b"self::")
                || rest.starts_with(b"super::"));
        if !use_item && !inline {
            i += 1;
            continue;
        }
        let reexport = use_item && {
            let line_start = text[..i].rfind([';', '}', '{', ']']).map_or(0, |p| p + 1);
            text[line_start..i].trim().starts_with("pub")
        };
        let mut found = Vec::new();
        let from = if use_item { i + 3 } else { i };
        i = parse_tree(b, from, Vec::new(), &mut found);
        for raw in found {
            let Some(p) = absolute(&raw, here, modules, use_item || child) else {
                continue;
            };
            if reexport {
                if let Some(name) = raw.last() {
                    exports.push((name.clone(), p));
                }
            } else {
                uses.push(p);
            }
        }
    }
    (uses, exports)
}

fn read_crate(src: &Path) -> Crate {
    let files = module_files(src);
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let (mut exports, mut uses) = (BTreeMap::new(), BTreeMap::new());
    for (m, file) in &files {
        let text = std::fs::read_to_string(file).expect("read source");
        let (u, e) = paths_in(&text, m, &modules);
        uses.insert(m.clone(), u);
        exports.insert(m.clone(), e.into_iter().collect());
    }
    Crate {
        files,
        exports,
        uses,
    }
}

impl Crate {
    /// The module file a full path lands in, following re-exports (bounded).
    fn resolve(&self, path: &ModPath) -> Option<ModPath> {
        let mut path = path.clone();
        for _ in 0..8 {
            let module = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| self.files.contains_key(p))?;
            let Some(next) = path.get(module.len()) else {
                return Some(module);
            };
            // A name re-exported by the module, or by an inline module of its file
            // (`crate::protocol::X` where `protocol` is a `mod { pub use … }` in lib.rs).
            let exports = self.exports.get(&module);
            let target = exports.and_then(|e| e.get(next)).or_else(|| {
                (path.len() > module.len() + 1)
                    .then(|| exports.and_then(|e| e.get(&path[module.len() + 1])))
                    .flatten()
            });
            let skip = if exports.is_some_and(|e| e.contains_key(next)) {
                1
            } else {
                2
            };
            match target {
                Some(target) if target != &path => {
                    let mut p = target.clone();
                    p.extend(
                        path[(module.len() + skip).min(path.len())..]
                            .iter()
                            .cloned(),
                    );
                    path = p;
                }
                _ => return Some(module),
            }
        }
        None
    }

    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (from, paths) in &self.uses {
            for p in paths {
                if let Some(to) = self.resolve(p) {
                    if &to != from {
                        edges.entry(from.clone()).or_default().insert(to);
                    }
                }
            }
        }
        edges
    }
}

/// Strongly connected components of more than one node (Tarjan).
fn circles<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct T<'a, N> {
        edges: &'a BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on: BTreeSet<N>,
        out: Vec<Vec<N>>,
    }
    fn visit<N: Ord + Clone>(t: &mut T<'_, N>, v: &N) {
        let n = t.index.len();
        t.index.insert(v.clone(), n);
        t.low.insert(v.clone(), n);
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        for w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v.clone(), lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v.clone(), lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<N> = edges.keys().cloned().collect();
    for v in &nodes {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Every problem of one crate's tree: circles between files, circles between top-level
/// modules, and imports across systems or from a shared part up into a system.
fn problems(src: &Path, top_layer: &[&str]) -> Vec<String> {
    let krate = read_crate(src);
    let edges = krate.edges();
    if std::env::var_os("DELAYQ_SHOW_IMPORTS").is_some() {
        for (from, tos) in &edges {
            let tos: Vec<String> = tos.iter().map(show).collect();
            eprintln!("{} -> {}", show(from), tos.join(", "));
        }
    }
    let mut out = Vec::new();
    for c in circles(&edges) {
        out.push(format!(
            "import circle between files: {}",
            c.iter().map(show).collect::<Vec<_>>().join(" <-> ")
        ));
    }
    let top = |m: &ModPath| m.first().cloned().unwrap_or_default();
    let mut folded: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in &edges {
        for to in tos {
            let (a, b) = (top(from), top(to));
            if a != b && !a.is_empty() && !b.is_empty() {
                folded.entry(a).or_default().insert(b);
            }
        }
    }
    for c in circles(&folded) {
        out.push(format!(
            "import circle between top-level modules: {}",
            c.join(" <-> ")
        ));
    }
    for (from, tos) in &edges {
        let a = top(from);
        if a.is_empty() || top_layer.contains(&a.as_str()) {
            continue;
        }
        for to in tos {
            let b = top(to);
            if a == b
                || !SYSTEMS.contains(&b.as_str())
                || BUILDS_ON.contains(&(a.as_str(), b.as_str()))
            {
                continue;
            }
            let what = if SYSTEMS.contains(&a.as_str()) {
                "one system imports another"
            } else {
                "a shared part imports a system"
            };
            out.push(format!("{what}: {} uses {}", show(from), show(to)));
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_crate_has_an_import_circle_and_systems_import_only_shared_parts() {
    let crates: &[(&str, &[&str])] = &[
        // The configuration catalogue names every system's options: a top layer.
        ("delayq-core/src", &["config"]),
        ("delayq-runtime/src", &["runtime", "testing"]),
        ("delayq-macros/src", &[]),
        ("delayq-cli/src", &[]),
        ("delayq-spec/src", &[]),
        ("delayq-dev/src", &[]),
    ];
    let mut all = Vec::new();
    for (src, top) in crates {
        for p in problems(&root().join(src), top) {
            all.push(format!("{src}: {p}"));
        }
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The lines of `manifest` under `[table]` up to the next table, without comments.
fn table_lines(manifest: &str, table: &str) -> Vec<String> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in manifest
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
    {
        if line.starts_with('[') {
            inside = line == format!("[{table}]");
        } else if inside && !line.is_empty() {
            out.push(line.to_string());
        }
    }
    out
}

#[test]
fn the_root_is_only_a_workspace_and_examples_use_only_published_crates() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).expect(p);
    let manifest = read("Cargo.toml");
    assert!(
        !manifest.lines().any(|l| l.trim() == "[package]"),
        "the root Cargo.toml holds a package: keep it a virtual workspace"
    );
    // What a user copies from the examples may name only crates they can get.
    let published = [
        "delayq-runtime",
        "delayq-core",
        "delayq-macros",
        "delayq-spec",
    ];
    let examples = read("examples/Cargo.toml");
    for table in ["dependencies", "dev-dependencies"] {
        for line in table_lines(&examples, table) {
            let name = line.split(['=', ' ']).next().unwrap_or("");
            assert!(
                !name.starts_with("delayq") || published.contains(&name),
                "examples/Cargo.toml [{table}] names {name}, which is not published"
            );
        }
    }
    // The rules crate is built for the host by the proc-macro crate: no Redis, no runtime.
    for line in table_lines(&read("delayq-spec/Cargo.toml"), "dependencies") {
        for heavy in ["redis", "tokio", "delayq-core"] {
            assert!(!line.starts_with(heavy), "delayq-spec depends on {heavy}");
        }
    }
}

#[test]
fn the_checker_sees_a_circle_through_a_reexport_and_a_system_crossing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    let write = |p: &str, text: &str| {
        let path = src.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod cli; mod error; mod delay; mod stream; pub use error::Error; pub struct Args; fn main() { cli::run() }",
    );
    write(
        "cli.rs",
        "pub fn run() {} fn args() -> crate::Args { todo!() }",
    );
    write(
        "error.rs",
        "// crate::stream::x in a comment is no edge\nuse crate::delay::{Id, keys::{K}};",
    );
    write("delay/mod.rs", "mod id; mod keys; pub use id::Id;");
    write(
        "delay/id.rs",
        "pub struct Id; fn f() -> crate::Error { todo!() }",
    );
    write("delay/keys.rs", "pub struct K;");
    write("stream/mod.rs", "use super::delay::keys::K;");
    let found = problems(src, &[]);
    let text = found.join("\n");
    assert!(
        text.contains("import circle between files: delay::id <-> error"),
        "{text}"
    );
    assert!(
        text.contains("import circle between top-level modules: delay <-> error"),
        "{text}"
    );
    assert!(
        text.contains("one system imports another: stream uses delay::keys"),
        "{text}"
    );
    assert!(
        text.contains("a shared part imports a system: error uses delay::id"),
        "{text}"
    );
    assert!(
        text.contains("import circle between files: crate <-> cli"),
        "{text}"
    );
    assert!(!text.contains("stream::x"), "{text}");
}

/// The most lines a source file of a crate may have: a file a reader can hold.
const MAX_FILE_LINES: usize = 330;

/// Files allowed over [`MAX_FILE_LINES`], each with its reason: none today.
const OVER_MAX_FILE_LINES: &[&str] = &[];

#[test]
fn no_source_file_of_a_crate_is_over_330_lines() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root()).expect("read the workspace") {
        let dir = entry.expect("entry").path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        // delayq-dev is the test kit that drives processes, not a crate users read or get.
        if name.starts_with("delayq-") && name != "delayq-dev" && dir.join("src").is_dir() {
            walk(&dir.join("src"), &mut files);
        }
    }
    assert!(
        !files.is_empty(),
        "no crate sources found under {:?}",
        root()
    );
    let mut over = Vec::new();
    for file in files {
        let shown = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let lines = std::fs::read_to_string(&file)
            .expect("read source")
            .lines()
            .count();
        if lines > MAX_FILE_LINES && !OVER_MAX_FILE_LINES.contains(&shown.as_str()) {
            over.push(format!("{shown}: {lines} lines"));
        }
    }
    over.sort();
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them along their seams, one concept a file):\n{}",
        over.join("\n")
    );
}
