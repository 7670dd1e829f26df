//! `cptsim train --policy ldp`: the LDP flags, the policy built from them and the plot of the
//! learned per-layer precision (`ldp_bits.png`).

use std::path::Path;

use anyhow::{bail, Context};
use cptsim_models::ModelSummary;
use cptsim_sim::ldp::{plot, BitMap, Ldp, LdpConfig, Mapping};
use cptsim_sim::train::{Policy, TrainNet, Trainer};
use cptsim_traces::schedule::BitRange;
use cptsim_traces::TraceRow;
use serde::{Deserialize, Serialize};

use super::run::bit_range;
use super::train::{QuantizerArg, TrainArgs};

/// File name of the plot in `--out`.
pub(crate) const PLOT: &str = "ldp_bits.png";

const TARGET: f64 = 0.6;
const LR: f64 = 0.1;
const ALPHA: f64 = 1.0;
const EPS: f64 = 1e-8;

/// The LDP options of `cptsim train` (spec §8; used with `--policy ldp`). Every choice the spec
/// marks unknown is one of them, at the spec's default.
#[derive(clap::Args, Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
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

impl Default for LdpArgs {
    fn default() -> Self {
        Self {
            target: TARGET,
            ldp_mapping: MappingArg::Scaled,
            ldp_init_bits: None,
            ldp_lr: LR,
            ldp_alpha: ALPHA,
            ldp_eps: EPS,
            ldp_momentum: 0.0,
            ldp_weight_decay: 0.0,
            ldp_no_clip: false,
        }
    }
}

/// `--ldp-mapping` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MappingArg {
    /// Reading 1: N = B_max.
    Scaled,
    /// Reading 2: B_min + β·(B_max − B_min).
    Offset,
}

/// The LDP policy for `net` and the static baseline's forward/backward bits.
pub(crate) fn policy(
    args: &TrainArgs,
    net: &TrainNet,
    summary: &ModelSummary,
) -> anyhow::Result<(Box<dyn Policy>, BitRange, BitRange)> {
    let l = &args.ldp;
    if !matches!(args.quantizer, QuantizerArg::Sbm) {
        bail!("--policy ldp: needs --quantizer sbm (its step-size gradient is derived for SBM)");
    }
    if args.prt || args.schedule != "static" {
        bail!(
            "--policy ldp: learns the bits itself; drop --schedule {} / --prt",
            args.schedule
        );
    }
    if !(l.target > 0.0 && l.target <= 1.0) {
        bail!(
            "--target {}: must be a fraction of the static forward cost in (0, 1]",
            l.target
        );
    }
    let fw = bit_range("--bits", args.bits.as_deref(), "3:8")?;
    let bw = bit_range("--grad-bits", args.grad_bits.as_deref(), "8")?;
    if fw.min >= fw.max {
        bail!(
            "--policy ldp --bits {}: LDP learns bits within a range; give MIN:MAX such as 3:8",
            args.bits.as_deref().unwrap_or_default()
        );
    }
    if bw.min != bw.max {
        bail!(
            "--grad-bits {}: LDP keeps one fixed backward precision",
            args.grad_bits.as_deref().unwrap_or_default()
        );
    }
    let mapping = match l.ldp_mapping {
        MappingArg::Scaled => Mapping::Scaled,
        MappingArg::Offset => Mapping::Offset,
    };
    let map = BitMap::new(mapping, fw.min, fw.max).context("--bits")?;
    let defaults = LdpConfig::new(map, bw.max);
    let config = LdpConfig {
        init_bits: l.ldp_init_bits.unwrap_or(defaults.init_bits),
        target: l.target,
        lr: l.ldp_lr,
        alpha: l.ldp_alpha,
        eps: l.ldp_eps,
        momentum: l.ldp_momentum,
        weight_decay: l.ldp_weight_decay,
        clip: !l.ldp_no_clip,
        ..defaults
    };
    let ldp = Ldp::for_net(config, net, summary).context("--policy ldp")?;
    Ok((Box::new(ldp), fw, bw))
}

/// Writes `ldp_bits.png` into `dir` when LDP runs.
pub(crate) fn write_plot(dir: &Path, tr: &Trainer<'_>, rows: &[TraceRow]) -> anyhow::Result<()> {
    let Some(ldp) = tr.policy_as::<Ldp>() else {
        return Ok(());
    };
    let layers: Vec<u32> = ldp.layers().iter().map(|l| l.layer).collect();
    let map = ldp.config.map;
    let img = plot::bits_heatmap(rows, &layers, tr.state.iteration, (map.b_min, map.b_max));
    let path = dir.join(PLOT);
    img.write(&path)
        .with_context(|| format!("writing {}", path.display()))
}
