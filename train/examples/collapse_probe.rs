//! The instrumented LeNet-5 run behind README "Collapsed runs": `cptsim train`'s MNIST recipe
//! (static bits, batch 128, cosine lr over the run, momentum 0.9, weight decay 1e-4), printing
//! for every iteration, before the step, the statistics of the forward pass on the batch that
//! step trains on: per ReLU output (and the logits) its range, mean, share of positive values
//! (`pos`), share of positive values an 8-bit min/max grid rounds to its lowest level (`q0`) and
//! how many channels are positive for some sample (`live`). The probe pass leaves the training
//! trajectory unchanged (the range EMA it touches is restored).
//!
//! `cargo run --release -p cptsim-train --example collapse_probe -- SEED sbm|dorefa|none FW BW ITERS
//! [LR] [WARMUP]` from the workspace root (reads `../shared/data/mnist`); `PROBE_SHOW` lists the
//! values to print (default `relu1,relu2,relu_fc1,relu_fc2,fc3`).
use cptsim_nn::build::{build_network, BuildOptions, Init};
use cptsim_nn::data::{load_mnist, Loader, Split};
use cptsim_nn::layers::Mode;
use cptsim_nn::optim::{LrPolicy, LrSchedule};
use cptsim_nn::quant::QuantMethod;
use cptsim_traces::schedule::{BitRange, ScheduleArgs};
use cptsim_train::{SchedulePolicy, TrainConfig, TrainData, TrainNet, Trainer};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let seed: u64 = a[1].parse().unwrap();
    let method = a[2].as_str();
    let fw: u8 = a[3].parse().unwrap();
    let bw: u8 = a[4].parse().unwrap();
    let iters: u64 = a[5].parse().unwrap();
    let lr: f32 = a.get(6).map_or(0.1, |s| s.parse().unwrap());
    let warmup: u64 = a.get(7).map_or(0, |s| s.parse().unwrap());
    let graph = cptsim_models::load_graph("zoo:lenet5", 128).unwrap();
    let opts = BuildOptions {
        init: Init::Seeded(seed),
        method: match method {
            "dorefa" => QuantMethod::Dorefa,
            _ => QuantMethod::Sbm,
        },
        noise_seed: seed,
        scope: Default::default(),
    };
    let net = TrainNet::from_network(build_network(&graph, &opts).unwrap()).unwrap();
    let dir = std::path::Path::new("../shared/data/mnist");
    let data = TrainData {
        train: load_mnist(dir, Split::Train, false).unwrap(),
        test: load_mnist(dir, Split::Test, false).unwrap(),
        val: None,
    };
    let sched = ScheduleArgs::new("static", iters)
        .bits(BitRange::fixed(fw))
        .grad_bits(BitRange::fixed(bw))
        .build()
        .unwrap();
    let cfg = TrainConfig {
        iterations: iters,
        batch: 128,
        lr: LrPolicy {
            base_lr: lr,
            schedule: LrSchedule::Cosine {
                total: iters,
                min_lr: 0.0,
            },
            warmup,
        },
        seed,
        eval_every: iters,
        eval_batch: 500,
        quantize: method != "none",
        ..TrainConfig::new(iters, lr)
    };
    let mut loader = Loader::new(&data.train, 128, net.input, false, seed).unwrap();
    let mut tr = Trainer::new(net, &data, cfg, Box::new(SchedulePolicy(sched))).unwrap();
    let names: Vec<String> = (0..tr.net.graph.len())
        .map(|i| tr.net.graph.layer_mut(i).unwrap().name().to_string())
        .collect();
    let show: Vec<&str> = std::env::var("PROBE_SHOW")
        .unwrap_or_else(|_| "relu1,relu2,relu_fc1,relu_fc2,fc3".into())
        .leak()
        .split(',')
        .collect();
    while !tr.done() {
        let t = tr.state.iteration;
        let batch = loader.next_batch().unwrap();
        let _ = tr.policy.apply(t, &mut tr.net, method != "none");
        let saved: Vec<_> = tr
            .net
            .graph
            .quant_layers_mut()
            .iter()
            .map(|(_, q)| q.act_range)
            .collect();
        let mut line = String::new();
        {
            let mut hook =
                |v: usize, out: &cptsim_nn::layers::Tensor, _p: cptsim_nn::net::Pending<'_>| {
                    let name = &names[v - 1];
                    if show.contains(&name.as_str()) {
                        let s = out.as_slice().unwrap();
                        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
                        let mut pos = 0usize;
                        let mut q = 0usize; // positive values that an 8-bit min/max grid rounds to the lowest level
                        for &x in s {
                            lo = lo.min(x);
                            hi = hi.max(x);
                            pos += usize::from(x > 0.0);
                        }
                        let step = (hi - lo) / 255.0;
                        for &x in s {
                            if x > 0.0 && (x - lo) / step < 0.5 {
                                q += 1;
                            }
                        }
                        let mean = s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64;
                        // per-unit liveness: fraction of units (last axis) positive for some sample
                        let c = *out.shape().last().unwrap();
                        let mut alive = vec![false; c];
                        for (i, &x) in s.iter().enumerate() {
                            if x > 0.0 {
                                alive[i % c] = true;
                            }
                        }
                        let live = alive.iter().filter(|&&b| b).count();
                        line += &format!(
                        " | {name} [{lo:.2},{hi:.2}] m{mean:.3} pos{:.2} q0{:.2} live{live}/{c}",
                        pos as f64 / s.len() as f64,
                        q as f64 / pos.max(1) as f64
                    );
                    }
                    Ok(())
                };
            tr.net
                .graph
                .forward_with(batch.images, Mode::Train, &mut hook)
                .unwrap();
        }
        for ((_, q), r) in tr.net.graph.quant_layers_mut().into_iter().zip(saved) {
            q.act_range = r;
        }
        let r = tr.step().unwrap();
        println!("{t} loss {:.3} acc {:.2}{line}", r.loss, r.train_acc);
        if let Some(e) = r.eval {
            println!("eval {:.4} {:.4}", e.test_loss, e.test_acc);
        }
    }
}
