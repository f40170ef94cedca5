//! The shape of the code, checked: crates depend one way (each on crates of lower layers only),
//! the scripted model server is outside the shipping controller and worker, no two modules of a
//! crate import each other (directly or round a longer circle), and no source file holds more
//! than ~800 lines of non-test code. ARCHITECTURE.md draws the same layers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each workspace crate's directory and layer: a crate's `[dependencies]` may name only
/// Lightsout crates of a lower layer. (Dev-dependencies are free: tests may use the scripted
/// server and the test kit.)
const LAYERS: &[(&str, u32)] = &[
    ("testkit", 0),
    ("api", 1),
    ("stats", 1),
    ("model", 2),
    ("trajectory", 3),
    ("swe-prbench", 3),
    ("core", 4),
    ("report", 5),
    ("s3", 5),
    ("scripted", 5),
    ("worker", 6),
    ("controller", 7),
    ("cli", 8),
];

/// Non-test lines a source file may hold (code before its `#[cfg(test)]` module).
const FILE_LINES_MAX: usize = 800;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn package_name(dir: &str) -> String {
    let manifest = fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("name = ")).unwrap();
    line.trim_start_matches("name = ").trim_matches('"').to_string()
}

/// The Lightsout crates a manifest's `[dependencies]` table names (not dev or build ones).
fn normal_dependencies(dir: &str) -> Vec<String> {
    let manifest = fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
    let mut in_table = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_table = line == "[dependencies]";
            continue;
        }
        if in_table && line.starts_with("lightsout-") {
            out.push(line.split(['.', ' ', '=']).next().unwrap().to_string());
        }
    }
    out
}

#[test]
fn every_crate_is_in_a_layer_and_depends_only_on_lower_layers() {
    let workspace = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = workspace.lines().find(|l| l.starts_with("members = ")).unwrap();
    let layer_of: BTreeMap<String, u32> = LAYERS.iter().map(|(dir, layer)| (package_name(dir), *layer)).collect();
    for (dir, _) in LAYERS {
        assert!(members.contains(&format!("\"{dir}\"")), "{dir} is in LAYERS but not a workspace member");
    }
    let listed = members.matches('"').count() / 2;
    assert_eq!(listed, LAYERS.len(), "every workspace member needs a layer in LAYERS: {members}");
    let mut violations = Vec::new();
    for (dir, layer) in LAYERS {
        for dependency in normal_dependencies(dir) {
            let Some(&below) = layer_of.get(&dependency) else { panic!("{dir} depends on unknown {dependency}") };
            if below >= *layer {
                violations.push(format!("{dir} (layer {layer}) depends on {dependency} (layer {below})"));
            }
        }
    }
    assert!(violations.is_empty(), "dependencies against the layers:\n{}", violations.join("\n"));
}

#[test]
fn the_scripted_model_server_is_not_in_the_shipping_binaries() {
    let by_name: BTreeMap<String, &str> = LAYERS.iter().map(|(dir, _)| (package_name(dir), *dir)).collect();
    for shipping in ["worker", "controller"] {
        let mut seen = BTreeSet::new();
        let mut todo = vec![shipping.to_string()];
        while let Some(dir) = todo.pop() {
            for dependency in normal_dependencies(&dir) {
                assert_ne!(dependency, "lightsout-scripted", "{shipping} reaches lightsout-scripted through {dir}");
                if seen.insert(dependency.clone()) {
                    todo.push(by_name[&dependency].to_string());
                }
            }
        }
    }
}

/// A source file's module path within its crate (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code without its tests (by convention the `#[cfg(test)]` module comes last) and
/// without comment lines.
fn code_of(text: &str) -> Vec<&str> {
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..end].lines().filter(|l| !l.trim_start().starts_with("//")).collect()
}

fn is_test_file(module: &[String]) -> bool {
    module.last().is_some_and(|m| m == "tests" || m.ends_with("_tests"))
}

/// Identifier-like words following `prefix` in `line`.
fn paths_after<'a>(line: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = line[from..].find(prefix).map(|i| from + i) {
        from = i + prefix.len();
        // Not the tail of a longer path or word (`super::super::`, `lightsout_crate::`).
        if line[..i].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let words: Vec<&str> = line[from..]
            .split("::")
            .map(|w| w.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""))
            .take_while(|w| !w.is_empty())
            .collect();
        out.push(words);
    }
    out
}

/// Edges between sibling modules: (their parent, from, to).
fn module_edges(crate_dir: &str) -> BTreeSet<(Vec<String>, String, String)> {
    let src = root().join(crate_dir).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges = BTreeSet::new();
    for file in files {
        let module = module_path(&src, &file);
        if is_test_file(&module) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for line in code_of(&text) {
            let mut targets: Vec<Vec<String>> = Vec::new();
            for words in paths_after(line, "crate::") {
                targets.push(words.iter().map(|w| w.to_string()).collect());
            }
            for words in paths_after(line, "super::") {
                // `super::super::x`: count the supers, then the first other word names the module.
                let ups = 1 + words.iter().take_while(|w| **w == "super").count();
                let Some(name) = words.iter().find(|w| **w != "super") else { continue };
                if ups > module.len() {
                    continue;
                }
                let mut target = module[..module.len() - ups].to_vec();
                target.push(name.to_string());
                targets.push(target);
            }
            for target in targets {
                let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common < module.len() && common < target.len() {
                    edges.insert((module[..common].to_vec(), module[common].clone(), target[common].clone()));
                }
            }
        }
    }
    edges
}

/// The groups of modules that reach each other (Tarjan's strongly connected components).
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        graph.entry(from).or_default().push(to);
        graph.entry(to).or_default();
    }
    struct Search<'a> {
        graph: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut Search<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        for w in s.graph[v].clone() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    let mut search =
        Search { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in nodes {
        if !search.index.contains_key(v) {
            visit(&mut search, v);
        }
    }
    search.found
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut found = Vec::new();
    for (dir, _) in LAYERS {
        let mut by_parent: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
        for (parent, from, to) in module_edges(dir) {
            by_parent.entry(parent).or_default().insert((from, to));
        }
        for (parent, edges) in by_parent {
            for circle in circles(&edges) {
                let within = if parent.is_empty() { "the crate root".to_string() } else { parent.join("::") };
                found.push(format!("{dir}, in {within}: {}", circle.join(" ↔ ")));
            }
        }
    }
    assert!(found.is_empty(), "modules importing each other:\n{}", found.join("\n"));
}

#[test]
fn the_circle_finder_finds_circles() {
    let edges: BTreeSet<(String, String)> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")].iter().map(|(x, y)| (x.to_string(), y.to_string())).collect();
    assert_eq!(circles(&edges), vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]);
    let line = "use super::super::collector::{Collector}; let x = crate::plan::variants(spec);";
    assert_eq!(paths_after(line, "super::"), vec![vec!["super", "collector"]]);
    assert_eq!(paths_after(line, "crate::"), vec![vec!["plan", "variants"]]);
}

#[test]
fn no_source_file_holds_more_than_800_lines_of_code() {
    let mut long = Vec::new();
    for (dir, _) in LAYERS {
        let src = root().join(dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            if is_test_file(&module_path(&src, &file)) {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap();
            let end = text.find("#[cfg(test)]").unwrap_or(text.len());
            let lines = text[..end].lines().count();
            if lines > FILE_LINES_MAX {
                long.push(format!("{}: {lines} lines", file.strip_prefix(root()).unwrap().display()));
            }
        }
    }
    assert!(long.is_empty(), "files over {FILE_LINES_MAX} lines of non-test code:\n{}", long.join("\n"));
}
