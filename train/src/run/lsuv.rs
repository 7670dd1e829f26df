//! `--init lsuv`: the seeded weights, then every conv and linear layer scaled in graph order so
//! that its output on the first training samples has unit standard deviation, a residual
//! branch's last layer a tenth of its skip's ([`cptsim_nn::net::lsuv`]); and the check of
//! seeded weights that advises it.

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
/// Conv and linear layers from which a network without normalization layers is flagged whatever
/// its output's size: at SGD's lr 0.1 AlexNet (8) oscillates and EfficientNetV2-S diverges from
/// seeded weights and both train from LSUV's; LeNet-5 (5) trains from seeded weights at lr 0.05
/// (`tests/tests/train_recipe.rs`).
const DEEP: usize = 8;

/// Scales `net`'s conv and linear layers; notes what it did.
pub(super) fn apply(
    model: &ModelSummary,
    net: &mut TrainNet,
    inputs: &Inputs,
    batch: usize,
    notices: &mut Vec<Notice>,
) -> anyhow::Result<()> {
    let (x, samples) = first_samples(net, inputs, SAMPLES.min(batch.max(1)))?;
    let nodes = scalable(model, net);
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

/// Warns when the seeded network's output on the first training samples vanishes or explodes,
/// or when it is a deep network without normalization layers (its batch norm folded at export),
/// and says what `--init lsuv` does about it.
pub(super) fn check_signal(
    model: &ModelSummary,
    normalized: bool,
    net: &mut TrainNet,
    inputs: &Inputs,
    batch: usize,
    notices: &mut Vec<Notice>,
) -> anyhow::Result<()> {
    let (x, samples) = first_samples(net, inputs, CHECK_SAMPLES.min(batch.max(1)))?;
    let y = net.graph.forward(x, Mode::Eval)?;
    let s = cptsim_nn::net::lsuv::std_dev(&y);
    let depth = (!normalized).then(|| scalable(model, net).len());
    if let Some(w) = signal_warning(s, samples, depth) {
        notices.push(Notice::Warning(w));
    }
    Ok(())
}

/// The warning [`check_signal`] gives for an initial output standard deviation `std` on
/// `samples` samples, and the count of conv and linear layers of a network without
/// normalization layers (`None` when it has some): the signal vanishes or explodes, or the
/// network is at least [`DEEP`] layers deep without normalization.
fn signal_warning(std: f64, samples: usize, unnormalized: Option<usize>) -> Option<String> {
    let why = if !SIGNAL.contains(&std) {
        format!(
            "the output of the initial network has standard deviation {std:.2e} on the first \
             {samples} training samples: the signal {} through its layers (a deep network \
             without normalization layers, e.g. batch norm folded into the convs by an \
             eval-mode export)",
            if std < 1.0 { "vanishes" } else { "explodes" }
        )
    } else {
        let depth = unnormalized.filter(|&d| d >= DEEP)?;
        format!(
            "the network has {depth} conv and linear layers and no normalization layer (no \
             batch, layer or group norm; e.g. batch norm folded into the convs by an eval-mode \
             export): the seeded weights do not hold its signal at the size each layer expects \
             (output standard deviation {std:.2e} on the first {samples} training samples)"
        )
    };
    Some(format!(
        "{why} and it may not learn, or may diverge; --init lsuv scales each conv and linear \
         layer to unit output std on the first training samples"
    ))
}

/// The graph nodes of `net`'s conv and linear layers, in graph order.
fn scalable(model: &ModelSummary, net: &mut TrainNet) -> Vec<usize> {
    net.graph
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
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vanishing_output_is_flagged_with_or_without_normalization() {
        for depth in [None, Some(3)] {
            let w = signal_warning(1e-9, 8, depth).expect("flagged");
            assert!(w.contains("1.00e-9") && w.contains("vanishes"), "{w}");
            assert!(
                w.contains("--init lsuv scales each conv and linear layer"),
                "{w}"
            );
        }
    }

    /// An output of a usual size is flagged only for a network at least [`DEEP`] layers deep
    /// without normalization layers.
    #[test]
    fn a_deep_network_without_normalization_is_flagged_at_any_output_size() {
        let w = signal_warning(0.05, 2, Some(DEEP)).expect("flagged");
        assert!(
            w.contains("8 conv and linear layers and no normalization"),
            "{w}"
        );
        assert!(
            w.contains("--init lsuv scales each conv and linear layer"),
            "{w}"
        );
        assert_eq!(signal_warning(0.05, 2, Some(DEEP - 1)), None);
        assert_eq!(signal_warning(0.05, 2, None), None);
    }
}
