//! `cptsim plot` and the HTML reports: every figure kind as SVG and PNG from real run outputs
//! (a `run --report` directory, `train --out` directories incl. LDP) and a hand-written sweep
//! results fixture; bad input is one clear error naming the file and column. `plot_browser.rs`
//! looks at them in Chromium.

use std::path::Path;

use cptsim_e2e::{assert_one_clear_line, run, stderr};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn ok(args: &[&str]) {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
}

/// Runs `args`, expects exit 2 (usage) and one error line containing every `want`.
fn fails(args: &[&str], want: &[&str]) {
    fails_with(2, args, want);
}

/// Runs `args`, expects exit 3 (a file that exists but is malformed) and one error line
/// containing every `want`.
fn bad_input(args: &[&str], want: &[&str]) {
    fails_with(3, args, want);
}

/// Runs `args`, expects exit `code` and one error line containing every `want`.
fn fails_with(code: i32, args: &[&str], want: &[&str]) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert_one_clear_line(&err);
    for w in want {
        assert!(err.contains(w), "{args:?}: want {w:?} in {err}");
    }
}

/// Decoded RGB pixels of a PNG file, and its size.
fn pixels(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    let (w, h) = img.dimensions();
    (w, h, img.pixels().map(|p| p.0).collect())
}

/// Asserts a PNG is not blank: enough non-white pixels in several colours.
fn assert_not_blank(path: &Path) {
    let (w, h, px) = pixels(path);
    let ink = px.iter().filter(|p| **p != [255, 255, 255]).count();
    let mut colours: Vec<[u8; 3]> = px.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        ink * 100 > px.len() && colours.len() > 8,
        "{}: {w}x{h}, {ink} non-white pixels, {} colours",
        path.display(),
        colours.len()
    );
}

#[test]
fn schedule_figures_have_one_panel_per_schedule_in_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("s.svg");
    let png = dir.path().join("s.png");
    let list = "cosine,exp-triangular-v,pfq:100,300";
    ok(&[
        "plot",
        "schedule",
        "--schedule",
        list,
        "--iters",
        "400",
        "--cycles",
        "2",
        "-o",
        &s(&svg),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    for name in ["cosine", "exp-triangular-v", "pfq:100,300"] {
        assert_eq!(
            text.matches(&format!("\n{name}\n</text>")).count(),
            1,
            "{name}"
        );
    }
    assert_eq!(text.matches("\niteration\n</text>").count(), 3);
    ok(&[
        "plot",
        "schedule",
        "--schedule",
        "cosine",
        "--iters",
        "400",
        "--dpi",
        "192",
        "-o",
        &s(&png),
    ]);
    let (w, h, _) = pixels(&png);
    assert_eq!((w, h), (1600, 1000));
    assert_not_blank(&png);
    fails(
        &[
            "plot",
            "schedule",
            "--schedule",
            "cosine,nope",
            "-o",
            &s(&svg),
        ],
        &["--schedule", "unknown schedule 'nope'"],
    );
    fails(
        &["plot", "schedule", "-o", &s(&dir.path().join("s.jpg"))],
        &["s.jpg", ".svg or .png"],
    );
}

/// Checks that the heat map of `svg` (one column per iteration) shows what `ldp_bits.png` shows:
/// per layer, top to bottom, one rectangle per run of equal weight bits in `trace_csv`, and one
/// colour per bit-width (equal bits, equal colour; different bits, different colours).
fn assert_map_follows_trace(svg: &str, trace_csv: &str) {
    // Runs of b_w per layer, in iteration order.
    let mut runs: Vec<Vec<u8>> = Vec::new();
    for line in trace_csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (layer, bits): (usize, u8) = (f[2].parse().unwrap(), f[4].parse().unwrap());
        if runs.len() <= layer {
            runs.resize(layer + 1, Vec::new());
        }
        if runs[layer].last() != Some(&bits) {
            runs[layer].push(bits);
        }
    }
    // The map's rectangles: left of the colour bar, not the white background.
    let attr = |tag: &str, name: &str| -> String {
        let key = format!(" {name}=\"");
        let start = tag.find(&key).unwrap() + key.len();
        tag[start..].split('"').next().unwrap().to_string()
    };
    let mut rows: Vec<(i64, Vec<(i64, String)>)> = Vec::new();
    for tag in svg.split("<rect").skip(1) {
        let (x, y, w): (i64, i64, i64) = (
            attr(tag, "x").parse().unwrap(),
            attr(tag, "y").parse().unwrap(),
            attr(tag, "width").parse().unwrap(),
        );
        let fill = attr(tag, "fill");
        if fill == "#FFFFFF" || x + w > 708 {
            continue;
        }
        match rows.iter_mut().find(|(ry, _)| *ry == y) {
            Some((_, r)) => r.push((x, fill)),
            None => rows.push((y, vec![(x, fill)])),
        }
    }
    rows.sort_by_key(|(y, _)| *y);
    assert_eq!(rows.len(), runs.len(), "one map row per traced layer");
    let mut colour_of: Vec<(u8, String)> = Vec::new();
    for ((_, rects), bits) in rows.iter_mut().zip(&runs) {
        rects.sort();
        assert_eq!(rects.len(), bits.len(), "runs {bits:?}");
        for ((_, fill), b) in rects.iter().zip(bits) {
            match colour_of.iter().find(|(cb, _)| cb == b) {
                Some((_, c)) => assert_eq!(c, fill, "{b} bits"),
                None => {
                    assert!(colour_of.iter().all(|(_, c)| c != fill), "{fill} reused");
                    colour_of.push((*b, fill.clone()));
                }
            }
        }
    }
}

