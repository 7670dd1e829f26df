//! The Bit Fusion paper's comparison with Eyeriss on its eight benchmarks (batch 16, per image).
//!
//! References, read off the authors' result files and combined as their notebook combines them:
//! their Eyeriss (`results/eyeriss_results.csv`: time = cycles / 500 MHz / 16, energy = (ALU +
//! RF + array + buffer + 0.15 × DRAM) × 3.2 pJ / 16 with their pooling rows, DRAM words × 2 bytes
//! without them) and their Bit Fusion sweep (the 192-bit rows of
//! `results/bitfusion-eyeriss-sim-sweep.csv`); the paper's headline, 3.9× speed-up and 5.1×
//! energy reduction (geometric means over the eight).
//!
//! cptsim's Eyeriss energy and DRAM are held to theirs per benchmark, its 16×16 array's time in
//! the geometric mean; its Bit Fusion to their sweep on the six benchmarks the sweep ran at the
//! stated bits; and the headline, computed with cptsim's own two models at the bits the sweep
//! ran ([`crate::workload::bench_bits::paper_sweep`]) against the array the authors' Eyeriss data
//! imply (`eyeriss-256pe`), to the paper's within 10 % (speed) and 15 % (energy). The headline
//! at the stated bits and against the Eyeriss chip is shown beside it.

use super::{zoo_model, Row, Tolerance, ValidationError};
use crate::cost::accelerator::Accelerator;
use crate::cost::inference::{cost_inference, geomean};
use crate::workload::bench_bits;

/// (benchmark, the authors' Eyeriss time ms, energy mJ, DRAM MB) per image.
pub const AUTHORS_EYERISS: [(&str, f64, f64, f64); 8] = [
    ("bf-alexnet", 8.7858, 12.834, 13.048),
    ("bf-svhn", 1.4121, 2.7888, 2.496),
    ("bf-cifar10", 5.5192, 10.702, 7.800),
    ("bf-lenet5", 0.13971, 0.30661, 0.432),
    ("bf-vgg7", 2.7032, 5.7029, 4.679),
    ("bf-resnet18", 11.936, 19.646, 18.468),
    ("bf-rnn", 0.13107, 0.40402, 2.122),
    ("bf-lstm", 0.10260, 0.32284, 1.649),
];

/// (benchmark, the authors' Bit Fusion time ms, energy mJ) per image, same order.
pub const AUTHORS_BITFUSION: [(&str, f64, f64); 8] = [
    ("bf-alexnet", 4.708, 8.247),
    ("bf-svhn", 0.1647, 0.2638),
    ("bf-cifar10", 0.4117, 0.7245),
    ("bf-lenet5", 0.0513, 0.0713),
    ("bf-vgg7", 0.3528, 0.5781),
    ("bf-resnet18", 6.135, 10.60),
    ("bf-rnn", 0.0493, 0.0786),
    ("bf-lstm", 0.0421, 0.0675),
];

/// The paper's headline: Bit Fusion's geometric-mean speed-up and energy reduction over Eyeriss.
pub const HEADLINE: (f64, f64) = (3.9, 5.1);

/// Per image: time ms, energy mJ, DRAM MB.
pub type PerImage = (f64, f64, f64);

/// Which bits the benchmarks run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchBits {
    /// As the benchmark definitions state them.
    Stated,
    /// As the authors' sweep ran them.
    PaperSweep,
}

/// cptsim's per-image costs of every benchmark on accelerator `accel` at `bits`, batch 16.
pub fn costs(accel: &str, bits: BenchBits) -> Result<Vec<PerImage>, ValidationError> {
    let acc = Accelerator::load(accel).map_err(|e| ValidationError::of(accel, e))?;
    AUTHORS_EYERISS
        .iter()
        .map(|(name, ..)| {
            let model = zoo_model(name, None)?;
            let b = match bits {
                BenchBits::Stated => bench_bits::stated(name),
                BenchBits::PaperSweep => bench_bits::paper_sweep(name),
            }
            .ok_or_else(|| ValidationError::of(*name, "no benchmark bits"))?;
            let c =
                cost_inference(&model, &b, 16, &acc).map_err(|e| ValidationError::of(*name, e))?;
            Ok((
                c.latency_per_image_s() * 1e3,
                c.energy_per_image_j() * 1e3,
                c.totals.dram_bytes / 16.0 / 1e6,
            ))
        })
        .collect()
}

