//! `cptsim train`: quantized training of an imported model on real or synthetic data under a
//! precision schedule, PFQ or PRT; writes the trace, metrics, checkpoint and summary into `--out`
//! and resumes exactly from a checkpoint with `--resume`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cptsim_sim::build::{build_network, BuildOptions, Init, QuantScope};
use cptsim_sim::quant::QuantMethod;
use cptsim_sim::train::{checkpoint, TrainNet, Trainer};
use cptsim_sim::SimError;
use cptsim_traces::Bits;
use serde::{Deserialize, Serialize};

use super::run::ConventionArg;
use super::train_dfq::{self, CandidatesArg, DfqExecArg};
use super::train_ldp::{self as ldp, LdpArgs};
use super::train_output::{self as output, Progress, Summary};
use super::train_policy;
use super::train_setup as setup;

const CHECKPOINT: &str = "checkpoint.bin";

/// Arguments of `cptsim train`.
#[derive(clap::Args, Debug, Clone, Serialize, Deserialize)]
pub struct TrainArgs {
    /// The model: `zoo:NAME` or an ONNX file.
    #[arg(long, required_unless_present = "resume")]
    pub(crate) model: Option<String>,
    /// Training data: mnist:DIR, fashion-mnist:DIR, cifar10:DIR, cifar100:DIR or synthetic.
    #[arg(long, required_unless_present = "resume")]
    pub(crate) data: Option<String>,
    /// Who decides the precision: `schedule` (--schedule, PFQ or PRT, for every in-scope layer),
    /// `ldp` (learned per-layer forward bits in --bits MIN:MAX at fixed --grad-bits, see --target
    /// and --ldp-*), `dfq` (an LSTM gate picks each sample's activation/error bits per residual
    /// block, weights at --weight-bits; the gate learns from the cost term only — the cheap
    /// per-sample execution does not compute the unselected candidates its task-loss gradient
    /// needs) or `fractrain` (DFQ whose cp target the PFQ indicator raises by --cp-step, see
    /// --pfq-eps/--pfq-alpha).
    #[arg(long, value_enum, default_value_t = PolicyArg::Schedule)]
    #[serde(default)]
    pub(crate) policy: PolicyArg,
    /// LDP settings.
    #[command(flatten)]
    #[serde(default)]
    pub(crate) ldp: LdpArgs,
    /// Precision schedule (any name `cptsim run` accepts), or `pfq` for the PFQ loss-plateau
    /// indicator (see --pfq-*).
    #[arg(long, default_value = "static")]
    pub(crate) schedule: String,
    /// Forward bits MIN:MAX (one number = fixed) [default: 3:8].
    #[arg(long)]
    pub(crate) bits: Option<String>,
    /// Backward (error) bits, a number or MIN:MAX [default: 8].
    #[arg(long)]
    pub(crate) grad_bits: Option<String>,
    /// Cycles of a cyclic schedule.
    #[arg(long, default_value_t = 32)]
    pub(crate) cycles: u64,
    /// Whose reference code cyclic schedules follow: cpt (P = T/N) or wk (P = T/N + 1).
    #[arg(long, value_enum, default_value_t = ConventionArg::Cpt)]
    pub(crate) convention: ConventionArg,
    /// Quantizer simulating low precision; `none` trains in fp32.
    #[arg(long, value_enum, default_value_t = QuantizerArg::Sbm)]
    pub(crate) quantizer: QuantizerArg,
    /// Quantize the first layer (default: yes for inputs under 64 px, spec §1.4).
    #[arg(long)]
    pub(crate) quantize_first: Option<bool>,
    /// Quantize the classifier (default: no).
    #[arg(long)]
    pub(crate) quantize_last: Option<bool>,
    /// Quantize 1×1 shortcut convs (default: as the first layer).
    #[arg(long)]
    pub(crate) quantize_shortcut: Option<bool>,
    /// Quantize depthwise convs (default: yes).
    #[arg(long)]
    pub(crate) quantize_depthwise: Option<bool>,
    /// Run depthwise convs at a fixed precision FW/BW instead of the schedule (FracTrain's model
    /// file uses 8/16; spec §1.4) [default: follow the schedule].
    #[arg(long, value_name = "FW/BW")]
    pub(crate) depthwise_bits: Option<String>,
    /// Training iterations [default: 390].
    #[arg(long, conflicts_with = "epochs")]
    pub(crate) iters: Option<u64>,
    /// Passes over the training set (instead of --iters).
    #[arg(long)]
    pub(crate) epochs: Option<u64>,
    /// Samples per iteration.
    #[arg(long, default_value_t = 128)]
    pub(crate) batch: usize,
    /// Base learning rate (the CIFAR recipe's 0.1).
    #[arg(long, default_value_t = 0.1)]
    pub(crate) lr: f32,
    /// Learning-rate schedule: cosine (annealed to 0 over the run, whatever its length), constant,
    /// or paper (×0.1 at 50 % and 75 % of the run, the CIFAR recipe's 32k/48k of 64k).
    #[arg(long, value_enum, default_value_t = LrArg::Cosine)]
    pub(crate) lr_schedule: LrArg,
    /// Linear learning-rate warm-up iterations.
    #[arg(long, default_value_t = 0)]
    pub(crate) warmup: u64,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9)]
    pub(crate) momentum: f32,
    /// Weight decay (all parameters, as the reference code).
    #[arg(long, default_value_t = 1e-4)]
    pub(crate) weight_decay: f32,
    /// Seed of the initial weights, data order, augmentation and rounding noise.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Initial weights: `seed` re-initialises per spec §9.1 from --seed, `model` keeps the
    /// model's stored weights.
    #[arg(long, value_enum, default_value_t = InitArg::Seed)]
    pub(crate) init: InitArg,
    /// Train on the first N training images only.
    #[arg(long)]
    pub(crate) subset: Option<usize>,
    /// Hold out this fraction of the training set as a validation set (reported per evaluation).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) val_split: f64,
    /// Evaluate on the test set (and write a checkpoint) every N iterations [default: 390].
    #[arg(long)]
    pub(crate) eval_every: Option<u64>,
    /// Disable the random crop/flip augmentation of CIFAR.
    #[arg(long)]
    pub(crate) no_augment: bool,
    /// A loss above this (or NaN) stops the run.
    #[arg(long, default_value_t = 1000.0)]
    pub(crate) max_loss: f32,
    /// PFQ forward stage list.
    #[arg(long, default_value = "3,4,6,8")]
    pub(crate) pfq_fw: String,
    /// PFQ backward stage list.
    #[arg(long, default_value = "6,6,8,8")]
    pub(crate) pfq_bw: String,
    /// PFQ initial plateau threshold ε.
    #[arg(long, default_value_t = 0.05)]
    pub(crate) pfq_eps: f64,
    /// PFQ threshold decay α.
    #[arg(long, default_value_t = 0.3)]
    pub(crate) pfq_alpha: f64,
    /// PFQ/FracTrain: check the loss-plateau indicator every N iterations [default: at each
    /// evaluation, every --eval-every, as the reference code]. Short runs need checks more often
    /// than evaluations: the indicator needs 5 checks per turning point.
    #[arg(long, value_name = "N")]
    #[serde(default)]
    pub(crate) pfq_check_every: Option<u64>,
    /// DFQ/FracTrain cost target cp in percent of an fp32 iteration [default: 3 for dfq, the
    /// initial 1.5 for fractrain].
    #[arg(long)]
    #[serde(default)]
    pub(crate) target_cp: Option<f64>,
    /// DFQ: fixed weight bits of the gated convs.
    #[arg(long, default_value_t = 4)]
    #[serde(default)]
    pub(crate) weight_bits: u32,
    /// DFQ candidate (activation, error) bit pairs: cifar (5 options) or imagenet (4).
    #[arg(long, value_enum, default_value_t = CandidatesArg::Cifar)]
    #[serde(default)]
    pub(crate) candidates: CandidatesArg,
    /// FracTrain: target increase per turning point Δcp.
    #[arg(long, default_value_t = 0.5)]
    #[serde(default)]
    pub(crate) cp_step: f64,
    /// FracTrain: turning points K.
    #[arg(long, default_value_t = 3)]
    #[serde(default)]
    pub(crate) cp_turns: usize,
    /// DFQ cost-term weight β.
    #[arg(long, default_value_t = 1e-3)]
    #[serde(default)]
    pub(crate) dfq_beta: f64,
    /// DFQ sign-rule dead band (cp within target ± this gets ±0.1; 0 = none).
    #[arg(long, default_value_t = 0.0)]
    #[serde(default)]
    pub(crate) dfq_relax: f64,
    /// DFQ/FracTrain block execution in training: `selected` runs each sample's chosen
    /// candidate only and trains the gate by the cost term alone; `all` runs every candidate
    /// over the batch and mixes them, so the gate also gets the task gradient, as the reference
    /// (spec §6.3; about K times the block work and memory).
    #[arg(long, value_enum, default_value_t = DfqExecArg::Selected)]
    #[serde(default)]
    pub(crate) dfq_exec: DfqExecArg,
    /// Run the Precision Range Test first and use the bound it finds as B_min of the schedule.
    #[arg(long)]
    pub(crate) prt: bool,
    /// PRT: first forward precision.
    #[arg(long, default_value_t = 2)]
    pub(crate) prt_start_bits: u8,
    /// PRT: iterations per precision step.
    #[arg(long, default_value_t = 60)]
    pub(crate) prt_iters_per_step: u64,
    /// PRT: iterations at the end of each step whose training accuracy is averaged.
    #[arg(long, default_value_t = 10)]
    pub(crate) prt_window: u64,
    /// PRT: training-accuracy gain (percentage points) that marks B_min.
    #[arg(long, default_value_t = 4.0)]
    pub(crate) prt_threshold: f64,
    /// Directory for trace.pb, trace.csv, metrics.csv, checkpoint.bin and summary.json.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) out: Option<PathBuf>,
    /// Continue the run checkpointed in DIR (its settings are used; outputs go to --out or DIR).
    #[arg(long, value_name = "DIR")]
    #[serde(skip)]
    pub(crate) resume: Option<PathBuf>,
    /// Stop after this many iterations (checkpoint written) as if interrupted.
    #[arg(long)]
    #[serde(skip)]
    pub(crate) stop_at: Option<u64>,
    /// Output format of the final summary.
    #[arg(long, value_enum, default_value_t = FormatArg::Table)]
    #[serde(skip)]
    pub(crate) format: FormatArg,
}

