//! The command-line flags of `cptsim train`: a thin front of [`TrainPlan`], one flag per plan
//! key (the key with `-` for `_`), defaults and value names taken from the plan's.
//! [`TrainArgs::to_plan`] turns them into the plan; the plan validates itself.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::ArgMatches;
use cptsim_train::plan::{
    CandidatesKind, Choice, Convention, DfqExecKind, EvalBitsKind, FwBw, InitKind, LrKind,
    MappingKind, PlanError, PolicyKind, Quantizer, Range, Stages,
};
use cptsim_train::TrainPlan;

use crate::cmd::arith::ArithArgs;
use crate::cmd::quant_scope::ScopeArgs;
use crate::cmd::shared::OutputFormat;

/// The plan's defaults (the flags' defaults).
fn d() -> TrainPlan {
    TrainPlan::default()
}

/// Parses a flag whose values are a plan [`Choice`], listing each value with its line of help.
fn choice<T: Choice + Clone>() -> impl TypedValueParser<Value = T> {
    let values = T::VALUES
        .iter()
        .map(|(_, name, help)| PossibleValue::new(*name).help(help.trim()));
    PossibleValuesParser::new(values).map(|name| T::from_name(&name).unwrap_or(T::VALUES[0].0))
}

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
    #[arg(long, value_parser = choice::<PolicyKind>(), default_value_t = d().policy)]
    pub(crate) policy: PolicyKind,
    /// Precision schedule (any name `cptsim run` accepts), or `pfq` for the PFQ loss-plateau
    /// indicator (see --pfq-*).
    #[arg(long, default_value_t = d().schedule)]
    pub(crate) schedule: String,
    /// Forward bits MIN:MAX (one number = fixed) [default: 3:8].
    #[arg(long)]
    pub(crate) bits: Option<String>,
    /// Backward (error) bits, a number or MIN:MAX [default: 8].
    #[arg(long)]
    pub(crate) grad_bits: Option<String>,
    /// Cycles of a cyclic schedule.
    #[arg(long, default_value_t = d().cycles)]
    pub(crate) cycles: u64,
    /// Whose reference code cyclic schedules follow: cpt (P = T/N) or wk (P = T/N + 1).
    #[arg(long, value_parser = choice::<Convention>(), default_value_t = d().convention)]
    pub(crate) convention: Convention,
    /// Quantizer simulating low precision; `none` trains in fp32.
    #[arg(long, value_parser = choice::<Quantizer>(), default_value_t = d().quantizer)]
    pub(crate) quantizer: Quantizer,
    /// Which layer roles are quantized.
    #[command(flatten)]
    pub(crate) scope: ScopeArgs,
    /// How the quantized layers multiply.
    #[command(flatten)]
    pub(crate) arith: ArithArgs,
    /// Run depthwise convs at a fixed precision FW/BW instead of the schedule (FracTrain's model
    /// file uses 8/16; see docs/src/guide/shared-flags.md) [default: follow the schedule].
    #[arg(long, value_name = "FW/BW")]
    pub(crate) depthwise_bits: Option<String>,
    /// Training iterations [default: 390, unless --epochs].
    #[arg(long, conflicts_with = "epochs")]
    pub(crate) iters: Option<u64>,
    /// Passes over the training set (instead of --iters).
    #[arg(long)]
    pub(crate) epochs: Option<u64>,
    /// Samples per iteration (a language model: token streams).
    #[arg(long, default_value_t = d().batch)]
    pub(crate) batch: usize,
    /// Tokens per window of a language model (truncated BPTT length), or per synthetic
    /// sequence of a sequence classifier [default: the zoo model's, or the ONNX file's fixed
    /// length].
    #[arg(long)]
    pub(crate) seq_len: Option<usize>,
    /// Base learning rate (the CIFAR recipe's 0.1).
    #[arg(long, default_value_t = d().lr, allow_negative_numbers = true)]
    pub(crate) lr: f32,
    /// Learning-rate schedule: cosine (annealed to 0 over the run, whatever its length), constant,
    /// or paper (×0.1 at 50 % and 75 % of the run, the CIFAR recipe's 32k/48k of 64k).
    #[arg(long, value_parser = choice::<LrKind>(), default_value_t = d().lr_schedule)]
    pub(crate) lr_schedule: LrKind,
    /// Precision of every evaluation: current (the bits of the iteration it follows, as the
    /// papers did; a cyclic run's last evaluation is then at the top of --bits, since its last
    /// cycle ends on the last iteration), max (forward and backward at the top of --bits and
    /// --grad-bits) or fp32. metrics.csv records the bits each evaluation ran at (0 = fp32).
    #[arg(long, value_parser = choice::<EvalBitsKind>(), default_value_t = d().eval_bits)]
    pub(crate) eval_bits: EvalBitsKind,
    /// Linear learning-rate warm-up iterations.
    #[arg(long, default_value_t = d().warmup)]
    pub(crate) warmup: u64,
    /// SGD momentum.
    #[arg(long, default_value_t = d().momentum, allow_negative_numbers = true)]
    pub(crate) momentum: f32,
    /// Weight decay (all parameters, as the reference code).
    #[arg(long, default_value_t = d().weight_decay, allow_negative_numbers = true)]
    pub(crate) weight_decay: f32,
    /// Clip the global L2 norm of all gradients to this before each step (PyTorch's
    /// `clip_grad_norm_`; its word_language_model example uses 0.25) [default: no clipping].
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) clip_grad: Option<f32>,
    /// Seed of the initial weights, data order, augmentation and rounding noise.
    #[arg(long, default_value_t = d().seed)]
    pub(crate) seed: u64,
    /// Initial weights: `seed` re-initialises from --seed (the weights `zoo export --seed` writes
    /// for a zoo model: conv N(0, 2/(k·k·C_out)), Linear PyTorch's U(±1/√C_in) but a CIFAR
    /// classifier's N(0, 2/(C_in·C_out))), `model` keeps the model's stored weights.
    #[arg(long, value_parser = choice::<InitKind>(), default_value_t = d().init)]
    pub(crate) init: InitKind,
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
    /// Evaluate on the first N test samples only (images or synthetic sequences; a corpus's test
    /// split is used whole): a quicker evaluation for a large model.
    #[arg(long, value_name = "N")]
    pub(crate) test_subset: Option<usize>,
    /// Hold out this fraction of the training set as a validation set (reported per evaluation).
    #[arg(long, default_value_t = d().val_split)]
    pub(crate) val_split: f64,
    /// Evaluate on the test set (and write a checkpoint) every N iterations.
    #[arg(long, default_value_t = d().eval_every)]
    pub(crate) eval_every: u64,
    /// Disable the random crop/flip augmentation of CIFAR.
    #[arg(long)]
    pub(crate) no_augment: bool,
    /// A loss above this (or NaN) stops the run.
    #[arg(long, default_value_t = d().max_loss, allow_negative_numbers = true)]
    pub(crate) max_loss: f32,
    /// Stop a run that collapsed to chance (test loss at ln(classes) with chance accuracy over 3
    /// evaluations in a row) with exit code 6, keeping its outputs; without it a collapse is a
    /// warning and `summary.json` `collapsed`.
    #[arg(long)]
    pub(crate) stop_on_collapse: bool,
    /// PFQ forward stage list.
    #[arg(long, default_value_t = d().pfq_fw.to_string())]
    pub(crate) pfq_fw: String,
    /// PFQ backward stage list.
    #[arg(long, default_value_t = d().pfq_bw.to_string())]
    pub(crate) pfq_bw: String,
    /// PFQ initial plateau threshold ε.
    #[arg(long, default_value_t = d().pfq_eps)]
    pub(crate) pfq_eps: f64,
    /// PFQ threshold decay α.
    #[arg(long, default_value_t = d().pfq_alpha)]
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
    #[arg(long, default_value_t = d().weight_bits)]
    pub(crate) weight_bits: u32,
    /// DFQ candidate (activation, error) bit pairs: cifar (5 options) or imagenet (4).
    #[arg(long, value_parser = choice::<CandidatesKind>(), default_value_t = d().candidates)]
    pub(crate) candidates: CandidatesKind,
    /// FracTrain: target increase per turning point Δcp.
    #[arg(long, default_value_t = d().cp_step)]
    pub(crate) cp_step: f64,
    /// FracTrain: turning points K.
    #[arg(long, default_value_t = d().cp_turns)]
    pub(crate) cp_turns: usize,
    /// DFQ cost-term weight β.
    #[arg(long, default_value_t = d().dfq_beta)]
    pub(crate) dfq_beta: f64,
    /// DFQ sign-rule dead band (cp within target ± this gets ±0.1; 0 = none).
    #[arg(long, default_value_t = d().dfq_relax)]
    pub(crate) dfq_relax: f64,
    /// DFQ/FracTrain block execution in training: `selected` runs each sample's chosen
    /// candidate only and trains the gate by the cost term alone; `all` runs every candidate
    /// over the batch and mixes them, so the gate also gets the task gradient, as the reference
    /// (see docs/src/methods/dfq.md; about K times the block work and memory).
    #[arg(long, value_parser = choice::<DfqExecKind>(), default_value_t = d().dfq_exec)]
    pub(crate) dfq_exec: DfqExecKind,
    /// Run the Precision Range Test first and use the bound it finds as B_min of the schedule.
    #[arg(long)]
    pub(crate) prt: bool,
    /// PRT: first forward precision.
    #[arg(long, default_value_t = d().prt_start_bits)]
    pub(crate) prt_start_bits: u8,
    /// PRT: iterations per precision step.
    #[arg(long, default_value_t = d().prt_iters_per_step)]
    pub(crate) prt_iters_per_step: u64,
    /// PRT: iterations at the end of each step whose training accuracy is averaged.
    #[arg(long, default_value_t = d().prt_window)]
    pub(crate) prt_window: u64,
    /// PRT: training-accuracy gain (percentage points) that marks B_min.
    #[arg(long, default_value_t = d().prt_threshold)]
    pub(crate) prt_threshold: f64,
    /// LDP: target forward cost T as a fraction of the static cost (every LDP layer at the
    /// --bits maximum), in (0, 1].
    #[arg(long, default_value_t = d().target)]
    pub(crate) target: f64,
    /// LDP: how β becomes bits: `scaled` b = clamp(rne(β·B_max), B_min, B_max) (reading 1), or
    /// `offset` b = B_min + rne(β·(B_max − B_min)) (reading 2).
    #[arg(long, value_parser = choice::<MappingKind>(), default_value_t = d().ldp_mapping)]
    pub(crate) ldp_mapping: MappingKind,
    /// LDP: initial (unrounded) bits of every layer [default: middle of --bits].
    #[arg(long)]
    pub(crate) ldp_init_bits: Option<f64>,
    /// LDP: precision learning rate (SGD on β every iteration).
    #[arg(long, default_value_t = d().ldp_lr)]
    pub(crate) ldp_lr: f64,
    /// LDP: weight α of the balanced cost gradient.
    #[arg(long, default_value_t = d().ldp_alpha)]
    pub(crate) ldp_alpha: f64,
    /// LDP: ε in the balancing denominator mean|G_C| + ε.
    #[arg(long, default_value_t = d().ldp_eps)]
    pub(crate) ldp_eps: f64,
    /// LDP: momentum on β.
    #[arg(long, default_value_t = d().ldp_momentum)]
    pub(crate) ldp_momentum: f64,
    /// LDP: weight decay on β.
    #[arg(long, default_value_t = d().ldp_weight_decay)]
    pub(crate) ldp_weight_decay: f64,
    /// LDP: let β leave the interval mapping to [B_min − ½, B_max + ½] (clipped by default).
    #[arg(long)]
    pub(crate) ldp_no_clip: bool,
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
    #[arg(long, value_name = "MINUTES", default_value_t = d().checkpoint_minutes)]
    pub(crate) checkpoint_minutes: f64,
    /// Worker threads of the run [default: RAYON_NUM_THREADS, else one per core]. Results do
    /// not depend on it.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Cost the trace the run records on these accelerators when it ends (comma-separated
    /// built-in names or TOML config paths; see `cptsim accel list`): latency and energy against
    /// the static baseline, in the summary and its summary.json.
    #[arg(long, value_delimiter = ',', num_args = 1.., value_name = "NAME|PATH")]
    pub(crate) accel: Vec<String>,
    /// Output format of the final summary.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub(crate) format: OutputFormat,
    /// The ids of the flags given on the command line (not defaulted), filled by `main`; a
    /// resumed run checks them against its checkpoint's plan.
    #[arg(skip)]
    pub(crate) given: Vec<String>,
}

