//! ResNets: the CIFAR 6n+2 basic-block and 9n+2 bottleneck families (spec §9.1) and the
//! torchvision ImageNet ResNet-18/34/50 (spec §9.3), built from one set of blocks.

use crate::export::{ConvGeom, ExportError, Value};

use super::net::{join, Net};

/// The residual block a ResNet is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Block {
    /// conv3×3 → BN → ReLU → conv3×3 → BN (+ shortcut) → ReLU.
    Basic,
    /// conv1×1 → BN → ReLU → conv3×3 (stride) → BN → ReLU → conv1×1 (×4) → BN (+ shortcut) → ReLU.
    Bottleneck,
}

impl Block {
    /// Output channels per `planes`.
    fn expansion(self) -> usize {
        match self {
            Block::Basic => 1,
            Block::Bottleneck => 4,
        }
    }
}

/// The stem of a ResNet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stem {
    /// CIFAR: 3×3 conv 3→16, stride 1, BN, ReLU.
    Cifar,
    /// ImageNet: 7×7 conv 3→64, stride 2, BN, ReLU, 3×3 max-pool stride 2.
    ImageNet,
}

/// A whole ResNet: stem, stages of `(planes, blocks, stride)`, global pool and FC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResNet {
    pub(crate) stem: Stem,
    pub(crate) block: Block,
    pub(crate) stages: &'static [(usize, usize, usize)],
}

/// CIFAR stages for `n` blocks per stage.
pub(crate) const fn cifar_stages(n: usize) -> [(usize, usize, usize); 3] {
    [(16, n, 1), (32, n, 2), (64, n, 2)]
}

impl ResNet {
    /// Adds the network to `net`, reading `x`, and returns the logits.
    pub(crate) fn build(
        &self,
        net: &mut Net,
        x: &Value,
        classes: usize,
    ) -> Result<Value, ExportError> {
        let mut y = match self.stem {
            Stem::Cifar => net.conv_bn("", "1", x, ConvGeom::dense(16, 3, 1, 1))?,
            Stem::ImageNet => net.conv_bn("", "1", x, ConvGeom::dense(64, 7, 2, 3))?,
        };
        y = net.relu("relu", &y)?;
        if self.stem == Stem::ImageNet {
            y = net.graph().max_pool("maxpool", &y, 3, 2, 1)?;
        }
        for (s, &(planes, blocks, stride)) in self.stages.iter().enumerate() {
            for b in 0..blocks {
                let prefix = format!("layer{}.{b}", s + 1);
                let stride = if b == 0 { stride } else { 1 };
                y = residual_block(net, &prefix, &y, self.block, planes, stride)?;
            }
        }
        net.classifier(&y, classes)
    }
}

/// One residual block: conv+BN layers with ReLU between them, then `relu(y + shortcut(x))`.
fn residual_block(
    net: &mut Net,
    prefix: &str,
    x: &Value,
    block: Block,
    planes: usize,
    stride: usize,
) -> Result<Value, ExportError> {
    let convs = match block {
        Block::Basic => vec![
            ConvGeom::dense(planes, 3, stride, 1),
            ConvGeom::dense(planes, 3, 1, 1),
        ],
        Block::Bottleneck => vec![
            ConvGeom::dense(planes, 1, 1, 0),
            ConvGeom::dense(planes, 3, stride, 1),
            ConvGeom::dense(planes * block.expansion(), 1, 1, 0),
        ],
    };
    let mut y = x.clone();
    for (i, &geom) in convs.iter().enumerate() {
        if i > 0 {
            y = net.relu(&join(prefix, &format!("relu{i}")), &y)?;
        }
        y = net.conv_bn(prefix, &(i + 1).to_string(), &y, geom)?;
    }
    let relu = format!("relu{}", convs.len());
    residual_relu(net, prefix, x, &y, stride, &relu)
}

/// `relu(y + shortcut(x))`: identity shortcut when shape is kept, else a 1×1 projection + BN.
fn residual_relu(
    net: &mut Net,
    prefix: &str,
    x: &Value,
    y: &Value,
    stride: usize,
    relu: &str,
) -> Result<Value, ExportError> {
    let shortcut = projection_shortcut(net, prefix, x, y, stride)?;
    let sum = net.add(&join(prefix, "add"), y, &shortcut)?;
    net.relu(&join(prefix, relu), &sum)
}

/// The shortcut of a block whose main path produced `y` from `x`: `x` itself when the shapes
/// agree, else `prefix.shortcut.conv` (1×1, `stride`) + `prefix.shortcut.bn`.
pub(crate) fn projection_shortcut(
    net: &mut Net,
    prefix: &str,
    x: &Value,
    y: &Value,
    stride: usize,
) -> Result<Value, ExportError> {
    if x.shape == y.shape && stride == 1 {
        return Ok(x.clone());
    }
    let out = y.shape.first().copied().unwrap_or(0);
    net.conv_bn(
        &join(prefix, "shortcut"),
        "",
        x,
        ConvGeom::dense(out, 1, stride, 0),
    )
}
