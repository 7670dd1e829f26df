//! The papers' BitOPs figures (docs/src/methods/cost.md): static GBitOPs of the ten CIFAR and
//! ImageNet models at 8/8 and 6/6 bits as printed, CPT's reductions, Wolfe & Kyrillidis's cost
//! ratios of ten schedules, CPT's ResNet-74 run and FracTrain's fp32-equivalent MACs. Paper
//! accounting needs only a model's totals, so each model is a one-layer stand-in carrying the
//! published conv+FC MACs and BN outputs per image.

use cptsim_models::{LayerInfo, LayerKind, LayerRole, ModelSummary};
use cptsim_traces::schedule::{BitRange, Convention, ScheduleArgs};
use cptsim_traces::{synthesize, QuantScope};

use super::{Row, Tolerance, ValidationError};
use crate::workload::bitops::{Accounting, BitOpsCounter};

/// (model, conv+FC MACs, BN outputs, OPS per image, static 8/8 and 6/6 GBitOPs as printed:
/// mantissa and exponent). 3.142 is ResNet-152's 6/6 figure, not π.
#[allow(clippy::approx_constant, clippy::type_complexity)]
pub const STATIC_GBITOPS: [(&str, u64, u64, u64, (f64, i32), (f64, i32)); 10] = [
    (
        "resnet20",
        40_818_944,
        200_704,
        41_220_352,
        (0.648, 8),
        (0.365, 8),
    ),
    (
        "resnet38",
        83_286_272,
        372_736,
        84_031_744,
        (1.322, 8),
        (0.743, 8),
    ),
    (
        "resnet74",
        168_220_928,
        716_800,
        169_654_528,
        (2.668, 8),
        (1.501, 8),
    ),
    (
        "resnet110",
        253_155_584,
        1_060_864,
        255_277_312,
        (4.015, 8),
        (2.259, 8),
    ),
    (
        "resnet152",
        352_246_016,
        1_462_272,
        355_170_560,
        (5.586, 8),
        (3.142, 8),
    ),
    (
        "resnet164",
        380_557_568,
        1_576_960,
        383_711_488,
        (6.035, 8),
        (3.395, 8),
    ),
    (
        "mobilenetv2",
        91_270_144,
        1_724_928,
        94_720_000,
        (1.490, 8),
        (0.838, 8),
    ),
    (
        "resnet18",
        1_814_073_344,
        2_483_712,
        1_819_040_768,
        (2.861, 9),
        (1.609, 9),
    ),
    (
        "resnet34",
        3_663_761_408,
        3_738_112,
        3_671_237_632,
        (5.774, 9),
        (3.248, 9),
    ),
    (
        "resnet50",
        4_089_184_256,
        11_113_984,
        4_111_412_224,
        (6.467, 9),
        (3.638, 9),
    ),
];

/// CPT's CIFAR reductions on ResNet-74 (64 000 iterations, 32 cycles): FW min, FW max, BW,
/// reduction in percent.
pub const CPT_REDUCTIONS: [(u8, u8, u8, f64); 8] = [
    (3, 8, 8, 36.67),
    (3, 6, 6, 30.05),
    (4, 8, 8, 30.11),
    (4, 6, 6, 20.69),
    (3, 4, 6, 14.84),
    (5, 8, 8, 23.16),
    (5, 6, 8, 10.23),
    (4, 6, 8, 19.96),
];

/// CPT's ImageNet reductions on ResNet-18 (120 epochs × 5 005 iterations, 32 cycles).
pub const IMAGENET_REDUCTIONS: [(u8, u8, u8, f64); 2] = [(4, 8, 8, 30.10), (4, 6, 6, 20.68)];

