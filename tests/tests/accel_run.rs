//! `cptsim run --accel` and `cptsim compare`: costing a training run on the accelerator models,
//! its reports, and the errors of runs that cannot be costed.

use cptsim_e2e::{assert_one_clear_line, run, stderr, stdout};

fn run_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["run", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

#[test]
fn run_with_accel_reports_each_accelerator_against_its_static_baseline() {
    let v = run_json(&[
        "--model",
        "zoo:resnet74",
        "--schedule",
        "cosine",
        "--bits",
        "3:8",
        "--grad-bits",
        "8",
        "--accel",
        "zc706,bitfusion,stripes",
    ]);
    let accels = v["accelerators"].as_array().unwrap();
    assert_eq!(accels.len(), 3);
    for a in accels {
        for key in [
            "name",
            "latency_s",
            "energy_j",
            "dram_bytes",
            "static_latency_s",
            "static_energy_j",
        ] {
            assert!(a.get(key).is_some(), "missing {key}: {a}");
        }
        for key in ["compute_j", "sram_j", "dram_j"] {
            assert!(a["breakdown"][key].as_f64().unwrap() > 0.0, "{key}: {a}");
        }
        let (t, s) = (
            a["latency_s"].as_f64().unwrap(),
            a["static_latency_s"].as_f64().unwrap(),
        );
        assert!(
            t < s,
            "cyclic precision is faster than static 8/8 on {}",
            a["name"]
        );
    }
    // an alias is reported under the name typed
    assert_eq!(accels[1]["name"], "bitfusion");
}

#[test]
fn zc706_reproduces_the_published_static_resnet74_hours() {
    for (bits, hours) in [("8", 44.6), ("6", 33.2)] {
        let v = run_json(&[
            "--model",
            "zoo:resnet74",
            "--schedule",
            "static",
            "--bits",
            bits,
            "--grad-bits",
            bits,
            "--accel",
            "zc706",
        ]);
        let h = v["accelerators"][0]["latency_s"].as_f64().unwrap() / 3600.0;
        assert!(
            (h / hours - 1.0).abs() < 0.02,
            "{bits}/{bits}: {h} h vs {hours} h"
        );
    }
}

#[test]
fn run_report_writes_layer_and_epoch_csvs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("rep");
    let ds = d.to_string_lossy().to_string();
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--iters",
        "800",
        "--cycles",
        "2",
        "--accel",
        "stripes,dadiannao",
        "--report",
        &ds,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("dadiannao"), "{}", stdout(&out));
    let epochs = std::fs::read_to_string(d.join("stripes-epochs.csv")).unwrap();
    assert_eq!(epochs.lines().count(), 1 + 3, "{epochs}"); // 800 iterations of 391
    let layers = std::fs::read_to_string(d.join("dadiannao-layers.csv")).unwrap();
    // 22 layers × 3 GEMMs, minus the first layer's error backprop, plus the header
    assert_eq!(layers.lines().count(), 1 + 22 * 3 - 1, "{layers}");
}

#[test]
fn run_rejects_a_bad_accel_before_working() {
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--accel",
        "zc706,nope.toml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--accel nope.toml"), "{e}");
    assert_one_clear_line(&e);
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--accel",
        "zc706,,stripes",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("empty accelerator name"),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--accel",
        "none",
        "--report",
        "/tmp/x",
    ]);
    assert_eq!(out.status.code(), Some(2), "--report needs an accelerator");
    assert!(stderr(&out).contains("--report"), "{}", stderr(&out));
}

