//! The documentation's examples are tests. Every ```console block of `README.md`, of the book
//! (`docs/src/**/*.md`) and of `studies/**/*.md` runs with the built `cptsim` (trycmd: `$ ` lines are commands, the lines
//! after them the expected stdout + stderr, `...` and `[..]` elide what varies), so a changed
//! output fails here. Blocks marked ```console,ignore are not run; each says why beside it.
//!
//! Each page runs in its own scratch directory laid out like a checkout: `repo/` (the working
//! directory, with `examples/` and `tests/` linked from the workspace) beside `shared/data`
//! (linked to the datasets), so the pages' relative paths — `../shared/data/fashion-mnist`,
//! `examples/sweeps/…`, `runs/…` — work as they do for a reader at the repository root, and no
//! output lands in the source tree. Pages that train on data skip with a printed reason when the
//! datasets are missing, and fail instead under `CPTSIM_REQUIRE_DATA=1`.
//!
//! To update the shown outputs after an intended change:
//! `TRYCMD=overwrite cargo test --release -p cptsim-e2e --test docs_examples`.
//!
//! The other tests check that every relative link of those pages resolves to a file (and a
//! `#fragment` to a heading of it), that every page of the book is in its SUMMARY.md, and that
//! no page carries development-log material (issue numbers, sittings, dates, commit hashes,
//! references to specs outside the repository).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cptsim_e2e::{cptsim, cptsim_path, workspace_root};

/// `README.md`, every page of the book and the studies' pages, sorted.
fn pages() -> Vec<PathBuf> {
    let root = workspace_root()
        .canonicalize()
        .unwrap_or_else(|_| workspace_root());
    let mut pages = vec![root.join("README.md")];
    collect_md(&root.join("docs/src"), &mut pages);
    collect_md(&root.join("studies"), &mut pages);
    pages.sort();
    pages
}

fn collect_md(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_md(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// The lines of the page's runnable console blocks (```console without `ignore`).
fn console_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut inside = None::<bool>;
    for line in text.lines() {
        match (inside, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let mut words = info.trim().split(',');
                let lang = words.next().unwrap_or_default();
                let runs = lang == "console" && !words.any(|w| w == "ignore");
                inside = Some(runs);
            }
            (Some(_), Some(_)) => inside = None,
            (Some(true), None) => lines.push(line),
            _ => {}
        }
    }
    lines
}

/// True when a page's commands read the shared datasets (directly or through a training plan).
fn needs_data(commands: &[&str]) -> bool {
    commands
        .iter()
        .filter(|l| l.starts_with("$ "))
        .any(|l| l.contains("shared/data") || l.contains("examples/sweeps/quickstart"))
}

/// A file or directory symlink `link` → `target`.
fn symlink(target: &Path, link: &Path) {
    if let Err(e) = std::os::unix::fs::symlink(target, link) {
        panic!("{} → {}: {e}", link.display(), target.display());
    }
}

fn create_dir(dir: &Path) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        panic!("{}: {e}", dir.display());
    }
}