/// Parses a text flag's value into its plan type, the error naming the flag.
fn parse<T: std::str::FromStr<Err = String>>(key: &str, text: &str) -> Result<T, PlanError> {
    text.parse()
        .map_err(|m| PlanError::new(key, format!("{}: {m}", cptsim_train::plan::flag(key))))
}

impl TrainArgs {
    /// The plan these flags say (not validated: a resumed run takes most of its plan from the
    /// checkpoint; [`TrainPlan::validate`] checks a new one).
    pub(crate) fn to_plan(&self) -> Result<TrainPlan, PlanError> {
        let range = |key: &str, flag, text: &Option<String>, default: Range| match text {
            Some(t) => Range::parse_checked(flag, t).map_err(|m| PlanError::new(key, m)),
            None => Ok(default),
        };
        let depthwise_bits = match &self.depthwise_bits {
            Some(t) => Some(parse::<FwBw>("depthwise_bits", t)?),
            None => None,
        };
        Ok(TrainPlan {
            model: self.model.clone().unwrap_or_default(),
            data: self.data.clone().unwrap_or_default(),
            policy: self.policy,
            schedule: self.schedule.clone(),
            bits: range("bits", "--bits", &self.bits, d().bits)?,
            grad_bits: range("grad_bits", "--grad-bits", &self.grad_bits, d().grad_bits)?,
            cycles: self.cycles,
            convention: self.convention,
            quantizer: self.quantizer,
            quantize_first: self.scope.quantize_first,
            quantize_last: self.scope.quantize_last,
            quantize_shortcut: self.scope.quantize_shortcut,
            quantize_depthwise: self.scope.quantize_depthwise,
            arithmetic: self.arith.arithmetic.clone(),
            accumulator: self.arith.accumulator.clone(),
            depthwise_bits,
            iters: self.iters,
            epochs: self.epochs,
            batch: self.batch,
            seq_len: self.seq_len,
            lr: self.lr,
            lr_schedule: self.lr_schedule,
            eval_bits: self.eval_bits,
            warmup: self.warmup,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            clip_grad: self.clip_grad,
            seed: self.seed,
            init: self.init,
            classes: self.classes,
            reinit_head: self.reinit_head,
            subset: self.subset,
            test_subset: self.test_subset,
            val_split: self.val_split,
            eval_every: self.eval_every,
            no_augment: self.no_augment,
            max_loss: self.max_loss,
            stop_on_collapse: self.stop_on_collapse,
            pfq_fw: parse::<Stages>("pfq_fw", &self.pfq_fw)?,
            pfq_bw: parse::<Stages>("pfq_bw", &self.pfq_bw)?,
            pfq_eps: self.pfq_eps,
            pfq_alpha: self.pfq_alpha,
            pfq_check_every: self.pfq_check_every,
            target_cp: self.target_cp,
            weight_bits: self.weight_bits,
            candidates: self.candidates,
            cp_step: self.cp_step,
            cp_turns: self.cp_turns,
            dfq_beta: self.dfq_beta,
            dfq_relax: self.dfq_relax,
            dfq_exec: self.dfq_exec,
            prt: self.prt,
            prt_start_bits: self.prt_start_bits,
            prt_iters_per_step: self.prt_iters_per_step,
            prt_window: self.prt_window,
            prt_threshold: self.prt_threshold,
            target: self.target,
            ldp_mapping: self.ldp_mapping,
            ldp_init_bits: self.ldp_init_bits,
            ldp_lr: self.ldp_lr,
            ldp_alpha: self.ldp_alpha,
            ldp_eps: self.ldp_eps,
            ldp_momentum: self.ldp_momentum,
            ldp_weight_decay: self.ldp_weight_decay,
            ldp_no_clip: self.ldp_no_clip,
            out: self.out.clone(),
            stop_at: self.stop_at,
            checkpoint_minutes: self.checkpoint_minutes,
            threads: self.threads,
        })
    }
}

