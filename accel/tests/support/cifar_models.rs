//! The CIFAR models (docs/src/reference/models.md) for the accelerator tests and benchmarks, taken from the
//! model zoo through the same export → import path a user's `zoo:NAME` takes.

use cptsim_models::ModelSummary;

/// The zoo model `name` with `classes` outputs, summarised at batch 1.
fn zoo(name: &str, classes: usize) -> ModelSummary {
    let proto = cptsim_models::zoo::build(name, Some(classes), 0)
        .unwrap_or_else(|e| panic!("zoo:{name}: {e}"));
    cptsim_models::onnx::import_proto(&proto, name, 1)
        .unwrap_or_else(|e| panic!("zoo:{name}: {e}"))
        .summary()
}

/// CIFAR ResNet-(6n+2) with basic blocks and 1×1 projection shortcuts.
pub fn cifar_resnet(n: usize, classes: usize) -> ModelSummary {
    zoo(&format!("resnet{}", 6 * n + 2), classes)
}

/// Kuangliu-style CIFAR MobileNetV2.
#[allow(dead_code)]
pub fn cifar_mobilenetv2(classes: usize) -> ModelSummary {
    zoo("mobilenetv2", classes)
}
