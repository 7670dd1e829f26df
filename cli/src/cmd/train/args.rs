//! The command-line flags of `cptsim train` as clap parses them, and their value enums. Nothing
//! here validates or interprets: [`TrainArgs::resolve`](super::plan) turns them into a
//! [`TrainPlan`](super::plan::TrainPlan).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cmd::arith::ArithArgs;
use crate::cmd::quant_scope::ScopeArgs;
use crate::cmd::shared::ConventionArg;
use crate::cmd::shared::{OutputFormat, QuantizerArg};

/// Arguments of `cptsim train`.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainArgs {
    /// The model: `zoo:NAME` or an ONNX file.
    #[arg(long, required_unless_present = "resume")]
    pub(crate) model: Option<String>,
    /// Training data: mnist:DIR, fashion-mnist:DIR, cifar10:DIR, cifar100:DIR or synthetic;
    /// for a language model text:FILE (characters), ptb:DIR or wikitext:DIR (words).
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
    pub(crate) policy: PolicyArg,
    /// LDP settings.
    #[command(flatten)]
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
    /// Which layer roles are quantized.
    #[command(flatten)]
    pub(crate) scope: ScopeArgs,
    /// How the quantized layers multiply.
    #[command(flatten)]
    pub(crate) arith: ArithArgs,
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
    /// Samples per iteration (a language model: token streams).
    #[arg(long, default_value_t = 128)]
    pub(crate) batch: usize,
    /// Tokens per window of a language model (truncated BPTT length) [default: the zoo
    /// model's, or the ONNX file's fixed length].
    #[arg(long)]
    pub(crate) seq_len: Option<usize>,
    /// Base learning rate (the CIFAR recipe's 0.1).
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub(crate) lr: f32,
    /// Learning-rate schedule: cosine (annealed to 0 over the run, whatever its length), constant,
    /// or paper (×0.1 at 50 % and 75 % of the run, the CIFAR recipe's 32k/48k of 64k).
    #[arg(long, value_enum, default_value_t = LrArg::Cosine)]
    pub(crate) lr_schedule: LrArg,
    /// Precision of every evaluation: current (the bits of the iteration it follows, as the
    /// papers did; a cyclic run's last evaluation is then at the top of --bits, since its last
    /// cycle ends on the last iteration), max (forward and backward at the top of --bits and
    /// --grad-bits) or fp32. metrics.csv records the bits each evaluation ran at (0 = fp32).
    #[arg(long, value_enum, default_value_t = EvalBitsArg::Current)]
    pub(crate) eval_bits: EvalBitsArg,
    /// Linear learning-rate warm-up iterations.
    #[arg(long, default_value_t = 0)]
    pub(crate) warmup: u64,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.9, allow_negative_numbers = true)]
    pub(crate) momentum: f32,
    /// Weight decay (all parameters, as the reference code).
    #[arg(long, default_value_t = 1e-4, allow_negative_numbers = true)]
    pub(crate) weight_decay: f32,
    /// Clip the global L2 norm of all gradients to this before each step (PyTorch's
    /// `clip_grad_norm_`; its word_language_model example uses 0.25) [default: no clipping].
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) clip_grad: Option<f32>,
    /// Seed of the initial weights, data order, augmentation and rounding noise.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Initial weights: `seed` re-initialises per spec §9.1 from --seed, `model` keeps the
    /// model's stored weights.
    #[arg(long, value_enum, default_value_t = InitArg::Seed)]
    pub(crate) init: InitArg,
    /// Classes of the model's head [default: the dataset's: 10 for MNIST, Fashion-MNIST and
    /// CIFAR-10, 100 for CIFAR-100; synthetic data follows the model's head]. A zoo model is
    /// built with this head; a label of the data at or above it is an error.
    #[arg(long, value_name = "N")]
    pub(crate) classes: Option<usize>,
    /// Replace an ONNX model's final Linear layer by a freshly initialised one (from --seed) when
    /// its outputs differ from the class count, instead of stopping with an error.
    #[arg(long)]
    pub(crate) reinit_head: bool,
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
    #[arg(long, default_value_t = 1000.0, allow_negative_numbers = true)]
    pub(crate) max_loss: f32,
    /// Stop a run that collapsed to chance (test loss at ln(classes) with chance accuracy over 3
    /// evaluations in a row) with exit code 6, keeping its outputs; without it a collapse is a
    /// warning and `summary.json` `collapsed`.
    #[arg(long)]
    pub(crate) stop_on_collapse: bool,
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
    pub(crate) pfq_check_every: Option<u64>,
    /// DFQ/FracTrain cost target cp in percent of an fp32 iteration [default: 3 for dfq, the
    /// initial 1.5 for fractrain].
    #[arg(long)]
    pub(crate) target_cp: Option<f64>,
    /// DFQ: fixed weight bits of the gated convs.
    #[arg(long, default_value_t = 4)]
    pub(crate) weight_bits: u32,
    /// DFQ candidate (activation, error) bit pairs: cifar (5 options) or imagenet (4).
    #[arg(long, value_enum, default_value_t = CandidatesArg::Cifar)]
    pub(crate) candidates: CandidatesArg,
    /// FracTrain: target increase per turning point Δcp.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) cp_step: f64,
    /// FracTrain: turning points K.
    #[arg(long, default_value_t = 3)]
    pub(crate) cp_turns: usize,
    /// DFQ cost-term weight β.
    #[arg(long, default_value_t = 1e-3)]
    pub(crate) dfq_beta: f64,
    /// DFQ sign-rule dead band (cp within target ± this gets ±0.1; 0 = none).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) dfq_relax: f64,
    /// DFQ/FracTrain block execution in training: `selected` runs each sample's chosen
    /// candidate only and trains the gate by the cost term alone; `all` runs every candidate
    /// over the batch and mixes them, so the gate also gets the task gradient, as the reference
    /// (spec §6.3; about K times the block work and memory).
    #[arg(long, value_enum, default_value_t = DfqExecArg::Selected)]
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
    pub(crate) out: Option<PathBuf>,
    /// Continue the run checkpointed in DIR (its settings are used; outputs go to --out or DIR).
    #[arg(long, value_name = "DIR")]
    pub(crate) resume: Option<PathBuf>,
    /// Stop after this many iterations (checkpoint written) as if interrupted.
    #[arg(long)]
    pub(crate) stop_at: Option<u64>,
    /// Also write a checkpoint (and the outputs so far) whenever this many minutes have passed
    /// since the last one, so that a hard kill (SIGKILL, a crashed node, the OOM killer) loses at
    /// most that much work; 0: only at evaluations. Results do not depend on it.
    #[arg(long, value_name = "MINUTES", default_value_t = 10.0)]
    pub(crate) checkpoint_minutes: f64,
    /// Output format of the final summary.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub(crate) format: OutputFormat,
    /// The ids of the flags given on the command line (not defaulted), filled by `main`; a
    /// resumed run checks them against its checkpoint's plan.
    #[arg(skip)]
    pub(crate) given: Vec<String>,
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

