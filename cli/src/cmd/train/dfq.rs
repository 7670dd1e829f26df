//! `cptsim train --policy dfq|fractrain`: the DFQ gate (spec §6) and FracTrain's target stepping
//! (§7) built from the command line and attached to the imported model's residual blocks.

use super::args::{CandidatesArg, DfqExecArg, PolicyArg};
use super::plan::TrainPlan;
use anyhow::Context;
use cptsim_models::{Graph as IrGraph, ModelSummary};
use cptsim_nn::build::{build_network, BuildOptions};
use cptsim_train::policy::dfq::{find_blocks, CandidateSet, Dfq, DfqConfig, FracTrainConfig};
use cptsim_train::TrainNet;

/// The DFQ controller for `--policy dfq|fractrain`, attached to `net`; `None` for schedules.
pub(crate) fn build(
    args: &TrainPlan,
    ir: &IrGraph,
    opts: &BuildOptions,
    summary: &ModelSummary,
    net: &mut TrainNet,
) -> anyhow::Result<Option<Dfq>> {
    let fractrain = match args.policy {
        PolicyArg::Schedule | PolicyArg::Ldp => return Ok(None),
        PolicyArg::Dfq => false,
        PolicyArg::Fractrain => true,
    };
    let policy = args.policy.name();
    let d = &args.dfq;
    let target = d.target_cp.unwrap_or(if fractrain { 1.5 } else { 3.0 });
    let set = match d.candidates {
        CandidatesArg::Cifar => CandidateSet::Cifar,
        CandidatesArg::Imagenet => CandidateSet::Imagenet,
    };
    let mut cfg = DfqConfig::new(set, d.weight_bits, target);
    cfg.beta = d.beta;
    cfg.relax = d.relax;
    if fractrain {
        cfg.fractrain = Some(FracTrainConfig {
            cp_step: d.cp_step,
            turns: d.cp_turns,
            epsilon: args.pfq.epsilon,
            alpha: args.pfq.alpha,
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
    let model = args.model.as_str();
    let blocks = find_blocks(ir, summary).with_context(|| format!("--model {model}"))?;
    let k = cfg.candidates.len();
    let mut dfq = Dfq::new(cfg, &blocks, summary, &mut net.graph, args.seed)
        .with_context(|| format!("--policy {policy} on --model {model}"))?;
    if d.exec == DfqExecArg::All {
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
