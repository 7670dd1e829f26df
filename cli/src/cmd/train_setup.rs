//! What `cptsim train` assembles before the first iteration: the datasets from `--data`, the
//! precision policy from the schedule/PFQ/PRT flags, and the trainer settings.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cptsim_models::{LayerRole, ModelSummary};
use cptsim_sim::data::{load_cifar, load_mnist, synthetic, CifarKind, Dataset, Split};
use cptsim_sim::optim::{LrPolicy, LrSchedule};
use cptsim_sim::train::{
    Pfq, PfqConfig, Policy, Prt, PrtConfig, PrtPolicy, SchedulePolicy, TrainConfig, TrainData,
    TrainNet,
};
use cptsim_traces::schedule::{BitRange, ScheduleArgs};
use cptsim_traces::Bits;

use super::run::bit_range;
use super::train::{LrArg, TrainArgs};

/// Images of the synthetic dataset (training + test).
const SYNTHETIC_TRAIN: usize = 4096;
const SYNTHETIC_TEST: usize = 1024;

/// The `--data` kinds.
pub(crate) const DATA_KINDS: &str =
    "mnist:DIR, fashion-mnist:DIR, cifar10:DIR, cifar100:DIR, synthetic";

/// Loads the training and test sets `--data` names (synthetic ones shaped for the model), then
/// applies `--subset` and `--val-split`.
pub(crate) fn load_data(
    args: &TrainArgs,
    input: [usize; 3],
    classes: usize,
) -> anyhow::Result<TrainData> {
    let spec = args.data.as_deref().unwrap_or("");
    let (kind, dir) = match spec.split_once(':') {
        Some((k, d)) => (k, Some(PathBuf::from(d))),
        None => (spec, None),
    };
    let need_dir = |dir: &Option<PathBuf>| -> anyhow::Result<PathBuf> {
        let d = dir
            .clone()
            .with_context(|| format!("--data {kind}: needs a directory ({kind}:DIR)"))?;
        if !d.is_dir() {
            bail!("--data {spec}: directory {} not found", d.display());
        }
        Ok(d)
    };
    let load = |f: &dyn Fn(&Path, Split) -> cptsim_sim::Result<Dataset>, d: &Path| {
        let tr = f(d, Split::Train).with_context(|| format!("--data {spec}"))?;
        let te = f(d, Split::Test).with_context(|| format!("--data {spec}"))?;
        anyhow::Ok((tr, te))
    };
    let (mut train, test) = match kind {
        "mnist" | "fashion-mnist" => {
            let fashion = kind == "fashion-mnist";
            load(&|d, s| load_mnist(d, s, fashion), &need_dir(&dir)?)?
        }
        "cifar10" | "cifar100" => {
            let k = if kind == "cifar10" {
                CifarKind::Cifar10
            } else {
                CifarKind::Cifar100
            };
            load(&|d, s| load_cifar(d, s, k), &need_dir(&dir)?)?
        }
        "synthetic" => {
            if dir.is_some() {
                bail!("--data synthetic takes no directory");
            }
            let all = synthetic(
                SYNTHETIC_TRAIN + SYNTHETIC_TEST,
                input,
                classes,
                60.0,
                args.seed,
            )?;
            let test = all.select(&(SYNTHETIC_TRAIN..all.len()).collect::<Vec<_>>());
            let train = all.select(&(0..SYNTHETIC_TRAIN).collect::<Vec<_>>());
            (train, test)
        }
        _ => bail!("--data {spec}: unknown dataset kind `{kind}` (expected {DATA_KINDS})"),
    };
    if let Some(n) = args.subset {
        if n == 0 {
            bail!("--subset: needs at least 1 image");
        }
        train.truncate(n);
    }
    let (train, val) = if args.val_split > 0.0 {
        let (t, v) = train
            .split_validation(args.val_split, args.seed)
            .context("--val-split")?;
        if t.is_empty() || v.is_empty() {
            bail!(
                "--val-split {}: leaves {} training and {} validation images",
                args.val_split,
                t.len(),
                v.len()
            );
        }
        (t, Some(v))
    } else {
        (train, None)
    };
    Ok(TrainData { train, test, val })
}

