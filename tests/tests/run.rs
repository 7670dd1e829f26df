//! `cptsim run`: the paper's ResNet-74 CPT numbers, the save → `--trace` round trip through both
//! trace formats, and clear rejection of bad input.

#![allow(clippy::approx_constant)] // published GBitOPs values, not approximations of π

use cptsim_e2e::{assert_one_clear_line, run, stderr, stdout};
use serde_json::Value;

/// Runs `cptsim run … --format json` and parses the report.
fn run_json(args: &[&str]) -> Value {
    let mut all = vec!["run", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    match serde_json::from_str(&stdout(&out)) {
        Ok(v) => v,
        Err(e) => panic!("{all:?}: not JSON ({e}): {}", stdout(&out)),
    }
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn resnet74_cosine_matches_the_paper() {
    let v = run_json(&["--model", "zoo:resnet74", "--schedule", "cosine"]);
    assert_eq!(v["schedule"], "cosine");
    assert_eq!(v["bits"], serde_json::json!([3, 8]));
    assert_eq!(v["grad_bits"], 8);
    assert_eq!(v["iterations"], 64_000);
    assert_eq!(v["batch"], 128);
    // methods.md §2.3/§2.4: 2.668e8 static, −36.67 %, ≈ 1.69e8 GBitOPs.
    assert_eq!((num(&v, "static_gbitops") / 1e5).round(), 2668.0, "{v}");
    assert_eq!((num(&v, "gbitops") / 1e6).round(), 169.0, "{v}");
    assert_eq!((num(&v, "reduction") * 1e4).round(), 3667.0, "{v}");
}

#[test]
fn zoo_models_reproduce_the_static_gbitops_column() {
    // methods.md §2.3: static 8/8 and 6/6 GBitOPs as printed (mantissa · 10^exp, 3 decimals).
    let table = [
        ("resnet20", (0.648, 8), (0.365, 8)),
        ("resnet38", (1.322, 8), (0.743, 8)),
        ("resnet74", (2.668, 8), (1.501, 8)),
        ("resnet110", (4.015, 8), (2.259, 8)),
        ("resnet152", (5.586, 8), (3.142, 8)),
        ("resnet164", (6.035, 8), (3.395, 8)),
        ("mobilenetv2", (1.490, 8), (0.838, 8)),
        ("resnet18", (2.861, 9), (1.609, 9)),
        ("resnet34", (5.774, 9), (3.248, 9)),
        ("resnet50", (6.467, 9), (3.638, 9)),
    ];
    let printed = |x: f64, (m, e): (f64, i32)| {
        (x / 10f64.powi(e) * 1000.0).round() == (m * 1000.0_f64).round()
    };
    for (name, s88, s66) in table {
        let model = format!("zoo:{name}");
        let v = run_json(&["--model", &model, "--schedule", "static", "--bits", "8"]);
        assert!(printed(num(&v, "gbitops"), s88), "{name} 8/8: {v}");
        let v = run_json(&[
            "--model",
            &model,
            "--schedule",
            "static",
            "--bits",
            "6",
            "--grad-bits",
            "6",
        ]);
        assert!(printed(num(&v, "gbitops"), s66), "{name} 6/6: {v}");
        assert_eq!(num(&v, "reduction"), 0.0);
    }
}

#[test]
fn table_output_shows_the_reduction() {
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet74",
        "--schedule",
        "cpt",
        "--bits",
        "4:8",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("reduction   30.11 %"), "{text}");
    assert!(text.contains("2.6684e8"), "{text}");
}

/// A W&K schedule under the CIFAR policy, costed in hardware accounting.
const WK_RUN: [&str; 10] = [
    "--model",
    "zoo:resnet74",
    "--schedule",
    "exp-triangular-v",
    "--cycles",
    "8",
    "--policy",
    "cifar",
    "--accounting",
    "hardware",
];

#[test]
fn saved_traces_cost_the_same_when_read_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let direct = run_json(&WK_RUN);
    for name in ["t.csv", "t.pb"] {
        let path = dir.path().join(name);
        let p = path.to_string_lossy().into_owned();
        let saved = run_json(&[&WK_RUN[..], &["--save-trace", &p]].concat());
        assert!(path.exists(), "{name} not written");
        let back = run_json(&[
            "--model",
            "zoo:resnet74",
            "--trace",
            &p,
            "--accounting",
            "hardware",
        ]);
        for key in ["gbitops", "static_gbitops", "reduction", "bn_gops"] {
            assert_eq!(saved[key], direct[key], "{name} {key}");
            assert_eq!(back[key], saved[key], "{name} {key}");
        }
        assert_eq!(back["iterations"], 64_000);
        assert_eq!(back["batch"], 128);
        assert_eq!(back["bits"], serde_json::json!([3, 8]));
        assert_eq!(back["trace_rows"], saved["trace_rows"]);
    }
}

/// ResNet-74 at a static 8 bits.
const STATIC8: [&str; 6] = [
    "--model",
    "zoo:resnet74",
    "--schedule",
    "static",
    "--bits",
    "8",
];

