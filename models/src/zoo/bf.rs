//! The eight benchmarks of the Bit Fusion paper (Sharma et al., ISCA 2018), `bf-` in the zoo, as
//! its authors' published simulator defines them (`bitfusion/src/benchmarks/benchmarks.py`), with
//! their per-layer precisions ([`bits`]). Inference benchmarks: no BatchNorm, ReLU after each
//! hidden layer (ReLU does not change any cost).
//!
//! ResNet-18 is the authors' layer list (1×1 "a" and 3×3 "b" convs, four modules) plus a standard
//! classifier head. Two-tower AlexNet is one graph with grouped convs (conv2, conv4, conv5 in two groups; conv1 and
//! conv3 as one conv of both towers' filters): the same layers and MACs as the towers.

use crate::export::{ConvGeom, ExportError, Value};

use super::net::Net;

/// Which benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bench {
    AlexNet,
    Svhn,
    Cifar10,
    LeNet5,
    Vgg7,
    ResNet18,
    Rnn,
    Lstm,
}

fn conv(net: &mut Net, name: &str, x: &Value, out: usize, k: usize) -> Result<Value, ExportError> {
    let y = net.conv(name, x, ConvGeom::dense(out, k, 1, k / 2), true)?;
    net.relu(&format!("{name}.relu"), &y)
}

fn pool(net: &mut Net, name: &str, x: &Value) -> Result<Value, ExportError> {
    net.graph().max_pool(name, x, 2, 2, 0)
}

fn fc(net: &mut Net, name: &str, x: &Value, out: usize) -> Result<Value, ExportError> {
    let y = net.fc(name, x, out)?;
    net.relu(&format!("{name}.relu"), &y)
}

/// The QNN-style CIFAR/SVHN net: three (conv, conv, pool) stages of `widths`, FC `hidden` twice.
fn qnn(net: &mut Net, x: &Value, widths: [usize; 3], classes: usize) -> Result<Value, ExportError> {
    let mut y = x.clone();
    for (s, &w) in widths.iter().enumerate() {
        y = conv(net, &format!("conv{}", 2 * s), &y, w, 3)?;
        y = conv(net, &format!("conv{}", 2 * s + 1), &y, w, 3)?;
        y = pool(net, &format!("pool{}", 2 * s + 1), &y)?;
    }
    let y = net.flatten("flatten", &y)?;
    let y = fc(net, "fc6", &y, 1024)?;
    let y = fc(net, "fc7", &y, 1024)?;
    net.head("fc8", &y, classes)
}