/// Iterations of the run: `--iters`, or `--epochs` passes over the training set.
pub(crate) fn iterations(args: &TrainArgs, train_len: usize) -> anyhow::Result<u64> {
    let n = match (args.iters, args.epochs) {
        (Some(i), None) => i,
        (None, Some(e)) => e * (train_len as u64).div_ceil(args.batch.max(1) as u64),
        (None, None) => 390,
        (Some(_), Some(_)) => bail!("--iters and --epochs: give one of them"),
    };
    if n == 0 {
        bail!("--iters/--epochs: a run needs at least 1 iteration");
    }
    Ok(n)
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

/// The schedule, PFQ or PRT policy and the static baseline's forward/backward bits.
pub(crate) fn policy(
    args: &TrainArgs,
    iterations: u64,
) -> anyhow::Result<(Box<dyn Policy>, BitRange, BitRange)> {
    let fw = bit_range("--bits", args.bits.as_deref(), "3:8")?;
    let bw = bit_range("--grad-bits", args.grad_bits.as_deref(), "8")?;
    if args.schedule == "pfq" {
        let cfg = PfqConfig {
            fw: stage_list("--pfq-fw", &args.pfq_fw)?,
            bw: stage_list("--pfq-bw", &args.pfq_bw)?,
            epsilon: args.pfq_eps,
            alpha: args.pfq_alpha,
        };
        let pfq = Pfq::new(cfg.clone()).context("--pfq-fw/--pfq-bw/--pfq-eps/--pfq-alpha")?;
        let range = |v: &[u8]| BitRange {
            min: v.iter().copied().min().unwrap_or(0),
            max: v.iter().copied().max().unwrap_or(0),
        };
        return Ok((Box::new(pfq), range(&cfg.fw), range(&cfg.bw)));
    }
    let sched = ScheduleArgs::new(args.schedule.as_str(), iterations)
        .cycles(args.cycles)
        .bits(fw)
        .grad_bits(bw)
        .convention(args.convention.rule());
    let schedule = sched.build()?;
    if !args.prt {
        return Ok((Box::new(SchedulePolicy(schedule)), fw, bw));
    }
    let cfg = PrtConfig {
        start_bits: args.prt_start_bits,
        max_bits: fw.max,
        iters_per_step: args.prt_iters_per_step,
        window: args.prt_window,
        threshold_pp: args.prt_threshold,
    };
    if cfg.max_iterations() > iterations {
        bail!(
            "--prt: the test may take {} iterations ({} steps × --prt-iters-per-step {}), more than the run's {iterations}",
            cfg.max_iterations(),
            cfg.max_bits.saturating_sub(cfg.start_bits) + 1,
            cfg.iters_per_step
        );
    }
    let prt = Prt::new(cfg).context("--prt-start-bits/--prt-window")?;
    let range = BitRange {
        min: args.prt_start_bits.min(fw.max),
        max: fw.max,
    };
    Ok((Box::new(PrtPolicy::new(prt, sched, bw.max)), range, bw))
}

/// Trainer settings from the flags.
pub(crate) fn config(args: &TrainArgs, iterations: u64) -> anyhow::Result<TrainConfig> {
    if args.batch == 0 {
        bail!("--batch: a batch needs at least 1 sample");
    }
    if !(args.lr.is_finite() && args.lr > 0.0) {
        bail!("--lr: {} is not a positive learning rate", args.lr);
    }
    if args.eval_every == Some(0) {
        bail!("--eval-every: must be at least 1");
    }
    if args.pfq_check_every == Some(0) {
        bail!("--pfq-check-every: must be at least 1");
    }
    let schedule = match args.lr_schedule {
        LrArg::Constant => LrSchedule::Constant,
        LrArg::Cosine => LrSchedule::Cosine {
            total: iterations,
            min_lr: 0.0,
        },
        // The CIFAR recipe's drops at 32 000 and 48 000 of 64 000 iterations, scaled to the run.
        LrArg::Paper => LrSchedule::MultiStep {
            milestones: vec![iterations / 2, iterations * 3 / 4],
            gamma: 0.1,
        },
    };
    Ok(TrainConfig {
        iterations,
        batch: args.batch,
        lr: LrPolicy {
            base_lr: args.lr,
            schedule,
            warmup: args.warmup,
        },
        momentum: args.momentum,
        weight_decay: args.weight_decay,
        seed: args.seed,
        eval_every: args.eval_every.unwrap_or(390),
        check_every: args.pfq_check_every,
        eval_batch: 500,
        augment: !args.no_augment,
        max_loss: args.max_loss,
        quantize: args.quantizer.method().is_some(),
    })
}

/// Applies `--depthwise-bits FW/BW`: depthwise convs run at that fixed precision.
pub(crate) fn fix_depthwise(
    args: &TrainArgs,
    summary: &ModelSummary,
    net: &mut TrainNet,
) -> anyhow::Result<()> {
    let Some(text) = args.depthwise_bits.as_deref() else {
        return Ok(());
    };
    let (fw, bw) = parse_fw_bw(text).map_err(|m| anyhow::anyhow!("--depthwise-bits: {m}"))?;
    if args.quantize_depthwise == Some(false) {
        bail!("--depthwise-bits {text} contradicts --quantize-depthwise false (drop one of them)");
    }
    let depthwise = |i: u32| {
        summary
            .layers
            .get(i as usize)
            .is_some_and(|l| l.role == LayerRole::Depthwise)
    };
    let n = net.fix_bits(depthwise, Bits::forward_backward(fw, bw));
    if n == 0 {
        eprintln!(
            "note: --depthwise-bits has no effect: `{}` has no depthwise convs",
            summary.name
        );
    }
    Ok(())
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
