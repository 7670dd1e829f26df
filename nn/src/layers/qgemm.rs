//! The quantized operands shared by conv and linear layers (spec §1.2): quantized weights and
//! input activation for the forward GEMM, the quantized error for both backward GEMMs, and the
//! non-identity backward factors of quantizers that have them (DoReFa).

use ndarray::{Array2, ArrayView2, CowArray, Ix2, IxDyn};

use super::intgemm::{self, IntOperands};
use super::{owned, standard, Mode, Tensor};
use crate::error::{Result, SimError};
use crate::quant::{lsq, LayerQuant};

/// Forward operands of one quantized GEMM layer, kept for backward (as
/// `QuantOperands<'static, 'static>`, see [`QuantOperands::into_owned`]).
pub(crate) struct QuantOperands<'a, 'w> {
    /// Quantized input activation: a copy, except in an fp32 pass that does not keep it for
    /// backward (evaluation, or a layer that keeps another form of it), which reads the input
    /// in place.
    pub x: CowArray<'a, f32, IxDyn>,
    /// Gradient mask of the activation quantizer, if not the identity.
    pub x_mask: Option<Vec<f32>>,
    /// Quantized weights `[O, K]`: the weights themselves (not a copy) at fp32.
    pub w: CowArray<'w, f32, Ix2>,
    /// Factor `∂ŵ/∂w` for the weight gradient, if not the identity.
    pub w_scale: Option<Array2<f32>>,
    /// `X̂ − X`, kept only while the layer's hook wants the step residual (LDP).
    pub x_residual: Option<Vec<f32>>,
    /// The integer codes, when the forward GEMM runs on them (a forward pass only: not kept
    /// for backward).
    pub int: Option<IntOperands>,
}

impl QuantOperands<'_, '_> {
    /// The operands with an owned input, to keep for backward (moves, unless borrowed).
    pub fn into_owned(self) -> QuantOperands<'static, 'static> {
        QuantOperands {
            x: CowArray::from(self.x.into_owned()),
            x_mask: self.x_mask,
            w: CowArray::from(self.w.into_owned()),
            w_scale: self.w_scale,
            x_residual: self.x_residual,
            int: None,
        }
    }
}

/// Quantizes the input and weights for the forward GEMM. The input is quantized in place when
/// owned, else copied; an fp32 input is read as it is unless `keep_x` (the layer keeps it for
/// backward). An evaluation pass whose GEMM reads only the integer codes (`codes_only`)
/// leaves the input as it is.
pub(crate) fn quantize_operands<'a, 'w>(
    quant: &mut LayerQuant,
    x: CowArray<'a, f32, IxDyn>,
    w: ArrayView2<'w, f32>,
    mode: Mode,
    keep_x: bool,
    codes_only: bool,
) -> QuantOperands<'a, 'w> {
    let mut x = x;
    if codes_only && mode == Mode::Eval && quant.integer_gemms().is_some() {
        let int = x
            .as_slice()
            .and_then(|s| intgemm::quantize_codes(quant, s, w, false));
        if let Some((int, wq)) = int {
            return QuantOperands {
                x,
                x_mask: None,
                w: CowArray::from(wq),
                w_scale: None,
                x_residual: None,
                int: Some(int),
            };
        }
    }
    if quant.integer_gemms().is_some() {
        let mut xq = owned(x);
        if let Some(s) = xq.as_slice_mut() {
            if let Some((int, wq)) = intgemm::quantize(quant, s, w, mode == Mode::Train) {
                return QuantOperands {
                    x: CowArray::from(xq),
                    x_mask: None,
                    w: CowArray::from(wq),
                    w_scale: None,
                    x_residual: None,
                    int: Some(int),
                };
            }
        }
        x = CowArray::from(xq);
    }
    let (w, w_scale) = match quant.weights(w) {
        Some((q, s)) => (CowArray::from(q), s),
        None => (CowArray::from(w), None),
    };
    if !keep_x && quant.bits_fw == 0 && x.is_standard_layout() {
        return QuantOperands {
            x,
            x_mask: None,
            w,
            w_scale,
            x_residual: None,
            int: None,
        };
    }
    let mut xq = owned(x);
    let probe = wants_step_residual(quant) && mode == Mode::Train && quant.bits_fw > 0;
    let x_orig = probe.then(|| xq.iter().copied().collect::<Vec<f32>>());
    let x_mask = match xq.as_slice_mut() {
        Some(s) => quant.activations(s, mode == Mode::Train),
        None => None,
    };
    let x_residual = x_orig.map(|mut r| {
        r.iter_mut().zip(xq.iter()).for_each(|(r, q)| *r = q - *r);
        r
    });
    QuantOperands {
        x: CowArray::from(xq),
        x_mask,
        w,
        w_scale,
        x_residual,
        int: None,
    }
}

