//! Training-step throughput of a hand-built CIFAR ResNet-20 (spec §9.1) at batch 128, fp32 and
//! SBM 8/8 (all convs quantized, FC fp32), on random 3×32×32 inputs.
//!
//! Run: `cargo bench -p cptsim-sim --bench train_step` (env `CPTSIM_BENCH_THREADS`, default 1;
//! `CPTSIM_BENCH_STEPS`, default 5). Reports wall and CPU-time throughput and the load average.
//! Reference (issue #5): PyTorch, one thread: ≈164 images per CPU-second fp32, ≈156 with 8-bit
//! fake quantization.

use std::time::Instant;

use cptsim_sim::cputime::{load_average_1min, process_cpu_seconds};
use cptsim_sim::init::{conv_weight, linear_weight_bias};
use cptsim_sim::layers::*;
use cptsim_sim::net::Graph;
use cptsim_sim::optim::Sgd;
use cptsim_sim::quant::{LayerQuant, QuantMethod};
use cptsim_sim::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

struct Builder {
    g: Graph,
    rng: ChaCha8Rng,
    n: u64,
}

impl Builder {
    fn conv_bn(
        &mut self,
        input: usize,
        cin: usize,
        cout: usize,
        k: usize,
        s: usize,
    ) -> Result<usize> {
        self.n += 1;
        let name = format!("conv{}", self.n);
        let w = conv_weight(&mut self.rng, cout, [k, k], cin);
        let spec = Conv2dSpec::square(cin, cout, k, s, k / 2);
        let c = Conv2d::new(
            &name,
            spec,
            w,
            None,
            LayerQuant::new(QuantMethod::Sbm, self.n),
        )?;
        self.g.push(c, &[input])?;
        self.g.then(BatchNorm::new(&format!("bn{}", self.n), cout))
    }

    fn relu(&mut self) -> Result<usize> {
        self.g.then(Activation::new("relu", ActivationKind::Relu))
    }

    fn block(&mut self, x: usize, cin: usize, cout: usize, s: usize) -> Result<usize> {
        self.conv_bn(x, cin, cout, 3, s)?;
        let a = self.relu()?;
        let b = self.conv_bn(a, cout, cout, 3, 1)?;
        let short = if s != 1 || cin != cout {
            self.conv_bn(x, cin, cout, 1, s)?
        } else {
            x
        };
        self.g.push(Add::new("add"), &[b, short])?;
        self.relu()
    }
}

fn resnet20(classes: usize) -> Result<Graph> {
    let mut b = Builder {
        g: Graph::new(),
        rng: ChaCha8Rng::seed_from_u64(1),
        n: 0,
    };
    b.conv_bn(0, 3, 16, 3, 1)?;
    let mut x = b.relu()?;
    let mut cin = 16;
    for (stage, width) in [16usize, 32, 64].into_iter().enumerate() {
        for i in 0..3 {
            let s = if stage > 0 && i == 0 { 2 } else { 1 };
            x = b.block(x, cin, width, s)?;
            cin = width;
        }
    }
    b.g.then(GlobalAvgPool::new("gap"))?;
    b.g.then(Flatten::new("flatten"))?;
    let (w, bias) = linear_weight_bias(&mut b.rng, classes, 64);
    b.g.then(Linear::new(
        "fc",
        w,
        Some(bias),
        LayerQuant::new(QuantMethod::Sbm, 0),
    )?)?;
    Ok(b.g)
}

fn run(bits: u32, steps: usize) -> Result<()> {
    let mut g = resnet20(10)?;
    for (name, q) in g.quant_layers_mut() {
        if name.starts_with("conv") {
            q.set_bits(bits, bits)?;
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let x = Tensor::from_shape_simple_fn(vec![128, 32, 32, 3], || rng.random_range(-2.0..2.0));
    let labels: Vec<usize> = (0..128).map(|i| i % 10).collect();
    let mut loss = SoftmaxCrossEntropy::new();
    let mut opt = Sgd::paper();
    let mut step = |g: &mut Graph| -> Result<()> {
        let out = g.forward(x.clone(), Mode::Train)?;
        loss.forward(&out, &labels)?;
        g.backward(loss.backward()?)?;
        opt.step(&mut g.params_mut(), 0.1)
    };
    step(&mut g)?; // warm-up
    let (c0, load0) = (process_cpu_seconds(), load_average_1min());
    let mut times = Vec::new();
    let w0 = Instant::now();
    for _ in 0..steps {
        let t = Instant::now();
        step(&mut g)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let wall = w0.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds() - c0;
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let imgs = (128 * steps) as f64;
    println!(
        "{:<8} step median {:7.1} ms | {:6.1} img/s wall | {:6.1} img per CPU-second | load {:?} → {:?}",
        if bits == 0 { "fp32".to_string() } else { format!("sbm {bits}/{bits}") },
        median * 1e3,
        imgs / wall,
        imgs / cpu.max(1e-9),
        load0,
        load_average_1min()
    );
    Ok(())
}

fn main() {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let threads = env("CPTSIM_BENCH_THREADS", 1);
    let steps = env("CPTSIM_BENCH_STEPS", 5).max(1);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot build a {threads}-thread pool: {e}");
            std::process::exit(2);
        }
    };
    println!("ResNet-20, batch 128, {steps} steps, {threads} thread(s)");
    for bits in [0, 8] {
        if let Err(e) = pool.install(|| run(bits, steps)) {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