#[test]
fn hardware_accounting_charges_the_fp32_classifier() {
    let static8 = STATIC8;
    let hardware = [&static8[..], &["--accounting", "hardware"]].concat();
    let paper = run_json(&static8);
    let all = run_json(&hardware);
    let cifar = run_json(&[&hardware[..], &["--policy", "cifar"]].concat());
    // Hardware leaves BN out; fp32 FC costs more than an 8-bit one.
    assert!(num(&all, "gbitops") < num(&paper, "gbitops"));
    assert!(num(&cifar, "gbitops") > num(&all, "gbitops"));
    assert!(num(&all, "bn_gops") > 0.0);
}

/// `run` takes the same `--quantize-*` flags as `train`, over its `--policy` preset; `family` is
/// `train`'s default scope (spec §1.4 by input size).
#[test]
fn scope_flags_refine_the_policy_preset() {
    let hw = [&STATIC8[..], &["--accounting", "hardware"]].concat();
    let with = |extra: &[&str]| run_json(&[&hw[..], extra].concat());
    let cifar = with(&["--policy", "cifar"]);
    let no_fc = with(&["--quantize-last", "false"]);
    let family = with(&["--policy", "family"]);
    for key in ["gbitops", "static_gbitops"] {
        assert_eq!(no_fc[key], cifar[key], "{key}");
        assert_eq!(family[key], cifar[key], "{key}");
    }
    let fc_back = with(&["--policy", "cifar", "--quantize-last", "true"]);
    assert_eq!(fc_back["gbitops"], with(&[])["gbitops"]);
    let imagenet_r18 = |extra: &[&str]| {
        let base = [
            "--model",
            "zoo:resnet18",
            "--iters",
            "100",
            "--accounting",
            "hardware",
        ];
        run_json(&[&base[..], extra].concat())
    };
    assert_eq!(
        imagenet_r18(&["--policy", "family"])["gbitops"],
        imagenet_r18(&["--policy", "imagenet"])["gbitops"]
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let trace = dir.path().join("t.csv");
    let t = trace.to_string_lossy().into_owned();
    run_json(&[&hw[..], &["--save-trace", &t]].concat());
    rejects(
        &[
            "--model",
            "zoo:resnet74",
            "--trace",
            &t,
            "--quantize-first",
            "false",
        ],
        "--quantize-first",
    );
}

#[test]
fn schedule_files_report_their_own_bits() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let file = dir.path().join("s.csv");
    std::fs::write(&file, "iteration,fw_bits,bw_bits\n0,4,6\n50,6,6\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = format!("file:{}", file.display());
    let base = ["--model", "zoo:resnet20", "--iters", "100"];
    let with = |extra: &[&str]| run_json(&[&base[..], extra].concat());
    let v = with(&["--schedule", &spec]);
    assert_eq!(v["bits"], serde_json::json!([4, 6]), "{v}");
    assert_eq!(v["grad_bits"], 6, "{v}");
    let static6 = with(&["--schedule", "static", "--bits", "6", "--grad-bits", "6"]);
    assert_eq!(v["static_gbitops"], static6["gbitops"], "{v}");
    // Explicit flags still set the baseline.
    let v = with(&["--schedule", &spec, "--bits", "3:8", "--grad-bits", "8"]);
    assert_eq!(v["bits"], serde_json::json!([3, 8]), "{v}");
    let static8 = with(&["--schedule", "static", "--bits", "8", "--grad-bits", "8"]);
    assert_eq!(v["static_gbitops"], static8["gbitops"], "{v}");
}

/// Runs `cptsim run` expecting exit code 2 (usage) and a message containing `want`.
fn rejects(args: &[&str], want: &str) {
    rejects_with(2, args, want);
}

/// Runs `cptsim run` expecting exit code 3 (bad input data) and a message containing `want`.
fn rejects_data(args: &[&str], want: &str) {
    rejects_with(3, args, want);
}

fn rejects_with(code: i32, args: &[&str], want: &str) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(code), "{all:?}: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains(want), "{all:?}: stderr lacks '{want}': {err}");
    assert!(!err.contains("panicked"), "{err}");
    if !err.contains("try '--help'") {
        // cptsim's own errors (clap's usage errors have their own multi-line layout).
        assert_one_clear_line(&err);
    }
}

