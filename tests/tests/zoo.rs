//! `cptsim zoo list` and `cptsim zoo export`: listing, writing ONNX files, determinism, errors.

use cptsim_e2e::{run, stderr, stdout};

#[test]
fn list_shows_every_model_with_input_and_classes() {
    let out = run(&["zoo", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for (name, input, classes) in [
        ("resnet20", "3x32x32", "100"),
        ("resnet164-bottleneck", "3x32x32", "100"),
        ("mobilenetv2", "3x32x32", "100"),
        ("resnet50", "3x224x224", "1000"),
        ("lenet5", "1x28x28", "10"),
        ("mlp", "1x28x28", "10"),
        ("bf-alexnet", "3x227x227", "1000"),
        ("bf-lstm", "3600x1x1", "3600"),
    ] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{text}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[1], input, "{line}");
        assert_eq!(cols[2], classes, "{line}");
        assert!(cols.len() > 3, "no description: {line}");
    }
    // 23 exportable models, then the 3 cost-only ones and the 2 small trainable LMs.
    for (name, kind) in [
        ("transformer-wt103", "(cost only)"),
        ("ptb-lstm", "(cost only)"),
        ("deit-tiny", "(cost only)"),
        ("lstm-lm", "(trainable)"),
        ("transformer-lm", "(trainable)"),
    ] {
        let line = text.lines().find(|l| l.starts_with(name));
        assert!(line.is_some_and(|l| l.contains(kind)), "{name}:\n{text}");
    }
    assert_eq!(text.lines().count(), 29, "{text}");
}

#[test]
fn export_writes_a_deterministic_onnx_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.onnx");
    let b = dir.path().join("b.onnx");
    let c = dir.path().join("c.onnx");
    for (path, seed) in [(&a, "5"), (&b, "5"), (&c, "6")] {
        let path = path.to_str().unwrap();
        let out = run(&[
            "zoo",
            "export",
            "zoo:lenet5",
            "-o",
            path,
            "--seed",
            seed,
            "--classes",
            "7",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("7 classes"), "{}", stdout(&out));
    }
    let (a, b, c) = (
        std::fs::read(a).unwrap(),
        std::fs::read(b).unwrap(),
        std::fs::read(c).unwrap(),
    );
    assert!(
        a.len() > 4 * 61_000,
        "lenet5 has ~61k parameters, file is {} bytes",
        a.len()
    );
    assert_eq!(a, b);
    assert_ne!(a, c);
    // The file holds the node names and the producer the exporter writes.
    let text = String::from_utf8_lossy(&a);
    assert!(text.contains("cptsim") && text.contains("conv2") && text.contains("logits"));
    // Nothing but the three outputs is left in the directory (no temporary files).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn unknown_model_fails_listing_valid_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.onnx");
    let out = run(&["zoo", "export", "resnet21", "-o", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: unknown zoo model `resnet21`"),
        "{err}"
    );
    assert!(
        err.contains("resnet20") && err.contains("mobilenetv2"),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn unwritable_path_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("m.onnx");
    let out = run(&["zoo", "export", "mlp", "-o", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: cannot write") && err.contains("missing-dir"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn zero_classes_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    let out = run(&[
        "zoo",
        "export",
        "mlp",
        "-o",
        path.to_str().unwrap(),
        "--classes",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("classes"), "{}", stderr(&out));
}
