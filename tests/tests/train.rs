//! `cptsim train`: LeNet-5 on real MNIST reaches ≥ 97 %, a resumed run equals an uninterrupted one,
//! the written trace is costed by `cptsim run --trace` to the same GBitOPs, PFQ and PRT runs report
//! their decisions, and bad input exits 2 (usage) or 3 (bad data) with a clear line.

use std::path::Path;

use cptsim_e2e::{run, shared_data, stderr, stdout};
use serde_json::Value;

fn train(args: &[&str]) -> std::process::Output {
    let mut all = vec!["train"];
    all.extend_from_slice(args);
    run(&all)
}

fn train_ok(args: &[&str]) -> String {
    let out = train(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

fn json_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", path.display()))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn lenet5_reaches_97_percent_on_mnist_static_8_8() {
    let Some(dir) = shared_data("mnist") else {
        return;
    };
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = format!("mnist:{}", dir.display());
    let o = out.path().to_string_lossy().into_owned();
    let args = [
        "--model",
        "zoo:lenet5",
        "--data",
        &data,
        "--schedule",
        "static",
        "--bits",
        "8",
        "--grad-bits",
        "8",
        "--iters",
        "300",
        "--batch",
        "128",
        // LeNet-5's recipe (no BatchNorm: the default 0.1 sits at the edge of divergence, README
        // "Collapsed runs").
        "--lr",
        "0.05",
        "--out",
        &o,
    ];
    let printed = train_ok(&args);
    let s = json_file(&out.path().join("summary.json"));
    let acc = s["final_test_acc"].as_f64().unwrap_or(0.0);
    eprintln!("LeNet-5, MNIST, SBM 8/8, 300 × 128, lr 0.05: test accuracy {acc:.4}\n{printed}");
    assert!(acc >= 0.97, "final test accuracy {acc}: {s}");
    assert_eq!(s["iterations"], 300);
    assert_eq!(
        s["gbitops"], s["static_gbitops"],
        "static run costs its own baseline"
    );
    for key in ["best_test_acc", "seconds", "images_per_s"] {
        assert!(s[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {s}");
    }
}

const COSINE: [&str; 6] = [
    "--schedule",
    "cosine",
    "--cycles",
    "2",
    "--eval-every",
    "10",
];
/// Runs a 40-iteration run of LeNet-5 on synthetic data into `out`, with extra flags.
fn synthetic_run(out: &Path, extra: &[&str]) -> std::process::Output {
    let o = out.to_string_lossy().into_owned();
    let mut args = vec![
        "--model",
        "zoo:lenet5",
        "--data",
        "synthetic",
        "--bits",
        "3:8",
        "--iters",
        "40",
        "--batch",
        "32",
        "--seed",
        "3",
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    train(&args)
}

#[test]
fn resumed_run_equals_uninterrupted_and_trace_feeds_run() {
    let full = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = synthetic_run(full.path(), &COSINE);
    assert!(out.status.success(), "{}", stderr(&out));
    let split = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = synthetic_run(split.path(), &[&COSINE[..], &["--stop-at", "17"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume"), "{}", stderr(&out));
    assert!(!split.path().join("summary.json").exists());
    let dir = split.path().to_string_lossy().into_owned();
    let out = train(&["--resume", &dir]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("resumed at iteration 17/40"),
        "{}",
        stderr(&out)
    );
    for f in ["metrics.csv", "trace.csv"] {
        assert_eq!(
            read(&full.path().join(f)),
            read(&split.path().join(f)),
            "{f}"
        );
    }
    let (a, b) = (
        json_file(&full.path().join("summary.json")),
        json_file(&split.path().join("summary.json")),
    );
    for key in [
        "final_test_acc",
        "best_test_acc",
        "gbitops",
        "static_gbitops",
        "iterations",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    assert_eq!(read(&full.path().join("metrics.csv")).lines().count(), 5);
    // The trace is costed by `cptsim run` exactly as the trainer costed it.
    for name in ["trace.pb", "trace.csv"] {
        let path = full.path().join(name).to_string_lossy().into_owned();
        let out = run(&[
            "run",
            "--model",
            "zoo:lenet5",
            "--trace",
            &path,
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let r: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
        let (g, mine) = (r["gbitops"].as_f64(), a["gbitops"].as_f64());
        assert!(g.is_some() && g == mine, "{name}: run {r} vs train {a}");
        assert_eq!(r["static_gbitops"], a["static_gbitops"], "{name}");
        assert_eq!(r["iterations"], 40, "{name}");
    }
    let g = a["gbitops"].as_f64().unwrap_or(0.0);
    let s = a["static_gbitops"].as_f64().unwrap_or(0.0);
    assert!(g > 0.0 && g < s, "cyclic 3:8 costs less than static 8: {a}");
}

#[test]
fn sigterm_checkpoints_the_iteration_reached_and_the_run_resumes_there() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = dir.path().to_string_lossy().into_owned();
    let child = cptsim_e2e::cptsim()
        .args("train --model zoo:lenet5 --data synthetic --iters 1000000".split(' '))
        .args(["--batch", "16", "--eval-every", "5", "--out", &o])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Signal once the loop runs (its first checkpoint exists), between two evaluations mostly.
    let started = std::time::Instant::now();
    while !dir.path().join("checkpoint.bin").exists() {
        assert!(
            started.elapsed().as_secs() < 300,
            "no checkpoint after 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -TERM failed");
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let at = err
        .split("interrupted at iteration ")
        .nth(1)
        .and_then(|t| t.split('/').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no interruption message: {err}"));
    assert!(at >= 5, "{err}");
    assert!(!dir.path().join("summary.json").exists());
    // The checkpoint holds the iteration reached, not the last evaluation's.
    let out = train(&["--resume", &o, "--stop-at", &(at + 2).to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let resumed = format!("resumed at iteration {at}/1000000");
    assert!(stderr(&out).contains(&resumed), "{}", stderr(&out));
}

#[test]
fn a_killed_run_resumes_from_its_timed_checkpoint_to_the_uninterrupted_result() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (whole, killed) = (dir.path().join("whole"), dir.path().join("killed"));
    let (w, k) = (
        whole.to_string_lossy().into_owned(),
        killed.to_string_lossy().into_owned(),
    );
    // One evaluation, at the end: only the timed checkpoints (every 30 ms) come before it.
    let args: Vec<&str> = "--model zoo:lenet5 --data synthetic --iters 400 --batch 16 \
                           --lr 0.05 --eval-every 400"
        .split_whitespace()
        .collect();
    train_ok(&[&args[..], &["--out", &w]].concat());
    let mut child = cptsim_e2e::cptsim()
        .arg("train")
        .args(&args)
        .args(["--out", &k, "--checkpoint-minutes", "0.0005"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    while !killed.join("checkpoint.bin").exists() {
        assert!(
            started.elapsed().as_secs() < 300,
            "no checkpoint after 300 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SIGKILL: no handler runs, so only what the timed checkpoints wrote survives.
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(!status.success(), "the run ended before it was killed");
    assert!(!killed.join("summary.json").exists());
    let out = train(&["--resume", &k]);
    assert!(out.status.success(), "{}", stderr(&out));
    let at = stderr(&out)
        .split("resumed at iteration ")
        .nth(1)
        .and_then(|t| t.split('/').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no resume message: {}", stderr(&out)));
    assert!((1..400).contains(&at), "resumed at {at}");
    for file in ["trace.csv", "metrics.csv"] {
        assert_eq!(read(&killed.join(file)), read(&whole.join(file)), "{file}");
    }
    let bad = train(&["--resume", &k, "--checkpoint-minutes=-1"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("--checkpoint-minutes"),
        "{}",
        stderr(&bad)
    );
}

/// A PFQ run (stages 3/8 → 8/8, ε = 10 so every full window is a plateau) of [`synthetic_run`];
/// returns its JSON summary.
fn pfq_run(out: &Path, extra: &[&str]) -> Value {
    let base = [
        "--schedule",
        "pfq",
        "--pfq-fw",
        "3,8",
        "--pfq-bw",
        "8,8",
        "--pfq-eps",
        "10",
        "--format",
        "json",
    ];
    let out = synthetic_run(out, &[&base[..], extra].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_default()
}

#[test]
fn pfq_and_prt_report_their_decisions() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = pfq_run(dir.path(), &["--eval-every", "2"]);
    // ε = 10 makes every 5-check window a plateau: the stage rises after check 5 (iteration 10).
    assert_eq!(s["pfq_turns"], serde_json::json!([10]), "{s}");
    let trace = read(&dir.path().join("trace.csv"));
    assert!(trace.contains("\n0,10,0,conv1,3,3,8,32"), "{trace}");
    assert!(trace.contains("\n10,40,0,conv1,8,8,8,32"), "{trace}");
    // --pfq-check-every decouples the indicator from the evaluations: checks after every
    // iteration, so the turn comes after check 5 = iteration 5, with one evaluation at the end.
    let s = pfq_run(
        dir.path(),
        &["--pfq-check-every", "1", "--eval-every", "40"],
    );
    assert_eq!(s["pfq_turns"], serde_json::json!([5]), "{s}");
    let trace = read(&dir.path().join("trace.csv"));
    assert!(trace.contains("\n5,40,0,conv1,8,8,8,32"), "{trace}");
    let out = synthetic_run(
        dir.path(),
        &[
            "--prt",
            "--prt-iters-per-step",
            "4",
            "--prt-window",
            "2",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    let bits = s["prt_bits"].as_u64().unwrap_or(0);
    assert!((2..=8).contains(&bits), "{s}");
    let trace = read(&dir.path().join("trace.csv"));
    assert!(
        trace.contains("\n0,4,0,conv1,2,2,8,32"),
        "PRT starts at 2 bits: {trace}"
    );
}

#[test]
fn depthwise_convs_run_at_the_fixed_precision_given() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = dir.path().to_string_lossy().into_owned();
    train_ok(&[
        "--model",
        "zoo:mobilenetv2",
        "--data",
        "synthetic",
        "--schedule",
        "static",
        "--bits",
        "4",
        "--iters",
        "2",
        "--batch",
        "4",
        "--stop-at",
        "1",
        "--depthwise-bits",
        "8/16",
        "--out",
        &o,
    ]);
    let csv = read(&dir.path().join("trace.csv"));
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let fixed = rows.iter().filter(|r| r[4..7] == ["8", "8", "16"]).count();
    let scheduled = rows.iter().filter(|r| r[4..7] == ["4", "4", "8"]).count();
    // MobileNetV2 (CIFAR) has 17 depthwise convs; the other in-scope convs follow the schedule.
    assert_eq!(fixed, 17, "{csv}");
    assert!(scheduled > 30, "{csv}");
    fails_with(
        &[
            "--model",
            "zoo:mobilenetv2",
            "--data",
            "synthetic",
            "--depthwise-bits",
            "8-16",
        ],
        &["--depthwise-bits", "FW/BW"],
    );
}

/// A usage error: exit code 2 and the needles in the error line.
fn fails_with(args: &[&str], needles: &[&str]) {
    fails_with_code(2, args, needles);
}

fn fails_with_code(code: i32, args: &[&str], needles: &[&str]) {
    let out = train(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or("");
    for n in needles {
        assert!(line.contains(n), "{args:?}: `{n}` not in {err}");
    }
}

#[test]
fn bad_inputs_exit_2_with_a_clear_line() {
    let base = ["--model", "zoo:lenet5", "--iters", "2"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    }
    fails_with(
        &with(&base, &["--data", "imagenet:/tmp"]),
        &["unknown dataset kind `imagenet`", "mnist:DIR"],
    );
    fails_with(
        &with(&base, &["--data", "mnist:/nonexistent/mnist"]),
        &["/nonexistent/mnist", "not found"],
    );
    fails_with(
        &with(&base, &["--data", "synthetic", "--bits", "3:99"]),
        &["--bits"],
    );
    fails_with(
        &with(&base, &["--data", "synthetic", "--schedule", "wavy"]),
        &["wavy"],
    );
    fails_with(
        &with(
            &base,
            &[
                "--data",
                "synthetic",
                "--quantizer",
                "sbm",
                "--grad-bits",
                "0",
            ],
        ),
        &["--grad-bits"],
    );
    // A truncated MNIST file names the file and the byte offset; bad input data exits 3.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut images = vec![0u8, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28];
    images.extend(vec![7u8; 28 * 28]); // one image of the two announced
    for split in ["train", "t10k"] {
        std::fs::write(
            dir.path().join(format!("{split}-images-idx3-ubyte")),
            &images,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join(format!("{split}-labels-idx1-ubyte")),
            [0u8, 0, 8, 1, 0, 0, 0, 2, 1, 2],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let data = format!("mnist:{}", dir.path().display());
    fails_with_code(
        3,
        &with(&base, &["--data", &data]),
        &["train-images-idx3-ubyte", "at byte"],
    );
    fails_with(
        &["--resume", "/nonexistent/run"],
        &["--resume", "checkpoint.bin"],
    );
}

/// `train --accel` costs the trace it just recorded: latency and energy per accelerator in its
/// table, its JSON and summary.json, equal to `cptsim run --trace` of the same trace against the
/// same baseline; a bad accelerator fails before any training.
#[test]
fn accel_costs_the_recorded_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let args = [
        "--schedule",
        "cosine",
        "--cycles",
        "4",
        "--accel",
        "zc706,stripes",
        "--format",
        "json",
    ];
    let ran = synthetic_run(&out, &args);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let printed: Value = serde_json::from_str(&stdout(&ran)).unwrap();
    let summary = json_file(&out.join("summary.json"));
    assert_eq!(printed, summary);
    let accels = summary["accelerators"].as_array().unwrap();
    let names: Vec<&str> = accels.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["zc706", "stripes"]);
    for a in accels {
        for key in [
            "latency_s",
            "energy_j",
            "static_latency_s",
            "static_energy_j",
        ] {
            assert!(a[key].as_f64().unwrap() > 0.0, "{key}: {a}");
        }
        // A cyclic schedule below 8 bits beats the static 8-bit run.
        assert!(
            a["latency_s"].as_f64() < a["static_latency_s"].as_f64(),
            "{a}"
        );
    }
    let trace = out.join("trace.pb").to_string_lossy().into_owned();
    let costed = run(&[
        "run",
        "--model",
        "zoo:lenet5",
        "--trace",
        &trace,
        "--bits",
        "3:8",
        "--grad-bits",
        "8",
        "--accel",
        "zc706,stripes",
        "--format",
        "json",
    ]);
    assert!(costed.status.success(), "{}", stderr(&costed));
    let costed: Value = serde_json::from_str(&stdout(&costed)).unwrap();
    for (mine, theirs) in accels
        .iter()
        .zip(costed["accelerators"].as_array().unwrap())
    {
        for key in [
            "latency_s",
            "energy_j",
            "static_latency_s",
            "static_energy_j",
        ] {
            let (a, b) = (mine[key].as_f64().unwrap(), theirs[key].as_f64().unwrap());
            assert!((a - b).abs() <= 1e-9 * b.abs(), "{key}: {a} vs {b}");
        }
    }
    // The table says the same.
    let table = synthetic_run(&tmp.path().join("t"), &args[..6]);
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(
        stdout(&table).contains("zc706") && stdout(&table).contains("stripes"),
        "{}",
        stdout(&table)
    );
    let bad = synthetic_run(&tmp.path().join("bad"), &["--accel", "zc707"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("zc707"), "{}", stderr(&bad));
    assert!(!tmp.path().join("bad").exists());
}
