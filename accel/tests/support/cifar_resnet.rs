//! Test-only generator of the CIFAR ResNets of methods.md §9.1 (depth 6n+2, basic blocks, 1×1
//! projection shortcuts at the stage transitions), until the zoo lands in `cptsim-models`.

use cptsim_models::summary::{LayerInfo, LayerKind, LayerRole, ModelSummary};

fn conv(
    name: String,
    role: LayerRole,
    cin: usize,
    cout: usize,
    hw: usize,
    k: usize,
    stride: usize,
) -> LayerInfo {
    let out = hw / stride;
    let pad = k / 2;
    LayerInfo {
        name,
        kind: LayerKind::Conv,
        role,
        in_shape: [cin, hw, hw],
        out_shape: [cout, out, out],
        kernel: [k, k],
        stride: [stride, stride],
        pads: [pad; 4],
        dilation: [1, 1],
        groups: 1,
        params: (cin * cout * k * k) as u64,
        macs: (cin * cout * k * k * out * out) as u64,
    }
}

/// ResNet-(6n+2) for CIFAR with `classes` outputs.
pub fn cifar_resnet(n: usize, classes: usize) -> ModelSummary {
    let mut layers = vec![conv("conv1".into(), LayerRole::First, 3, 16, 32, 3, 1)];
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
                ));
            }
            cin = width;
            hw = out;
        }
    }
    layers.push(LayerInfo {
        name: "fc".into(),
        kind: LayerKind::Linear,
        role: LayerRole::Last,
        in_shape: [64, 1, 1],
        out_shape: [classes, 1, 1],
        kernel: [1, 1],
        stride: [1, 1],
        pads: [0; 4],
        dilation: [1, 1],
        groups: 1,
        params: (64 * classes + classes) as u64,
        macs: (64 * classes) as u64,
    });
    let bn_elements: u64 = layers
        .iter()
        .filter(|l| l.kind == LayerKind::Conv)
        .map(|l| (l.out_shape[0] * l.out_shape[1] * l.out_shape[2]) as u64)
        .sum();
    let params = layers.iter().map(|l| l.params).sum::<u64>()
        + 2 * layers
            .iter()
            .filter(|l| l.kind == LayerKind::Conv)
            .map(|l| l.out_shape[0] as u64)
            .sum::<u64>();
    ModelSummary {
        name: format!("resnet{}", 6 * n + 2),
        input: vec![1, 3, 32, 32],
        layers,
        bn_elements,
        params,
    }
}
