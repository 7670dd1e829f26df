//! CIFAR MobileNetV2 in the kuangliu style used by CPT/FracTrain/W&K (spec §9.2): stride-1 stem
//! and second stage, plain ReLU, 1×1 conv shortcut where a stride-1 block changes width.

use crate::export::{ConvGeom, ExportError, Value};

use super::net::{join, Net};
use super::resnet::projection_shortcut;

/// `(expansion, out channels, blocks, stride)` per stage.
const STAGES: [(usize, usize, usize, usize); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 1),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// Adds MobileNetV2 to `net`, reading `x` (`[3, 32, 32]`), and returns the logits.
pub(crate) fn build(net: &mut Net, x: &Value, classes: usize) -> Result<Value, ExportError> {
    let y = net.conv_bn("", "1", x, ConvGeom::dense(32, 3, 1, 1))?;
    let mut y = net.relu("relu1", &y)?;
    let mut index = 0;
    for &(expansion, out, blocks, stage_stride) in &STAGES {
        for b in 0..blocks {
            let stride = if b == 0 { stage_stride } else { 1 };
            y = inverted_residual(net, &format!("layers.{index}"), &y, expansion, out, stride)?;
            index += 1;
        }
    }
    let y = net.conv_bn("", "2", &y, ConvGeom::dense(1280, 1, 1, 0))?;
    let y = net.relu("relu2", &y)?;
    net.classifier(&y, classes)
}

/// 1×1 expand → BN → ReLU → 3×3 depthwise → BN → ReLU → 1×1 project → BN (+ shortcut at stride 1).
fn inverted_residual(
    net: &mut Net,
    prefix: &str,
    x: &Value,
    expansion: usize,
    out: usize,
    stride: usize,
) -> Result<Value, ExportError> {
    let hidden = expansion * x.shape.first().copied().unwrap_or(0);
    let y = net.conv_bn(prefix, "1", x, ConvGeom::dense(hidden, 1, 1, 0))?;
    let y = net.relu(&join(prefix, "relu1"), &y)?;
    let depthwise = ConvGeom {
        groups: hidden,
        ..ConvGeom::dense(hidden, 3, stride, 1)
    };
    let y = net.conv_bn(prefix, "2", &y, depthwise)?;
    let y = net.relu(&join(prefix, "relu2"), &y)?;
    let y = net.conv_bn(prefix, "3", &y, ConvGeom::dense(out, 1, 1, 0))?;
    if stride != 1 {
        return Ok(y);
    }
    let shortcut = projection_shortcut(net, prefix, x, &y, 1)?;
    net.add(&join(prefix, "add"), &y, &shortcut)
}