#[test]
fn configs_sharing_a_name_keep_separate_rows_and_reports() {
    // An edited copy of a built-in that kept its `name` used to overwrite the built-in's report
    // files and print an indistinguishable row.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.toml");
    let text = stdout(&run(&["accel", "show", "bitfusion"]));
    std::fs::write(
        &copy,
        text.replacen("clock_mhz = 500", "clock_mhz = 250", 1),
    )
    .unwrap();
    let copy = copy.to_string_lossy().to_string();
    let report = dir.path().join("rep");
    let accels = format!("bitfusion-eyeriss-iso,{copy}");
    let v = run_json(&[
        "--model",
        "zoo:resnet20",
        "--iters",
        "20",
        "--cycles",
        "2",
        "--accel",
        &accels,
        "--report",
        &report.to_string_lossy(),
    ]);
    let list = v["accelerators"].as_array().cloned().unwrap_or_default();
    assert_eq!(list.len(), 2, "{v}");
    assert_eq!(list[0]["name"], "bitfusion-eyeriss-iso");
    assert_eq!(
        list[1]["name"],
        format!("bitfusion-eyeriss-iso ({copy})").as_str()
    );
    let slow = list[1]["latency_s"].as_f64().unwrap();
    assert!(slow > list[0]["latency_s"].as_f64().unwrap(), "{v}");
    // Two CSVs per accelerator, and the run's index.html.
    assert_eq!(std::fs::read_dir(&report).unwrap().count(), 4 + 1);
}

#[test]
fn layers_a_trace_omits_run_fp32_on_accelerators_too() {
    // BitOPs counts a layer absent from a trace as fp32; the accelerators used to skip it.
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.csv");
    let full_s = full.to_string_lossy().to_string();
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--iters",
        "20",
        "--cycles",
        "2",
        "--save-trace",
        &full_s,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&full).unwrap();
    let (omitted, fp32): (Vec<&str>, Vec<String>) = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let as_fp32 = if f[2] == "5" {
                format!("{},{},{},{},0,0,0,{}", f[0], f[1], f[2], f[3], f[7])
            } else {
                l.to_string()
            };
            (if f[2] == "5" { "" } else { l }, as_fp32)
        })
        .unzip();
    let write = |name: &str, lines: Vec<String>| {
        let p = dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p.to_string_lossy().to_string()
    };
    let omitted = write(
        "omitted.csv",
        omitted
            .into_iter()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
    );
    let fp32 = write("fp32.csv", fp32);
    let cost = |trace: &str| {
        let v = run_json(&[
            "--model",
            "zoo:resnet20",
            "--trace",
            trace,
            "--accel",
            "zc706,bitfusion",
        ]);
        (v["gbitops"].clone(), v["accelerators"].clone())
    };
    let ((g1, a1), (g2, a2)) = (cost(&omitted), cost(&fp32));
    assert_eq!(g1, g2);
    for (x, y) in a1.as_array().unwrap().iter().zip(a2.as_array().unwrap()) {
        for key in [
            "latency_s",
            "energy_j",
            "dram_bytes",
            "static_latency_s",
            "static_energy_j",
        ] {
            let (p, q) = (x[key].as_f64().unwrap(), y[key].as_f64().unwrap());
            assert!((p - q).abs() <= 1e-9 * q.abs(), "{key}: {p} vs {q}");
        }
    }
}

