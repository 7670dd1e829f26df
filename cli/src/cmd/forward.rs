//! `cptsim forward`: one eval-mode forward pass of a model on an `.npy` input, written as `.npy`
//! (BatchNorm nodes exported in training mode use batch statistics, as the file asks).

use std::path::PathBuf;

use super::quant_scope::ScopeArgs;
use super::shared::QuantizerArg;
use anyhow::{Context, Result};
use clap::Args;
use cptsim_models::ir::Op;
use cptsim_models::load_graph;
use cptsim_sim::build::{build_network, BuildOptions};
use cptsim_sim::layers::Mode;
use cptsim_sim::npy;
use cptsim_sim::quant::QuantMethod;

/// Arguments of `cptsim forward`.
#[derive(Args)]
pub struct ForwardArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    #[arg(long)]
    pub model: String,
    /// Input `.npy`: float32, C order, NCHW (or `[N, F]`), batch first.
    #[arg(long)]
    pub input: PathBuf,
    /// Output `.npy` (written atomically).
    #[arg(long)]
    pub output: PathBuf,
    /// Quantize the in-scope conv/linear layers (spec §1.4) at this many bits: weights per
    /// output channel, input activations per tensor with the batch's own range. Default: fp32.
    #[arg(long)]
    pub bits: Option<u32>,
    /// Quantizer used with `--bits`.
    #[arg(long, value_enum, default_value_t = QuantizerArg::Sbm)]
    pub quantizer: QuantizerArg,
    /// Which layers are quantized.
    #[command(flatten)]
    pub scope: ScopeArgs,
}

/// Runs the command.
pub fn run(args: &ForwardArgs) -> Result<()> {
    // The allocator policy of `train` and `bench` (large activations reused, not re-mmapped).
    crate::malloc::keep_large_blocks();
    let x = npy::read(&args.input)?;
    let batch = match x.shape().first() {
        Some(&n) if n > 0 => n,
        _ => anyhow::bail!(
            "{}: input shape {:?} has no batch dimension",
            args.input.display(),
            x.shape()
        ),
    };
    if let Some((i, v)) = first_non_finite(&x) {
        anyhow::bail!("{}: element {i} is {v}", args.input.display());
    }
    let graph = load_graph(&args.model, batch)?;
    if graph.bn_folded {
        eprintln!("{}", cptsim_models::onnx::BN_FOLDED_NOTE);
    }
    let opts = BuildOptions {
        method: match (args.quantizer.method(), args.bits) {
            (Some(m), _) => m,
            (None, None) => QuantMethod::Sbm,
            (None, Some(b)) => {
                anyhow::bail!("--quantizer none --bits {b}: drop --bits for an fp32 pass")
            }
        },
        scope: args.scope.scope(),
        ..BuildOptions::default()
    };
    let mut net = build_network(&graph, &opts).with_context(|| format!("model {}", args.model))?;
    if let Some(b) = args.bits {
        net.set_bits(b, 0).context("--bits")?;
        net.use_batch_ranges_in_eval(true);
    }
    let input = net
        .input_from_ir(&x)
        .with_context(|| format!("{}", args.input.display()))?;
    // A file exported in training mode asks for batch statistics in its BatchNorm nodes
    // (ONNX `training_mode = 1`); honour it, as onnxruntime does.
    let training_bn = graph
        .nodes
        .iter()
        .any(|n| matches!(&n.op, Op::BatchNorm(b) if b.training_mode));
    let mode = if training_bn {
        eprintln!("note: the model's BatchNorm nodes are in training mode: using batch statistics");
        Mode::Train
    } else {
        Mode::Eval
    };
    let y = net.forward(input, mode)?;
    let y = net.output_to_ir(y)?;
    if let Some((i, v)) = first_non_finite(&y) {
        // input and weights were checked finite: the model's own arithmetic overflowed
        return Err(cptsim_models::ModelError::graph(
            &args.model,
            format!(
                "output element {i} of {} is {v} although the input and weights are finite \
                 (an overflow in the model's arithmetic); {} not written",
                y.len(),
                args.output.display()
            ),
        )
        .into());
    }
    npy::write(&args.output, &y)?;
    Ok(())
}

/// The first NaN or infinite element of `t` (in C order) and its value.
fn first_non_finite(t: &cptsim_sim::layers::Tensor) -> Option<(usize, f32)> {
    t.iter().copied().enumerate().find(|(_, v)| !v.is_finite())
}