/// Wolfe & Kyrillidis's cost ratios (64 000 iterations, 8 cycles, their convention) for FW/BW
/// 3-8/8, 4-8/8, 3-6/6, 4-6/6.
pub const WK_RATIOS: [(&str, [f64; 4]); 10] = [
    ("cosine", [0.6333, 0.6990, 0.6997, 0.7932]),
    ("cosine-triangular", [0.6334, 0.6990, 0.6997, 0.7932]),
    ("linear", [0.6275, 0.6952, 0.6959, 0.7916]),
    ("linear-triangular", [0.6276, 0.6953, 0.6959, 0.7916]),
    ("exp", [0.8224, 0.8581, 0.8629, 0.9122]),
    ("exp-triangular-v", [0.6347, 0.7000, 0.7008, 0.7937]),
    ("exp-triangular-h", [0.8224, 0.8581, 0.8629, 0.9122]),
    ("demon", [0.3989, 0.5011, 0.4971, 0.6443]),
    ("demon-triangular-v", [0.6372, 0.7016, 0.7025, 0.7944]),
    ("demon-triangular-h", [0.3989, 0.5011, 0.4971, 0.6443]),
];

/// The FW/BW ranges of [`WK_RATIOS`]' columns.
pub const WK_RANGES: [(u8, u8, u8); 4] = [(3, 8, 8), (4, 8, 8), (3, 6, 6), (4, 6, 6)];

const GROUP_STATIC: &str = "BitOPs: static GBitOPs";
const GROUP_CPT: &str = "BitOPs: CPT reductions";
const GROUP_WK: &str = "BitOPs: Wolfe & Kyrillidis ratios";

/// A conv layer of role `role` carrying `macs` per sample (shapes unused by BitOPs).
pub fn layer(name: &str, role: LayerRole, macs: u64) -> LayerInfo {
    LayerInfo {
        name: name.into(),
        kind: LayerKind::Conv,
        role,
        in_shape: [1, 1, 1],
        out_shape: [1, 1, 1],
        kernel: [1, 1],
        stride: [1, 1],
        pads: [0; 4],
        dilation: [1, 1],
        groups: 1,
        params: 0,
        macs,
        hidden: None,
    }
}

/// A one-layer stand-in for model `name` carrying `macs` and `bn_elements` per image.
pub fn totals_model(name: &str, macs: u64, bn_elements: u64) -> ModelSummary {
    ModelSummary {
        name: name.into(),
        input: vec![1, 3, 32, 32],
        layers: vec![layer("all", LayerRole::Body, macs)],
        bn_elements,
        residual_elements: 0,
        params: 0,
    }
}

/// `args`' schedule synthesised on `model` at batch 128 (every layer quantized) and counted.
pub fn count(model: &ModelSummary, args: ScheduleArgs) -> Result<BitOpsCounter, ValidationError> {
    let what = || format!("a schedule on {}", model.name);
    let schedule = args.build().map_err(|e| ValidationError::of(what(), e))?;
    let mut c = BitOpsCounter::new(model);
    for row in synthesize(&schedule, model, &QuantScope::ALL, 128) {
        c.add(&row).map_err(|e| ValidationError::of(what(), e))?;
    }
    Ok(c)
}

/// A CIFAR run: 64 000 iterations at FW `min`–`max`, BW `bw`.
pub fn cifar(name: &str, min: u8, max: u8, bw: u8) -> ScheduleArgs {
    ScheduleArgs::new(name, 64_000)
        .bits(BitRange { min, max })
        .grad_bits(BitRange::fixed(bw))
}

/// Paper GBitOPs of `args` and of its static baseline at the trace's widest bits.
fn with_baseline(model: &ModelSummary, args: ScheduleArgs) -> Result<(f64, f64), ValidationError> {
    let c = count(model, args)?;
    let top = c
        .bit_bounds()
        .map(|(_, hi)| hi)
        .ok_or_else(|| ValidationError::of(&model.name, "no quantized rows"))?;
    Ok((c.totals().paper, c.static_totals(top).paper))
}

fn printed(
    group: &'static str,
    model: &str,
    quantity: String,
    got: f64,
    (m, e): (f64, i32),
) -> Row {
    let unit = 10f64.powi(e);
    Row {
        group,
        model: model.to_string(),
        quantity,
        reference: m * unit,
        cptsim: got,
        tolerance: Tolerance::Absolute(0.0005 * unit),
    }
}

