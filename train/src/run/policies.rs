//! The registry of `policy` values: one line per policy builds it from the plan, with the static
//! baseline's forward/backward bits. Schedules (with PFQ and the PRT), LDP, and the DFQ gate
//! attached to the model's residual blocks (FracTrain's target stepping included).

use anyhow::Context;
use cptsim_models::{Graph as IrGraph, ModelSummary};
use cptsim_nn::build::{build_network, BuildOptions};
use cptsim_traces::schedule::BitRange;

use super::observer::Notice;
use crate::plan::{DfqExecKind, PolicyKind, TrainPlan};
use crate::policy::dfq::{find_blocks, Dfq};
use crate::policy::ldp::Ldp;
use crate::{Pfq, Policy, Prt, PrtPolicy, SchedulePolicy, TrainNet};

/// A policy the run can move to the thread that trains.
pub(crate) type SendPolicy = Box<dyn Policy + Send>;

/// The policy `policy` names and the static baseline's bits; `gate` is the DFQ gate
/// [`dfq_gate`] attached to the network (present for dfq/fractrain).
pub(crate) fn build(
    plan: &TrainPlan,
    iterations: u64,
    net: &TrainNet,
    summary: &ModelSummary,
    gate: Option<Dfq>,
) -> anyhow::Result<(SendPolicy, BitRange, BitRange)> {
    match (plan.policy, gate) {
        (PolicyKind::Schedule, _) => schedule(plan, iterations),
        (PolicyKind::Ldp, _) => ldp(plan, net, summary),
        // DFQ and FracTrain keep the static baseline of `bits`/`grad_bits`.
        (PolicyKind::Dfq | PolicyKind::Fractrain, Some(d)) => {
            let (_, fw, bw) = schedule(plan, iterations)?;
            Ok((Box::new(d), fw, bw))
        }
        (PolicyKind::Dfq | PolicyKind::Fractrain, None) => {
            anyhow::bail!("--policy {}: no gate was built", plan.policy)
        }
    }
}

/// The schedule, PFQ or PRT policy and the static baseline's forward/backward bits.
fn schedule(plan: &TrainPlan, iterations: u64) -> anyhow::Result<(SendPolicy, BitRange, BitRange)> {
    let fw = plan.bits.bit_range();
    let bw = plan.grad_bits.bit_range();
    if plan.schedule == "pfq" {
        let cfg = plan.pfq_config();
        let pfq = Pfq::new(cfg.clone()).context("--pfq-fw/--pfq-bw/--pfq-eps/--pfq-alpha")?;
        let range = |v: &[u8]| BitRange {
            min: v.iter().copied().min().unwrap_or(0),
            max: v.iter().copied().max().unwrap_or(0),
        };
        return Ok((Box::new(pfq), range(&cfg.fw), range(&cfg.bw)));
    }
    let sched = plan.schedule_args(iterations);
    let schedule = sched.build()?;
    let Some(cfg) = plan.prt_config() else {
        return Ok((Box::new(SchedulePolicy(schedule)), fw, bw));
    };
    plan.check_prt(iterations)?;
    let prt = Prt::new(cfg.clone()).context("--prt-start-bits/--prt-window")?;
    let range = BitRange {
        min: cfg.start_bits.min(fw.max),
        max: fw.max,
    };
    Ok((Box::new(PrtPolicy::new(prt, sched, bw.max)), range, bw))
}

/// The LDP policy for `net` and the static baseline's forward/backward bits.
fn ldp(
    plan: &TrainPlan,
    net: &TrainNet,
    summary: &ModelSummary,
) -> anyhow::Result<(SendPolicy, BitRange, BitRange)> {
    let config = plan.ldp_config().context("--bits")?;
    let ldp = Ldp::for_net(config, net, summary).context("--policy ldp")?;
    Ok((
        Box::new(ldp),
        plan.bits.bit_range(),
        plan.grad_bits.bit_range(),
    ))
}

/// The DFQ controller for `policy = dfq|fractrain`, attached to `net`; `None` for the others.
pub(crate) fn dfq_gate(
    plan: &TrainPlan,
    ir: &IrGraph,
    opts: &BuildOptions,
    summary: &ModelSummary,
    net: &mut TrainNet,
    notes: &mut Vec<Notice>,
) -> anyhow::Result<Option<Dfq>> {
    if !matches!(plan.policy, PolicyKind::Dfq | PolicyKind::Fractrain) {
        return Ok(None);
    }
    let cfg = plan.dfq_config();
    cfg.validate()?;
    let unreachable = cfg.unreachable_targets();
    if !unreachable.is_empty() {
        let (lo, hi) = cfg.cp_range();
        let list: Vec<String> = unreachable.iter().map(|t| format!("{t}")).collect();
        notes.push(Notice::Warning(format!(
            "--target-cp: target(s) {} % outside the candidates' reach {lo:.3}..={hi:.3} % \
             (weights at {} bits): the cost term pushes every sample to one end while such a \
             target holds, and a short run may not bring the gate back (see its confidence in \
             dfq.csv)",
            list.join(", "),
            cfg.weight_bits
        )));
    }
    let (model, policy) = (plan.model.as_str(), plan.policy);
    let blocks = find_blocks(ir, summary).with_context(|| format!("--model {model}"))?;
    let k = cfg.candidates.len();
    let mut dfq = Dfq::new(cfg, &blocks, summary, &mut net.graph, plan.seed)
        .with_context(|| format!("--policy {policy} on --model {model}"))?;
    if plan.dfq_exec == DfqExecKind::All {
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