#[test]
fn every_console_example_prints_what_the_docs_show() {
    // Fails with a clear message when the binary is older than its sources.
    let _ = cptsim();
    let root = match workspace_root().canonicalize() {
        Ok(root) => root,
        Err(e) => panic!("workspace root: {e}"),
    };
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("scratch directory: {e}"),
    };
    let mut data = None::<Option<PathBuf>>;
    let started = std::time::Instant::now();
    let mut ran = 0;
    for page in pages() {
        let text = read(&page);
        let lines = console_lines(&text);
        if !lines.iter().any(|l| l.starts_with("$ ")) {
            continue;
        }
        let rel = page.strip_prefix(&root).unwrap_or(&page).to_path_buf();
        let dataset = if needs_data(&lines) {
            let dir = data.get_or_insert_with(|| {
                cptsim_testdata::shared_data("fashion-mnist")
                    .and_then(|d| d.parent().map(Path::to_path_buf))
            });
            match dir {
                Some(dir) => Some(dir.clone()),
                None => {
                    cptsim_testdata::skip(&format!(
                        "{}: its examples train on ../shared/data, which is missing",
                        rel.display()
                    ));
                    continue;
                }
            }
        } else {
            None
        };
        let base = scratch.path().join(rel.to_string_lossy().replace('/', "_"));
        let work = base.join("repo");
        create_dir(&work);
        for linked in ["examples", "tests", "LICENSE-APACHE"] {
            symlink(&root.join(linked), &work.join(linked));
        }
        if let Some(dataset) = dataset {
            create_dir(&base.join("shared"));
            symlink(&dataset, &base.join("shared/data"));
        }
        if let Err(e) = std::env::set_current_dir(&work) {
            panic!("{}: {e}", work.display());
        }
        let page_started = std::time::Instant::now();
        trycmd::TestCases::new()
            .register_bin("cptsim", cptsim_path())
            .case(&page)
            .run();
        eprintln!(
            "docs example {}: {:.1} s",
            rel.display(),
            page_started.elapsed().as_secs_f64()
        );
        ran += 1;
    }
    if let Err(e) = std::env::set_current_dir(&root) {
        panic!("{}: {e}", root.display());
    }
    assert!(ran > 0, "no page with console examples found");
    eprintln!(
        "docs examples: {ran} pages in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// mdBook's anchor for a heading: lower case, spaces to `-`, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The text of a page outside fenced code blocks.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((n + 1, line));
        }
    }
    out
}

/// The anchors of a page's headings (duplicates numbered as mdBook numbers them).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let title = heading.trim_start_matches('#').trim();
        let base = slug(title);
        let mut id = base.clone();
        let mut n = 1;
        while !seen.insert(id.clone()) {
            id = format!("{base}-{n}");
            n += 1;
        }
    }
    seen
}

/// Link targets `](target)` of a line, code spans left out.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut code = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '`' => code = !code,
            ']' if !code && chars.get(i + 1) == Some(&'(') => {
                let rest: String = chars[i + 2..].iter().collect();
                if let Some(end) = rest.find(')') {
                    out.push(rest[..end].trim().to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (n, line) in prose(&text) {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target.as_str(), None),
                };
                let dir = page.parent().unwrap_or(Path::new("."));
                let resolved = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                if !resolved.exists() {
                    broken.push(format!("{}:{n}: {target}: no such file", page.display()));
                    continue;
                }
                if let Some(fragment) = fragment {
                    let is_md = resolved.extension().is_some_and(|e| e == "md");
                    if is_md && !anchors(&read(&resolved)).contains(fragment) {
                        broken.push(format!("{}:{n}: {target}: no such heading", page.display()));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let src = workspace_root().join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let listed: HashSet<String> = summary.lines().flat_map(links).collect();
    let mut pages = Vec::new();
    collect_md(&src, &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .filter_map(|p| p.strip_prefix(&src).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p != "SUMMARY.md" && !listed.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "pages mdBook would leave out (not in docs/src/SUMMARY.md): {missing:?}"
    );
}

/// A word that looks like a commit hash: 7 to 40 hex digits with both digits and letters,
/// standing alone (not the tail of a sweep cell id such as `…_0-3a7b974b7b38`).
fn hash_like(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

#[test]
fn no_page_reads_like_a_lab_notebook() {
    let mut found = Vec::new();
    let markers = [
        "issue",
        "sitting",
        "session",
        "methods.md",
        "accelerators.md",
        "spec §",
    ];
    for page in pages() {
        let text = read(&page);
        for (n, line) in prose(&text) {
            let lower = line.to_lowercase();
            for marker in markers {
                if lower.contains(marker) {
                    found.push(format!("{}:{n}: `{marker}`", page.display()));
                }
            }
            let words = line.split(|c: char| !(c.is_ascii_alphanumeric() || "#-_/.".contains(c)));
            for word in words {
                let numbered = word.strip_prefix('#').is_some_and(|rest| {
                    !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
                });
                let dated = word.len() >= 7
                    && word.starts_with("20")
                    && word.as_bytes().get(4) == Some(&b'-')
                    && word[..4].chars().all(|c| c.is_ascii_digit());
                if numbered || dated || hash_like(word) {
                    found.push(format!("{}:{n}: `{word}`", page.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "development-log markers (history belongs in git and CHANGELOG.md):\n{}",
        found.join("\n")
    );
}
