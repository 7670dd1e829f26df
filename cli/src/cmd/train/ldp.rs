//! `cptsim train --policy ldp`: the LDP flags, the policy built from them and the plot of the
//! learned per-layer precision (`ldp_bits.png`).

use std::path::Path;

use anyhow::Context;
use cptsim_models::ModelSummary;
use cptsim_plot::trace::{heatmap, HeatmapOptions, Operand};
use cptsim_traces::schedule::BitRange;
use cptsim_traces::{TraceMeta, TraceRow};
use cptsim_train::policy::ldp::{BitMap, Ldp, LdpConfig, Mapping};
use cptsim_train::{Policy, TrainNet, Trainer};

use super::args::MappingArg;
use super::plan::TrainPlan;

/// File name of the plot in `--out`.
pub(crate) const PLOT: &str = "ldp_bits.png";

/// The LDP policy for `net` and the static baseline's forward/backward bits.
pub(crate) fn policy(
    plan: &TrainPlan,
    net: &TrainNet,
    summary: &ModelSummary,
) -> anyhow::Result<(Box<dyn Policy>, BitRange, BitRange)> {
    let l = &plan.ldp;
    let (fw, bw) = (plan.bits.bit_range(), plan.grad_bits.bit_range());
    let mapping = match l.mapping {
        MappingArg::Scaled => Mapping::Scaled,
        MappingArg::Offset => Mapping::Offset,
    };
    let map = BitMap::new(mapping, fw.min, fw.max).context("--bits")?;
    let defaults = LdpConfig::new(map, bw.max);
    let config = LdpConfig {
        init_bits: l.init_bits.unwrap_or(defaults.init_bits),
        target: l.target,
        lr: l.lr,
        alpha: l.alpha,
        eps: l.eps,
        momentum: l.momentum,
        weight_decay: l.weight_decay,
        clip: l.clip,
        ..defaults
    };
    let ldp = Ldp::for_net(config, net, summary).context("--policy ldp")?;
    Ok((Box::new(ldp), fw, bw))
}

/// Writes `ldp_bits.png` into `dir` when LDP runs: the learned weight bits per quantized layer
/// over the iterations so far, on the colour range `--bits`.
pub(crate) fn write_plot(
    dir: &Path,
    tr: &Trainer<'_>,
    model: &ModelSummary,
    batch: u64,
    rows: &[TraceRow],
) -> anyhow::Result<()> {
    let Some(ldp) = tr.policy_as::<Ldp>() else {
        return Ok(());
    };
    let map = ldp.config.map;
    let opts = HeatmapOptions {
        operand: Operand::Weights,
        layers: Some(ldp.layers().iter().map(|l| l.layer).collect()),
        bits: Some((map.b_min, map.b_max)),
        title: "LDP: learned weight bits".into(),
        ..HeatmapOptions::default()
    };
    let meta = TraceMeta::for_model(model, batch, tr.state.iteration);
    let path = dir.join(PLOT);
    let figure = heatmap(rows, &meta, &opts).context("ldp_bits.png")?;
    cptsim_plot::write(&figure, &path, cptsim_plot::Size::default())
        .with_context(|| format!("writing {}", path.display()))
}
