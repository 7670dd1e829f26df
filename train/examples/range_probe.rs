//! Where a short cyclic run's final evaluation takes its activation ranges from: trains LeNet-5
//! on Fashion-MNIST as `cptsim train --model zoo:lenet5 --data fashion-mnist:… --batch 128 --lr
//! 0.05` does (SBM, cosine lr, momentum 0.9, weight decay 1e-4), then evaluates the final weights
//! at the final bits three ways: with the running activation ranges the run ends with (what
//! `train` reports), with each test batch's own ranges, and with running ranges re-estimated
//! from scratch over `RECAL` training batches (default 50) at the final bits. Prints the three
//! accuracies and each quantized layer's running input range (lo, range) before and after.
//!
//! `cargo run --release -p cptsim-train --example range_probe -- SEED ITERS static|cosine [CYCLES]
//! [BMIN]` from the workspace root (reads `../shared/data/fashion-mnist`; static runs 8/8,
//! cosine BMIN-8/8, BMIN default 3, 32 cycles).
use cptsim_nn::build::{build_network, BuildOptions, Init};
use cptsim_nn::data::{load_mnist, Loader, Split};
use cptsim_nn::layers::Mode;
use cptsim_nn::optim::{LrPolicy, LrSchedule};
use cptsim_nn::quant::{QuantMethod, RangeEma};
use cptsim_traces::schedule::{BitRange, ScheduleArgs};
use cptsim_train::{SchedulePolicy, TrainConfig, TrainData, TrainNet, Trainer};

fn ranges(tr: &mut Trainer<'_>) -> String {
    tr.net
        .graph
        .quant_layers_mut()
        .iter()
        .map(|(name, q)| format!("{name} [{:.3}, {:.3}]", q.act_range.lo, q.act_range.range))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let seed: u64 = a[1].parse().unwrap();
    let iters: u64 = a[2].parse().unwrap();
    let schedule = a[3].as_str();
    let cycles: u64 = a.get(4).map_or(32, |s| s.parse().unwrap());
    let bmin: u8 = a.get(5).map_or(3, |s| s.parse().unwrap());
    let recal: usize = std::env::var("RECAL").map_or(50, |s| s.parse().unwrap());
    let graph = cptsim_models::load_graph("zoo:lenet5", 128).unwrap();
    let opts = BuildOptions {
        init: Init::Seeded(seed),
        method: QuantMethod::Sbm,
        noise_seed: seed,
        scope: Default::default(),
    };
    let net = TrainNet::from_network(build_network(&graph, &opts).unwrap()).unwrap();
    let dir = std::path::Path::new("../shared/data/fashion-mnist");
    let data = TrainData {
        train: load_mnist(dir, Split::Train, true).unwrap(),
        test: load_mnist(dir, Split::Test, true).unwrap(),
        val: None,
    };
    let fw = match schedule {
        "static" => BitRange::fixed(8),
        _ => BitRange { min: bmin, max: 8 },
    };
    let sched = ScheduleArgs::new(schedule, iters)
        .bits(fw)
        .grad_bits(BitRange::fixed(8))
        .cycles(cycles)
        .build()
        .unwrap();
    let cfg = TrainConfig {
        iterations: iters,
        batch: 128,
        lr: LrPolicy {
            base_lr: 0.05,
            schedule: LrSchedule::Cosine {
                total: iters,
                min_lr: 0.0,
            },
            warmup: 0,
        },
        seed,
        eval_every: iters,
        eval_batch: 500,
        ..TrainConfig::new(iters, 0.05)
    };
    let mut tr = Trainer::new(net, &data, cfg, Box::new(SchedulePolicy(sched))).unwrap();
    while !tr.done() {
        tr.step().unwrap();
    }
    let reported = tr.state.evals.last().map_or(f64::NAN, |e| e.test_acc);
    let before = ranges(&mut tr);
    for (_, q) in tr.net.graph.quant_layers_mut() {
        q.batch_range_in_eval = true;
    }
    let (_, own) = tr.evaluate(&data.test).unwrap();
    let mut loader = Loader::new(&data.train, 128, tr.net.input, false, seed ^ 0x5eed).unwrap();
    for (_, q) in tr.net.graph.quant_layers_mut() {
        q.batch_range_in_eval = false;
        q.act_range = RangeEma::default();
    }
    for _ in 0..recal {
        let b = loader.next_batch().unwrap();
        tr.net.graph.forward(b.images, Mode::Train).unwrap();
    }
    let (_, recalibrated) = tr.evaluate(&data.test).unwrap();
    println!(
        "seed {seed} iters {iters} {schedule} cycles {cycles} bmin {bmin}: running {:.2} own {:.2} \
         recalibrated {:.2}",
        100.0 * reported,
        100.0 * own,
        100.0 * recalibrated
    );
    println!("  running ranges      {before}");
    println!("  recalibrated ranges {}", ranges(&mut tr));
}
