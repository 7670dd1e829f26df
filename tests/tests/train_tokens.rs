//! A sequence classifier (token ids `[B, T]` → one class per sequence; a bidirectional GRU
//! exported by `tests/python/make_seq_fixtures.py`) trains on `--data synthetic`: seeded token
//! sequences of its input's length, ids within its vocabulary, one label per sequence over its
//! outputs. A language model is told to train on a corpus instead.

use cptsim_e2e::{run, stderr};

const MODEL: &str = "tests/fixtures/seq/bigru_classifier_legacy_opset14.onnx";

/// `cptsim train` of the classifier on synthetic sequences with `extra` flags: the losses of
/// the progress lines (the first and the last iteration's among them) and `metrics.csv`.
fn train(extra: &[&str]) -> (Vec<f64>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.to_string_lossy().into_owned();
    let mut args = vec![
        "train",
        "--model",
        MODEL,
        "--data",
        "synthetic",
        "--batch",
        "4",
        "--iters",
        "20",
        "--eval-every",
        "20",
        "--lr",
        "0.1",
        "--clip-grad",
        "2",
        "--out",
        &out_s,
    ];
    args.extend_from_slice(extra);
    let res = run(&args);
    let err = stderr(&res);
    assert!(res.status.success(), "{err}");
    let losses = err
        .lines()
        .filter(|l| l.starts_with("iter "))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    (
        losses,
        std::fs::read_to_string(out.join("metrics.csv")).unwrap(),
    )
}

#[test]
fn a_sequence_classifier_trains_on_synthetic_token_sequences() {
    // One fixed batch of 4 sequences of 9 tokens, repeated: the loss falls.
    let (losses, metrics) = train(&["--seq-len", "9", "--subset", "4"]);
    assert!(losses.len() >= 2, "{losses:?}");
    assert!(losses[losses.len() - 1] < 0.7 * losses[0], "{losses:?}");
    // The test set is evaluated: one row at iteration 20 with an accuracy in [0, 1].
    let row: Vec<&str> = metrics.lines().nth(1).unwrap().split(',').collect();
    let acc: f64 = row[4].parse().unwrap();
    assert!(row[0] == "20" && (0.0..=1.0).contains(&acc), "{metrics}");
    // Deterministic from the seed; another seed draws other sequences.
    assert_eq!(train(&["--seq-len", "9", "--subset", "4"]).1, metrics);
    let (other, _) = train(&["--seq-len", "9", "--subset", "4", "--seed", "5"]);
    assert_ne!(other, losses);
}

#[test]
fn synthetic_tokens_need_a_classifier_and_fit_its_input() {
    // A language model (one output per token) is pointed to a corpus.
    let res = run(&[
        "train",
        "--model",
        "tests/fixtures/seq/gru_lm_legacy_opset14.onnx",
        "--data",
        "synthetic",
        "--seq-len",
        "7",
        "--batch",
        "3",
        "--iters",
        "2",
    ]);
    let err = stderr(&res);
    assert!(!res.status.success(), "{err}");
    assert!(
        err.contains("one class per sequence") && err.contains("text:FILE"),
        "{err}"
    );
    // The symbolic sequence axis needs --seq-len, as for any use of the file.
    let res = run(&[
        "train",
        "--model",
        MODEL,
        "--data",
        "synthetic",
        "--iters",
        "2",
    ]);
    let err = stderr(&res);
    assert!(!res.status.success() && err.contains("--seq-len"), "{err}");
    // --seq-len on image data is refused naming the data.
    let res = run(&[
        "train",
        "--model",
        "zoo:lenet5",
        "--data",
        "mnist:/nowhere",
        "--seq-len",
        "9",
    ]);
    let err = stderr(&res);
    assert!(
        !res.status.success() && err.contains("has no sequences"),
        "{err}"
    );
}