/// `--policy` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PolicyArg {
    /// The precision follows --schedule (static, cyclic, pfq) or --prt.
    #[default]
    Schedule,
    /// LDP: learnable per-layer precision (spec §8).
    Ldp,
    /// DFQ: an LSTM gate picks each sample's (activation, error) bits per residual block (§6).
    Dfq,
    /// FracTrain: DFQ whose cp target the PFQ indicator raises by --cp-step per turning point (§7).
    Fractrain,
}

impl PolicyArg {
    /// The name the summary reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Schedule => "schedule",
            Self::Ldp => "ldp",
            Self::Dfq => "dfq",
            Self::Fractrain => "fractrain",
        }
    }
}

/// `--quantizer` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QuantizerArg {
    Sbm,
    Dorefa,
    Wageubn,
    None,
}

impl QuantizerArg {
    /// The engine's method, `None` for fp32 training.
    pub(crate) fn method(self) -> Option<QuantMethod> {
        match self {
            Self::Sbm => Some(QuantMethod::Sbm),
            Self::Dorefa => Some(QuantMethod::Dorefa),
            Self::Wageubn => Some(QuantMethod::Wageubn),
            Self::None => None,
        }
    }
}

/// `--lr-schedule` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LrArg {
    Constant,
    Cosine,
    Paper,
}

