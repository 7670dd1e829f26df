//! Every figure kind and HTML report rendered in headless Chromium at 1400 CSS px, as a reviewer
//! opens them, and measured there (`browser/measure.js`): no page scrolls sideways, no text of a
//! figure falls outside its SVG or runs into other text, the Pareto plot of several accelerators
//! lists and colours each one apart, and the curves' bits follow the run's trace. Each is
//! screenshotted into `target/screenshots/` (CI keeps them), or `$CPTSIM_SCREENSHOTS`.
//!
//! Without Chromium the test prints `SKIPPED` and passes, unless `CPTSIM_REQUIRE_CHROMIUM=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use cptsim_e2e::{run, stderr, workspace_root};
use serde_json::Value;

/// The browser window's width in CSS px.
const WIDTH: u32 = 1400;

/// The measuring script, appended to each page.
const MEASURE: &str = include_str!("browser/measure.js");

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn ok(args: &[&str]) {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
}

/// The Chromium binary, if installed.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Where the screenshots go: `$CPTSIM_SCREENSHOTS`, else the workspace's `target/screenshots`.
fn screenshot_dir() -> PathBuf {
    let dir = match std::env::var_os("CPTSIM_SCREENSHOTS") {
        Some(d) => PathBuf::from(d),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("target"))
            .join("screenshots"),
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Runs headless Chromium on `url` in a window of `(width, height)` CSS px with `extra`
/// arguments; returns its stdout and the console messages it logged.
fn chrome(
    chromium: &Path,
    url: &Path,
    (width, height): (u32, u32),
    extra: &[String],
) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", url.display()))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", chromium.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {err}");
    let console = err
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// A page to look at: an HTML report, or a figure's SVG shown alone on a page.
struct Page {
    /// The HTML file Chromium opens.
    html: PathBuf,
    /// The screenshot's name.
    name: &'static str,
}

impl Page {
    fn report(html: PathBuf, name: &'static str) -> Page {
        Page { html, name }
    }

    /// `svg` inline on an otherwise empty page beside it.
    fn figure(svg: &Path, name: &'static str) -> Page {
        let text = std::fs::read_to_string(svg).unwrap();
        let html = svg.with_extension("html");
        std::fs::write(
            &html,
            format!(
                "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{name}</title></head>\
                 <body style=\"margin:0\">{text}</body></html>"
            ),
        )
        .unwrap();
        Page { html, name }
    }

    /// The page measured with `measure.js` (in a copy, so the page itself keeps no script).
    fn measure(&self, chromium: &Path) -> Value {
        let page = std::fs::read_to_string(&self.html).unwrap();
        assert!(page.contains("</body>"), "{}", self.html.display());
        let probe = self
            .html
            .with_file_name(format!("{}.measure.html", self.name));
        std::fs::write(
            &probe,
            page.replace("</body>", &format!("<script>{MEASURE}</script></body>")),
        )
        .unwrap();
        let (dom, console) = chrome(chromium, &probe, (WIDTH, 1000), &["--dump-dom".into()]);
        assert!(console.is_empty(), "{}: console: {console:?}", self.name);
        let start = dom
            .rfind("<pre id=\"measured\">")
            .unwrap_or_else(|| panic!("{}: no measurement in the DOM", self.name));
        let body = &dom[start + "<pre id=\"measured\">".len()..];
        let json = body.split("</pre>").next().unwrap_or_default();
        let json = json
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{}: {e}: {json}", self.name))
    }

    /// A screenshot of `size` CSS px into the screenshot directory as `NAME{suffix}.png`,
    /// checked for console messages and blankness; returns its path.
    fn screenshot(&self, chromium: &Path, size: (u32, u32), suffix: &str) -> PathBuf {
        let png = screenshot_dir().join(format!("{}{suffix}.png", self.name));
        let (_, console) = chrome(
            chromium,
            &self.html,
            size,
            &[format!("--screenshot={}", png.display())],
        );
        assert!(console.is_empty(), "{}: console: {console:?}", self.name);
        assert_not_blank(&png);
        png
    }

    /// Measures the page, asserts what every page must hold, screenshots it; returns the
    /// measurement for checks of its own.
    fn check(&self, chromium: &Path, height: u32) -> Value {
        let m = self.measure(chromium);
        let (scroll, client) = (m["scroll_width"].as_f64(), m["client_width"].as_f64());
        assert!(
            scroll.is_some() && scroll <= client,
            "{}: the page is {scroll:?} px wide in a {client:?} px window",
            self.name
        );
        let svgs = m["svgs"].as_array().cloned().unwrap_or_default();
        assert!(!svgs.is_empty(), "{}: no figure", self.name);
        for (i, svg) in svgs.iter().enumerate() {
            let outside = &svg["outside"];
            assert_eq!(
                outside.as_array().map(Vec::len),
                Some(0),
                "{} figure {i}: text outside the figure: {outside}",
                self.name
            );
            let overlaps = &svg["overlaps"];
            assert_eq!(
                overlaps.as_array().map(Vec::len),
                Some(0),
                "{} figure {i}: overlapping text: {overlaps}",
                self.name
            );
        }
        self.screenshot(chromium, (WIDTH, height), "");
        m
    }
}

/// Asserts a PNG is not blank: enough non-white pixels in several colours.
fn assert_not_blank(path: &Path) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    let px: Vec<[u8; 3]> = img.pixels().map(|p| p.0).collect();
    let ink = px.iter().filter(|p| **p != [255, 255, 255]).count();
    let mut colours = px.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        ink * 200 > px.len() && colours.len() > 8,
        "{}: {ink} non-white pixels of {}, {} colours",
        path.display(),
        px.len(),
        colours.len()
    );
}

