//! `--init lsuv`: the seeded weights, then every conv and linear layer scaled in graph order so
//! that its output on the first training samples has unit standard deviation, a residual
//! branch's last layer a tenth of its skip's ([`cptsim_nn::net::lsuv`]).

use anyhow::Context;
use cptsim_models::{LayerKind, ModelSummary};
use cptsim_nn::data::eval_batches;
use cptsim_nn::layers::{Mode, Tensor};

use super::observer::Notice;
use super::Inputs;
use crate::TrainNet;

/// Training samples the scaling measures on (fewer when the batch or the set is smaller).
const SAMPLES: usize = 64;
/// Training samples the check of a seeded network's output looks at.
const CHECK_SAMPLES: usize = 8;
/// An initial output standard deviation outside this range is flagged (initial logits are
/// typically 0.1–1; below 1e-2 the loss sits at ln(classes)).
const SIGNAL: std::ops::RangeInclusive<f64> = 1e-2..=1e3;

/// Scales `net`'s conv and linear layers; notes what it did.
pub(super) fn apply(
    model: &ModelSummary,
    net: &mut TrainNet,
    inputs: &Inputs,
    batch: usize,
    notices: &mut Vec<Notice>,
) -> anyhow::Result<()> {
    let (x, samples) = first_samples(net, inputs, SAMPLES.min(batch.max(1)))?;
    let nodes: Vec<usize> = net
        .graph
        .quant_nodes()
        .into_iter()
        .zip(&net.slots)
        .filter(|(_, s)| {
            model
                .layers
                .get(s.layer as usize)
                .is_some_and(|l| matches!(l.kind, LayerKind::Conv | LayerKind::Linear))
        })
        .map(|(n, _)| n)
        .collect();
    let scaled =
        cptsim_nn::net::lsuv::unit_variance(&mut net.graph, &nodes, &x).context("--init lsuv")?;
    let (lo, hi) = scaled.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
        (lo.min(s.factor), hi.max(s.factor))
    });
    if !scaled.is_empty() {
        let branches = scaled.iter().filter(|s| s.target != 1.0).count();
        notices.push(Notice::Note(format!(
            "note: --init lsuv scaled {} conv/linear layers to unit output std ({branches} \
             ending a residual branch to {} of their skip's) on the first {samples} training \
             samples (factors {lo:.3e} to {hi:.3e})",
            scaled.len(),
            cptsim_nn::net::lsuv::BRANCH
        )));
    }
    Ok(())
}

/// Warns when the seeded network's output on the first training samples vanishes or explodes
/// (a deep network without normalization layers, its batch norm folded at export), and says
/// what `--init lsuv` does about it.
pub(super) fn check_signal(
    net: &mut TrainNet,
    inputs: &Inputs,
    batch: usize,
    notices: &mut Vec<Notice>,
) -> anyhow::Result<()> {
    let (x, samples) = first_samples(net, inputs, CHECK_SAMPLES.min(batch.max(1)))?;
    let y = net.graph.forward(x, Mode::Eval)?;
    let s = cptsim_nn::net::lsuv::std_dev(&y);
    if !SIGNAL.contains(&s) {
        notices.push(Notice::Warning(format!(
            "the output of the initial network has standard deviation {s:.2e} on the first \
             {samples} training samples: the signal {} through its layers (a deep network \
             without normalization layers, e.g. batch norm folded into the convs by an eval-mode \
             export) and it may not learn; --init lsuv scales each conv and linear layer to unit \
             output std on the first training samples",
            if s < 1.0 { "vanishes" } else { "explodes" }
        )));
    }
    Ok(())
}

/// The first `n` samples of the training set (fewer when it is smaller), as the model's input.
fn first_samples(net: &TrainNet, inputs: &Inputs, n: usize) -> anyhow::Result<(Tensor, usize)> {
    match inputs {
        Inputs::Images(d) => {
            let k = n.min(d.train.len());
            let first = d.train.select(&(0..k).collect::<Vec<_>>());
            let b = eval_batches(&first, k, net.input)?;
            let b = b
                .into_iter()
                .next()
                .context("--init lsuv: no training images")?;
            Ok((b.images, k))
        }
        Inputs::Text(t) => Ok((t.batch(&t.train, 0)?.ids, t.train.batch)),
        Inputs::Tokens(t) => Ok((t.train.batch(0, t.batch, t.layout)?.0, t.batch)),
    }
}