fn static_rows() -> Result<Vec<Row>, ValidationError> {
    let mut v = Vec::new();
    for (name, macs, bn, ops, s88, s66) in STATIC_GBITOPS {
        let m = totals_model(name, macs, bn);
        v.push(Row {
            group: GROUP_STATIC,
            model: name.into(),
            quantity: "OPS per image".into(),
            reference: ops as f64,
            cptsim: m.ops_per_image() as f64,
            tolerance: Tolerance::Exact,
        });
        for (b, printed_as) in [(8, s88), (6, s66)] {
            let g = count(&m, cifar("static", b, b, b))?
                .totals()
                .gbitops(Accounting::Paper);
            v.push(printed(
                GROUP_STATIC,
                name,
                format!("GBitOPs static {b}/{b}"),
                g,
                printed_as,
            ));
        }
    }
    Ok(v)
}

fn reduction_rows() -> Result<Vec<Row>, ValidationError> {
    let mut v = Vec::new();
    let r74 = totals_model("resnet74", 168_220_928, 716_800);
    let g = count(&r74, cifar("cosine", 3, 8, 8))?
        .totals()
        .gbitops(Accounting::Paper);
    v.push(printed(
        GROUP_CPT,
        "resnet74",
        "GBitOPs CPT 3-8/8".into(),
        g,
        (1.690, 8),
    ));
    let r18 = totals_model("resnet18", 1_814_073_344, 2_483_712);
    let cases = CPT_REDUCTIONS
        .iter()
        .map(|&(lo, hi, bw, want)| (&r74, 64_000, lo, hi, bw, want))
        .chain(
            IMAGENET_REDUCTIONS
                .iter()
                .map(|&(lo, hi, bw, want)| (&r18, 120 * 5005, lo, hi, bw, want)),
        );
    for (m, iters, lo, hi, bw, want) in cases {
        let args = ScheduleArgs::new("cosine", iters)
            .bits(BitRange { min: lo, max: hi })
            .grad_bits(BitRange::fixed(bw));
        let (run, base) = with_baseline(m, args)?;
        v.push(Row {
            group: GROUP_CPT,
            model: m.name.clone(),
            quantity: format!("reduction % CPT {lo}-{hi}/{bw}"),
            reference: want,
            cptsim: 100.0 * (1.0 - run / base),
            tolerance: Tolerance::Absolute(0.005),
        });
    }
    // FracTrain: a ResNet-74 SBM 8/8 run is 2.61e14 fp32-equivalent MACs
    let fp32_eq = count(&r74, cifar("static", 8, 8, 8))?.totals().paper / 1024.0 / 1e12;
    v.push(Row {
        group: GROUP_CPT,
        model: "resnet74".into(),
        quantity: "FracTrain fp32-equivalent TMACs, static 8/8".into(),
        reference: 261.0,
        cptsim: fp32_eq,
        tolerance: Tolerance::Absolute(0.5),
    });
    Ok(v)
}

fn wk_rows() -> Result<Vec<Row>, ValidationError> {
    let m = totals_model("resnet74", 168_220_928, 716_800);
    let mut v = Vec::new();
    for (name, ratios) in WK_RATIOS {
        for ((lo, hi, bw), want) in WK_RANGES.into_iter().zip(ratios) {
            let args = cifar(name, lo, hi, bw)
                .cycles(8)
                .convention(Convention::WolfeKyrillidis);
            let (run, base) = with_baseline(&m, args)?;
            v.push(Row {
                group: GROUP_WK,
                model: "resnet74".into(),
                quantity: format!("cost ratio {name} {lo}-{hi}/{bw}"),
                reference: want,
                cptsim: run / base,
                tolerance: Tolerance::Absolute(0.00005),
            });
        }
    }
    Ok(v)
}

/// The BitOPs rows.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let mut v = static_rows()?;
    v.extend(reduction_rows()?);
    v.extend(wk_rows()?);
    Ok(v)
}