/// `--init` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum InitArg {
    Seed,
    Model,
}

/// `--format` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub(crate) enum FormatArg {
    #[default]
    Table,
    Json,
}

/// What the checkpoint keeps besides the trainer state.
#[derive(Serialize, Deserialize)]
struct Saved {
    args: TrainArgs,
    seconds: f64,
}

/// Runs the subcommand.
pub fn run(mut args: TrainArgs) -> anyhow::Result<()> {
    cptsim_sim::malloc::keep_large_blocks();
    let mut seconds_before = 0.0;
    let resume = match args.resume.clone() {
        Some(dir) => {
            let path = dir.join(CHECKPOINT);
            let ck = checkpoint::load(&path).context("--resume")?;
            let saved: Saved = serde_json::from_value(ck.header.settings.clone())
                .with_context(|| format!("--resume: {}: settings unreadable", path.display()))?;
            let (out, stop_at, format) = (args.out.take(), args.stop_at, args.format);
            args = TrainArgs {
                out: Some(out.unwrap_or_else(|| dir.clone())),
                resume: Some(dir),
                stop_at,
                format,
                ..saved.args
            };
            seconds_before = saved.seconds;
            Some(ck)
        }
        None => None,
    };
    let model_spec = args.model.clone().unwrap_or_default();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
    }
    let graph = cptsim_models::load_graph(&model_spec, args.batch.max(1))
        .with_context(|| format!("--model {model_spec}"))?;
    let opts = BuildOptions {
        init: match args.init {
            InitArg::Seed => Init::Seeded(args.seed),
            InitArg::Model => Init::FromModel,
        },
        method: args.quantizer.method().unwrap_or(QuantMethod::Sbm),
        noise_seed: args.seed,
        scope: QuantScope {
            first: args.quantize_first,
            last: args.quantize_last,
            shortcut: args.quantize_shortcut,
            depthwise: args.quantize_depthwise,
        },
    };
    let network = build_network(&graph, &opts).with_context(|| format!("--model {model_spec}"))?;
    let summary = network.summary().clone();
    let mut net =
        TrainNet::from_network(network).with_context(|| format!("--model {model_spec}"))?;
    setup::fix_depthwise(&args, &summary, &mut net)?;
    let dfq = train_dfq::build(&args, &graph, &opts, &summary, &mut net)?;
    let data = setup::load_data(&args, net.input, net.classes)?;
    let iterations = setup::iterations(&args, data.train.len())?;
    let (policy, fw, bw) = train_policy::build(&args, iterations, &net, &summary, dfq)?;
    let config = setup::config(&args, iterations)?;
    let mut tr = Trainer::new(net, &data, config, policy)?;
    let adaptation = tr.adaptation();
    if adaptation.is_needed() {
        eprintln!("{}", adaptation.describe());
    }
    if let Some(ck) = resume {
        ck.restore(&mut tr).context("--resume")?;
        eprintln!("resumed at iteration {}/{iterations}", tr.state.iteration);
    }
    let stop = args.stop_at.unwrap_or(iterations).min(iterations);
    let mut progress = Progress::new(tr.state.iteration, iterations);
    let out = args.out.clone();
    let save = |tr: &mut Trainer<'_>, progress: &Progress| -> anyhow::Result<()> {
        let Some(dir) = &out else { return Ok(()) };
        let saved = Saved {
            args: args.clone(),
            seconds: seconds_before + progress.seconds(),
        };
        checkpoint::save(&dir.join(CHECKPOINT), tr, serde_json::to_value(saved)?)?;
        let rows = tr.rows();
        output::write_traces(dir, &summary, args.batch as u64, tr.state.iteration, &rows)?;
        ldp::write_plot(dir, tr, &rows)?;
        tr.policy
            .write_artefacts(dir, tr.state.iteration)
            .with_context(|| format!("--out {}", dir.display()))?;
        output::write_metrics(dir, &tr.state.evals)
    };
    while tr.state.iteration < stop {
        let report = match tr.step() {
            Ok(r) => r,
            Err(e @ SimError::Diverged { .. }) => {
                let kept = match (&out, tr.state.evals.last()) {
                    (Some(dir), Some(last)) => format!(
                        "; the last good checkpoint (iteration {}) is {}",
                        last.iteration,
                        dir.join(CHECKPOINT).display()
                    ),
                    (Some(_), None) => "; no checkpoint was written yet".into(),
                    (None, _) => "; no --out, so no checkpoint".into(),
                };
                bail!("{e}: stopped{kept} (try a lower --lr or higher --bits)");
            }
            Err(e) => return Err(e.into()),
        };
        progress.step(&report);
        if report.eval.is_some() {
            save(&mut tr, &progress)?;
        }
    }
    if !tr.done() {
        save(&mut tr, &progress)?;
        eprintln!(
            "stopped at iteration {stop}/{iterations} (--stop-at); continue with --resume {}",
            out.as_deref()
                .map_or("DIR".into(), |d| d.display().to_string())
        );
        return Ok(());
    }
    let rows = tr.rows();
    let (gbitops, static_gbitops) =
        output::cost(&summary, &rows, Bits::forward_backward(fw.max, bw.max))?;
    let cpu = progress.train_cpu_seconds();
    let secs = progress.seconds();
    let iterations_done = tr.state.iteration;
    let report = tr.policy.report(&mut tr.net, &rows, iterations_done);
    let last = tr.state.evals.last();
    let result = Summary {
        policy: args.policy.name(),
        target: report.target,
        achieved: report.achieved,
        ldp: report.layers,
        final_test_acc: last.map_or(0.0, |e| e.test_acc),
        best_test_acc: tr.state.best_test_acc(),
        gbitops,
        static_gbitops,
        iterations: iterations_done,
        seconds: seconds_before + secs,
        images_per_s: progress.images() as f64 / progress.train_seconds().max(1e-9),
        cpu_seconds: cpu,
        images_per_cpu_s: progress.images() as f64 / cpu.max(1e-9),
        load_average: cptsim_sim::cputime::load_average_1min(),
        prt_bits: report.prt_bits,
        pfq_turns: report.turns,
    };
    if let Some(dir) = &out {
        output::write_summary(dir, &result)?;
    }
    print(&args, &result, fw.max, bw.max, out.as_deref());
    Ok(())
}

