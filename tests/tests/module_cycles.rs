//! Crates depend only on the crates below them ([`LAYERS`]; from each member's `Cargo.toml`), and
//! no crate has a module cycle: reads every `.rs` file under each workspace member's `src/`, collects the
//! module paths it refers to (`use crate::…`, `use super::…`, `use self::…`, `use child::…` and
//! `crate::…`/`super::…` paths in code; `#[cfg(test)]` code excluded), and checks that among the
//! children of every module the "refers to" relation has no cycle. A reference between a module
//! and its own ancestor or descendant does not count (a parent declares and re-exports its
//! children; a child may use what its parent re-exports); any other reference counts as an edge
//! between the two children of their lowest common ancestor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cptsim_e2e::{workspace_root, BINARY_SOURCES};

/// The `Cargo.toml` of directory `dir` of the workspace (`""`: the root).
fn manifest(dir: &str) -> toml::Table {
    let text = std::fs::read_to_string(workspace_root().join(dir).join("Cargo.toml")).unwrap();
    toml::from_str(&text).unwrap()
}

/// The workspace's member crates (directories), from the root `Cargo.toml`.
fn members() -> Vec<String> {
    manifest("")["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

/// The workspace crates that member `krate` depends on (its `cptsim-*` dependencies, build
/// and normal; not dev-dependencies, which only its tests see), as member directories.
fn dependencies(krate: &str, by_package: &BTreeMap<String, String>) -> BTreeSet<String> {
    let manifest = manifest(krate);
    ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|t| manifest.get(*t).and_then(|d| d.as_table()))
        .flat_map(|d| d.keys())
        .filter_map(|name| by_package.get(name).cloned())
        .collect()
}

/// Package name → member directory, for every workspace member.
fn packages() -> BTreeMap<String, String> {
    members()
        .into_iter()
        .map(|c| {
            (
                manifest(&c)["package"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                c,
            )
        })
        .collect()
}

/// The crates from the bottom up: each may depend only on crates before it. A new member must
/// be placed here (the test fails until it is).
const LAYERS: [&str; 11] = [
    "testdata", "models", "traces", "accel", "kernels", "nn", "train", "bench", "plot", "cli",
    "tests",
];

/// Module path of a source file (`src/a/mod.rs` and `src/a.rs` → `["a"]`; `lib.rs` → `[]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without comments, string literals and `#[cfg(test)]` items.
fn code_of(text: &str) -> String {
    without_test_items(&strip(text))
}

/// The modules `code` declares under `#[cfg(test)]` whose body is a file of its own
/// (`#[cfg(test)] mod tests;`).
fn test_modules(code: &str) -> Vec<String> {
    code.split("#[cfg(test)]")
        .skip(1)
        .filter_map(|after| {
            let item = after.trim_start();
            let item = item
                .strip_prefix("pub(crate) ")
                .or(item.strip_prefix("pub "))
                .unwrap_or(item);
            let name = item.strip_prefix("mod ")?.split(';').next()?.trim();
            let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            plain.then(|| name.to_string())
        })
        .collect()
}

/// Removes every item that follows `#[cfg(test)]`: up to its `;`, or its whole `{ … }` block.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let semi = item.find(';').unwrap_or(item.len());
        let brace = item.find('{').unwrap_or(item.len());
        let end = if semi < brace {
            semi + 1
        } else {
            let mut depth = 0;
            let mut end = item.len();
            for (i, c) in item.char_indices().skip(brace) {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            end
        };
        rest = &item[end.min(item.len())..];
    }
    out.push_str(rest);
    out
}

/// The source without comments and string or char literals.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i + 1 < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // a char literal such as '(' or '\n' (lifetimes have no closing quote)
            let end = b[i + 1..].iter().position(|&c| c == b'\'').unwrap_or(0) + i + 2;
            i = end;
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or("").trim().to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.to_string(),
            _ if prefix.is_empty() => p,
            _ => format!("{prefix}::{p}"),
        })
        .collect()
}

/// Every path the code refers to: `use` trees and `crate::`/`super::`/`self::` paths elsewhere.
fn paths_in(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for stmt in code.split(';') {
        let s = stmt.trim_start();
        let s = s
            .strip_prefix("pub(crate) ")
            .or(s.strip_prefix("pub "))
            .unwrap_or(s);
        if let Some(tree) = s.strip_prefix("use ") {
            paths.extend(expand(tree));
        }
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let i = from + at;
            let before = code[..i].chars().last();
            if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                let end = code[i..]
                    .find(|c: char| !ident(c))
                    .map_or(code.len(), |e| i + e);
                paths.push(code[i..end].trim_end_matches(':').to_string());
            }
            from = i + start.len();
        }
    }
    paths
}

/// The module a path names, resolved from module `at` against the set of `modules`.
fn resolve(path: &str, at: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest): (Vec<String>, &[&str]) = match segs.first()? {
        &"crate" => (Vec::new(), &segs[1..]),
        &"self" => (at.to_vec(), &segs[1..]),
        &"super" => {
            let mut b = at.to_vec();
            let mut k = 0;
            while segs.get(k) == Some(&"super") {
                b.pop();
                k += 1;
            }
            (b, &segs[k..])
        }
        first => {
            // a child module of `at` used by its plain name
            let mut child = at.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            (at.to_vec(), &segs[..])
        }
    };
    for s in rest {
        base.push(s.to_string());
        if !modules.contains(&base) {
            base.pop();
            break;
        }
    }
    Some(base)
}