/// `--lr-schedule` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LrArg {
    Constant,
    Cosine,
    Paper,
}

/// `--eval-bits` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EvalBitsArg {
    #[default]
    Current,
    Max,
    Fp32,
}

impl EvalBitsArg {
    /// The value's name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Max => "max",
            Self::Fp32 => "fp32",
        }
    }
}

/// `--init` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum InitArg {
    Seed,
    Model,
}

/// `--candidates` values (spec §6.1).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum CandidatesArg {
    /// (3,6) (4,6) (4,8) (6,8) (6,12).
    #[default]
    Cifar,
    /// (3,6) (4,8) (6,12) (8,16).
    Imagenet,
}

/// `--dfq-exec` values (spec §6.3).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DfqExecArg {
    /// Each sample's selected candidate only; the gate learns from the cost term.
    #[default]
    Selected,
    /// Every candidate, mixed by the masks; the gate also gets the task gradient.
    All,
}

const TARGET: f64 = 0.6;
const LR: f64 = 0.1;
const ALPHA: f64 = 1.0;
const EPS: f64 = 1e-8;

/// The LDP options of `cptsim train` (spec §8; used with `--policy ldp`). Every choice the spec
/// marks unknown is one of them, at the spec's default.
#[derive(clap::Args, Debug, Clone)]
pub struct LdpArgs {
    /// LDP: target forward cost T as a fraction of the static cost (every LDP layer at the
    /// --bits maximum), in (0, 1].
    #[arg(long, default_value_t = TARGET)]
    pub(crate) target: f64,
    /// LDP: how β becomes bits: `scaled` b = clamp(rne(β·B_max), B_min, B_max) (reading 1), or
    /// `offset` b = B_min + rne(β·(B_max − B_min)) (reading 2).
    #[arg(long, value_enum, default_value_t = MappingArg::Scaled)]
    pub(crate) ldp_mapping: MappingArg,
    /// LDP: initial (unrounded) bits of every layer [default: middle of --bits].
    #[arg(long)]
    pub(crate) ldp_init_bits: Option<f64>,
    /// LDP: precision learning rate (SGD on β every iteration).
    #[arg(long, default_value_t = LR)]
    pub(crate) ldp_lr: f64,
    /// LDP: weight α of the balanced cost gradient.
    #[arg(long, default_value_t = ALPHA)]
    pub(crate) ldp_alpha: f64,
    /// LDP: ε in the balancing denominator mean|G_C| + ε.
    #[arg(long, default_value_t = EPS)]
    pub(crate) ldp_eps: f64,
    /// LDP: momentum on β.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) ldp_momentum: f64,
    /// LDP: weight decay on β.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) ldp_weight_decay: f64,
    /// LDP: let β leave the interval mapping to [B_min − ½, B_max + ½] (clipped by default).
    #[arg(long)]
    pub(crate) ldp_no_clip: bool,
}

/// `--ldp-mapping` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MappingArg {
    /// Reading 1: N = B_max.
    Scaled,
    /// Reading 2: B_min + β·(B_max − B_min).
    Offset,
}
