//! The validated, versioned settings of one training run. [`TrainArgs::resolve`] turns the parsed
//! flags into a [`TrainPlan`]: every value parsed and typed, every default applied, every
//! flag-level rule checked. The plan — not the flags — is what the checkpoint stores, so renaming
//! a flag does not break `--resume`, and a plan can be built and serialised without clap (a sweep
//! builds one per cell, then calls [`TrainPlan::validate`]).

use anyhow::{bail, Context};
use cptsim_traces::schedule::BitRange;
use cptsim_traces::QuantScope;
use serde::{Deserialize, Serialize};

use super::args::{
    CandidatesArg, DfqExecArg, EvalBitsArg, InitArg, LrArg, MappingArg, PolicyArg, TrainArgs,
};
use crate::cmd::arith::ArithArgs;
use crate::cmd::shared::ConventionArg;
use crate::cmd::shared::{bit_range, QuantizerArg};
use cptsim_nn::quant::arith::ArithSpec;

/// Version of [`TrainPlan`]'s serialised form; a checkpoint with another is rejected.
///
/// 2: `classes` and `reinit_head` (a zoo head follows the dataset's class count, where version 1
/// kept the model's default head) and the data directory stored absolute.
pub(crate) const PLAN_VERSION: u32 = 2;

/// Iterations when neither `--iters` nor `--epochs` is given, and the default `--eval-every`.
const DEFAULT_ITERATIONS: u64 = 390;

/// An inclusive bit range (serialisable form of [`BitRange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Range {
    pub(crate) min: u8,
    pub(crate) max: u8,
}

impl Range {
    pub(crate) fn bit_range(self) -> BitRange {
        BitRange {
            min: self.min,
            max: self.max,
        }
    }

    fn from_bit_range(r: BitRange) -> Self {
        Self {
            min: r.min,
            max: r.max,
        }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.min == self.max {
            true => write!(f, "{}", self.min),
            false => write!(f, "{}:{}", self.min, self.max),
        }
    }
}

/// How long the run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Length {
    /// A number of iterations.
    Iterations(u64),
    /// Passes over the training set (iterations follow from its size and the batch).
    Epochs(u64),
}

/// PFQ stage lists and the plateau indicator (also FracTrain's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PfqPlan {
    pub(crate) fw: Vec<u8>,
    pub(crate) bw: Vec<u8>,
    pub(crate) epsilon: f64,
    pub(crate) alpha: f64,
    /// Check the indicator every N iterations instead of at each evaluation.
    pub(crate) check_every: Option<u64>,
}

/// The Precision Range Test, when on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PrtPlan {
    pub(crate) start_bits: u8,
    pub(crate) iters_per_step: u64,
    pub(crate) window: u64,
    pub(crate) threshold: f64,
}

/// DFQ/FracTrain settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct DfqPlan {
    /// cp target (%), `None` = the policy's default.
    pub(crate) target_cp: Option<f64>,
    pub(crate) weight_bits: u32,
    pub(crate) candidates: CandidatesArg,
    pub(crate) cp_step: f64,
    pub(crate) cp_turns: usize,
    pub(crate) beta: f64,
    pub(crate) relax: f64,
    pub(crate) exec: DfqExecArg,
}

/// LDP settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct LdpPlan {
    pub(crate) target: f64,
    pub(crate) mapping: MappingArg,
    pub(crate) init_bits: Option<f64>,
    pub(crate) lr: f64,
    pub(crate) alpha: f64,
    pub(crate) eps: f64,
    pub(crate) momentum: f64,
    pub(crate) weight_decay: f64,
    pub(crate) clip: bool,
}

fn fp32_arithmetic() -> String {
    "fp32".into()
}

fn exact_accumulator() -> String {
    "exact".into()
}

impl TrainPlan {
    /// The arithmetic of the run's quantized GEMMs.
    pub(crate) fn arith(&self) -> anyhow::Result<ArithSpec> {
        ArithArgs {
            arithmetic: self.arithmetic.clone(),
            accumulator: self.accumulator.clone(),
        }
        .spec(self.quantizer)
    }
}

