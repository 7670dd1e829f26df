//! 2-D convolution (any stride, padding, dilation and groups, depthwise included) as im2col +
//! GEMM on channels-last tensors, with the three GEMMs on quantized operands (spec §1.2); the
//! forward pass and input gradient of 3×3 convs at stride 1 by Winograd's F(2×2, 3×3)
//! (`winograd`); the forward pass of depthwise and grouped convs by direct loops over the taps.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use ndarray::{s, Array2, ArrayView2, ArrayView4, ArrayViewMut2, CowArray, Ix4, IxDyn};
use rayon::prelude::*;

use super::intgemm;
use super::qgemm::{
    bias_grad, input_grad_read, mask_input_grad, quantize_error, quantize_operands,
    record_step_grad, scale_weight_grad, QuantOperands,
};
use super::{
    as4, block_of, cached, check_grad, expect_inputs, filled_by_blocks, weight_and_bias, Epilogue,
    Layer, Mode, Param, Tensor,
};
use crate::error::{Result, SimError};
use crate::quant::{LayerQuant, QuantMethod};
use cptsim_kernels::gemm::{
    add_partials, matmul_into, matmul_patches_t_uninit, matmul_patches_uninit, matmul_uninit,
    PackedB, B,
};
use cptsim_kernels::reduce::{add_in_order, sums_and_squares};

mod fused;
mod plan;

use super::from_ir::{owned, Ctx, Layout, Val};
use crate::init::{conv_bias, conv_weight};
pub use cptsim_kernels::conv::Conv2dSpec;
use cptsim_kernels::conv::{winograd, with_scratch, zeroed, Im2col};
use cptsim_models::ir::{self, Node};
pub(crate) use fused::{forward_depthwise_block, Stage};
pub use plan::{batch_gemms, block_gemms, output_hw, BlockGemms, Gemms};
use plan::{geometry, transposed_spec};
use rand::Rng;

/// What backward needs from the training forward pass.
struct ConvCache {
    /// The quantized operands; their input is left empty when `padded` holds it.
    ops: QuantOperands<'static, 'static>,
    /// The (quantized) input `[N, H, W, C]` with the spec's padding added, for a conv that pads
    /// and reads its patches in place: the forward pass reads it, the weight gradient again.
    padded: Option<Vec<f32>>,
    in_shape: [usize; 4],
    out_shape: [usize; 4],
}

/// A 2-D convolution layer with weights `[O, KH, KW, I/groups]` and an optional bias `[O]`.
pub struct Conv2d {
    name: String,
    spec: Conv2dSpec,
    /// Weights `[O, KH, KW, I/groups]`.
    pub weight: Param,
    /// Optional bias `[O]`.
    pub bias: Option<Param>,
    /// Quantization state (fp32 unless bits are set).
    pub quant: LayerQuant,
    cache: Option<ConvCache>,
    prepared: Option<Prepared>,
}

/// What the weights are quantized as: their storage, length and quantizer (method, bits).
type PreparedKey = (usize, usize, QuantMethod, u32);

/// Forms an evaluation pass derives from the (quantized) weights: packed for the GEMMs, and
/// Winograd's transform. Kept across evaluation passes, as an inference runtime keeps its packed
/// weights, and dropped by a training pass, by [`Layer::params_mut`] and [`Layer::quant_mut`]
/// (the ways weights and quantizer change) or when the key differs. Code writing the public
/// `weight` or `quant` fields in place (tests only) must go through those instead.
struct Prepared {
    key: PreparedKey,
    packed: Option<PackedB>,
    wino: Option<Vec<PackedB>>,
    /// A grouped conv's weights as its direct loop reads them.
    grouped: Option<Vec<f32>>,
}

/// The weights `[O, KH, KW, I/groups]` of `spec` as the matrix `[O, K]` (a view of `weight`
/// alone, so the layer's other fields stay free while it is read).
fn weight_matrix<'w>(
    name: &str,
    spec: &Conv2dSpec,
    weight: &'w Param,
) -> Result<ArrayView2<'w, f32>> {
    weight
        .value
        .view()
        .into_shape_with_order((spec.out_channels, spec.k_per_group()))
        .map_err(|e| SimError::shape(name, format!("weight not contiguous: {e}")))
}