#[test]
fn compare_prints_one_row_per_configuration() {
    let text = stdout(&run(&["accel", "show", "bitfusion"]));
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.toml");
    let b = dir.path().join("b.toml");
    std::fs::write(&a, &text).unwrap();
    let wide = text
        .replacen("bits_per_cycle = 192", "bits_per_cycle = 768", 1)
        .replacen(
            "name = \"bitfusion-eyeriss-iso\"",
            "name = \"wide-dram\"",
            1,
        );
    std::fs::write(&b, wide).unwrap();
    let (a, b) = (
        a.to_string_lossy().to_string(),
        b.to_string_lossy().to_string(),
    );
    let args = [
        "compare",
        "--model",
        "zoo:resnet20",
        "--iters",
        "400",
        "--cycles",
        "2",
        "--accel",
        &a,
        &b,
        "stripes",
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    let rows: Vec<&str> = s.lines().filter(|l| l.contains('%')).collect();
    assert_eq!(rows.len(), 3, "{s}");
    assert!(
        rows[0].starts_with("bitfusion-eyeriss-iso")
            && rows[1].starts_with("wide-dram")
            && rows[2].starts_with("stripes")
    );
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&run(&json_args))).unwrap();
    let accels = v["accelerators"].as_array().unwrap();
    // 4× the DRAM interface never makes the same array slower
    assert!(accels[1]["latency_s"].as_f64().unwrap() <= accels[0]["latency_s"].as_f64().unwrap());
    let out = run(&["compare", "--model", "zoo:resnet20"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--accel"), "{}", stderr(&out));
}

#[test]
fn a_trace_of_10_to_the_15_iterations_costs_and_its_report_is_refused_clearly() {
    // The per-epoch vector must not be sized from the iteration count (that aborted, exit 134).
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.csv");
    let short_s = short.to_string_lossy().to_string();
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--iters",
        "4",
        "--cycles",
        "1",
        "--save-trace",
        &short_s,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&short).unwrap();
    let mut lines = text.lines();
    let mut huge = vec![lines.next().unwrap().to_string()];
    let mut seen = std::collections::HashSet::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if seen.insert(f[2].to_string()) {
            huge.push(format!("0,1000000000000000,{},{},8,8,8,128", f[2], f[3]));
        }
    }
    let path = dir.path().join("huge.csv");
    std::fs::write(&path, huge.join("\n") + "\n").unwrap();
    let p = path.to_string_lossy().to_string();
    let v = run_json(&["--model", "zoo:resnet20", "--trace", &p, "--accel", "zc706"]);
    let s = v["accelerators"][0]["latency_s"].as_f64().unwrap();
    assert!(s.is_finite() && s > 1e14, "{s}");
    let report = dir.path().join("rep");
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--trace",
        &p,
        "--accel",
        "zc706",
        "--report",
        &report.to_string_lossy(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_clear_line(&err);
    assert!(
        err.contains("--epoch-iters") && err.contains("epochs"),
        "{err}"
    );
}

#[test]
fn mobilenetv2_depthwise_layers_no_longer_dominate_zc706_time() {
    // A depthwise group mapped to one array column took 87 % of the time (6 % of the MACs).
    // With the channel-lanes mapping the model predicts ~2× a ResNet-74 MAC's cost
    // (memory-bound, accel/README.md) and about 13 % of the time.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("rep");
    let out = run(&[
        "run",
        "--model",
        "zoo:mobilenetv2",
        "--iters",
        "10",
        "--cycles",
        "1",
        "--bits",
        "8",
        "--accel",
        "zc706",
        "--report",
        &report.to_string_lossy(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let inspect = run(&["inspect", "zoo:mobilenetv2", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    let depthwise: std::collections::HashSet<String> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["groups"].as_u64().unwrap() > 1)
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(depthwise.len(), 17);
    let csv = std::fs::read_to_string(report.join("zc706-layers.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (name, lat, bound) = (col("layer"), col("latency_s"), col("bound"));
    let (mut dw, mut all) = (0.0, 0.0);
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let s: f64 = f[lat].parse().unwrap();
        all += s;
        if depthwise.contains(f[name]) {
            dw += s;
            assert!(["compute", "memory"].contains(&f[bound]), "{l}");
        }
    }
    let share = dw / all;
    assert!(share < 0.25, "depthwise share of ZC706 time {share:.3}");
}

#[test]
fn run_names_the_depthwise_layer_and_key_on_a_config_without_a_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout(&run(&["accel", "show", "dadiannao"]));
    let path = dir.path().join("no-dw.toml");
    std::fs::write(&path, text.replacen("depthwise = \"dense\"", "", 1)).unwrap();
    let out = run(&[
        "run",
        "--model",
        "zoo:mobilenetv2",
        "--iters",
        "10",
        "--cycles",
        "1",
        "--accel",
        &path.to_string_lossy(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_clear_line(&err);
    assert!(
        err.contains("layers.0.conv2")
            && err.contains("`depthwise`")
            && !err.contains("--epoch-iters"),
        "{err}"
    );
}