/// Everything that determines a training run's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrainPlan {
    /// [`PLAN_VERSION`] when written.
    pub(crate) version: u32,
    /// `zoo:NAME` or an ONNX file.
    pub(crate) model: String,
    /// `mnist:DIR`, …, or `synthetic`.
    pub(crate) data: String,
    pub(crate) policy: PolicyArg,
    /// A schedule name of the traces crate, or `pfq`.
    pub(crate) schedule: String,
    pub(crate) bits: Range,
    pub(crate) grad_bits: Range,
    pub(crate) cycles: u64,
    pub(crate) convention: ConventionArg,
    pub(crate) quantizer: QuantizerArg,
    pub(crate) scope: QuantScope,
    /// `--arithmetic` and `--accumulator` (a plan from before them: fp32).
    #[serde(default = "fp32_arithmetic")]
    pub(crate) arithmetic: String,
    #[serde(default = "exact_accumulator")]
    pub(crate) accumulator: String,
    /// Fixed (forward, backward) bits of depthwise convs.
    pub(crate) depthwise_bits: Option<(u8, u8)>,
    pub(crate) length: Length,
    pub(crate) batch: usize,
    /// `--seq-len` (a language model's window).
    #[serde(default)]
    pub(crate) seq_len: Option<usize>,
    pub(crate) lr: f32,
    pub(crate) lr_schedule: LrArg,
    /// `--eval-bits` (plans written before it existed evaluated at the current bits).
    #[serde(default)]
    pub(crate) eval_bits: EvalBitsArg,
    pub(crate) warmup: u64,
    pub(crate) momentum: f32,
    pub(crate) weight_decay: f32,
    /// `--clip-grad` (plans before it never clipped).
    #[serde(default)]
    pub(crate) clip_grad: Option<f32>,
    pub(crate) seed: u64,
    pub(crate) init: InitArg,
    /// `--classes`: outputs of the head (`None` = the dataset's count).
    pub(crate) classes: Option<usize>,
    /// `--reinit-head`.
    pub(crate) reinit_head: bool,
    pub(crate) subset: Option<usize>,
    pub(crate) val_split: f64,
    pub(crate) eval_every: u64,
    pub(crate) augment: bool,
    pub(crate) max_loss: f32,
    /// `--stop-on-collapse`.
    #[serde(default)]
    pub(crate) stop_on_collapse: bool,
    pub(crate) pfq: PfqPlan,
    pub(crate) prt: Option<PrtPlan>,
    pub(crate) dfq: DfqPlan,
    pub(crate) ldp: LdpPlan,
}

fn stage_list(flag: &str, text: &str) -> anyhow::Result<Vec<u8>> {
    text.split(',')
        .map(|s| {
            s.trim()
                .parse::<u8>()
                .with_context(|| format!("{flag}: `{s}` is not a bit-width"))
        })
        .collect()
}

/// Parses `FW/BW` (each a bit-width in 1..=32).
fn parse_fw_bw(text: &str) -> Result<(u8, u8), String> {
    let bad = || format!("expected FW/BW such as 8/16, got '{text}'");
    let (fw, bw) = text.split_once('/').ok_or_else(bad)?;
    let one = |s: &str| match s.trim().parse::<u8>() {
        Ok(b) if (1..=32).contains(&b) => Ok(b),
        _ => Err(format!(
            "'{}' is not a bit-width in 1..=32 (in '{text}')",
            s.trim()
        )),
    };
    Ok((one(fw)?, one(bw)?))
}

/// `path` made absolute against the working directory (not resolving links), so a plan read back
/// by `--resume` from another directory finds the same files.
fn absolute(flag: &str, path: &str) -> anyhow::Result<String> {
    let abs = std::path::absolute(path).with_context(|| format!("{flag} {path}"))?;
    abs.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("{flag}: path {} is not UTF-8", p.to_string_lossy()))
}

