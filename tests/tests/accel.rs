//! `cptsim layer` and `cptsim accel`: the accelerator models one layer at a time, their
//! built-in configs, and bad configurations.

use cptsim_e2e::{assert_one_clear_line, run, stderr, stdout};

fn layer_json(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["layer", "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

const RESNET20_STAGE1: [&str; 18] = [
    "--k",
    "3",
    "--stride",
    "1",
    "--pad",
    "1",
    "--ic",
    "16",
    "--oc",
    "16",
    "--hw",
    "32",
    "--batch",
    "16",
    "--act-bits",
    "4",
    "--wgt-bits",
    "4",
];

#[test]
fn layer_json_has_the_documented_keys() {
    let mut args = vec!["--accel", "bitfusion"];
    args.extend_from_slice(&RESNET20_STAGE1);
    let v = layer_json(&args);
    for key in [
        "total_cycles",
        "compute_cycles",
        "stall_cycles",
        "dram_bits",
        "sram_bits",
        "energy_j",
        "tiling",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    // 16 · ceil(16/32) · 32 · 32 · 9 · ceil(16/(16·4)) = 147 456 cycles
    assert_eq!(v["compute_cycles"], 147_456);
    let total = v["total_cycles"].as_u64().unwrap();
    let parts = v["compute_cycles"].as_u64().unwrap() + v["stall_cycles"].as_u64().unwrap();
    assert_eq!(total, parts);
}

#[test]
fn layer_bit_fusion_gains_nothing_below_n_pf_but_stripes_does() {
    let at = |accel: &str, bits: &str| {
        let mut args = vec!["--accel", accel];
        args.extend_from_slice(&RESNET20_STAGE1[..14]);
        args.extend_from_slice(&["--act-bits", bits, "--wgt-bits", bits]);
        layer_json(&args)["compute_cycles"].as_u64().unwrap()
    };
    assert_eq!(at("bitfusion", "2"), at("bitfusion", "8"));
    assert_eq!(at("stripes", "2") * 4, at("stripes", "8"));
    assert_eq!(at("dadiannao", "8"), at("stripes", "8") * 2);
}

#[test]
fn layer_fc_and_first_layer_run_on_every_builtin() {
    for accel in [
        "zc706",
        "bitfusion",
        "bitfusion-stripes-iso",
        "stripes",
        "dadiannao",
    ] {
        let v = layer_json(&[
            "--accel", accel, "--fc", "--ic", "512", "--oc", "100", "--batch", "4",
        ]);
        assert!(v["energy_j"].as_f64().unwrap() > 0.0, "{accel}");
        let v = layer_json(&[
            "--accel",
            accel,
            "--first-layer",
            "--ic",
            "3",
            "--oc",
            "16",
            "--hw",
            "32",
        ]);
        assert!(v["total_cycles"].as_u64().unwrap() > 0, "{accel}");
    }
}

#[test]
fn layer_text_output_names_the_accelerator() {
    let mut args = vec!["layer", "--accel", "stripes"];
    args.extend_from_slice(&RESNET20_STAGE1);
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    assert!(
        s.contains("stripes") && s.contains("total cycles") && s.contains("tiling"),
        "{s}"
    );
}

#[test]
fn layers_beyond_the_counters_are_rejected_not_wrapped() {
    // Each of these once printed wrapped-around (e.g. zero) cycle counts with exit 0.
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--ic",
                "4000000000",
                "--oc",
                "4000000000",
                "--hw",
                "4000000",
                "--batch",
                "4000000000",
            ],
            "too large",
        ),
        (
            &[
                "--ic",
                "1",
                "--oc",
                "1",
                "--hw",
                "8",
                "--pad",
                "18446744073709551615",
            ],
            "--pad",
        ),
        (
            &[
                "--ic",
                "100000000",
                "--oc",
                "100000000",
                "--fc",
                "--batch",
                "100000000",
            ],
            "too large",
        ),
    ];
    for accel in ["bitfusion", "stripes", "zc706"] {
        for (flags, want) in cases {
            let mut args = vec!["layer", "--accel", accel];
            args.extend_from_slice(flags);
            let out = run(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
            let e = stderr(&out);
            assert!(e.contains(want), "{args:?}: {e}");
            assert_one_clear_line(&e);
        }
    }
}

#[test]
fn layer_flag_errors_name_the_flag() {
    let out = run(&["layer", "--accel", "bitfusion", "--ic", "16", "--oc", "16"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--hw"), "{}", stderr(&out));
    let out = run(&[
        "layer",
        "--accel",
        "bitfusion",
        "--ic",
        "0",
        "--oc",
        "16",
        "--hw",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--ic"), "{}", stderr(&out));
    let out = run(&[
        "layer",
        "--accel",
        "bitfusion",
        "--ic",
        "4",
        "--oc",
        "16",
        "--hw",
        "8",
        "--act-bits",
        "40",
    ]);
    assert!(stderr(&out).contains("--act-bits"), "{}", stderr(&out));
    let out = run(&[
        "layer",
        "--accel",
        "no-such-accel",
        "--ic",
        "4",
        "--oc",
        "4",
        "--hw",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("no-such-accel") && e.contains("bitfusion-stripes-iso"),
        "{e}"
    );
}

#[test]
fn accel_list_names_every_builtin() {
    let out = run(&["accel", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    for name in [
        "zc706",
        "bitfusion",
        "bitfusion-eyeriss-iso",
        "bitfusion-stripes-iso",
        "stripes",
        "dadiannao",
    ] {
        assert!(
            s.lines().any(|l| l.starts_with(name)),
            "{name} missing: {s}"
        );
    }
}

#[test]
fn accel_show_prints_a_config_that_loads_back() {
    let out = run(&["accel", "show", "bitfusion"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("core_pj_per_cycle = 235.104"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, &text).unwrap();
    let p = path.to_string_lossy().to_string();
    let mut args = vec!["--accel", p.as_str()];
    args.extend_from_slice(&RESNET20_STAGE1);
    // the configuration's own name: an alias (`bitfusion`) is reported under the alias
    let mut builtin = vec!["--accel", "bitfusion-eyeriss-iso"];
    builtin.extend_from_slice(&RESNET20_STAGE1);
    assert_eq!(layer_json(&args), layer_json(&builtin));
    let shown = run(&["accel", "show", &p]);
    assert_eq!(stdout(&shown), text);
}

/// Writes the built-in Bit Fusion config with one edit and runs a layer on it.
fn run_edited(from: &str, to: &str, extra: &[&str]) -> std::process::Output {
    let text = stdout(&run(&["accel", "show", "bitfusion"]));
    assert!(text.contains(from), "{from}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    let p = path.to_string_lossy().to_string();
    let mut args = vec![
        "layer",
        "--accel",
        p.as_str(),
        "--ic",
        "16",
        "--oc",
        "16",
        "--hw",
        "8",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn bad_configs_are_rejected_with_key_and_reason() {
    for (from, to, key) in [
        (
            "clock_mhz = 500",
            "clock_mhz = 500\nturbo_mode = true",
            "turbo_mode",
        ),
        ("input_kib = 32", "input_kib = 0", "buffers.input_kib"),
        (
            "bits_per_cycle = 192",
            "bits_per_cycle = -192",
            "dram.bits_per_cycle",
        ),
        ("clock_mhz = 500", "clock_mhz = 0", "clock_mhz"),
        (
            "dram_pj_per_bit = 15.0",
            "dram_pj_per_bit = -1.0",
            "energy.dram_pj_per_bit",
        ),
    ] {
        let out = run_edited(from, to, &[]);
        assert_eq!(out.status.code(), Some(2), "{key}");
        let e = stderr(&out);
        assert!(e.contains(key) && e.contains("bad.toml"), "{key}: {e}");
        assert_one_clear_line(&e);
    }
    let out = run_edited("clock_mhz = 500", "clock_mhz = [", &[]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("bad.toml") && e.contains("line "), "{e}");
    assert_one_clear_line(&e);
}

#[test]
fn bits_beyond_the_engine_need_the_extension() {
    let ok = run_edited(
        "multipass = true",
        "multipass = true",
        &["--act-bits", "16"],
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let out = run_edited(
        "multipass = true",
        "multipass = false",
        &["--act-bits", "16"],
    );
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("16-bit") && e.contains("multipass"), "{e}");
    assert_one_clear_line(&e);
    // The same through `run`, where the GEMM that failed is named once.
    let text = stdout(&run(&["accel", "show", "bitfusion"]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("single.toml");
    std::fs::write(
        &path,
        text.replacen("multipass = true", "multipass = false", 1),
    )
    .unwrap();
    let p = path.to_string_lossy().to_string();
    let out = run(&[
        "run",
        "--model",
        "zoo:resnet20",
        "--schedule",
        "cosine",
        "--iters",
        "10",
        "--cycles",
        "1",
        "--grad-bits",
        "16",
        "--accel",
        &p,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("GEMM") && e.contains("multipass"), "{e}");
    assert_eq!(e.matches("16-bit operands").count(), 1, "{e}");
    assert_one_clear_line(&e);
}
