//! Speed of the analytic path of `cptsim run`: synthesise the full 64 000-iteration CPT cosine
//! trace of each CIFAR zoo model, cost it (paper and hardware) and write its binary trace; then
//! read the file back and cost it again.
//!
//! `cargo bench -p cptsim-accel --bench run_speed` — reports wall and CPU time per model (mean of
//! `REPS` repetitions: the kernel accounts thread CPU time at scheduler ticks, too coarse for one
//! ~10 ms run), the load average, and as a reference measured in the same run the bare schedule
//! evaluation.

use std::time::Instant;

use cptsim_accel::{Accounting, BitOpsCounter};
use cptsim_traces::schedule::ScheduleArgs;
use cptsim_traces::{read_trace, synthesize, write_trace, QuantScope, TraceMeta};

const MODELS: [&str; 7] = [
    "resnet20",
    "resnet38",
    "resnet74",
    "resnet110",
    "resnet152",
    "resnet164",
    "mobilenetv2",
];
const BATCH: u64 = 128;
/// Repetitions each time is averaged over.
const REPS: u32 = 20;

/// CPU time of this thread in seconds (scheduler statistics, nanosecond resolution).
fn cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|ns| ns.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns / 1e9)
}

/// Runs `f` `REPS` times, returning its last value and the mean wall and CPU seconds.
fn timed<T>(mut f: impl FnMut() -> T) -> (T, f64, f64) {
    let (w, c) = (Instant::now(), cpu_seconds());
    let mut v = f();
    for _ in 1..REPS {
        v = f();
    }
    let n = f64::from(REPS);
    (v, w.elapsed().as_secs_f64() / n, (cpu_seconds() - c) / n)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let dir = tempfile::tempdir()?;
    let schedule = ScheduleArgs::new("cosine", 64_000).build()?;
    let (spans, wall, cpu) = timed(|| schedule.spans().count());
    println!("reference: schedule evaluation alone, 64000 iterations -> {spans} spans: wall {:.2} ms, cpu {:.2} ms", wall * 1e3, cpu * 1e3);
    println!(
        "{:<12} {:>6} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>11}",
        "model",
        "layers",
        "rows",
        "file KiB",
        "synth wall",
        "synth cpu",
        "read wall",
        "read cpu",
        "GBitOPs"
    );
    for name in MODELS {
        let model = cptsim_models::load_summary(&format!("zoo:{name}"), BATCH as usize)?;
        let path = dir.path().join(format!("{name}.pb"));
        let meta = TraceMeta::for_model(&model, BATCH, schedule.iterations());
        let (result, s_wall, s_cpu) = timed(|| -> Result<_, Box<dyn std::error::Error>> {
            let mut counter = BitOpsCounter::new(&model);
            let rows = synthesize(&schedule, &model, &QuantScope::CPT_CIFAR, BATCH).inspect(|r| {
                // Layer indices of a synthesised trace are in range by construction.
                let _ = counter.add(r);
            });
            let n = write_trace(&path, &meta, rows)?;
            Ok((n, counter.totals()))
        });
        let (rows, totals) = result?;
        let (reread, r_wall, r_cpu) = timed(|| -> Result<_, Box<dyn std::error::Error>> {
            let mut counter = BitOpsCounter::new(&model);
            read_trace(&path, &model, |r| counter.add(r).map_err(|e| e.to_string()))?;
            Ok(counter.totals())
        });
        if reread? != totals {
            return Err(format!("{name}: trace read back costs differently").into());
        }
        let kib = std::fs::metadata(&path)?.len() as f64 / 1024.0;
        println!(
            "{name:<12} {:>6} {rows:>7} {kib:>9.1} {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>11.4e}",
            model.layers.len(),
            s_wall * 1e3,
            s_cpu * 1e3,
            r_wall * 1e3,
            r_cpu * 1e3,
            totals.gbitops(Accounting::Paper)
        );
    }
    Ok(())
}
