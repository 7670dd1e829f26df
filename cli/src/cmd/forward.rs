//! `cptsim forward`: one eval-mode forward pass of a model on an `.npy` input, written as `.npy`
//! (BatchNorm nodes exported in training mode use batch statistics, as the file asks).

use std::path::PathBuf;

use super::arith::ArithArgs;
use super::quant_scope::ScopeArgs;
use super::shared::QuantizerArg;
use crate::exit::Exit;
use anyhow::{Context, Result};
use clap::Args;
use cptsim_models::ir::Op;
use cptsim_models::load_graph_for_shape;
use cptsim_nn::build::{build_network, BuildOptions};
use cptsim_nn::layers::Mode;
use cptsim_nn::npy;
use cptsim_nn::quant::QuantMethod;

/// Arguments of `cptsim forward`.
#[derive(Args)]
pub struct ForwardArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    #[arg(long)]
    pub model: String,
    /// Input `.npy`, C order: float32 NCHW (or `[N, F]`), batch first; or a language model's
    /// token ids (int64, int32, or float32 holding integers) in the layout its input declares,
    /// `[B, T]` or `[T, B]`. The model is bound to this shape: the batch is the size on the
    /// input's batch axis (a symbolic dimension named like a batch, `batch`/`N`/`B`, else the
    /// first one not named like a sequence, else axis 0; a zoo model's axis 0) and the sequence
    /// length the size on the other symbolic axis of a rank-2/3 input (a zoo LM's axis 1).
    #[arg(long)]
    pub input: PathBuf,
    /// Output `.npy` (written atomically).
    #[arg(long)]
    pub output: PathBuf,
    /// Quantize the in-scope conv/linear layers (see docs/src/guide/shared-flags.md) at this
    /// many bits: weights per output channel, input activations per tensor with the batch's own
    /// range. Default: fp32.
    #[arg(long)]
    pub bits: Option<u32>,
    /// Quantizer used with `--bits`.
    #[arg(long, value_enum, default_value_t = QuantizerArg::Sbm)]
    pub quantizer: QuantizerArg,
    /// Which layers are quantized.
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// How the quantized layers multiply.
    #[command(flatten)]
    pub arith: ArithArgs,
}

/// Runs the command.
pub fn run(args: &ForwardArgs) -> Result<()> {
    // The allocator policy of `train` and `bench` (large activations reused, not re-mmapped).
    crate::malloc::keep_large_blocks();
    let x = npy::read(&args.input)?;
    if x.is_empty() {
        return Err(Exit::BadInput.error(format!(
            "{}: input shape {:?} has no elements",
            args.input.display(),
            x.shape()
        )));
    }
    if let Some((i, v)) = first_non_finite(&x) {
        return Err(Exit::BadInput.error(format!("{}: element {i} is {v}", args.input.display())));
    }
    let graph = load_graph_for_shape(&args.model, x.shape())
        .with_context(|| format!("input {} of shape {:?}", args.input.display(), x.shape()))?;
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
    let arith = args.arith.spec(args.quantizer)?;
    if let Some(b) = args.bits {
        net.set_bits(b, 0).context("--bits")?;
        net.use_batch_ranges_in_eval(true);
        net.use_arithmetic(arith);
    } else if arith != Default::default() {
        return Err(Exit::Usage
            .error("--arithmetic / --accumulator: need --bits (an fp32 pass has no codes)"));
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
fn first_non_finite(t: &cptsim_nn::layers::Tensor) -> Option<(usize, f32)> {
    t.iter().copied().enumerate().find(|(_, v)| !v.is_finite())
}
