//! Benchmark: cost the 64 000-iteration CPT cosine trace FW(3,8)/BW8 of ResNet-74 (CIFAR-100,
//! batch 128, cycles of 2 000 iterations) on the three accelerators, cold caches, CPU time.
//!
//! Run: `cargo bench -p cptsim-accel --bench trace_cost`

#[allow(dead_code)]
#[path = "../tests/support/cifar_models.rs"]
mod cifar_models;
#[allow(dead_code)]
#[path = "../tests/support/cosine_trace.rs"]
mod cosine_trace;

use std::time::Instant;

use cptsim_accel::{cost_trace, Accelerator};

/// CPU time of this process (user + system), seconds, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the ')'
    (ticks(11) + ticks(12)) / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn main() {
    let model = cifar_models::cifar_resnet(12, 100);
    let rows = cosine_trace::cosine_trace(&model, 64_000, 2_000, 3, 8, 8, 128);
    println!(
        "trace: {} rows, load average {}",
        rows.len(),
        load_average()
    );
    let mut total_cpu = 0.0;
    for name in ["zc706", "bitfusion", "stripes"] {
        let acc = match Accelerator::load(name) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        };
        let (c0, w0) = (cpu_seconds(), Instant::now());
        let cost = match cost_trace(&model, rows.iter().copied(), 391, &acc) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        };
        let cpu = cpu_seconds() - c0;
        total_cpu += cpu;
        println!(
            "{name:>10}: {:.2} h, {:.3e} J, {:.3e} DRAM bytes, {} searches; cpu {:.3} s, wall {:.3} s",
            cost.totals.latency_s / 3600.0,
            cost.totals.energy_j(),
            cost.totals.dram_bytes,
            cost.evaluations,
            cpu,
            w0.elapsed().as_secs_f64()
        );
    }
    println!(
        "all three: cpu {total_cpu:.3} s (target < 1 s); load average {}",
        load_average()
    );
}