#[test]
fn trace_heat_map_of_an_ldp_run_and_bad_traces() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("ldp");
    cptsim_e2e::train_small(&run_dir, &["--policy", "ldp"]);
    let trace = s(&run_dir.join("trace.csv"));
    let png = dir.path().join("bits.png");
    let svg = dir.path().join("bits.svg");
    let plot = |extra: &[&str], out: &Path| {
        let o = s(out);
        let mut args = vec!["plot", "trace", &trace, "--model", "zoo:lenet5", "-o", &o];
        args.extend_from_slice(extra);
        ok(&args);
    };
    plot(&["--bits", "3:8"], &png);
    assert_not_blank(&png);
    plot(&["--operand", "w"], &svg);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("layer (input side at the top)") && text.contains("weight bits"));
    assert_map_follows_trace(
        &text,
        &std::fs::read_to_string(run_dir.join("trace.csv")).unwrap(),
    );
    // A header-only trace is an error naming the file, not an empty image.
    let empty = dir.path().join("empty.csv");
    std::fs::write(
        &empty,
        "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n",
    )
    .unwrap();
    let out_png = dir.path().join("e.png");
    bad_input(
        &[
            "plot",
            "trace",
            &s(&empty),
            "--model",
            "zoo:lenet5",
            "-o",
            &s(&out_png),
        ],
        &["empty.csv", "nothing to plot"],
    );
    assert!(!out_png.exists());
    fails(
        &[
            "plot",
            "trace",
            &trace,
            "--model",
            "zoo:lenet5",
            "--operand",
            "x",
            "-o",
            &s(&png),
        ],
        &["--operand x"],
    );
}

/// The hand-written sweep fixture: every column the README lists, plus an extra one.
const RESULTS: &str = "\
model,schedule,bits,grad_bits,seed,accel,gbitops,static_gbitops,reduction,latency_s,energy_j,static_latency_s,static_energy_j,final_test_acc,best_test_acc,extra
resnet20,static,8,8,0,zc706,200,200,0,10,50,10,50,0.910,0.915,a
resnet20,static,8,8,1,zc706,200,200,0,10,50,10,50,0.914,0.918,a
resnet20,cosine,3:8,8,0,zc706,127,200,0.365,8.1,40,10,50,0.905,0.911,a
resnet20,cosine,3:8,8,1,zc706,127,200,0.365,8.1,40,10,50,0.909,0.913,a
resnet20,exp-triangular-v,3:8,8,0,zc706,140,200,0.3,8.6,43,10,50,0.902,0.906,a
resnet20,exp-triangular-v,3:8,8,1,zc706,140,200,0.3,8.6,43,10,50,0.896,0.904,a
resnet20,cosine,4:8,8,0,zc706,150,200,0.25,8.9,45,10,50,0.912,0.916,a
";