/// The ids of the flags given on the command line of `train` (not defaulted): its plan keys.
pub fn given_flags(matches: Option<&ArgMatches>) -> Vec<String> {
    let Some(m) = matches else { return Vec::new() };
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TrainArgs,
    }

    fn plan(extra: &[&str]) -> Result<TrainPlan, String> {
        let mut argv = vec!["t", "--model", "zoo:lenet5", "--data", "synthetic"];
        argv.extend_from_slice(extra);
        let args = Cli::try_parse_from(argv).map_err(|e| e.to_string())?.args;
        let plan = args.to_plan().map_err(|e| e.to_string())?;
        plan.validate().map_err(|e| e.to_string())?;
        Ok(plan)
    }

    #[test]
    fn the_flags_defaults_are_the_plans_and_each_flag_is_its_key() {
        let mut want = TrainPlan {
            model: "zoo:lenet5".into(),
            data: "synthetic".into(),
            ..TrainPlan::default()
        };
        assert_eq!(plan(&[]).unwrap(), want);
        let got = plan(&[
            "--policy",
            "ldp",
            "--ldp-lr",
            "0.5",
            "--no-augment",
            "--bits",
            "3:6",
        ]);
        (want.policy, want.ldp_lr, want.no_augment) = (PolicyKind::Ldp, 0.5, true);
        want.bits = Range::new(3, 6);
        assert_eq!(got.unwrap(), want);
        let keys = TrainPlan::keys();
        let cmd = <Cli as clap::CommandFactory>::command();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            // --accel costs the finished run's trace: the cost, not the run, takes it
            if !["format", "resume", "help", "given", "accel"].contains(&id) {
                assert!(keys.iter().any(|k| k == id), "flag --{id} is no plan key");
            }
        }
    }

    #[test]
    fn flag_values_are_checked_with_the_flag_named() {
        for (extra, needle) in [
            (&["--pfq-fw", "3,x"][..], "--pfq-fw"),
            (&["--bits", "9:3"], "--bits"),
            (&["--depthwise-bits", "8"], "--depthwise-bits"),
            (&["--policy", "lpd"], "lpd"),
            (&["--batch", "0"], "--batch"),
        ] {
            let e = plan(extra).unwrap_err();
            assert!(e.contains(needle), "{extra:?}: {e}");
        }
    }
}
