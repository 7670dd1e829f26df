//! The registry of `cptsim train --policy` values: one line per policy builds it from its
//! arguments, with the static baseline's forward/backward bits.

use cptsim_models::ModelSummary;
use cptsim_traces::schedule::BitRange;
use cptsim_train::policy::dfq::Dfq;
use cptsim_train::{Policy, TrainNet};

use super::args::PolicyArg;
use super::ldp;
use super::plan::TrainPlan;
use super::setup;

/// The policy `--policy` names and the static baseline's bits; `dfq` is the gate
/// [`super::dfq::build`] attached to the network (present for dfq/fractrain).
pub(crate) fn build(
    args: &TrainPlan,
    iterations: u64,
    net: &TrainNet,
    summary: &ModelSummary,
    dfq: Option<Dfq>,
) -> anyhow::Result<(Box<dyn Policy>, BitRange, BitRange)> {
    let (policy, fw, bw) = match (args.policy, dfq) {
        (PolicyArg::Schedule, _) => setup::policy(args, iterations)?,
        (PolicyArg::Ldp, _) => ldp::policy(args, net, summary)?,
        // DFQ and FracTrain keep the static baseline of --bits/--grad-bits.
        (PolicyArg::Dfq | PolicyArg::Fractrain, Some(d)) => {
            let (_, fw, bw) = setup::policy(args, iterations)?;
            (Box::new(d) as Box<dyn Policy>, fw, bw)
        }
        (PolicyArg::Dfq | PolicyArg::Fractrain, None) => {
            anyhow::bail!("--policy {}: no gate was built", args.policy.name())
        }
    };
    Ok((policy, fw, bw))
}
