//! The messages a new user meets with bad input: one cause, said once,
//! naming the file, node, key or flag, no internal structs; each with its exit code.

use cptsim_e2e::{assert_one_clear_line, run, stderr, write_npy};

/// Runs `cptsim args`, expects exit `code` and one clear line containing every fragment of
/// `want`; returns that line.
fn fails_with(args: &[&str], code: i32, want: &[&str]) -> String {
    let out = run(args);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {e}");
    assert_one_clear_line(&e);
    for w in want {
        assert!(e.contains(w), "{args:?}: no `{w}` in: {e}");
    }
    e
}

fn fixture(name: &str) -> String {
    format!("tests/fixtures/{name}")
}

#[test]
fn broken_graphs_say_what_is_broken() {
    let e = fails_with(
        &["inspect", &fixture("bad_cycle.onnx")],
        3,
        &["the graph has a cycle", "add1 (Add) → relu1 (Relu)"],
    );
    assert!(!e.contains("not produced"), "{e}");
    fails_with(
        &["inspect", &fixture("bad_duplicate_output.onnx")],
        3,
        &["value 'h' is produced by two nodes, relu1 (Relu) and sigmoid1 (Sigmoid)"],
    );
    fails_with(
        &["inspect", &fixture("bad_negative_bn_variance.onnx")],
        3,
        &[
            "node bn1",
            "'v', the running variance) holds -0.5 at element 1",
        ],
    );
    let e = fails_with(
        &["inspect", &fixture("bad_symbolic_image_size.onnx")],
        3,
        &[
            "dimension 2 is symbolic ('H')",
            "image input needs a fixed size",
        ],
    );
    assert!(!e.contains("--seq-len"), "{e}");
}

#[test]
fn a_model_path_is_named_once() {
    let model = fixture("bad_inconsistent_shapes.onnx");
    let e = fails_with(
        &[
            "train",
            "--model",
            &model,
            "--data",
            "synthetic",
            "--iters",
            "1",
        ],
        3,
        &["bad_inconsistent_shapes.onnx at --batch 128: node conv1 (Conv)"],
    );
    assert_eq!(e.matches("bad_inconsistent_shapes.onnx").count(), 1, "{e}");
}

#[test]
fn flag_values_are_checked_where_the_user_typed_them() {
    let train = |extra: &[&str]| {
        let mut a = vec!["train", "--model", "zoo:lenet5", "--data", "synthetic"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--iters", "1"]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    for (extra, want) in [
        (
            &["--lr", "-1"][..],
            "--lr: -1 is not a positive learning rate",
        ),
        (
            &["--weight-decay", "-1"],
            "--weight-decay -1: must be a finite number ≥ 0",
        ),
        (&["--momentum", "2"], "--momentum 2: must be below 1"),
        (
            &["--quantizer", "wageubn", "--bits", "1"],
            "--bits 1: wageubn needs at least 2 bits",
        ),
    ] {
        let args = train(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&refs, 2, &[want]);
    }
    fails_with(
        &["inspect", "zoo:lenet5", "--batch", "0"],
        2,
        &["--batch: must be at least 1"],
    );
}

#[test]
fn outputs_and_inputs_of_forward_are_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    write_npy(&x, &[2, 3, 32, 32], |_| 0.5);
    let x = x.to_string_lossy().into_owned();
    fails_with(
        &[
            "forward",
            "--model",
            "zoo:lenet5",
            "--input",
            &x,
            "--output",
            "y.npy",
        ],
        3,
        &["got [2, 3, 32, 32], model `lenet5` expects [2, 1, 28, 28] for this batch of 2"],
    );
    write_npy(dir.path().join("x.npy").as_path(), &[2, 1, 28, 28], |_| 0.5);
    let e = fails_with(
        &[
            "forward",
            "--model",
            "zoo:lenet5",
            "--input",
            &x,
            "--output",
            "y.npy",
            "--bits",
            "40",
        ],
        2,
        &["--bits", "40 for sbm"],
    );
    assert!(!e.contains("Sbm"), "no Debug-printed names: {e}");
    let y = dir.path().join("no-such-dir").join("y.npy");
    let y = y.to_string_lossy().into_owned();
    let e = fails_with(
        &[
            "forward",
            "--model",
            "zoo:lenet5",
            "--input",
            &x,
            "--output",
            &y,
        ],
        4,
        &["no-such-dir/y.npy"],
    );
    assert_eq!(e.matches("y.npy").count(), 1, "{e}");
}

#[test]
fn config_and_trace_errors_name_their_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("bad.toml");
    let text = cptsim_accel::config::builtin_text("zc706").unwrap();
    std::fs::write(&toml, text.replace("rows = 64", "rows = 0")).unwrap();
    let toml = toml.to_string_lossy().into_owned();
    let e = fails_with(
        &["run", "--model", "zoo:lenet5", "--accel", &toml],
        2,
        &[
            "--accel: accelerator config",
            "key `array.rows`: must be greater than zero",
        ],
    );
    assert_eq!(e.matches("bad.toml").count(), 1, "{e}");

    let csv = dir.path().join("t.csv");
    let saved = run(&[
        "run",
        "--model",
        "zoo:lenet5",
        "--schedule",
        "cosine",
        "--iters",
        "40",
        "--save-trace",
        &csv.to_string_lossy(),
    ]);
    assert!(saved.status.success(), "{}", stderr(&saved));
    let text = std::fs::read_to_string(&csv).unwrap();
    let cut = &text[..text.lines().take(3).map(|l| l.len() + 1).sum::<usize>() + 9];
    std::fs::write(&csv, cut).unwrap();
    let e = fails_with(
        &[
            "run",
            "--model",
            "zoo:lenet5",
            "--trace",
            &csv.to_string_lossy(),
        ],
        3,
        &["t.csv: line 4: ", " fields, expected 8"],
    );
    assert!(!e.contains("CSV error") && !e.contains("byte:"), "{e}");
}

#[test]
fn a_layer_too_large_names_the_accelerator_asked_for() {
    fails_with(
        &[
            "layer",
            "--accel",
            "bitfusion",
            "--k",
            "3",
            "--stride",
            "1",
            "--pad",
            "1",
            "--ic",
            "99999999",
            "--oc",
            "99999999",
            "--hw",
            "99999",
            "--batch",
            "99999",
            "--act-bits",
            "4",
            "--wgt-bits",
            "4",
        ],
        2,
        &["--accel bitfusion: layer too large to cost"],
    );
}

#[test]
fn a_plan_that_sets_the_sweeps_own_flags_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "name = \"p\"\n[grid]\nmodel = [\"zoo:lenet5\"]\nout = \"x\"\n",
    )
    .unwrap();
    let out = dir.path().join("study");
    fails_with(
        &[
            "sweep",
            "run",
            &plan.to_string_lossy(),
            "--dry-run",
            "--out",
            &out.to_string_lossy(),
        ],
        2,
        &[
            "plan key `out` is set by the sweep itself",
            "top-level `out`",
        ],
    );
}