#[test]
fn bad_inputs_exit_2_naming_the_flag() {
    let m = ["--model", "zoo:resnet74"];
    let with =
        |extra: &[&'static str]| -> Vec<&'static str> { m.iter().chain(extra).copied().collect() };
    rejects(&with(&["--bits", "8:3"]), "--bits");
    rejects(&with(&["--bits", "0:8"]), "--bits");
    rejects(&with(&["--grad-bits", "40"]), "--grad-bits");
    rejects(&with(&["--cycles", "100000"]), "--cycles");
    rejects(&with(&["--iters", "0"]), "--iters");
    rejects(&with(&["--batch", "0"]), "--batch");
    rejects(&with(&["--schedule", "cosinus"]), "demon-triangular-h");
    rejects(&with(&["--schedule", "pfq:100,50"]), "--schedule");
    rejects(
        &with(&["--schedule", "file:/no/such/schedule.csv"]),
        "/no/such/schedule.csv",
    );
    rejects(
        &with(&["--trace", "/no/such/trace.pb"]),
        "/no/such/trace.pb",
    );
    rejects(&with(&["--accounting", "thop"]), "--accounting");
    rejects(&["--model", "zoo:no-such-model"], "no-such-model");
}

#[test]
fn bad_trace_files_are_rejected() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    rejects(
        &["--model", "zoo:resnet74", "--save-trace", &path("t.txt")],
        ".csv or .pb",
    );
    // A trace of another model.
    let r20 = path("r20.pb");
    let out = run(&["run", "--model", "zoo:resnet20", "--save-trace", &r20]);
    assert!(out.status.success(), "{}", stderr(&out));
    rejects_data(
        &["--model", "zoo:resnet74", "--trace", &r20],
        "does not match",
    );
    // Truncated binary and CSV traces.
    let bytes = std::fs::read(&r20).unwrap_or_default();
    let cut = path("cut.pb");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
    rejects_data(&["--model", "zoo:resnet20", "--trace", &cut], "truncated");
    let csv = path("bad.csv");
    std::fs::write(
        &csv,
        "iter_start,iter_end,layer,layer_name,b_w,b_a,b_g,samples\n0,10,0,nope,4,4,8,128\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    rejects_data(&["--model", "zoo:resnet20", "--trace", &csv], "line 2");
    // A trace carries its batch; a --batch beside it would be silently ignored.
    rejects(
        &["--model", "zoo:resnet20", "--trace", &r20, "--batch", "64"],
        "cannot be used with",
    );
    // A CSV trace cut at a line boundary parses line by line; the layers' sample counts differ.
    let full = path("r20.csv");
    let out = run(&["run", "--model", "zoo:resnet20", "--save-trace", &full]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&full).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&csv, lines[..lines.len() - 5].join("\n")).unwrap_or_else(|e| panic!("{e}"));
    rejects_data(
        &["--model", "zoo:resnet20", "--trace", &csv],
        "truncated file",
    );
}

#[test]
fn the_headline_costs_on_zc706_bit_fusion_and_stripes_unless_told_not_to() {
    let both = ["--model", "zoo:resnet20", "--schedule", "cosine"];
    let default = run_json(&both);
    let explicit = run_json(&[&both[..], &["--accel", "zc706,bitfusion,stripes"]].concat());
    assert_eq!(default, explicit);
    let names: Vec<&str> = default["accelerators"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["zc706", "bitfusion", "stripes"]);
    let none = run_json(&[&both[..], &["--accel", "none"]].concat());
    assert!(none.get("accelerators").is_none(), "{none}");
    assert_eq!(none["gbitops"], default["gbitops"]);
    // the table: BitOPs, then one row per accelerator in a unit that fits (hours here)
    let out = run(&["run", "--model", "zoo:resnet74", "--schedule", "cosine"]);
    let text = stdout(&out);
    assert!(text.contains("GBitOPs     1.6898e8"), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("accelerator"))
        .unwrap_or_else(|| panic!("no accelerator table: {text}"));
    assert!(
        header.contains("time (h)") && header.contains("static (h)"),
        "{header}"
    );
    for name in ["zc706 ", "bitfusion ", "stripes "] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{name}: {text}");
    }
    let none = stdout(&run(&[&["run"][..], &both, &["--accel", "none"]].concat()));
    assert!(!none.contains("accelerator"), "{none}");
    // --accel none is alone, and compare needs a real accelerator
    rejects(
        &[&both[..], &["--accel", "none,zc706"]].concat(),
        "--accel none",
    );
    let out = run(&[&["compare"][..], &both, &["--accel", "none"]].concat());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn short_runs_print_times_in_a_unit_that_shows_them() {
    let out = run(&[
        "run",
        "--model",
        "zoo:lenet5",
        "--iters",
        "300",
        "--batch",
        "16",
    ]);
    let text = stdout(&out);
    assert!(!text.contains(" 0.000 "), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("accelerator"))
        .unwrap_or_else(|| panic!("no accelerator table: {text}"));
    assert!(header.contains("time (ms)"), "{header}");
    // JSON keeps seconds whatever the table shows
    let v = run_json(&[
        "--model",
        "zoo:lenet5",
        "--iters",
        "300",
        "--batch",
        "16",
        "--accel",
        "zc706",
    ]);
    let s = v["accelerators"][0]["latency_s"].as_f64().unwrap_or(0.0);
    let ms: f64 = text
        .lines()
        .find(|l| l.starts_with("zc706"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(f64::NAN);
    assert!((ms - s * 1e3).abs() < 1e-3, "{ms} ms against {s} s");
}