impl Conv2d {
    /// A conv layer from weights `[O, KH, KW, I/groups]` (channels-last) and an optional bias.
    pub fn new(
        name: &str,
        spec: Conv2dSpec,
        weight: Tensor,
        bias: Option<Tensor>,
        quant: LayerQuant,
    ) -> Result<Self> {
        spec.validate(name)?;
        let want = [
            spec.out_channels,
            spec.kernel[0],
            spec.kernel[1],
            spec.in_channels / spec.groups,
        ];
        if weight.shape() != want {
            return Err(SimError::shape(
                name,
                format!(
                    "weight shape {:?}, expected [O, KH, KW, I/g] = {want:?}",
                    weight.shape()
                ),
            ));
        }
        if let Some(b) = &bias {
            if b.shape() != [spec.out_channels] {
                return Err(SimError::shape(
                    name,
                    format!(
                        "bias shape {:?}, expected [{}]",
                        b.shape(),
                        spec.out_channels
                    ),
                ));
            }
        }
        Ok(Self {
            name: name.to_string(),
            spec,
            weight: Param::new("weight", weight, true),
            bias: bias.map(|b| Param::new("bias", b, false)),
            quant,
            cache: None,
            prepared: None,
        })
    }

    /// Converts ONNX/PyTorch weights `[O, I/g, KH, KW]` to this layer's `[O, KH, KW, I/g]`.
    pub fn weight_from_oihw(w: &Tensor) -> Result<Tensor> {
        let w4 = w.view().into_dimensionality::<Ix4>().map_err(|_| {
            SimError::shape(
                "conv",
                format!("OIHW weight must be 4-D, got {:?}", w.shape()),
            )
        })?;
        Ok(w4
            .permuted_axes([0, 2, 3, 1])
            .as_standard_layout()
            .into_owned()
            .into_dyn())
    }

    /// The layer's geometry.
    pub fn spec(&self) -> &Conv2dSpec {
        &self.spec
    }

    /// What the weights are quantized as now ([`Prepared`]'s key).
    fn prepared_key(&self) -> PreparedKey {
        (
            self.weight.value.as_ptr() as usize,
            self.weight.value.len(),
            self.quant.method,
            self.quant.bits_fw,
        )
    }

    fn weight_matrix(&self) -> Result<ArrayView2<'_, f32>> {
        weight_matrix(&self.name, &self.spec, &self.weight)
    }

    fn geometry(&self, x: &ArrayView4<f32>) -> Result<Im2col<'_>> {
        let (_, h, w, c) = x.dim();
        self.geometry_of(h, w, c)
    }

    /// The im2col geometry of an input of `h × w` pixels of `c` channels.
    fn geometry_of(&self, h: usize, w: usize, c: usize) -> Result<Im2col<'_>> {
        if c != self.spec.in_channels {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "input has {c} channels, layer expects {}",
                    self.spec.in_channels
                ),
            ));
        }
        geometry(&self.spec, &self.name, (h, w))
    }
}

/// A product writing one block of samples' whole output (uninitialised) from its input.
type BlockProduct<'a> =
    dyn for<'b> Fn(&'b mut [MaybeUninit<f32>], &[f32]) -> Result<&'b mut [f32]> + Sync + 'a;

/// The weights `[O, KH·KW·I]` of a one-group conv as the `[KH·KW·O, I]` matrix of its
/// [`Im2col::transposed_spec`]: term `(ky, kx, o)`, column `i` holds `w[o, KH−1−ky, KW−1−kx, i]`.
fn flipped_weights(layer: &str, w: ArrayView2<f32>, spec: &Conv2dSpec) -> Result<Array2<f32>> {
    let ([kh, kw], o, c) = (spec.kernel, spec.out_channels, spec.in_channels);
    let mut flipped = Vec::with_capacity(w.len());
    for tap in (0..kh * kw).rev() {
        // Row (ky, kx, oc) is the `c` weights of tap (KH−1−ky, KW−1−kx) of output channel oc.
        for row in w.outer_iter() {
            flipped.extend(row.slice(s![tap * c..(tap + 1) * c]).iter());
        }
    }
    Array2::from_shape_vec((kh * kw * o, c), flipped).map_err(shape_err(layer))
}

