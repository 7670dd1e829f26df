//! The CPT cost table: ZC706, Bit Fusion and Stripes time and energy of CIFAR-100
//! ResNet-74, ResNet-164 and MobileNetV2 trained 64 000 iterations × batch 128 with CPT cosine
//! schedules (period 2 000) and their static baselines. Every layer follows the schedule.
//!
//! Run: `cargo bench -p cptsim-accel --bench figures`

#[allow(dead_code)]
#[path = "../tests/support/cifar_models.rs"]
mod cifar_models;
#[path = "../tests/support/cosine_trace.rs"]
mod cosine_trace;

use cptsim_accel::{cost_trace, Accelerator, TraceCost};
use cptsim_models::summary::ModelSummary;

fn cost(
    model: &ModelSummary,
    acc: &Accelerator,
    lo: u8,
    hi: u8,
    bw: u8,
) -> Result<TraceCost, String> {
    let rows = if lo == hi {
        cosine_trace::static_trace(model, 64_000, hi, bw, 128)
    } else {
        cosine_trace::cosine_trace(model, 64_000, 2_000, lo, hi, bw, 128)
    };
    cost_trace(model, rows, 391, acc).map_err(|e| e.to_string())
}

fn main() {
    let models = [
        cifar_models::cifar_resnet(12, 100),
        cifar_models::cifar_resnet(27, 100),
        cifar_models::cifar_mobilenetv2(100),
    ];
    let mut accs = Vec::new();
    for name in ["zc706", "bitfusion", "stripes"] {
        match Accelerator::load(name) {
            Ok(a) => accs.push(a),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
    println!("| model | schedule | accelerator | time (h) | vs static | energy (J) | vs static | DRAM (TB) |");
    println!("|---|---|---|---|---|---|---|---|");
    for m in &models {
        for (lo, hi, bw) in [
            (8, 8, 8),
            (3, 8, 8),
            (4, 8, 8),
            (6, 6, 6),
            (3, 6, 6),
            (4, 6, 6),
        ] {
            for a in &accs {
                let (c, s) = match (cost(m, a, lo, hi, bw), cost(m, a, hi, hi, bw)) {
                    (Ok(c), Ok(s)) => (c, s),
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("error: {e}");
                        std::process::exit(2);
                    }
                };
                let sched = if lo == hi {
                    format!("static {hi}/{bw}")
                } else {
                    format!("cosine {lo}:{hi}/{bw}")
                };
                println!(
                    "| {} | {sched} | {} | {:.2} | {:+.1} % | {:.4e} | {:+.1} % | {:.2} |",
                    m.name,
                    a.name(),
                    c.totals.latency_s / 3600.0,
                    100.0 * (c.totals.latency_s / s.totals.latency_s - 1.0),
                    c.totals.energy_j(),
                    100.0 * (c.totals.energy_j() / s.totals.energy_j() - 1.0),
                    c.totals.dram_bytes / 1e12
                );
            }
        }
    }
}