/// Whether the layer's hook asks for the step-size residual.
fn wants_step_residual(quant: &LayerQuant) -> bool {
    quant.hook.as_ref().is_some_and(|h| h.wants_step_residual())
}

/// Whether [`record_step_grad`] reads the input gradient: a layer must compute it even when
/// nobody else wants it (see [`super::Layer::backward_params`]).
pub(crate) fn input_grad_read(quant: &LayerQuant, ops: &QuantOperands) -> bool {
    wants_step_residual(quant) && ops.x_residual.is_some()
}

/// When the hook asks for it, reports `Σ dL/dQ·(Q − I)` over the weights (`dw` = gradient w.r.t. the
/// quantized weights, before any backward factor; `w` = the fp32 master weights `[O, K]`) and
/// the input activation (`dx` = gradient w.r.t. the quantized input, before any mask).
pub(crate) fn record_step_grad(
    quant: &mut LayerQuant,
    ops: &QuantOperands,
    w: ArrayView2<f32>,
    dw: ArrayView2<f32>,
    dx: &[f32],
) {
    if !wants_step_residual(quant) {
        return;
    }
    let x_part = ops.x_residual.as_ref().map_or(0.0, |r| lsq::dot(dx, r));
    let w_part = if quant.bits_fw > 0 {
        lsq::residual_dot_2d(dw, ops.w.view(), w)
    } else {
        0.0
    };
    if let Some(h) = quant.hook.as_mut() {
        h.step_residual(x_part + w_part);
    }
}

/// The error `dL/dY` quantized in place (stochastic rounding at the layer's backward bits),
/// in standard layout.
pub(crate) fn quantize_error(quant: &mut LayerQuant, g: Tensor) -> Tensor {
    let samples = g.shape().first().copied().unwrap_or(1);
    let mut gq = standard(g);
    if let Some(s) = gq.as_slice_mut() {
        quant.errors(s, samples);
    }
    gq
}

/// Applies the activation quantizer's gradient mask to `dx` (no-op for STE quantizers).
pub(crate) fn mask_input_grad(dx: &mut Tensor, mask: Option<&Vec<f32>>) {
    if let (Some(m), Some(d)) = (mask, dx.as_slice_mut()) {
        d.iter_mut().zip(m).for_each(|(v, k)| *v *= k);
    }
}

/// Applies the weight quantizer's backward factor to `dw` (no-op for STE quantizers).
pub(crate) fn scale_weight_grad(dw: &mut Array2<f32>, scale: Option<&Array2<f32>>) {
    if let Some(s) = scale {
        *dw *= s;
    }
}

/// An error naming the layer when a quantized pass would meet a per-sample precision policy,
/// which `what` (e.g. "act × act GEMMs") does not support: its bits address the contiguous
/// samples of one batch-first activation.
pub(crate) fn reject_per_sample(layer: &str, quant: &LayerQuant, what: &str) -> Result<()> {
    if quant.bits_fw > 0 && quant.per_sample_bits().is_some() {
        return Err(SimError::shape(
            layer,
            format!("per-sample precision policies do not support {what}"),
        ));
    }
    Ok(())
}

/// The bias gradient of a layer whose output gradient is `data` laid out `[rows, c]`: the
/// per-channel sums as an f32 tensor of shape `[c]`.
pub(crate) fn bias_grad(data: &[f32], c: usize) -> Tensor {
    let sums: Vec<f32> = cptsim_kernels::reduce::sum_channels(data, c)
        .iter()
        .map(|&v| v as f32)
        .collect();
    ndarray::Array1::from(sums).into_dyn()
}