#[test]
fn pareto_from_a_results_fixture_and_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.csv");
    std::fs::write(&results, RESULTS).unwrap();
    let r = s(&results);
    for x in ["gbitops", "latency", "energy"] {
        let png = dir.path().join(format!("p-{x}.png"));
        ok(&[
            "plot",
            "pareto",
            &r,
            "--x",
            x,
            "--y",
            "accuracy",
            "--by",
            "schedule",
            "-o",
            &s(&png),
        ]);
        assert_not_blank(&png);
    }
    let svg = dir.path().join("p.svg");
    ok(&[
        "plot",
        "pareto",
        &r,
        "--y",
        "best",
        "--by",
        "bits",
        "-o",
        &s(&svg),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in ["\n3:8\n", "\n4:8\n", "Pareto front", "best test accuracy"] {
        assert!(text.contains(want), "{want}");
    }
    fails(
        &["plot", "pareto", &r, "--x", "time", "-o", &s(&svg)],
        &["--x time"],
    );
    fails(
        &["plot", "pareto", &r, "--by", "policy", "-o", &s(&svg)],
        &["--by policy", "results.csv has no column 'policy'"],
    );
    let cut = dir.path().join("cut.csv");
    std::fs::write(&cut, "schedule,seed,gbitops,static_gbitops\ncosine,0,1,2\n").unwrap();
    bad_input(
        &["plot", "pareto", &s(&cut), "-o", &s(&svg)],
        &["cut.csv", "no column 'final_test_acc'"],
    );
}

/// The run of the report tests: a short cosine run of ResNet-20 on two accelerators.
const RUN: &[&str] = &[
    "run",
    "--model",
    "zoo:resnet20",
    "--schedule",
    "cosine",
    "--iters",
    "800",
    "--cycles",
    "2",
    "--accel",
    "zc706,stripes",
];

/// `run --report` into `dir` on two accelerators; returns the terminal table.
fn report(dir: &Path) -> String {
    let out = run(&[RUN, &["--report", &s(dir)]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    cptsim_e2e::stdout(&out)
}

#[test]
fn run_report_index_and_breakdowns() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let table = report(&rep);
    let html = std::fs::read_to_string(rep.join("index.html")).unwrap();
    // The terminal's numbers, every CSV linked, both splits per accelerator inline.
    let gbitops = table
        .lines()
        .find_map(|l| l.strip_prefix("GBitOPs"))
        .map(str::trim)
        .unwrap();
    assert!(html.contains(&format!("<td>{gbitops}</td>")), "{gbitops}");
    let zc706: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("zc706"))
        .map(|l| l.split_whitespace().collect())
        .unwrap();
    // time (s) and energy (J) columns, as printed.
    for v in [zc706[1], zc706[3]] {
        assert!(html.contains(&format!("<td>{v}</td>")), "{v}");
    }
    for csv in ["zc706-layers.csv", "zc706-epochs.csv", "stripes-layers.csv"] {
        assert!(html.contains(&format!("<a href=\"{csv}\">")), "{csv}");
    }
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(html.contains("--report") && !html.contains("<script"));
    // The same page from the run's saved JSON report: only the command line differs.
    let json = dir.path().join("run.json");
    let doc = run(&[RUN, &["--format", "json"]].concat());
    assert!(doc.status.success(), "{}", stderr(&doc));
    std::fs::write(&json, &doc.stdout).unwrap();
    ok(&["plot", "run-index", &s(&rep), "--run", &s(&json)]);
    let again = std::fs::read_to_string(rep.join("index.html")).unwrap();
    let without_command = |h: &str| h.split("<pre>").next().unwrap_or_default().to_string();
    assert_eq!(without_command(&again), without_command(&html));
    assert!(again.contains("plot run-index"));
    std::fs::write(&json, "{\"model\": 3}").unwrap();
    bad_input(
        &["plot", "run-index", &s(&rep), "--run", &s(&json)],
        &["run.json", "not a `cptsim run --format json` report"],
    );
    let png = dir.path().join("b.png");
    ok(&[
        "plot",
        "breakdown",
        &s(&rep),
        "--accel",
        "stripes",
        "--split",
        "gemm",
        "-o",
        &s(&png),
    ]);
    assert_not_blank(&png);
    let svg = dir.path().join("stages.svg");
    ok(&[
        "plot",
        "breakdown",
        &s(&rep),
        "--accel",
        "zc706",
        "--per",
        "stage",
        "-o",
        &s(&svg),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    for stage in ["conv1", "layer1", "layer2", "layer3", "fc"] {
        assert!(text.contains(&format!("\n{stage}\n</text>")), "{stage}");
    }
    fails(
        &["plot", "breakdown", &s(&rep), "-o", &s(&png)],
        &["several accelerators", "zc706"],
    );
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    std::fs::write(
        cut.join("x-layers.csv"),
        "layer_index,layer,gemm,latency_s\n0,a,fw,1\n",
    )
    .unwrap();
    bad_input(
        &["plot", "breakdown", &s(&cut), "-o", &s(&png)],
        &["x-layers.csv", "no column 'cycles'"],
    );
}

#[test]
fn curves_overlay_runs_and_train_index() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("cosine"), dir.path().join("static"));
    cptsim_e2e::train_small(&a, &["--schedule", "cosine", "--cycles", "2"]);
    cptsim_e2e::train_small(&b, &["--schedule", "static"]);
    let svg = dir.path().join("c.svg");
    ok(&["plot", "curves", &s(&a), &s(&b), "-o", &s(&svg)]);
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in [
        "\ncosine\n",
        "\nstatic\n",
        "\ntest loss/accuracy, BW bits\n",
        "\nbits over the run (trace.csv)\n",
        "\nloss\n",
    ] {
        assert!(text.contains(want), "{want}");
    }
    ok(&["plot", "train-index", &s(&a), "--model", "zoo:lenet5"]);
    let html = std::fs::read_to_string(a.join("index.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
    assert!(html.contains("<a href=\"metrics.csv\">"));
    // the summary as a labelled table, not summary.json's keys
    assert!(html.contains("<td>final test accuracy</td>") && !html.contains("final_test_acc"));
    fails(
        &[
            "plot",
            "curves",
            &s(&dir.path().join("none")),
            "-o",
            &s(&svg),
        ],
        &["none", "metrics.csv"],
    );
}

#[test]
fn plot_validates_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    let head =
        "cell,model,schedule,bits,grad_bits,seed,accel,gbitops,static_gbitops,final_test_acc\n";
    let row = "c0,resnet20,cosine,3:8,8,0,zc706,127,200,0.9\n";
    let cases: [(&str, String, &[&str]); 6] = [
        (
            "dup-row",
            format!("{head}{row}{row}"),
            &["line 3", "the row repeats line 2"],
        ),
        (
            "dup-col",
            format!("seed,{head}0,{row}"),
            &["line 1, column 'seed'", "named twice"],
        ),
        (
            "seed",
            format!("{head}c0,resnet20,cosine,3:8,8,x1,zc706,127,200,0.9\n"),
            &["line 2, column 'seed'", "'x1' is not a number"],
        ),
        (
            "acc",
            format!("{head}c0,resnet20,cosine,3:8,8,0,zc706,127,200,91\n"),
            &["line 2, column 'final_test_acc'", "outside [0, 1]"],
        ),
        (
            "cost",
            format!("{head}c0,resnet20,cosine,3:8,8,0,zc706,-127,200,0.9\n"),
            &["line 2, column 'gbitops'", "negative"],
        ),
        (
            "long",
            format!(
                "{head}c0,resnet20,{},3:8,8,0,zc706,127,200,0.9\n",
                "x".repeat(1 << 20)
            ),
            &["line 2, column 'schedule'", "1048576 bytes"],
        ),
    ];
    for (name, text, want) in cases {
        let csv = dir.path().join(format!("{name}.csv"));
        std::fs::write(&csv, text).unwrap();
        let mut want = want.to_vec();
        let file = format!("{name}.csv");
        want.push(&file);
        bad_input(&["plot", "pareto", &s(&csv), "-o", &s(&svg)], &want);
        assert!(!svg.exists(), "{name}: a figure was written");
    }
}