fn print(args: &TrainArgs, s: &Summary, fw: u8, bw: u8, out: Option<&Path>) {
    if matches!(args.format, FormatArg::Json) {
        match serde_json::to_string_pretty(s) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("error: {e}"),
        }
        return;
    }
    println!(
        "model           {}",
        args.model.as_deref().unwrap_or_default()
    );
    println!("schedule        {}", args.schedule);
    if let Some(b) = s.prt_bits {
        println!("PRT bound       B_min = {b} bits");
    }
    if let Some(t) = &s.pfq_turns {
        println!("PFQ turns       {t:?}");
    }
    if let (Some(t), Some(a), true) = (s.target, s.achieved, s.ldp.is_none()) {
        println!("policy          {}", s.policy);
        println!(
            "cp target       {t:.3} %, achieved {a:.3} % (mean of the last 10 % of iterations)"
        );
    }
    if let Some(l) = &s.ldp {
        println!("policy          ldp");
        println!(
            "LDP cost        target {:.3}  achieved {}  (C/T_static, last 10 % of iterations)",
            s.target.unwrap_or_default(),
            s.achieved.map_or("-".into(), |a| format!("{a:.3}"))
        );
        let bits: Vec<String> = l.final_bits.iter().map(|b| b.bits.to_string()).collect();
        println!("final bits      {}", bits.join(" "));
        println!(
            "inference       {:.4} GBitOPs/image  (static {:.4}, Σ MAC·b²)",
            l.inference_gbitops, l.static_inference_gbitops
        );
    }
    println!("iterations      {}", s.iterations);
    println!("final test acc  {:.2} %", 100.0 * s.final_test_acc);
    println!("best test acc   {:.2} %", 100.0 * s.best_test_acc);
    println!("GBitOPs         {:.4e}", s.gbitops);
    println!(
        "static          {:.4e}  (FW {fw}, BW {bw})",
        s.static_gbitops
    );
    println!(
        "time            {:.1} s, {:.0} img/s, {:.0} img per CPU-s",
        s.seconds, s.images_per_s, s.images_per_cpu_s
    );
    if let Some(d) = out {
        println!("outputs         {}", d.display());
    }
}