/// Geometric-mean speed-up and energy reduction of `fast` over `base`.
pub fn headline(base: &[PerImage], fast: &[PerImage]) -> Result<(f64, f64), ValidationError> {
    let ratio = |f: fn(&PerImage) -> f64| {
        let v: Vec<f64> = base.iter().zip(fast).map(|(b, x)| f(b) / f(x)).collect();
        geomean(&v).ok_or_else(|| ValidationError::of("headline", "no benchmarks"))
    };
    Ok((ratio(|c| c.0)?, ratio(|c| c.1)?))
}

const GROUP_EYERISS: &str = "Eyeriss: the Bit Fusion authors' Eyeriss";
const GROUP_BITFUSION: &str = "Bit Fusion: the authors' sweep, per benchmark";
const GROUP_HEADLINE: &str = "Bit Fusion over Eyeriss: the paper's headline";

fn eyeriss_rows(accel: &str, c: &[PerImage]) -> Vec<Row> {
    let mut v = Vec::new();
    for ((name, _, mj, mb), (_, e, d)) in AUTHORS_EYERISS.iter().zip(c) {
        v.push(Row {
            group: GROUP_EYERISS,
            model: format!("{name} on {accel}"),
            quantity: "energy mJ per image".into(),
            reference: *mj,
            cptsim: *e,
            tolerance: Tolerance::Relative(0.10),
        });
        v.push(Row {
            group: GROUP_EYERISS,
            model: format!("{name} on {accel}"),
            quantity: "DRAM MB per image".into(),
            reference: *mb,
            cptsim: *d,
            tolerance: Tolerance::Relative(0.25),
        });
    }
    v
}

/// The Eyeriss and headline rows.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let chip = costs("eyeriss", BenchBits::Stated)?;
    let big = costs("eyeriss-256pe", BenchBits::Stated)?;
    let stated = costs("bitfusion", BenchBits::Stated)?;
    let sweep = costs("bitfusion", BenchBits::PaperSweep)?;
    let mut v = eyeriss_rows("eyeriss", &chip);
    v.extend(eyeriss_rows("eyeriss-256pe", &big));
    let time: Vec<f64> = AUTHORS_EYERISS
        .iter()
        .zip(&big)
        .map(|(a, c)| c.0 / a.1)
        .collect();
    v.push(Row {
        group: GROUP_EYERISS,
        model: "8 benchmarks on eyeriss-256pe".into(),
        quantity: "time / the authors' (geomean)".into(),
        reference: 1.0,
        cptsim: geomean(&time)
            .ok_or_else(|| ValidationError::of("eyeriss-256pe", "no benchmarks"))?,
        tolerance: Tolerance::Relative(0.10),
    });
    // the sweep's six stated-bits benchmarks; AlexNet and ResNet-18 ran at 8-bit throughput
    for ((name, ms, mj), (t, e, _)) in AUTHORS_BITFUSION.iter().zip(&stated) {
        let held = bench_bits::stated(name) == bench_bits::paper_sweep(name);
        let tolerance = |r| {
            if held {
                Tolerance::Relative(r)
            } else {
                Tolerance::Info
            }
        };
        for (quantity, reference, cptsim, tol) in [
            ("time ms per image, stated bits", *ms, *t, 0.005),
            ("energy mJ per image, stated bits", *mj, *e, 0.015),
        ] {
            v.push(Row {
                group: GROUP_BITFUSION,
                model: (*name).into(),
                quantity: quantity.into(),
                reference,
                cptsim,
                tolerance: tolerance(tol),
            });
        }
    }
    let (speed, energy) = HEADLINE;
    let mut headline_rows = |base: &str, b: &[PerImage], bits: &str, f: &[PerImage], held| {
        let (s, e) = headline(b, f)?;
        for (quantity, reference, cptsim, tol) in [
            ("speed-up (geomean)", speed, s, 0.10),
            ("energy reduction (geomean)", energy, e, 0.15),
        ] {
            v.push(Row {
                group: GROUP_HEADLINE,
                model: format!("bitfusion at {bits} bits over {base}"),
                quantity: quantity.into(),
                reference,
                cptsim,
                tolerance: if held {
                    Tolerance::Relative(tol)
                } else {
                    Tolerance::Info
                },
            });
        }
        Ok::<(), ValidationError>(())
    };
    headline_rows("eyeriss-256pe", &big, "paper-sweep", &sweep, true)?;
    headline_rows("eyeriss", &chip, "paper-sweep", &sweep, false)?;
    headline_rows("eyeriss-256pe", &big, "stated", &stated, false)?;
    headline_rows("eyeriss", &chip, "stated", &stated, false)?;
    Ok(v)
}
