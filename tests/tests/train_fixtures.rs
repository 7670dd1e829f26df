//! PyTorch-exported models with elementwise arithmetic train: input normalisation
//! inside the model, Clip/ReLU6/Hardtanh variants, conv with folded BN, and squeeze-and-excitation
//! in its Linear + `view(b, c, 1, 1)` + `expand_as` form and its 1×1-conv form, each from the
//! legacy and the dynamo exporter (`tests/python/make_fixtures.py`).

use cptsim_e2e::train_synthetic;

/// Trains `model` on synthetic data for `iters` iterations of `batch`; returns the rows of
/// `metrics.csv` as (iteration, train loss, test accuracy) and stderr.
fn train(model: &str, iters: u32, batch: u32) -> (Vec<(u64, f64, f64)>, String) {
    let every = (iters / 2).max(1).to_string();
    let (iters, batch) = (iters.to_string(), batch.to_string());
    train_synthetic(
        model,
        &["--iters", &iters, "--batch", &batch, "--eval-every", &every],
    )
}

#[test]
fn every_elementwise_fixture_trains_a_few_iterations() {
    for name in [
        "norm_clip_legacy_opset13.onnx",
        "norm_clip_dynamo_opset18.onnx",
        "se_legacy_opset13.onnx",
        "se_dynamo_opset18.onnx",
    ] {
        let (rows, err) = train(&format!("tests/fixtures/{name}"), 4, 8);
        assert_eq!(rows.len(), 2, "{name}: {rows:?}");
        assert!(rows.iter().all(|r| r.1.is_finite()), "{name}: {rows:?}");
        // the legacy exporter folds the eval-mode BN into the conv and cptsim says so
        if name.contains("legacy") {
            assert!(err.contains("BN was most likely folded"), "{name}: {err}");
        }
    }
}

#[test]
fn the_normalising_clip_model_learns() {
    // Sub/Div by constants, ReLU6, Hardtanh and one-sided clamps in the forward and backward
    // pass: 40 iterations reach far above chance on the separable synthetic data.
    let (rows, _) = train("tests/fixtures/norm_clip_legacy_opset13.onnx", 40, 16);
    let last = rows.last().unwrap();
    assert!(last.2 > 0.9, "{rows:?}");
    assert!(last.1 < rows[0].1, "{rows:?}");
}
