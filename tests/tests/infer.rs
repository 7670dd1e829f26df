//! `cptsim infer`: inference costing of models at per-layer bits, the Bit Fusion paper's eight
//! benchmarks against Eyeriss, LDP bits files, reports and bad input.

use cptsim_e2e::{assert_one_clear_line, run, stderr, stdout};

const BENCHMARKS: &str = "zoo:bf-alexnet,zoo:bf-svhn,zoo:bf-cifar10,zoo:bf-lenet5,zoo:bf-vgg7,zoo:bf-resnet18,zoo:bf-rnn,zoo:bf-lstm";

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["infer", "--format", "json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

#[test]
fn the_eight_bit_fusion_benchmarks_report_a_geomean_over_eyeriss() {
    let args = [
        "infer",
        "--model",
        BENCHMARKS,
        "--batch",
        "16",
        "--accel",
        "eyeriss,bitfusion",
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("geometric mean over 8 model(s), against eyeriss"),
        "{text}"
    );
    let v = json(&args[1..]);
    assert_eq!(v["models"].as_array().unwrap().len(), 8);
    let bf = &v["geomean"][1];
    // an alias is reported under the name typed
    assert_eq!(bf["accelerator"], "bitfusion");
    // Bit Fusion is faster and more energy-efficient than 16-bit Eyeriss on every benchmark
    for m in v["models"].as_array().unwrap() {
        let l = &m["accelerators"][1];
        assert!(l["speedup_over_eyeriss"].as_f64().unwrap() > 1.0, "{m}");
        assert!(
            l["energy_reduction_over_eyeriss"].as_f64().unwrap() > 1.0,
            "{m}"
        );
    }
    assert!(bf["speedup_over_eyeriss"].as_f64().unwrap() > 1.0);
    assert_eq!(v["geomean"][0]["speedup_over_eyeriss"], 1.0);
}

#[test]
fn an_ldp_bits_file_sets_the_layers_it_lists() {
    let dir = tempfile::tempdir().unwrap();
    let inspect = run(&["inspect", "zoo:resnet20", "--format", "json"]);
    let m: serde_json::Value = serde_json::from_str(&stdout(&inspect)).unwrap();
    let names: Vec<String> = m["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    // LDP's summary.json lists every conv (the classifier stays out): all at 2 bits
    let listed: Vec<_> = names[..names.len() - 1]
        .iter()
        .map(|n| serde_json::json!({"layer": n, "bits": 2}))
        .collect();
    let summary = dir.path().join("summary.json");
    std::fs::write(
        &summary,
        serde_json::json!({"ldp": {"final_bits": listed}}).to_string(),
    )
    .unwrap();
    let s = summary.to_string_lossy().to_string();
    let at = |extra: &[&str]| {
        let mut a = vec!["--model", "zoo:resnet20", "--accel", "bitfusion"];
        a.extend_from_slice(extra);
        json(&a)["models"][0]["accelerators"][0]["latency_s_per_image"]
            .as_f64()
            .unwrap()
    };
    assert!(at(&["--bits-file", &s]) < at(&["--bits", "8"]));
    // a layer the model does not have is named
    std::fs::write(
        &summary,
        r#"{"ldp": {"final_bits": [{"layer": "no.such.conv", "bits": 4}]}}"#,
    )
    .unwrap();
    let with_file = || {
        run(&[
            "infer",
            "--model",
            "zoo:resnet20",
            "--accel",
            "bitfusion",
            "--bits-file",
            &s,
        ])
    };
    let out = with_file();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_clear_line(&err);
    assert!(
        err.contains("no.such.conv") && err.contains("--bits-file"),
        "{err}"
    );
    // not an LDP summary
    std::fs::write(&summary, r#"{"policy": "static"}"#).unwrap();
    let out = with_file();
    assert!(stderr(&out).contains("ldp.final_bits"), "{}", stderr(&out));
}

#[test]
fn report_writes_one_layer_csv_per_model_and_accelerator() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("rep");
    let out = run(&[
        "infer",
        "--model",
        "zoo:bf-lenet5",
        "--accel",
        "eyeriss,zc706",
        "--report",
        &rep.to_string_lossy(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for acc in ["eyeriss", "zc706"] {
        let csv = std::fs::read_to_string(rep.join(format!("bf-lenet5-{acc}-infer.csv"))).unwrap();
        let mut lines = csv.lines();
        assert!(lines.next().unwrap().ends_with("mem_cycles,bound"));
        assert_eq!(lines.count(), 4, "{csv}");
    }
}

#[test]
fn a_depthwise_layer_on_a_config_without_a_depthwise_mapping_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout(&run(&["accel", "show", "stripes"]));
    let path = dir.path().join("no-dw.toml");
    std::fs::write(&path, text.replacen("depthwise = \"dense\"", "", 1)).unwrap();
    let out = run(&[
        "infer",
        "--model",
        "zoo:mobilenetv2",
        "--accel",
        &path.to_string_lossy(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_clear_line(&err);
    assert!(
        err.contains("layers.0.conv2") && err.contains("`depthwise`"),
        "{err}"
    );
}

#[test]
fn bad_flags_are_named() {
    for (args, flag) in [
        (vec!["--batch", "0"], "--batch"),
        (vec!["--bits", "0"], "--bits"),
        (vec!["--bits", "33"], "--bits"),
    ] {
        let mut all = vec!["infer", "--model", "zoo:bf-rnn", "--accel", "eyeriss"];
        all.extend_from_slice(&args);
        let out = run(&all);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(flag), "{err}");
    }
}

#[test]
fn the_first_eyeriss_configuration_is_the_baseline() {
    // the authors'-data option as baseline; the chip's 12×14 array is slower than its 16×16
    let args = [
        "infer",
        "--model",
        "zoo:bf-svhn",
        "--batch",
        "16",
        "--accel",
        "eyeriss-256pe,eyeriss,bitfusion",
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("against eyeriss-256pe:"),
        "{}",
        stdout(&out)
    );
    let v = json(&args[1..]);
    let l = &v["models"][0]["accelerators"];
    assert_eq!(l[0]["speedup_over_eyeriss"], 1.0);
    assert!(l[1]["speedup_over_eyeriss"].as_f64().unwrap() < 1.0, "{v}");
    assert!(l[2]["speedup_over_eyeriss"].as_f64().unwrap() > 1.0, "{v}");
}

#[test]
fn an_eyeriss_config_without_its_row_stationary_section_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout(&run(&["accel", "show", "eyeriss"]));
    let path = dir.path().join("no-rs.toml");
    std::fs::write(&path, text.replacen("filter_spad_words = 224", "", 1)).unwrap();
    let out = run(&[
        "infer",
        "--model",
        "zoo:bf-rnn",
        "--accel",
        &path.to_string_lossy(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_one_clear_line(&err);
    assert!(err.contains("filter_spad_words"), "{err}");
}

#[test]
fn paper_sweep_bits_run_alexnet_and_resnet18_at_8_bits_and_the_rest_as_stated() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    std::fs::write(&none, r#"{"ldp": {"final_bits": []}}"#).unwrap();
    let latency =
        |v: &serde_json::Value| v["models"][0]["accelerators"][0]["latency_s_per_image"].clone();
    let at = |model: &str, bits: &[&str]| {
        let mut a = vec!["--model", model, "--accel", "bitfusion"];
        a.extend_from_slice(bits);
        latency(&json(&a))
    };
    let none = none.to_string_lossy().into_owned();
    // AlexNet: every layer at 8 bits (what an empty bits file with the default --bits 8 gives)
    assert_eq!(
        at("zoo:bf-alexnet", &["--bits", "paper-sweep"]),
        at("zoo:bf-alexnet", &["--bits-file", &none])
    );
    assert_ne!(
        at("zoo:bf-alexnet", &["--bits", "paper-sweep"]),
        at("zoo:bf-alexnet", &[])
    );
    // SVHN: the stated bits
    assert_eq!(
        at("zoo:bf-svhn", &["--bits", "paper-sweep"]),
        at("zoo:bf-svhn", &[])
    );
    for (args, want) in [
        (
            vec!["--model", "zoo:resnet20", "--bits", "paper-sweep"],
            "not a Bit Fusion benchmark",
        ),
        (
            vec![
                "--model",
                "zoo:bf-svhn",
                "--bits",
                "paper-sweep",
                "--bits-file",
                &none,
            ],
            "drop --bits-file",
        ),
        (
            vec!["--model", "zoo:bf-svhn", "--bits", "sweep"],
            "paper-sweep",
        ),
    ] {
        let mut all = vec!["infer", "--accel", "bitfusion"];
        all.extend_from_slice(&args);
        let out = run(&all);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--bits") && err.contains(want), "{err}");
    }
}
