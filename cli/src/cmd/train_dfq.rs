//! `cptsim train --policy dfq|fractrain`: the DFQ gate (spec §6) and FracTrain's target stepping
//! (§7) built from the command line and attached to the imported model's residual blocks.

use anyhow::{bail, Context};
use cptsim_models::{Graph as IrGraph, ModelSummary};
use cptsim_sim::build::{build_network, BuildOptions};
use cptsim_sim::dfq::{find_blocks, CandidateSet, Dfq, DfqConfig, FracTrainConfig};
use cptsim_sim::train::TrainNet;
use serde::{Deserialize, Serialize};

use super::train::{PolicyArg, QuantizerArg, TrainArgs};

/// `--candidates` values (spec §6.1).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, Serialize, Deserialize)]
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

/// The DFQ controller for `--policy dfq|fractrain`, attached to `net`; `None` for schedules.
pub(crate) fn build(
    args: &TrainArgs,
    ir: &IrGraph,
    opts: &BuildOptions,
    summary: &ModelSummary,
    net: &mut TrainNet,
) -> anyhow::Result<Option<Dfq>> {
    let fractrain = match args.policy {
        PolicyArg::Schedule if args.target_cp.is_some() => {
            bail!("--target-cp needs --policy dfq or fractrain")
        }
        PolicyArg::Schedule | PolicyArg::Ldp if args.dfq_exec == DfqExecArg::All => {
            bail!("--dfq-exec all needs --policy dfq or fractrain")
        }
        PolicyArg::Schedule | PolicyArg::Ldp => return Ok(None),
        PolicyArg::Dfq => false,
        PolicyArg::Fractrain => true,
    };
    let policy = args.policy.name();
    if !matches!(args.quantizer, QuantizerArg::Sbm) {
        bail!("--policy {policy} runs on the SBM quantizer only (drop --quantizer)");
    }
    let target = args.target_cp.unwrap_or(if fractrain { 1.5 } else { 3.0 });
    let set = match args.candidates {
        CandidatesArg::Cifar => CandidateSet::Cifar,
        CandidatesArg::Imagenet => CandidateSet::Imagenet,
    };
    let mut cfg = DfqConfig::new(set, args.weight_bits, target);
    cfg.beta = args.dfq_beta;
    cfg.relax = args.dfq_relax;
    if fractrain {
        cfg.fractrain = Some(FracTrainConfig {
            cp_step: args.cp_step,
            turns: args.cp_turns,
            epsilon: args.pfq_eps,
            alpha: args.pfq_alpha,
        });
    }
    cfg.validate()?;
    let unreachable = cfg.unreachable_targets();
    if !unreachable.is_empty() {
        let (lo, hi) = cfg.cp_range();
        let list: Vec<String> = unreachable.iter().map(|t| format!("{t}")).collect();
        eprintln!(
            "warning: --target-cp: target(s) {} % outside the candidates' reach {lo:.3}..={hi:.3} % \
             (weights at {} bits): the cost term pushes every sample to one end while such a \
             target holds, and a short run may not bring the gate back (see its confidence in \
             dfq.csv)",
            list.join(", "),
            cfg.weight_bits
        );
    }
    let model = args.model.as_deref().unwrap_or_default();
    let blocks = find_blocks(ir, summary).with_context(|| format!("--model {model}"))?;
    let k = cfg.candidates.len();
    let mut dfq = Dfq::new(cfg, &blocks, summary, &mut net.graph, args.seed)
        .with_context(|| format!("--policy {policy} on --model {model}"))?;
    if args.dfq_exec == DfqExecArg::All {
        let replicas = (0..k)
            .map(|_| Ok(TrainNet::from_network(build_network(ir, opts)?)?.graph))
            .collect::<anyhow::Result<Vec<_>>>()
            .with_context(|| format!("--dfq-exec all on --model {model}"))?;
        dfq = dfq
            .with_replicas(&net.graph, replicas)
            .with_context(|| format!("--dfq-exec all on --model {model}"))?;
    }
    Ok(Some(dfq))
}
