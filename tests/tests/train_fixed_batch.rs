//! A model exported with a fixed batch of 2, whose reshape targets hold that batch (a channel
//! shuffle, a ViT's patches, `nn.MultiheadAttention`'s `[T, 2·heads, d]`), trains at its own
//! batch and at another, evaluates at the evaluation batch with its short last batch, and runs
//! `forward` at a third batch with each sample's output independent of the batch it is in
//! (`tests/python/make_fixtures.py`, `ShuffleAttn`).

use cptsim_e2e::{read_npy, run, run_forward, stderr, train_synthetic, write_npy};

const MODEL: &str = "tests/fixtures/shuffle_attn_fixed_batch2.onnx";

/// `metrics.csv` rows of a 30-iteration overfit of 6 synthetic images at `batch`: (train loss,
/// test accuracy), with stderr.
fn overfit(batch: u32) -> (Vec<(f64, f64)>, String) {
    let batch = batch.to_string();
    let flags = [
        "--subset",
        "6",
        "--batch",
        &batch,
        "--iters",
        "30",
        "--eval-every",
        "15",
    ];
    let (rows, err) = train_synthetic(MODEL, &flags);
    (rows.into_iter().map(|(_, l, a)| (l, a)).collect(), err)
}

/// The first loss of the progress lines.
fn first_loss(err: &str) -> f64 {
    let line = err.lines().find(|l| l.starts_with("iter 1/")).unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn a_fixed_batch_export_trains_and_evaluates_at_other_batches() {
    // batch 2 is the file's; batch 3 rebinds the targets at import. Both evaluate 1024 test
    // images in batches of 500, 500 and 24, none of them the training batch.
    for batch in [2, 3] {
        let (rows, err) = overfit(batch);
        assert_eq!(rows.len(), 2, "--batch {batch}: {rows:?}");
        let (first, last) = (first_loss(&err), rows[1].0);
        assert!(
            last.is_finite() && last < 0.7 * first,
            "--batch {batch}: loss {first} → {last}"
        );
        assert!(rows.iter().all(|r| r.1.is_finite()), "{rows:?}");
    }
}

/// The output `.npy` of `forward` on `n` images (image `i` the same at every `n`).
fn forward(dir: &std::path::Path, n: usize) -> Vec<f32> {
    let (x, y) = (dir.join(format!("x{n}.npy")), dir.join(format!("y{n}.npy")));
    let per = 3 * 8 * 8;
    write_npy(&x, &[n, 3, 8, 8], |i| {
        ((i % per) as f32 * 0.37 + (i / per) as f32 * 1.3).sin()
    });
    let res = run_forward(MODEL, &x, &y, &[]);
    assert!(res.status.success(), "batch {n}: {}", stderr(&res));
    let (_, data) = read_npy(&y);
    assert_eq!(data.len(), n * 5, "batch {n}");
    data
}

#[test]
fn forward_at_another_batch_keeps_each_sample_apart() {
    let dir = tempfile::tempdir().unwrap();
    let at2 = forward(dir.path(), 2);
    let at5 = forward(dir.path(), 5);
    // a target rebound to the wrong axis would mix samples or heads: rows would differ
    for (a, b) in at2.iter().zip(&at5[..10]) {
        assert!(
            (a - b).abs() <= 1e-5 * a.abs().max(1.0),
            "{at2:?} vs {at5:?}"
        );
    }
}

#[test]
fn a_batch_that_cannot_be_rebound_names_the_node_and_asks_for_a_dynamic_axis() {
    // at batch 1 the heads' axis [1·4] could hold the batch at either factor
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_npy(&x, &[1, 3, 8, 8], |i| i as f32 * 0.01);
    let res = run_forward(MODEL, &x, &y, &[]);
    let err = stderr(&res);
    assert!(!res.status.success(), "{err}");
    assert!(
        err.contains("/attn/Reshape_6")
            && err.contains("[2, 4, 16, 2]")
            && err.contains("dynamic batch axis"),
        "{err}"
    );
    assert!(!y.exists());
}

#[test]
fn inspect_reads_a_fixed_batch_export_at_its_own_batch() {
    let res = run(&["inspect", MODEL, "--format", "json"]);
    assert!(res.status.success(), "{}", stderr(&res));
    let j: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(j["batch"], 2, "{j}");
    let res = run(&["inspect", MODEL, "--batch", "3", "--format", "json"]);
    let j: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(j["batch"], 3, "{j}");
}