/// Builds `bench` on input `x`.
pub(crate) fn build(
    bench: Bench,
    net: &mut Net,
    x: &Value,
    classes: usize,
) -> Result<Value, ExportError> {
    match bench {
        Bench::AlexNet => {
            let grouped = |out, k, pad| ConvGeom {
                groups: 2,
                ..ConvGeom::dense(out, k, 1, pad)
            };
            let y = net.conv("conv1", x, ConvGeom::dense(96, 11, 4, 0), true)?;
            let y = net.relu("conv1.relu", &y)?;
            let y = pool(net, "pool1", &y)?;
            let y = net.conv("conv2", &y, grouped(256, 5, 2), true)?;
            let y = net.relu("conv2.relu", &y)?;
            let y = pool(net, "pool2", &y)?;
            let y = conv(net, "conv3", &y, 384, 3)?;
            let y = net.conv("conv4", &y, grouped(384, 3, 1), true)?;
            let y = net.relu("conv4.relu", &y)?;
            let y = net.conv("conv5", &y, grouped(256, 3, 1), true)?;
            let y = net.relu("conv5.relu", &y)?;
            let y = pool(net, "pool5", &y)?;
            let y = net.flatten("flatten", &y)?;
            let y = fc(net, "fc1", &y, 4096)?;
            let y = fc(net, "fc2", &y, 4096)?;
            net.head("fc3", &y, classes)
        }
        Bench::Svhn => qnn(net, x, [64, 128, 256], classes),
        Bench::Cifar10 => qnn(net, x, [128, 256, 512], classes),
        Bench::LeNet5 => {
            let y = conv(net, "conv0", x, 32, 5)?;
            let y = pool(net, "pool0", &y)?;
            let y = conv(net, "conv1", &y, 64, 5)?;
            let y = pool(net, "pool1", &y)?;
            let y = net.flatten("flatten", &y)?;
            let y = fc(net, "fc1", &y, 512)?;
            net.head("fc2", &y, classes)
        }
        Bench::Vgg7 => {
            let mut towers = Vec::new();
            for t in ["a", "b"] {
                let mut y = x.clone();
                for (s, w) in [128, 256, 512].into_iter().enumerate() {
                    y = conv(net, &format!("conv{}_{t}", s + 1), &y, w, 3)?;
                    y = pool(net, &format!("pool{}_{t}", s + 1), &y)?;
                }
                towers.push(y);
            }
            let y = net.add("add3", &towers[0], &towers[1])?;
            let y = net.flatten("flatten", &y)?;
            net.head("fc1", &y, classes)
        }
        Bench::ResNet18 => {
            let y = net.conv("conv1", x, ConvGeom::dense(64, 7, 2, 3), true)?;
            let y = net.relu("conv1.relu", &y)?;
            let mut y = pool(net, "pool1", &y)?;
            for (m, width) in [(2, 64), (3, 128), (4, 256), (5, 512)] {
                let mut a = y.clone();
                let mut b = y.clone();
                for i in 1..=2 {
                    let stride = if m > 2 && i == 1 { 2 } else { 1 };
                    let name = format!("conv{m}_{i}_a");
                    a = net.conv(&name, &b, ConvGeom::dense(width, 1, stride, 0), true)?;
                    a = net.relu(&format!("{name}.relu"), &a)?;
                    b = conv(net, &format!("conv{m}_{i}_b"), &a, width, 3)?;
                }
                y = if m < 5 {
                    net.add(&format!("add{m}"), &a, &b)?
                } else {
                    b
                };
            }
            // The authors' list stops at conv5_2_b; the zoo's models end in class scores, so
            // the standard head follows (0.05 % of the MACs).
            net.classifier(&y, classes)
        }
        Bench::Rnn | Bench::Lstm => {
            let y = net.flatten("flatten", x)?;
            net.head("matmul", &y, classes)
        }
    }
}

/// Per conv / linear layer, in order: (activation bits, weight bits) — the input tensor's and the
/// weights' precision in the authors' benchmark definitions (a layer's input has the precision
/// its producer outputs; the images are 8-bit, except LeNet-5's and VGG-7's 2-bit inputs).
pub fn bits(name: &str) -> Option<Vec<(u8, u8)>> {
    let v = |first: (u8, u8), rest: (u8, u8), n: usize, last: Option<(u8, u8)>| {
        let mut v = vec![first];
        v.extend(std::iter::repeat_n(rest, n));
        v.extend(last);
        v
    };
    Some(match name {
        // conv1 8-bit images × 4-bit weights; fc3 reads fc2's 8-bit output with 8-bit weights
        "bf-alexnet" => v((8, 4), (4, 4), 6, Some((8, 8))),
        // binary (QNN): 8-bit images, 1-bit weights, then 1-bit everything
        "bf-svhn" => v((8, 1), (1, 1), 8, None),
        // 8-bit images and first-layer weights, then 2-bit
        "bf-cifar10" => v((8, 8), (2, 2), 8, None),
        "bf-lenet5" => v((2, 2), (2, 2), 3, None),
        "bf-vgg7" => v((2, 2), (2, 2), 6, None),
        // 8-bit images and first-layer weights, then 4-bit; the added classifier head 8-bit like
        // AlexNet's last layer
        "bf-resnet18" => v((8, 8), (4, 4), 16, Some((8, 8))),
        "bf-rnn" | "bf-lstm" => vec![(4, 4)],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_benchmark_has_one_bit_pair_per_layer() {
        for name in super::super::names()
            .iter()
            .filter(|n| n.starts_with("bf-"))
        {
            let proto = super::super::build(name, None, 0).unwrap();
            let summary = crate::onnx::import_proto(&proto, name, 1)
                .unwrap()
                .summary();
            let b = bits(name).unwrap();
            assert_eq!(b.len(), summary.layers.len(), "{name}");
            assert!(b
                .iter()
                .all(|&(a, w)| (1..=8).contains(&a) && (1..=8).contains(&w)));
        }
        assert!(bits("resnet20").is_none());
    }
}
