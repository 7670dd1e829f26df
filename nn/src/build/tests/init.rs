//! Seeded initialisation of imported graphs: a deep depthwise-separable stack without
//! normalisation or biases (what PyTorch's dynamo exporter writes for MobileNet-style nets, BN
//! folded and all-zero biases dropped) keeps its signal, so its weights get gradients.

use crate::build::{build_network, BuildOptions, Init};
use crate::layers::gradcheck::rand_tensor;
use crate::layers::{Mode, Tensor};
use cptsim_models::ir::{self, Op};
use ndarray::ArrayD;

fn conv(out: usize, ipg: usize, k: usize, groups: usize) -> Op {
    Op::Conv(ir::Conv {
        weight: ArrayD::zeros(vec![out, ipg, k, k]),
        bias: None,
        strides: [1, 1],
        pads: [k / 2; 4],
        dilations: [1, 1],
        groups,
    })
}

fn rms(t: &Tensor) -> f64 {
    (t.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / t.len().max(1) as f64).sqrt()
}

#[test]
fn a_seeded_depthwise_separable_stack_keeps_its_signal() {
    let c = 32;
    let x = rand_tensor(&[2, c, 6, 6], 1.0, 21);
    let mut g = ir::Graph::new("m", "test", 2, "x", x.shape().to_vec());
    let mut v = g.input;
    for i in 0..6 {
        let dw = g.push(
            &format!("dw{i}"),
            conv(c, 1, 3, c),
            vec![v],
            &format!("d{i}"),
        );
        let r = g.push(
            &format!("relu{i}"),
            Op::Relu,
            vec![dw.unwrap()],
            &format!("r{i}"),
        );
        v = g
            .push(
                &format!("pw{i}"),
                conv(c, c, 1, 1),
                vec![r.unwrap()],
                &format!("p{i}"),
            )
            .unwrap();
    }
    g.output = g
        .push("flat", Op::Flatten { axis: 1 }, vec![v], "z")
        .unwrap();
    let opts = BuildOptions {
        init: Init::Seeded(3),
        ..Default::default()
    };
    let mut net = build_network(&g, &opts).unwrap();
    let y = net
        .forward(net.input_from_ir(&x).unwrap(), Mode::Eval)
        .unwrap();
    // He init in fan-out mode keeps the variance within a small factor per block; counting a
    // depthwise conv's fan-out over all 32 filters divided it by ≈ 32 per block (≈ 1e-9 after 6).
    let ratio = rms(&y) / rms(&x);
    assert!(
        ratio > 0.05 && ratio < 20.0,
        "output rms / input rms = {ratio:e}"
    );
}
