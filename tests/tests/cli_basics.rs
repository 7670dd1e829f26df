//! The binary's basic contract: help works and points into the book, an unknown subcommand fails
//! with exit code 2, the listings print JSON on request.

use cptsim_e2e::{run, stderr, stdout};

#[test]
fn help_lists_usage() {
    let out = run(&["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Usage: cptsim"));
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = run(&["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-command"));
}

/// What `--help` and the built-in configs may not send a reader to: files outside the repository
/// (the specs the code was written from) or tracker numbers.
const OUTSIDE: [&str; 6] = [
    "spec §",
    "methods.md",
    "accelerators.md",
    "issue",
    "§",
    "the README",
];

/// Every `docs/...` path `text` names exists in the repository.
fn docs_paths_exist(what: &str, text: &str) {
    let root = cptsim_e2e::workspace_root();
    for word in text.split(|c: char| c.is_whitespace() || "()[],;`'\"".contains(c)) {
        let path = word.trim_end_matches(['.', ':']);
        if path.starts_with("docs/") {
            assert!(root.join(path).is_file(), "{what}: {path} does not exist");
        }
    }
}

#[test]
fn help_and_built_in_configs_point_into_the_docs() {
    let commands: [&[&str]; 19] = [
        &["run"],
        &["compare"],
        &["infer"],
        &["layer"],
        &["accel", "list"],
        &["accel", "show"],
        &["zoo", "list"],
        &["zoo", "export"],
        &["inspect"],
        &["forward"],
        &["plot"],
        &["plot", "schedule"],
        &["plot", "trace"],
        &["plot", "pareto"],
        &["plot", "breakdown"],
        &["plot", "curves"],
        &["plot", "train-index"],
        &["plot", "run-index"],
        &["plot", "sweep-index"],
    ];
    for cmd in commands {
        let out = run(&[cmd, &["--help"]].concat());
        let text = stdout(&out);
        assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
        for bad in OUTSIDE {
            assert!(!text.contains(bad), "{cmd:?} --help says {bad:?}:\n{text}");
        }
        docs_paths_exist(&format!("{cmd:?} --help"), &text);
    }
    let list = run(&["accel", "list", "--format", "json"]);
    let names: Vec<serde_json::Value> =
        serde_json::from_slice(&list.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert!(names.len() >= 7);
    for entry in names {
        let name = entry["name"].as_str().unwrap_or_default().to_string();
        let text = stdout(&run(&["accel", "show", &name]));
        assert!(text.contains("name = "), "{name}: {text}");
        for bad in OUTSIDE {
            assert!(!text.contains(bad), "accel show {name} says {bad:?}");
        }
        docs_paths_exist(&format!("accel show {name}"), &text);
    }
}

#[test]
fn zoo_list_zoo_export_and_accel_list_print_json() {
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    let models = json(&["zoo", "list", "--format", "json"]);
    let models = models.as_array().cloned().unwrap_or_default();
    // one entry per line of the table (under its header)
    let table = stdout(&run(&["zoo", "list"]));
    assert_eq!(models.len(), table.lines().count() - 1, "{table}");
    let lenet = models
        .iter()
        .find(|m| m["name"] == "lenet5")
        .unwrap_or_else(|| panic!("no lenet5: {models:?}"));
    assert_eq!(lenet["input_shape"], serde_json::json!([1, 28, 28]));
    assert_eq!(lenet["classes"], 10);
    assert!(models.iter().any(|m| m["seq_len"].is_u64()), "{models:?}");
    let accels = json(&["accel", "list", "--format", "json"]);
    let bitfusion = accels
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == "bitfusion"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(bitfusion["alias_of"], "bitfusion-eyeriss-iso");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let onnx = dir.path().join("m.onnx");
    let onnx_arg = onnx.to_string_lossy().into_owned();
    let wrote = json(&[
        "zoo", "export", "lenet5", "-o", &onnx_arg, "--format", "json",
    ]);
    assert_eq!(wrote["model"], "zoo:lenet5");
    let bytes = std::fs::metadata(&onnx).map(|m| m.len()).unwrap_or(0);
    assert_eq!(wrote["bytes"], bytes);
    let out = run(&["zoo", "list", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--format csv"), "{}", stderr(&out));
}