/// Cycles among sibling modules of one crate, as readable strings.
fn cycles(krate: &str) -> Vec<String> {
    let root = workspace_root().join(krate);
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let src = root.join("src");
    // Modules in files of their own declared under `#[cfg(test)]` (`mod tests;`) are test code.
    let tests: Vec<Vec<String>> = files
        .iter()
        .flat_map(|f| {
            let at = module_of(&src, f);
            let code = strip(&std::fs::read_to_string(f).unwrap_or_default());
            test_modules(&code)
                .into_iter()
                .map(move |m| [at.clone(), vec![m]].concat())
        })
        .collect();
    files.retain(|f| {
        let at = module_of(&src, f);
        !tests.iter().any(|t| at.starts_with(t))
    });
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    // parent module → edges between its children
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for f in &files {
        let at = module_of(&src, f);
        let code = code_of(&std::fs::read_to_string(f).unwrap_or_default());
        for p in paths_in(&code) {
            let Some(to) = resolve(&p, &at, &modules) else {
                continue;
            };
            let common = at.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == at.len() || common == to.len() {
                continue; // ancestor or descendant
            }
            edges
                .entry(at[..common].to_vec())
                .or_default()
                .insert((at[common].clone(), to[common].clone()));
        }
    }
    let mut found = Vec::new();
    for (parent, e) in &edges {
        let nodes: BTreeSet<&String> = e.iter().flat_map(|(a, b)| [a, b]).collect();
        for &n in &nodes {
            // a path back to n from n
            let mut stack = vec![(n.clone(), vec![n.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((cur, trail)) = stack.pop() {
                for (_, next) in e.iter().filter(|(a, _)| *a == cur) {
                    if next == n {
                        let mut t = trail.clone();
                        t.push(n.clone());
                        let within = match parent.is_empty() {
                            true => format!("{krate} (crate root)"),
                            false => format!("{krate}::{}", parent.join("::")),
                        };
                        found.push(format!("{within}: {}", t.join(" → ")));
                    } else if seen.insert(next.clone()) {
                        let mut t = trail.clone();
                        t.push(next.clone());
                        stack.push((next.clone(), t));
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = members();
    for c in ["kernels", "nn", "train", "bench", "cli"] {
        assert!(
            crates.iter().any(|m| m == c),
            "{c} is not a workspace member"
        );
    }
    let all: Vec<String> = crates.iter().flat_map(|c| cycles(c)).collect();
    assert!(all.is_empty(), "module cycles:\n{}", all.join("\n"));
}

#[test]
fn no_crate_reaches_back_up() {
    let crates = members();
    let by_package = packages();
    let rank = |c: &str| LAYERS.iter().position(|l| *l == c);
    let mut wrong = Vec::new();
    for c in &crates {
        let Some(at) = rank(c) else {
            wrong.push(format!("{c} is not placed in LAYERS"));
            continue;
        };
        for d in dependencies(c, &by_package) {
            if rank(&d).is_none_or(|r| r >= at) {
                wrong.push(format!("{c} depends on {d}, which is not below it"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The trainer's layers, as built: kernels ← nn ← train ← bench.
    for (upper, lower) in [("nn", "kernels"), ("train", "nn"), ("bench", "train")] {
        assert!(
            dependencies(upper, &by_package).contains(lower),
            "{upper} → {lower}"
        );
    }
    assert!(dependencies("kernels", &by_package).is_empty());
}

#[test]
fn the_binary_guard_watches_every_crate_the_binary_is_built_from() {
    let mut built_from = dependencies("cli", &packages());
    built_from.insert("cli".into());
    let watched: BTreeSet<String> = BINARY_SOURCES.iter().map(|s| s.to_string()).collect();
    assert_eq!(watched, built_from);
}

#[test]
fn the_check_sees_a_cycle_and_resolves_paths() {
    let modules: BTreeSet<Vec<String>> = [vec![], vec!["a".into()], vec!["a".into(), "b".into()]]
        .into_iter()
        .collect();
    let at = vec!["a".to_string(), "b".to_string()];
    assert_eq!(
        resolve("super::super::a::b::X", &at, &modules),
        Some(at.clone())
    );
    assert_eq!(
        resolve("crate::a::Y", &at, &modules),
        Some(vec!["a".into()])
    );
    assert_eq!(
        expand("crate::{a::{b, c as d}, self}"),
        ["crate::a::b", "crate::a::c", "crate"]
    );
    let code = code_of(
        "use crate::x; // use crate::y;\nlet s = \"crate::z\";\n#[cfg(test)]\nuse crate::w;\n\
         #[cfg(test)]\nmod tests { use crate::v; fn f() { crate::u::g(); } }\nfn h() { crate::t::k(); }",
    );
    assert_eq!(paths_in(&code), ["crate::x", "crate::x", "crate::t::k"]);
    let decls = strip("#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline { }\nmod kept;");
    assert_eq!(test_modules(&decls), ["tests"]);
}