/// Outputs per part of an evaluation block of a 1×1 or depthwise conv (256 KiB: in L2 with
/// its input), which takes its bias and epilogue before the next part is written.
const PART_VALUES: usize = 1 << 16;

/// `y[row, c] += bias[c]` over the rows of `y`, if there is a bias.
fn add_bias(y: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in y.chunks_exact_mut(b.len().max(1)) {
            row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        }
    }
}

/// Adds group `g`'s input gradient to `dx`: its column gradient `gg·wg` (into `dcol`),
/// scattered.
fn scatter_input_grad(
    layer: &str,
    geo: &Im2col<'_>,
    g: usize,
    gg: ArrayView2<f32>,
    wg: ArrayView2<f32>,
    dcol: &mut [f32],
    dx: &mut [f32],
) -> Result<()> {
    let dv = ArrayViewMut2::from_shape((gg.nrows(), wg.ncols()), &mut *dcol)
        .map_err(shape_err(layer))?;
    matmul_into(dv, gg, wg, false)?;
    geo.scatter_add(dcol, g, dx);
    Ok(())
}

fn shape_err(layer: &str) -> impl Fn(ndarray::ShapeError) -> SimError + '_ {
    move |e| SimError::shape(layer, e.to_string())
}

/// Contiguous data of a standard-layout tensor, or a shape error.
fn data<'a, S: ndarray::Data<Elem = f32>>(
    layer: &str,
    t: &'a ndarray::ArrayBase<S, ndarray::IxDyn>,
) -> Result<&'a [f32]> {
    t.as_slice()
        .ok_or_else(|| SimError::shape(layer, "tensor is not contiguous"))
}