/// Whether `--data` names a text corpus (a language model's data).
pub(crate) fn is_text(spec: &str) -> bool {
    matches!(
        spec.split_once(':').map(|(kind, _)| kind),
        Some("text" | "ptb" | "wikitext")
    )
}

/// `--model` with a file path made absolute (`zoo:NAME` as is).
fn absolute_model(spec: &str) -> anyhow::Result<String> {
    match spec.starts_with("zoo:") {
        true => Ok(spec.to_string()),
        false => absolute("--model", spec),
    }
}

/// `--data KIND:PATH` with PATH made absolute (`synthetic` as is).
fn absolute_data(spec: &str) -> anyhow::Result<String> {
    match spec.split_once(':') {
        Some((kind, path)) if !path.is_empty() => {
            Ok(format!("{kind}:{}", absolute("--data", path)?))
        }
        _ => Ok(spec.to_string()),
    }
}

impl TrainArgs {
    /// The validated plan of these flags (`--model`/`--data` must be given; a resumed run takes
    /// its plan from the checkpoint instead).
    pub(crate) fn resolve(&self) -> anyhow::Result<TrainPlan> {
        let (Some(model), Some(data)) = (&self.model, &self.data) else {
            bail!("--model and --data are required (or --resume DIR)");
        };
        let depthwise_bits = match self.depthwise_bits.as_deref() {
            Some(text) => {
                let fw_bw =
                    parse_fw_bw(text).map_err(|m| anyhow::anyhow!("--depthwise-bits: {m}"))?;
                if self.scope.quantize_depthwise == Some(false) {
                    bail!(
                        "--depthwise-bits {text} contradicts --quantize-depthwise false (drop one of them)"
                    );
                }
                Some(fw_bw)
            }
            None => None,
        };
        let length = match (self.iters, self.epochs) {
            (Some(i), None) => Length::Iterations(i),
            (None, Some(e)) => Length::Epochs(e),
            (None, None) => Length::Iterations(DEFAULT_ITERATIONS),
            (Some(_), Some(_)) => bail!("--iters and --epochs: give one of them"),
        };
        let l = &self.ldp;
        let plan = TrainPlan {
            version: PLAN_VERSION,
            model: absolute_model(model)?,
            data: absolute_data(data)?,
            policy: self.policy,
            schedule: self.schedule.clone(),
            bits: Range::from_bit_range(bit_range("--bits", self.bits.as_deref(), "3:8")?),
            grad_bits: Range::from_bit_range(bit_range(
                "--grad-bits",
                self.grad_bits.as_deref(),
                "8",
            )?),
            cycles: self.cycles,
            convention: self.convention,
            quantizer: self.quantizer,
            scope: self.scope.scope(),
            arithmetic: {
                self.arith.spec(self.quantizer)?;
                self.arith.arithmetic.clone()
            },
            accumulator: self.arith.accumulator.clone(),
            depthwise_bits,
            length,
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
            val_split: self.val_split,
            eval_every: self.eval_every.unwrap_or(DEFAULT_ITERATIONS),
            augment: !self.no_augment,
            max_loss: self.max_loss,
            stop_on_collapse: self.stop_on_collapse,
            pfq: PfqPlan {
                fw: stage_list("--pfq-fw", &self.pfq_fw)?,
                bw: stage_list("--pfq-bw", &self.pfq_bw)?,
                epsilon: self.pfq_eps,
                alpha: self.pfq_alpha,
                check_every: self.pfq_check_every,
            },
            prt: self.prt.then_some(PrtPlan {
                start_bits: self.prt_start_bits,
                iters_per_step: self.prt_iters_per_step,
                window: self.prt_window,
                threshold: self.prt_threshold,
            }),
            dfq: DfqPlan {
                target_cp: self.target_cp,
                weight_bits: self.weight_bits,
                candidates: self.candidates,
                cp_step: self.cp_step,
                cp_turns: self.cp_turns,
                beta: self.dfq_beta,
                relax: self.dfq_relax,
                exec: self.dfq_exec,
            },
            ldp: LdpPlan {
                target: l.target,
                mapping: l.ldp_mapping,
                init_bits: l.ldp_init_bits,
                lr: l.ldp_lr,
                alpha: l.ldp_alpha,
                eps: l.ldp_eps,
                momentum: l.ldp_momentum,
                weight_decay: l.ldp_weight_decay,
                clip: !l.ldp_no_clip,
            },
        };
        plan.validate()?;
        Ok(plan)
    }
}