/// The strings of `key` (`texts`, `strokes`) of figure `i` of a measurement.
fn strings(m: &Value, i: usize, key: &str) -> Vec<String> {
    m["svgs"][i][key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A real sweep of three arms × two seeds on three accelerators, on synthetic data.
const PLAN: &str = r#"
name = "browser"
out = "OUT"

[grid]
model = "zoo:lenet5"
schedule = "static"
bits = "8"
grad_bits = "8"
seed = [0, 1]
accel = ["zc706", "bitfusion", "stripes"]

[train]
data = "synthetic"
iters = 40
batch = 16
eval_every = 40

[[cell]]
bits = "4"

[[cell]]
schedule = "cosine"
bits = "3:8"
cycles = 2
"#;

/// The accelerators of [`PLAN`] and the first colours of the series palette they are drawn in.
const ACCELS: [(&str, &str); 3] = [
    ("zc706", "#0072B2"),
    ("bitfusion", "#E69F00"),
    ("stripes", "#009E73"),
];

#[test]
fn figures_and_reports_read_well_at_1400_px_in_chromium() {
    let Some(chromium) = chromium() else {
        cptsim_testdata::skip_unless_required(
            "CPTSIM_REQUIRE_CHROMIUM",
            "no chromium on PATH (apt-get install chromium)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // The sweep: its page, and Pareto plots on latency (per accelerator) and GBitOPs.
    let sweep = d.join("sweep");
    let plan = d.join("plan.toml");
    std::fs::write(&plan, PLAN.replace("OUT", &s(&sweep))).unwrap();
    ok(&["sweep", "run", &s(&plan), "--jobs", "1"]);
    ok(&["plot", "sweep-index", &s(&sweep)]);
    let results = s(&sweep.join("results.csv"));
    let latency = d.join("pareto-latency.svg");
    ok(&[
        "plot",
        "pareto",
        &results,
        "--x",
        "latency",
        "-o",
        &s(&latency),
    ]);
    let m = Page::figure(&latency, "pareto-latency").check(&chromium, 520);
    let t = strings(&m, 0, "texts");
    let lines = strings(&m, 0, "strokes");
    for (accel, colour) in ACCELS {
        let entry = format!("{accel} and its front");
        assert_eq!(
            t.iter().filter(|x| **x == entry).count(),
            1,
            "{entry}: {t:?}"
        );
        assert!(
            lines.iter().any(|c| c == colour),
            "{accel} {colour}: {lines:?}"
        );
    }
    let legend = t.iter().filter(|x| x.ends_with(" and its front")).count();
    assert_eq!(
        legend,
        ACCELS.len(),
        "one legend entry per accelerator: {t:?}"
    );
    let gbitops = d.join("pareto-gbitops.svg");
    ok(&["plot", "pareto", &results, "-o", &s(&gbitops)]);
    let m = Page::figure(&gbitops, "pareto-gbitops").check(&chromium, 520);
    let t = strings(&m, 0, "texts");
    // GBitOPs are the same on every accelerator: one front, groups in the legend
    for want in ["Pareto front", "static", "cosine"] {
        assert!(t.iter().any(|x| x == want), "{want}: {t:?}");
    }
    assert!(!t.iter().any(|x| x.contains("zc706")), "{t:?}");
    let m = Page::report(sweep.join("index.html"), "sweep-index").check(&chromium, 2200);
    assert_eq!(m["svgs"].as_array().map(Vec::len), Some(3));

    // Training: CPT against static; the curves' bits follow the CPT trace.
    let (cpt, stat) = (d.join("cpt"), d.join("static"));
    cptsim_e2e::train_small(&cpt, &["--schedule", "cosine", "--cycles", "2"]);
    cptsim_e2e::train_small(&stat, &["--schedule", "static"]);
    let run = cptsim_plot::curves::read_run(&cpt).unwrap();
    let mut bits: Vec<u64> = run
        .trace
        .as_ref()
        .map(|t| t.fw.iter().map(|p| p.1 as u64).collect())
        .unwrap_or_default();
    bits.sort_unstable();
    bits.dedup();
    assert!(bits.len() >= 4, "CPT's forward bits over the run: {bits:?}");
    let curves = d.join("curves.svg");
    ok(&["plot", "curves", &s(&stat), &s(&cpt), "-o", &s(&curves)]);
    let m = Page::figure(&curves, "curves").check(&chromium, 520);
    let t = strings(&m, 0, "texts");
    for want in ["static", "cpt", "bits over the run (trace.csv)"] {
        assert!(t.iter().any(|x| x == want), "{want}: {t:?}");
    }
    ok(&["plot", "train-index", &s(&cpt), "--model", "zoo:lenet5"]);
    let m = Page::report(cpt.join("index.html"), "train-index").check(&chromium, 2000);
    assert_eq!(m["svgs"].as_array().map(Vec::len), Some(2));
    let html = std::fs::read_to_string(cpt.join("index.html")).unwrap();
    for want in [
        "<td>final test accuracy</td>",
        "<td>training cost</td>",
        " GBitOPs</td>",
    ] {
        assert!(html.contains(want), "{want}");
    }
    assert!(!html.contains("final_test_acc"), "raw summary.json keys");

    // Ten schedules at the default size.
    let ten = d.join("schedules.svg");
    ok(&[
        "plot",
        "schedule",
        "--schedule",
        "cosine,cosine-triangular,linear,linear-triangular,exp,exp-triangular-v,\
         exp-triangular-h,demon,demon-triangular-v,demon-triangular-h",
        "-o",
        &s(&ten),
    ]);
    let m = Page::figure(&ten, "schedules-ten").check(&chromium, 520);
    assert_eq!(
        strings(&m, 0, "texts")
            .iter()
            .filter(|t| *t == "iteration")
            .count(),
        10
    );

    // Cost reports: ResNet-20 on three accelerators, ResNet-74 (with its per-stage view), and
    // the breakdown figures of both.
    let rep = d.join("rep");
    ok(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--schedule",
        "cosine",
        "--accel",
        "zc706,bitfusion,stripes",
        "--report",
        &s(&rep),
    ]);
    let m = Page::report(rep.join("index.html"), "run-index").check(&chromium, 4200);
    assert_eq!(m["svgs"].as_array().map(Vec::len), Some(6));
    let rep74 = d.join("rep74");
    ok(&[
        "run",
        "--model",
        "zoo:resnet74",
        "--schedule",
        "cosine",
        "--accel",
        "zc706",
        "--report",
        &s(&rep74),
    ]);
    Page::report(rep74.join("index.html"), "run-index-resnet74").check(&chromium, 2400);
    for (name, dir, args) in [
        ("breakdown", &rep, ["--accel", "zc706", "--per", "layer"]),
        (
            "breakdown-gemm",
            &rep,
            ["--accel", "stripes", "--split", "gemm"],
        ),
        (
            "breakdown-stages",
            &rep74,
            ["--accel", "zc706", "--per", "stage"],
        ),
    ] {
        let svg = d.join(format!("{name}.svg"));
        let mut cmd = vec!["plot", "breakdown", dir.to_str().unwrap()];
        cmd.extend(args);
        let out = s(&svg);
        cmd.extend(["-o", &out]);
        ok(&cmd);
        Page::figure(&svg, name).check(&chromium, 520);
    }
    // A phone-width window (420 CSS px): the pages still draw their tables and figures.
    for (page, name) in [
        (rep.join("index.html"), "run-index"),
        (cpt.join("index.html"), "train-index"),
        (sweep.join("index.html"), "sweep-index"),
    ] {
        Page::report(page, name).screenshot(&chromium, (420, 2400), "-phone");
    }
    eprintln!("screenshots: {}", screenshot_dir().display());
}