impl Conv2d {
    /// The backward pass; the input gradient (and its GEMMs) only when `want_dx` or when the
    /// quantizer's hook reads it ([`input_grad_read`]).
    fn backward_with(&mut self, grad_out: Tensor, want_dx: bool) -> Result<Option<Tensor>> {
        let cache = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, &cache.out_shape)?;
        let want_dx = want_dx || input_grad_read(&self.quant, &cache.ops);
        let [n, h, w, c] = cache.in_shape;
        let geo = self.geometry_of(h, w, c)?;
        let o = cache.out_shape[3];
        let (kg, groups) = (self.spec.k_per_group(), self.spec.groups);
        let opg = o / groups;
        let mut quant = self.quant.clone();
        let gq = quantize_error(&mut quant, grad_out);
        let name = self.name.as_str();
        let spb = geo.samples_per_block();
        let (in_block, g_block) = (spb * geo.in_per_sample(), spb * geo.rows_per_sample() * o);
        let wq = &cache.ops.w;
        let dw_t = self
            .spec
            .is_depthwise()
            .then(|| wq.t().as_standard_layout().into_owned());
        let dw_t = dw_t.as_ref().and_then(|a| a.as_slice());
        let len = n * h * w * c;
        // The input gradient as the forward pass of the transposed conv where that is plain
        // (no column gradient to scatter), else by the scatter below into a zeroed dx.
        let transposed = transposed_spec(&geo);
        let pointwise = geo.input_is_columns();
        // Per block of `spb` samples, a product that writes the block's whole input gradient.
        let up_front = |spb: usize, f: &BlockProduct| {
            let g = data(name, &gq)?;
            let (in_block, g_block) = (spb * geo.in_per_sample(), spb * geo.rows_per_sample() * o);
            filled_by_blocks(len, in_block, |i, dxb| f(dxb, block_of(g, g_block, i)))
        };
        let mut dx = if !want_dx {
            Vec::new()
        } else if let Some(ts) = &transposed {
            let tgeo = geo.transposed(ts);
            let wt = flipped_weights(name, wq.view(), &self.spec)?;
            if let Some(tile) = winograd::forward_tile(&tgeo) {
                let u = winograd::weights(wt.view(), ts.in_channels, tile)?;
                up_front(
                    winograd::samples_per_block(&tgeo, Some(tile)),
                    &|dxb, gb| {
                        Ok(winograd::forward(
                            name,
                            &tgeo,
                            tile,
                            &u,
                            winograd::Input::Plain(gb),
                            dxb,
                        )?)
                    },
                )?
            } else {
                let padded = tgeo.patch_scratch(name, spb)?;
                up_front(spb, &|dxb, gb| {
                    with_scratch(padded, 0, |buf, _| {
                        let patches = tgeo.patches(name, gb, buf)?;
                        Ok(matmul_patches_uninit(dxb, &patches, wt.view())?)
                    })
                })?
            }
        } else if pointwise {
            // The columns' gradient is the input's.
            up_front(spb, &|dxb, gb| {
                let gv = ArrayView2::from_shape((gb.len() / o, o), gb).map_err(shape_err(name))?;
                Ok(matmul_uninit(dxb, gv, wq.view())?)
            })?
        } else {
            // Zeroed for the scatter, block by block in parallel.
            filled_by_blocks(len, in_block, |_, b| Ok(zeroed(b)))?
        };
        // One group and runs of kernel rows: the weight gradient reads the patches in place,
        // or its tiles by Winograd.
        let in_place = geo.reads_patches();
        let wino = winograd::weight_grad_applies(&geo);
        let padded_block = geo.patch_scratch(name, spb)?;
        // Each block's input: padded by the forward pass, or as it came (then padded per block
        // into scratch if the patches are read in place).
        let (inputs, in_chunk, patch_len) = match &cache.padded {
            Some(p) => (p.as_slice(), padded_block, 0),
            None => (
                data(name, &cache.ops.x)?,
                in_block,
                if in_place { padded_block } else { 0 },
            ),
        };
        // Per block of samples: its (disjoint) slice of dx, if wanted.
        let dx_blocks: Vec<Option<&mut [f32]>> = if want_dx {
            dx.chunks_mut(in_block).map(Some).collect()
        } else {
            (0..n.div_ceil(spb)).map(|_| None).collect()
        };
        // Per block of samples: its partial weight gradient, and its slice of dx.
        let partials: Vec<Array2<f32>> = dx_blocks
            .into_par_iter()
            .zip(inputs.par_chunks(in_chunk.max(1)))
            .zip(data(name, &gq)?.par_chunks(g_block))
            .map(|((dxb, xb), gb)| -> Result<Array2<f32>> {
                let r = gb.len() / o;
                let gv = ArrayView2::from_shape((r, o), gb).map_err(shape_err(name))?;
                if let Some(wt) = &dw_t {
                    let mut pdw_t = Array2::<f32>::zeros((kg, o));
                    let pd = pdw_t
                        .as_slice_mut()
                        .ok_or_else(|| SimError::shape(name, "not contiguous"))?;
                    // Without a wanted dx, its block goes to a scratch buffer.
                    let mut scratch = Vec::new();
                    let dxb = dxb.unwrap_or_else(|| {
                        scratch = vec![0.0; xb.len()];
                        &mut scratch
                    });
                    geo.depthwise_backward(xb, gb, wt, dxb, pd);
                    return Ok(pdw_t.t().as_standard_layout().into_owned());
                }
                let mut pdw = Array2::<f32>::zeros((o, kg));
                // The column gradient to scatter: none when dx is written above or not wanted.
                let dx_here = dxb.filter(|_| transposed.is_none());
                if wino {
                    let x = match cache.padded {
                        Some(_) => winograd::Input::Padded(xb),
                        None => winograd::Input::Plain(xb),
                    };
                    let pd = pdw
                        .as_slice_mut()
                        .ok_or_else(|| SimError::shape(name, "not contiguous"))?;
                    winograd::weight_grad(name, &geo, x, gb, pd)?;
                    if let Some(dxb) = dx_here {
                        with_scratch(r * kg, 0, |dcol, _| {
                            scatter_input_grad(name, &geo, 0, gv, wq.view(), dcol, dxb)
                        })?;
                    }
                    return Ok(pdw);
                }
                if pointwise {
                    // The columns are the input (their gradient was written above): no copies.
                    let xv = ArrayView2::from_shape((r, kg), xb).map_err(shape_err(name))?;
                    matmul_into(pdw.view_mut(), gv.t(), xv, false)?;
                    return Ok(pdw);
                }
                let dcol_len = if dx_here.is_some() { r * kg } else { 0 };
                // `buf`: the patches' padded copy (one group, runs of kernel rows: the weight
                // gradient reads them in place, as Pᵀ·g) or each group's gathered columns.
                let buf_len = if in_place { patch_len } else { r * kg };
                with_scratch(buf_len, dcol_len, |buf, dcol| -> Result<()> {
                    let mut dx_here = dx_here;
                    for g in 0..groups {
                        let gg = gv.slice(s![.., g * opg..(g + 1) * opg]);
                        let mut pg = pdw.slice_mut(s![g * opg..(g + 1) * opg, ..]);
                        if in_place {
                            let patches = match cache.padded {
                                Some(_) => geo.patches_of(name, xb)?,
                                None => geo.patches(name, xb, &mut *buf)?,
                            };
                            let mut t = vec![MaybeUninit::uninit(); kg * opg];
                            let t = matmul_patches_t_uninit(&mut t, &patches, gg)?;
                            let t =
                                ArrayView2::from_shape((kg, opg), &*t).map_err(shape_err(name))?;
                            pg.assign(&t.t());
                        } else {
                            geo.gather(xb, g, buf);
                            let colv =
                                ArrayView2::from_shape((r, kg), &*buf).map_err(shape_err(name))?;
                            matmul_into(pg, gg.t(), colv, false)?;
                        }
                        if let Some(dxb) = dx_here.as_deref_mut() {
                            let wg = wq.slice(s![g * opg..(g + 1) * opg, ..]);
                            scatter_input_grad(name, &geo, g, gg, wg, dcol, dxb)?;
                        }
                    }
                    Ok(())
                })?;
                Ok(pdw)
            })
            .collect::<Result<_>>()?;
        let mut dw = Array2::<f32>::zeros((o, kg));
        add_partials(dw.view_mut(), &partials, true)?;
        record_step_grad(
            &mut quant,
            &cache.ops,
            self.weight_matrix()?,
            dw.view(),
            &dx,
        );
        scale_weight_grad(&mut dw, cache.ops.w_scale.as_ref());
        let wshape = self.weight.value.raw_dim();
        self.weight.grad = dw.into_shape_with_order(wshape).map_err(shape_err(name))?;
        if let Some(b) = &mut self.bias {
            b.grad = bias_grad(data(name, &gq)?, o);
        }
        self.quant = quant;
        if !want_dx {
            return Ok(None);
        }
        let mut dx = Tensor::from_shape_vec(vec![n, h, w, c], dx).map_err(shape_err(name))?;
        mask_input_grad(&mut dx, cache.ops.x_mask.as_ref());
        Ok(Some(dx))
    }

    /// The forward pass on an input that is borrowed or owned (then quantized in place and kept
    /// for backward without a copy), `epilogue` applied to each block of the output (evaluation).
    fn run(
        &mut self,
        x: CowArray<'_, f32, IxDyn>,
        mode: Mode,
        epilogue: &Epilogue,
    ) -> Result<Tensor> {
        self.run_summing(x, mode, epilogue, None)
    }

    /// An evaluation forward pass with `epilogue` applied to each block of its output while the
    /// block is in cache (the fused layers after it, `net::fuse::eval_epilogue`).
    pub(crate) fn forward_then(
        &mut self,
        x: CowArray<'_, f32, IxDyn>,
        epilogue: &Epilogue,
    ) -> Result<Tensor> {
        self.run(x, Mode::Eval, epilogue)
    }

    /// A training forward pass that also returns its output's per-channel `[Σy | Σy²]`, for the
    /// batch norm after it (`net::fuse::conv_bn_relu`; see [`Conv2d::run_summing`]).
    pub(crate) fn forward_summed(
        &mut self,
        x: CowArray<'_, f32, IxDyn>,
    ) -> Result<(Tensor, Vec<f64>)> {
        let mut sums = Vec::new();
        let y = self.run_summing(x, Mode::Train, &Epilogue::default(), Some(&mut sums))?;
        Ok((y, sums))
    }

    /// [`Conv2d::run`]; with `sums`, also sets them to the output's `[Σy | Σy²]` per channel,
    /// each block of output rows summed while in cache and the blocks added in order (the
    /// chunks of [`super::batchnorm::train_sum_rows`]).
    fn run_summing(
        &mut self,
        x: CowArray<'_, f32, IxDyn>,
        mode: Mode,
        epilogue: &Epilogue,
        sums: Option<&mut Vec<f64>>,
    ) -> Result<Tensor> {
        let x4 = as4(&self.name, &x)?;
        let in_shape = {
            let (n, h, w, c) = x4.dim();
            [n, h, w, c]
        };
        let n = in_shape[0];
        // Put back after an evaluation pass that succeeds.
        let prepared = self.prepared.take();
        let geo = self.geometry(&x4)?;
        let (oh, ow) = geo.out_hw;
        let (o, kg, groups) = (
            self.spec.out_channels,
            self.spec.k_per_group(),
            self.spec.groups,
        );
        let mut quant = self.quant.clone();
        // A training pass of a conv that pads and reads its patches in place keeps the padded
        // input for the weight gradient (one padded copy per step, not two) instead of the
        // input, so an fp32 input is not copied as well.
        let keep_padded = mode == Mode::Train && geo.reads_patches() && self.spec.pads != [0; 4];
        let keep_x = mode == Mode::Train && !keep_padded;
        let w = weight_matrix(&self.name, &self.spec, &self.weight)?;
        let one_group = groups == 1 && !self.spec.is_depthwise();
        let ops = quantize_operands(&mut quant, x, w, mode, keep_x, one_group);
        let int_taps = match &ops.int {
            Some(int) if one_group => Some((int, intgemm::conv_taps(&self.name, &geo, int)?)),
            _ => None,
        };
        // Winograd's tile, if any, which sets the samples per block of work.
        let tile = winograd::forward_tile(&geo).filter(|_| int_taps.is_none());
        let spb = winograd::samples_per_block(&geo, tile);
        let rows = spb * geo.rows_per_sample();
        // The output's sums go by batch norm's blocks of rows (the usual blocks), a whole
        // number of them per block of work.
        let sum_rows = geo.samples_per_block() * geo.rows_per_sample();
        let padded = geo.patch_scratch(&self.name, spb)?;
        let len = [oh, ow, o]
            .iter()
            .try_fold(n, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| SimError::shape(&self.name, "output size overflows"))?;
        let name = self.name.as_str();
        let bias = self
            .bias
            .as_ref()
            .map(|b| data(name, &b.value))
            .transpose()?;
        // Depthwise convs skip the (degenerate, one-column) GEMMs: weights as [taps, C].
        let dw_t_arr = self
            .spec
            .is_depthwise()
            .then(|| ops.w.t().as_standard_layout().into_owned());
        let dw_t = dw_t_arr.as_ref().and_then(|a| a.as_slice());
        let xs = data(name, &ops.x)?;
        // 3×3 convs of 32–512 channels at stride 1 run by Winograd ([`winograd::forward_tile`]),
        // in training (reading the kept padded input) and evaluation alike; their input gradient
        // too. Their transformed kernels are packed once for all blocks; so are, for the other
        // convs, the weights as the GEMMs read them (a pack of the
        // transposed weights also reads them in runs, where a product's own cuts gather).
        // Both are kept for the next evaluation pass.
        let key = self.prepared_key();
        let mut prep = prepared
            .filter(|p| mode == Mode::Eval && p.key == key)
            .unwrap_or(Prepared {
                key,
                packed: None,
                wino: None,
                grouped: None,
            });
        if let Some(tile) = tile {
            if prep.wino.is_none() {
                prep.wino = Some(winograd::weights(ops.w.t(), self.spec.in_channels, tile)?);
            }
        } else if geo.grouped_direct() {
            prep.grouped
                .get_or_insert_with(|| geo.grouped_weights(ops.w.view()));
        } else if dw_t.is_none() && groups == 1 && int_taps.is_none() {
            prep.packed.get_or_insert_with(|| PackedB::new(ops.w.t()));
        }
        let wino = prep.wino.as_ref().zip(tile);
        let packed_w = prep.packed.as_ref();
        let w_operand = || match packed_w {
            Some(p) => B::Packed(p),
            None => B::View(ops.w.t()),
        };
        let padded_x = if keep_padded {
            let total = geo.patch_scratch(name, n)?;
            Some(filled_by_blocks(total, padded, |i, out| {
                Ok(geo.pad_into(name, block_of(xs, spb * geo.in_per_sample(), i), out)?)
            })?)
        } else {
            None
        };
        // Every block writes all of its output, so the output is not zeroed first.
        let blocks = if sums.is_some() {
            n.div_ceil(geo.samples_per_block())
        } else {
            0
        };
        let block_sums: Vec<OnceLock<Vec<f64>>> = (0..blocks).map(|_| OnceLock::new()).collect();
        // In evaluation a 1×1 or depthwise conv writes each block in parts of about
        // `PART_VALUES` outputs, each taking its bias and epilogue while it is in cache; the
        // other products write the block whole. Every output is its own chain either way.
        let parted = sums.is_none()
            && int_taps.is_none()
            && wino.is_none()
            && (dw_t.is_some() || (geo.input_is_columns() && prep.grouped.is_none()));
        let part_rows = if parted {
            (PART_VALUES / o.max(1)).max(1)
        } else {
            usize::MAX
        };
        let y = filled_by_blocks(len, rows * o, |i, yb| {
            let xb = block_of(xs, spb * geo.in_per_sample(), i);
            let r = yb.len() / o;
            let yb = if parted {
                let start = i * rows * o;
                for (p, part) in yb.chunks_mut(part_rows * o).enumerate() {
                    let row0 = p * part_rows;
                    let pr = part.len() / o;
                    let part = match &dw_t {
                        Some(wt) => geo.depthwise_forward_rows(xb, wt, bias, row0..row0 + pr, part),
                        None => {
                            let cols = &xb[row0 * kg..(row0 + pr) * kg];
                            let colv =
                                ArrayView2::from_shape((pr, kg), cols).map_err(shape_err(name))?;
                            let part = matmul_uninit(part, colv, w_operand())?;
                            add_bias(part, bias);
                            part
                        }
                    };
                    epilogue.apply(part, o, start + row0 * o)?;
                }
                // SAFETY: the parts cover the block, and each was written above.
                return Ok(unsafe { &mut *(std::ptr::from_mut(yb) as *mut [f32]) });
            } else if let Some((int, taps)) = &int_taps {
                let xc = int.x_codes.block(spb * geo.in_per_sample(), i);
                intgemm::conv_block(name, &geo, xc, int, taps, yb)?
            } else if let Some((u, tile)) = wino {
                let x = match &padded_x {
                    Some(p) if winograd::reads_padded(&geo, tile) => {
                        winograd::Input::Padded(block_of(p, padded, i))
                    }
                    _ => winograd::Input::Plain(xb),
                };
                winograd::forward(name, &geo, tile, u, x, yb)?
            } else if let Some(wt) = &dw_t {
                geo.depthwise_forward(xb, wt, None, yb)
            } else if let Some(gw) = &prep.grouped {
                let yb = zeroed(yb);
                geo.grouped_forward(name, xb, gw, yb)?;
                yb
            } else if geo.input_is_columns() {
                let colv = ArrayView2::from_shape((r, kg), xb).map_err(shape_err(name))?;
                matmul_uninit(yb, colv, w_operand())?
            } else if geo.reads_patches() {
                // The patches are read where they lie (in a padded copy if there is padding).
                match &padded_x {
                    Some(p) => {
                        let patches = geo.patches_of(name, block_of(p, padded, i))?;
                        matmul_patches_uninit(yb, &patches, w_operand())?
                    }
                    None => with_scratch(padded, 0, |buf, _| {
                        let patches = geo.patches(name, xb, buf)?;
                        matmul_patches_uninit(yb, &patches, w_operand()).map_err(SimError::from)
                    })?,
                }
            } else {
                // One group (grouped convs took the direct loop above).
                with_scratch(r * kg, 0, |col, _| {
                    geo.gather(xb, 0, col);
                    let colv = ArrayView2::from_shape((r, kg), &*col).map_err(shape_err(name))?;
                    matmul_uninit(yb, colv, w_operand()).map_err(SimError::from)
                })?
            };
            add_bias(yb, bias);
            epilogue.apply(yb, o, i * rows * o)?;
            let sum_blocks = yb.chunks((sum_rows * o).max(1)).enumerate();
            for (slot, sub) in sum_blocks
                .filter_map(|(j, sub)| Some((block_sums.get(i * (rows / sum_rows) + j)?, sub)))
            {
                let mut acc = vec![0.0; 2 * o];
                sums_and_squares(sub, &mut acc);
                let _ = slot.set(acc);
            }
            Ok(yb)
        })?;
        if let Some(sums) = sums {
            let parts = block_sums.into_iter().map(|s| s.into_inner());
            *sums = add_in_order(
                2 * o,
                parts
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| SimError::shape(name, "a block of the output was not summed"))?,
            );
        }
        self.quant = quant;
        self.prepared = (mode == Mode::Eval).then_some(prep);
        let out_shape = [n, oh, ow, o];
        if mode == Mode::Eval {
            self.cache = None;
            // An input handed over (or a quantized copy) goes to the evaluation free list.
            if ops.x.is_owned() {
                crate::arena::give(ops.x.into_owned());
            }
            return Tensor::from_shape_vec(out_shape.to_vec(), y).map_err(shape_err(name));
        }
        self.cache = Some({
            let ops = match padded_x {
                Some(_) => QuantOperands {
                    x: CowArray::from(Tensor::zeros(IxDyn(&[0]))),
                    ..ops
                },
                None => ops,
            };
            ConvCache {
                ops: ops.into_owned(),
                padded: padded_x,
                in_shape,
                out_shape,
            }
        });
        Tensor::from_shape_vec(out_shape.to_vec(), y).map_err(shape_err(name))
    }
}