impl TrainPlan {
    /// Checks the rules that need no model or data (those that do are checked when the run is
    /// set up): positive sizes and rates, and which settings each policy accepts.
    pub(crate) fn validate(&self) -> anyhow::Result<()> {
        if self.version != PLAN_VERSION {
            bail!(
                "train plan version {} (this cptsim reads {PLAN_VERSION})",
                self.version
            );
        }
        if matches!(self.length, Length::Iterations(0) | Length::Epochs(0)) {
            bail!("--iters/--epochs: a run needs at least 1 iteration");
        }
        if self.batch == 0 {
            bail!("--batch: a batch needs at least 1 sample");
        }
        if self.seq_len == Some(0) {
            bail!("--seq-len: a window needs at least 1 token");
        }
        if self.seq_len.is_some() && !is_text(&self.data) {
            bail!(
                "--seq-len: `--data {}` is not text (text:FILE, ptb:DIR or wikitext:DIR)",
                self.data
            );
        }
        if is_text(&self.data) && self.policy != PolicyArg::Schedule {
            bail!(
                "--policy {}: language models train under --policy schedule (its per-sample and \
                 learned policies are written for image models)",
                self.policy.name()
            );
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            bail!("--lr: {} is not a positive learning rate", self.lr);
        }
        if self.eval_every == 0 {
            bail!("--eval-every: must be at least 1");
        }
        if self.pfq.check_every == Some(0) {
            bail!("--pfq-check-every: must be at least 1");
        }
        if let Some(n) = self.classes {
            if n == 0 || n > usize::from(u16::MAX) {
                bail!("--classes {n}: must be in 1..={}", u16::MAX);
            }
        }
        if !(0.0..1.0).contains(&self.val_split) {
            bail!(
                "--val-split {}: must be a fraction in [0, 1)",
                self.val_split
            );
        }
        for (flag, v) in [
            ("--momentum", self.momentum),
            ("--weight-decay", self.weight_decay),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{flag} {v}: must be a finite number ≥ 0");
            }
        }
        if let Some(c) = self.clip_grad.filter(|c| !(c.is_finite() && *c > 0.0)) {
            bail!("--clip-grad {c}: must be a positive finite gradient norm");
        }
        if self.momentum >= 1.0 {
            bail!(
                "--momentum {}: must be below 1 (at 1 or above the velocity never decays)",
                self.momentum
            );
        }
        if self.quantizer == QuantizerArg::Wageubn {
            for (flag, r) in [("--bits", self.bits), ("--grad-bits", self.grad_bits)] {
                if r.min < 2 {
                    bail!("{flag} {}: wageubn needs at least 2 bits", r.min);
                }
            }
        }
        if self.max_loss.is_nan() || self.max_loss <= 0.0 {
            bail!("--max-loss {}: must be a positive loss", self.max_loss);
        }
        if self.subset == Some(0) {
            bail!("--subset: needs at least 1 image");
        }
        let gated = matches!(self.policy, PolicyArg::Dfq | PolicyArg::Fractrain);
        if self.policy == PolicyArg::Schedule && self.dfq.target_cp.is_some() {
            bail!("--target-cp needs --policy dfq or fractrain");
        }
        if gated && self.eval_bits != EvalBitsArg::Current {
            bail!(
                "--eval-bits {}: not with --policy {} (its gate picks each sample's bits in \
                 evaluation too); use --eval-bits current",
                self.eval_bits.name(),
                self.policy.name()
            );
        }
        if !gated && self.dfq.exec == DfqExecArg::All {
            bail!("--dfq-exec all needs --policy dfq or fractrain");
        }
        if gated && self.quantizer != QuantizerArg::Sbm {
            bail!(
                "--policy {} runs on the SBM quantizer only (drop --quantizer)",
                self.policy.name()
            );
        }
        if self.policy == PolicyArg::Ldp {
            self.validate_ldp()?;
        }
        Ok(())
    }

    fn validate_ldp(&self) -> anyhow::Result<()> {
        if self.quantizer != QuantizerArg::Sbm {
            bail!(
                "--policy ldp: needs --quantizer sbm (its step-size gradient is derived for SBM)"
            );
        }
        if self.prt.is_some() || self.schedule != "static" {
            bail!(
                "--policy ldp: learns the bits itself; drop --schedule {} / --prt",
                self.schedule
            );
        }
        let target = self.ldp.target;
        if !(target > 0.0 && target <= 1.0) {
            bail!("--target {target}: must be a fraction of the static forward cost in (0, 1]");
        }
        if self.bits.min >= self.bits.max {
            bail!(
                "--policy ldp --bits {}: LDP learns bits within a range; give MIN:MAX such as 3:8",
                self.bits
            );
        }
        if self.grad_bits.min != self.grad_bits.max {
            bail!(
                "--grad-bits {}: LDP keeps one fixed backward precision",
                self.grad_bits
            );
        }
        Ok(())
    }
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

    fn resolve(extra: &[&str]) -> anyhow::Result<TrainPlan> {
        let mut argv = vec!["t", "--model", "zoo:lenet5", "--data", "synthetic"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv)?.args.resolve()
    }

    #[test]
    fn defaults_resolve_and_the_plan_round_trips_through_json() {
        let plan = resolve(&[]).unwrap();
        assert_eq!(plan.bits, Range { min: 3, max: 8 });
        assert_eq!(plan.grad_bits, Range { min: 8, max: 8 });
        assert_eq!(plan.length, Length::Iterations(390));
        assert_eq!((plan.eval_every, plan.augment), (390, true));
        assert_eq!(plan.pfq.fw, vec![3, 4, 6, 8]);
        assert!(plan.prt.is_none());
        let json = serde_json::to_value(&plan).unwrap();
        let back: TrainPlan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn flag_rules_are_checked_with_the_flag_named() {
        for (extra, needle) in [
            (&["--batch", "0"][..], "--batch"),
            (&["--pfq-fw", "3,x"], "--pfq-fw"),
            (&["--bits", "9:3"], "--bits"),
            (&["--depthwise-bits", "8"], "--depthwise-bits"),
            (&["--target-cp", "3"], "--target-cp needs --policy dfq"),
            (
                &["--policy", "ldp", "--bits", "5"],
                "LDP learns bits within a range",
            ),
            (
                &["--policy", "dfq", "--quantizer", "dorefa"],
                "SBM quantizer only",
            ),
            (&["--iters", "0"], "at least 1 iteration"),
            (&["--val-split", "NaN"], "--val-split NaN"),
            (&["--momentum", "inf"], "--momentum inf"),
            (&["--max-loss", "NaN"], "--max-loss"),
            (&["--classes", "0"], "--classes 0"),
            (&["--clip-grad", "0"], "--clip-grad 0"),
            (&["--clip-grad", "NaN"], "--clip-grad NaN"),
            (&["--seq-len", "16"], "is not text"),
            (
                &["--seq-len", "0"],
                "--seq-len: a window needs at least 1 token",
            ),
        ] {
            let e = resolve(extra).unwrap_err().to_string();
            assert!(e.contains(needle), "{extra:?}: {e}");
        }
        let mut plan = resolve(&[]).unwrap();
        plan.version = PLAN_VERSION + 1;
        assert!(plan.validate().unwrap_err().to_string().contains("version"));
    }
}
