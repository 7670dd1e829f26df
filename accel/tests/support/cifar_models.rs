//! Test-only generators of the CIFAR models of methods.md §9.1–9.2 (ResNet-(6n+2) with basic
//! blocks and 1×1 projection shortcuts; kuangliu-style MobileNetV2), until the zoo lands in
//! `cptsim-models`.

use cptsim_models::summary::{LayerInfo, LayerKind, LayerRole, ModelSummary};

#[allow(clippy::too_many_arguments)]
fn conv(
    name: String,
    role: LayerRole,
    cin: usize,
    cout: usize,
    hw: usize,
    k: usize,
    stride: usize,
    groups: usize,
) -> LayerInfo {
    let out = hw / stride;
    LayerInfo {
        name,
        kind: LayerKind::Conv,
        role,
        in_shape: [cin, hw, hw],
        out_shape: [cout, out, out],
        kernel: [k, k],
        stride: [stride, stride],
        pads: [k / 2; 4],
        dilation: [1, 1],
        groups,
        params: (cin / groups * cout * k * k) as u64,
        macs: (cin / groups * cout * k * k * out * out) as u64,
    }
}

fn fc(name: &str, inputs: usize, classes: usize) -> LayerInfo {
    LayerInfo {
        name: name.into(),
        kind: LayerKind::Linear,
        role: LayerRole::Last,
        in_shape: [inputs, 1, 1],
        out_shape: [classes, 1, 1],
        kernel: [1, 1],
        stride: [1, 1],
        pads: [0; 4],
        dilation: [1, 1],
        groups: 1,
        params: (inputs * classes + classes) as u64,
        macs: (inputs * classes) as u64,
    }
}

/// The summary of `layers`, with one BN after every conv.
fn summary(name: String, layers: Vec<LayerInfo>) -> ModelSummary {
    let convs = || layers.iter().filter(|l| l.kind == LayerKind::Conv);
    let bn_elements = convs()
        .map(|l| (l.out_shape[0] * l.out_shape[1] * l.out_shape[2]) as u64)
        .sum();
    let bn_params: u64 = convs().map(|l| 2 * l.out_shape[0] as u64).sum();
    let params = layers.iter().map(|l| l.params).sum::<u64>() + bn_params;
    ModelSummary {
        name,
        input: vec![1, 3, 32, 32],
        layers,
        bn_elements,
        params,
    }
}

/// ResNet-(6n+2) for CIFAR with `classes` outputs.
pub fn cifar_resnet(n: usize, classes: usize) -> ModelSummary {
    let mut layers = vec![conv("conv1".into(), LayerRole::First, 3, 16, 32, 3, 1, 1)];
    let mut cin = 16;
    let mut hw = 32;
    for (s, width) in [16usize, 32, 64].into_iter().enumerate() {
        for b in 0..n {
            let stride = if s > 0 && b == 0 { 2 } else { 1 };
            let p = format!("layer{}.{b}", s + 1);
            layers.push(conv(
                format!("{p}.conv1"),
                LayerRole::Body,
                cin,
                width,
                hw,
                3,
                stride,
                1,
            ));
            let out = hw / stride;
            layers.push(conv(
                format!("{p}.conv2"),
                LayerRole::Body,
                width,
                width,
                out,
                3,
                1,
                1,
            ));
            if stride != 1 || cin != width {
                layers.push(conv(
                    format!("{p}.shortcut"),
                    LayerRole::Shortcut,
                    cin,
                    width,
                    hw,
                    1,
                    stride,
                    1,
                ));
            }
            cin = width;
            hw = out;
        }
    }
    layers.push(fc("fc", 64, classes));
    summary(format!("resnet{}", 6 * n + 2), layers)
}

/// MobileNetV2 for 32×32 inputs with `classes` outputs.
pub fn cifar_mobilenetv2(classes: usize) -> ModelSummary {
    let cfg = [
        (1, 16, 1, 1),
        (6, 24, 2, 1),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let mut layers = vec![conv("conv1".into(), LayerRole::First, 3, 32, 32, 3, 1, 1)];
    let (mut cin, mut hw) = (32, 32);
    let mut bi = 0;
    for (expansion, out, blocks, first_stride) in cfg {
        for b in 0..blocks {
            let stride = if b == 0 { first_stride } else { 1 };
            let planes = expansion * cin;
            let p = format!("layers.{bi}");
            layers.push(conv(
                format!("{p}.conv1"),
                LayerRole::Body,
                cin,
                planes,
                hw,
                1,
                1,
                1,
            ));
            layers.push(conv(
                format!("{p}.conv2"),
                LayerRole::Depthwise,
                planes,
                planes,
                hw,
                3,
                stride,
                planes,
            ));
            let o = hw / stride;
            layers.push(conv(
                format!("{p}.conv3"),
                LayerRole::Body,
                planes,
                out,
                o,
                1,
                1,
                1,
            ));
            if stride == 1 && cin != out {
                layers.push(conv(
                    format!("{p}.shortcut"),
                    LayerRole::Shortcut,
                    cin,
                    out,
                    hw,
                    1,
                    1,
                    1,
                ));
            }
            cin = out;
            hw = o;
            bi += 1;
        }
    }
    layers.push(conv(
        "conv2".into(),
        LayerRole::Body,
        320,
        1280,
        hw,
        1,
        1,
        1,
    ));
    layers.push(fc("linear", 1280, classes));
    summary("mobilenetv2".into(), layers)
}