impl Layer for Conv2d {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        self.run(CowArray::from(x.view()), mode, &Epilogue::default())
    }

    fn forward_owned(&mut self, x: Tensor, mode: Mode) -> Result<Tensor> {
        self.run(CowArray::from(x), mode, &Epilogue::default())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let dx = self.backward_with(grad_out, true)?;
        Ok(dx.into_iter().collect())
    }

    fn backward_params(&mut self, grad_out: Tensor) -> Result<()> {
        self.backward_with(grad_out, false).map(drop)
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.prepared = None;
        weight_and_bias(&mut self.weight, &mut self.bias)
    }

    fn quant_mut(&mut self) -> Option<&mut LayerQuant> {
        self.prepared = None;
        Some(&mut self.quant)
    }
}

impl Conv2d {
    /// The layer of an IR `Conv` node on an image: the model's weights (OIHW, converted) or
    /// fresh ones with PyTorch's default bias U(±1/√fan_in).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        c: &ir::Conv,
        ins: &[Val],
        quant: LayerQuant,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::Image)?;
        let in_channels = ctx.shape(node.inputs[0]).get(1).copied().unwrap_or(0);
        let kernel = c.kernel();
        let spec = Conv2dSpec {
            in_channels,
            out_channels: c.out_channels(),
            kernel,
            stride: c.strides,
            pads: c.pads,
            dilation: c.dilations,
            groups: c.groups,
        };
        spec.validate(&node.name)?;
        let (weight, bias) = match ctx.init {
            super::from_ir::Init::FromModel => (
                Conv2d::weight_from_oihw(&c.weight)
                    .map_err(|e| SimError::shape(&node.name, e.to_string()))?,
                c.bias.as_ref().map(owned),
            ),
            super::from_ir::Init::Seeded(_) => {
                let (out, ipg) = (spec.out_channels, in_channels / c.groups.max(1));
                let w = conv_weight(ctx.rng, out, kernel, ipg, c.groups);
                let b = c
                    .bias
                    .as_ref()
                    .map(|_| conv_bias(ctx.rng, out, kernel, ipg));
                (w, b)
            }
        };
        let layer = Conv2d::new(&node.name, spec, weight, bias, quant)?;
        ctx.push(layer, &[x.id], Layout::Image)
    }
}

#[cfg(test)]
mod tests;
