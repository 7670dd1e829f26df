//! 2-D convolution (any stride, padding, dilation and groups, depthwise included) as im2col +
//! GEMM on channels-last tensors, with the three GEMMs on quantized operands (spec §1.2); the
//! forward pass and input gradient of 3×3 convs at stride 1 by Winograd's F(2×2, 3×3)
//! (`winograd`).

use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use ndarray::{s, Array2, ArrayView2, ArrayView4, ArrayViewMut2, CowArray, Ix4, IxDyn};
use rayon::prelude::*;

use super::qgemm::{
    input_grad_read, mask_input_grad, quantize_error, quantize_operands, record_step_grad,
    scale_weight_grad, QuantOperands,
};
use super::reduce::{add_in_order, bias_grad, sums_and_squares};
use super::{
    as4, block_of, cached, check_grad, expect_inputs, filled_by_blocks, weight_and_bias, window_hw,
    Epilogue, Layer, Mode, Param, Tensor,
};
use crate::error::{Result, SimError};
use crate::quant::{LayerQuant, QuantMethod};
use cptsim_kernels::gemm::{
    add_partials, matmul_into, matmul_patches_t_uninit, matmul_patches_uninit, matmul_uninit,
    PackedB, B,
};

mod depthwise;
mod im2col;
mod lanes;
mod winograd;

use im2col::Im2col;

/// Geometry of a convolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv2dSpec {
    /// Input channels.
    pub in_channels: usize,
    /// Output channels.
    pub out_channels: usize,
    /// Kernel `[KH, KW]`.
    pub kernel: [usize; 2],
    /// Stride `[SH, SW]`.
    pub stride: [usize; 2],
    /// Zero padding `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Dilation `[DH, DW]`.
    pub dilation: [usize; 2],
    /// Groups (`in_channels` for depthwise).
    pub groups: usize,
}

impl Conv2dSpec {
    /// Square kernel `k`, stride `s`, symmetric padding `p`, no dilation, one group.
    pub fn square(in_channels: usize, out_channels: usize, k: usize, s: usize, p: usize) -> Self {
        Self {
            in_channels,
            out_channels,
            kernel: [k, k],
            stride: [s, s],
            pads: [p, p, p, p],
            dilation: [1, 1],
            groups: 1,
        }
    }

    /// Checks that the geometry is usable.
    pub fn validate(&self, layer: &str) -> Result<()> {
        let g = self.groups;
        let bad = self.kernel.contains(&0)
            || self.stride.contains(&0)
            || self.dilation.contains(&0)
            || g == 0
            || self.in_channels == 0
            || self.out_channels == 0
            || !self.in_channels.is_multiple_of(g)
            || !self.out_channels.is_multiple_of(g);
        if bad {
            return Err(SimError::shape(
                layer,
                format!("invalid conv geometry {self:?} (zero size, or channels not divisible by groups)"),
            ));
        }
        Ok(())
    }

    /// Output `(OH, OW)` for an `H×W` input.
    pub fn output_hw(&self, layer: &str, h: usize, w: usize) -> Result<(usize, usize)> {
        window_hw(
            layer,
            (h, w),
            self.kernel,
            self.stride,
            self.dilation,
            self.pads,
        )
    }

    /// True for a depthwise conv with channel multiplier 1 (`groups = in = out > 1`).
    pub fn is_depthwise(&self) -> bool {
        self.groups > 1 && self.groups == self.in_channels && self.out_channels == self.in_channels
    }

    /// GEMM reduction length per group: `KH·KW·I/groups`.
    pub fn k_per_group(&self) -> usize {
        self.kernel[0] * self.kernel[1] * (self.in_channels / self.groups)
    }
}

/// A GEMM `[m, k, n]` (`C[m, n] = A[m, k]·B[k, n]`) and how many times a pass runs it.
pub type Gemms = ([usize; 3], usize);

/// The GEMMs a training step of a conv runs per group on one block of samples (or a batch:
/// [`Conv2dSpec::batch_gemms`]), by the rules of its forward and backward passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockGemms {
    /// Output rows × taps·channels × output channels, once; or a Winograd conv's products,
    /// tiles × channels × output channels, one per position (16 or 36) and chunk of tiles.
    pub forward: Vec<Gemms>,
    /// The input gradient: as the transposed conv's forward pass (stride 1; by Winograd where
    /// that conv qualifies), as the column gradient to scatter, or none when nobody wants it.
    pub error: Vec<Gemms>,
    /// The weight gradient: by Winograd (output channels × tiles × channels, 16 per chunk of
    /// tiles) where the forward pass qualifies and its kept input is one the tiles read; else
    /// `Pᵀ·g` on the patches in place (one group, runs of kernel rows), else `gᵀ·col`, once.
    pub weight: Vec<Gemms>,
    /// Whether the forward, error and weight products are Winograd's (their `B` is stored as
    /// `[k, n]`: the transformed kernels, the transposed conv's, the transformed input).
    pub winograd: [bool; 3],
}

impl Conv2dSpec {
    /// [`BlockGemms`] of conv `layer` for a block of `samples` samples of `in_hw` pixels, with
    /// or without the input gradient; `None` for a depthwise conv (no GEMM).
    pub fn block_gemms(
        &self,
        layer: &str,
        in_hw: (usize, usize),
        samples: usize,
        input_grad: bool,
    ) -> Result<Option<BlockGemms>> {
        if self.is_depthwise() {
            return Ok(None);
        }
        let geo = Im2col::of(self, layer, in_hw)?;
        let (kg, opg) = (self.k_per_group(), self.out_channels / self.groups);
        let rows = samples * geo.rows_per_sample();
        let mut error_winograd = false;
        let error = match geo.transposed_spec() {
            _ if !input_grad => vec![],
            Some(t) => {
                let tgeo = geo.transposed(&t);
                let tile = winograd::forward_tile(&tgeo);
                error_winograd = tile.is_some();
                if let Some(tile) = tile {
                    winograd::products(&tgeo, tile, samples)
                } else {
                    vec![(
                        [
                            samples * in_hw.0 * in_hw.1,
                            t.k_per_group(),
                            self.in_channels,
                        ],
                        1,
                    )]
                }
            }
            None => vec![([rows, opg, kg], 1)],
        };
        let forward_tile = winograd::forward_tile(&geo);
        let forward = if let Some(tile) = forward_tile {
            winograd::products(&geo, tile, samples)
        } else {
            vec![([rows, kg, opg], 1)]
        };
        let weight = if winograd::weight_grad_applies(&geo) {
            winograd::weight_products(&geo, samples)
        } else if geo.reads_patches() {
            vec![([kg, rows, opg], 1)]
        } else {
            vec![([opg, rows, kg], 1)]
        };
        Ok(Some(BlockGemms {
            forward,
            error,
            weight,
            winograd: [
                forward_tile.is_some(),
                error_winograd,
                winograd::weight_grad_applies(&geo),
            ],
        }))
    }

    /// The GEMMs a training step of the conv runs per group on a batch of `batch` samples: each
    /// pass's [`Conv2dSpec::block_gemms`] over the blocks of samples it works in (F(4×4)
    /// Winograd takes more samples per block than the other passes), counts summed.
    pub fn batch_gemms(
        &self,
        layer: &str,
        in_hw: (usize, usize),
        batch: usize,
        input_grad: bool,
    ) -> Result<Option<BlockGemms>> {
        let Some(mut total) = self.block_gemms(layer, in_hw, 0, input_grad)? else {
            return Ok(None);
        };
        let geo = Im2col::of(self, layer, in_hw)?;
        let usual = geo.samples_per_block();
        let block_of = |g: &Im2col<'_>| winograd::samples_per_block(g, winograd::forward_tile(g));
        let transposed = geo.transposed_spec();
        let error_spb = transposed
            .as_ref()
            .map_or(usual, |t| block_of(&geo.transposed(t)));
        type Pick = fn(&mut BlockGemms) -> &mut Vec<Gemms>;
        let passes: [(usize, Pick); 3] = [
            (block_of(&geo), |g| &mut g.forward),
            (error_spb, |g| &mut g.error),
            (usual, |g| &mut g.weight),
        ];
        for (per, pick) in passes {
            let mut gemms = Vec::new();
            for (samples, count) in [(per, batch / per), (batch % per, 1)] {
                if samples == 0 || count == 0 {
                    continue;
                }
                if let Some(mut g) = self.block_gemms(layer, in_hw, samples, input_grad)? {
                    gemms.extend(pick(&mut g).iter().map(|&(s, n)| (s, n * count)));
                }
            }
            *pick(&mut total) = gemms;
        }
        Ok(Some(total))
    }
}

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
        Ok(Im2col {
            spec: &self.spec,
            in_hw: (h, w),
            out_hw: self.spec.output_hw(&self.name, h, w)?,
        })
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

thread_local! {
    /// Per-thread column buffers reused across blocks and calls (every use overwrites the part it
    /// reads, so no zeroing is needed).
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs `f` with two scratch buffers of the given lengths (contents unspecified).
fn with_scratch<R>(a: usize, b: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut bufs) => {
            let (x, y) = &mut *bufs;
            if x.len() < a {
                x.resize(a, 0.0);
            }
            if y.len() < b {
                y.resize(b, 0.0);
            }
            f(&mut x[..a], &mut y[..b])
        }
        Err(_) => f(&mut vec![0.0; a], &mut vec![0.0; b]),
    })
}

/// `b` filled with zeros.
fn zeroed(b: &mut [MaybeUninit<f32>]) -> &mut [f32] {
    b.fill(MaybeUninit::new(0.0));
    // SAFETY: every element was just written (`MaybeUninit<f32>` has the layout of `f32`).
    unsafe { &mut *(std::ptr::from_mut(b) as *mut [f32]) }
}

/// Maps an ndarray shape error to a shape error naming the layer.
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
        let transposed = geo.transposed_spec();
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
                        winograd::forward(name, &tgeo, tile, &u, winograd::Input::Plain(gb), dxb)
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

    /// A training [`Conv2d::run`] that also returns its output's sums (see
    /// [`Conv2d::run_summing`]).
    fn train_summed(&mut self, x: CowArray<'_, f32, IxDyn>) -> Result<(Tensor, Vec<f64>)> {
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
        let opg = o / groups;
        let mut quant = self.quant.clone();
        // A training pass of a conv that pads and reads its patches in place keeps the padded
        // input for the weight gradient (one padded copy per step, not two) instead of the
        // input, so an fp32 input is not copied as well.
        let keep_padded = mode == Mode::Train && geo.reads_patches() && self.spec.pads != [0; 4];
        let keep_x = mode == Mode::Train && !keep_padded;
        let w = weight_matrix(&self.name, &self.spec, &self.weight)?;
        let ops = quantize_operands(&mut quant, x, w, mode, keep_x);
        // Winograd's tile, if any, which sets the samples per block of work.
        let tile = winograd::forward_tile(&geo);
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
        let key = (
            self.weight.value.as_ptr() as usize,
            self.weight.value.len(),
            self.quant.method,
            self.quant.bits_fw,
        );
        let mut prep = prepared
            .filter(|p| mode == Mode::Eval && p.key == key)
            .unwrap_or(Prepared {
                key,
                packed: None,
                wino: None,
            });
        if let Some(tile) = tile {
            if prep.wino.is_none() {
                prep.wino = Some(winograd::weights(ops.w.t(), self.spec.in_channels, tile)?);
            }
        } else if dw_t.is_none() && groups == 1 {
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
                geo.pad_into(name, block_of(xs, spb * geo.in_per_sample(), i), out)
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
        let y = filled_by_blocks(len, rows * o, |i, yb| {
            let xb = block_of(xs, spb * geo.in_per_sample(), i);
            let r = yb.len() / o;
            let yb = if let Some((u, tile)) = wino {
                let x = match &padded_x {
                    Some(p) if winograd::reads_padded(&geo, tile) => {
                        winograd::Input::Padded(block_of(p, padded, i))
                    }
                    _ => winograd::Input::Plain(xb),
                };
                winograd::forward(name, &geo, tile, u, x, yb)?
            } else if let Some(wt) = &dw_t {
                let yb = zeroed(yb);
                geo.depthwise_forward(xb, wt, yb);
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
            } else if groups == 1 {
                with_scratch(r * kg, 0, |col, _| {
                    geo.gather(xb, 0, col);
                    let colv = ArrayView2::from_shape((r, kg), &*col).map_err(shape_err(name))?;
                    matmul_uninit(yb, colv, w_operand()).map_err(SimError::from)
                })?
            } else {
                let yb = zeroed(yb);
                let mut yv =
                    ArrayViewMut2::from_shape((r, o), &mut *yb).map_err(shape_err(name))?;
                with_scratch(r * kg, 0, |col, _| -> Result<()> {
                    for g in 0..groups {
                        geo.gather(xb, g, col);
                        let colv =
                            ArrayView2::from_shape((r, kg), &*col).map_err(shape_err(name))?;
                        let wg = ops.w.slice(s![g * opg..(g + 1) * opg, ..]);
                        let yg = yv.slice_mut(s![.., g * opg..(g + 1) * opg]);
                        matmul_into(yg, colv, wg.t(), false)?;
                    }
                    Ok(())
                })?;
                yb
            };
            if let Some(b) = bias {
                for row in yb.chunks_exact_mut(o) {
                    row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
                }
            }
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
        self.cache = (mode == Mode::Train).then(|| {
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

    fn gives_train_sums(&self) -> bool {
        true
    }

    fn forward_summed(&mut self, inputs: &[&Tensor]) -> Result<(Tensor, Vec<f64>)> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        self.train_summed(CowArray::from(x.view()))
    }

    fn forward_owned_summed(&mut self, x: Tensor) -> Result<(Tensor, Vec<f64>)> {
        self.train_summed(CowArray::from(x))
    }

    fn forward_then(&mut self, inputs: &[&Tensor], epilogue: &Epilogue) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        self.run(CowArray::from(x.view()), Mode::Eval, epilogue)
    }

    fn forward_owned_then(&mut self, x: Tensor, epilogue: &Epilogue) -> Result<Tensor> {
        self.run(CowArray::from(x), Mode::Eval, epilogue)
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

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;
    use crate::quant::QuantMethod;

    fn conv(spec: Conv2dSpec, bias: bool, seed: u64) -> Conv2d {
        let w = rand_tensor(
            &[
                spec.out_channels,
                spec.kernel[0],
                spec.kernel[1],
                spec.in_channels / spec.groups,
            ],
            0.5,
            seed,
        );
        let b = bias.then(|| rand_tensor(&[spec.out_channels], 0.5, seed + 1));
        Conv2d::new("c", spec, w, b, LayerQuant::new(QuantMethod::Sbm, 0)).unwrap()
    }

    #[test]
    fn evaluation_keeps_prepared_weights_only_while_weights_and_bits_stand() {
        // A Winograd conv and a strided one (packed weights), through the ways weights change.
        for spec in [
            Conv2dSpec::square(32, 32, 3, 1, 1),
            Conv2dSpec::square(8, 16, 3, 2, 1),
        ] {
            let mut c = conv(spec.clone(), false, 61);
            let x = rand_tensor(&[2, 8, 8, spec.in_channels], 1.0, 62);
            let fresh = |c: &Conv2d| {
                let mut f = conv(spec.clone(), false, 0);
                f.weight.value = c.weight.value.clone();
                f.quant = c.quant.clone();
                f.forward(&[&x], Mode::Eval).unwrap()
            };
            let y0 = c.forward(&[&x], Mode::Eval).unwrap();
            assert!(c.prepared.is_some());
            assert_eq!(c.forward(&[&x], Mode::Eval).unwrap(), y0);
            c.params_mut()[0].value.mapv_inplace(|v| v * 0.5);
            let y1 = c.forward(&[&x], Mode::Eval).unwrap();
            assert_ne!(y1, y0);
            assert_eq!(y1, fresh(&c));
            c.quant_mut().unwrap().set_bits(4, 0).unwrap();
            let y2 = c.forward(&[&x], Mode::Eval).unwrap();
            assert_ne!(y2, y1);
            assert_eq!(y2, fresh(&c));
            c.forward(&[&x], Mode::Train).unwrap();
            assert!(c.prepared.is_none(), "a training pass drops them");
        }
    }

    #[test]
    fn summed_forward_gives_batch_norms_own_sums_bit_for_bit() {
        use crate::layers::batchnorm::train_sum_rows;
        use crate::layers::reduce::{chunk_sums_by, sums_and_squares};
        // Three blocks of one 32×32 sample; three of 4, 4 and 1 16×16 samples; F(4×4) Winograd
        // convs, whose blocks of work (16 samples of 16×16) hold several of the sums' blocks
        // (4 samples): one block of work of 5 samples, and blocks of 16 and 4 samples.
        for (spec, shape) in [
            (Conv2dSpec::square(3, 8, 3, 1, 1), [3, 32, 32, 3]),
            (Conv2dSpec::square(4, 8, 3, 1, 1), [9, 16, 16, 4]),
            (Conv2dSpec::square(32, 32, 3, 1, 1), [5, 16, 16, 32]),
            (Conv2dSpec::square(32, 16, 3, 1, 1), [20, 16, 16, 32]),
        ] {
            let x = rand_tensor(&shape, 1.0, 71);
            let (mut a, mut b) = (conv(spec.clone(), true, 72), conv(spec.clone(), true, 72));
            let (y, sums) = a.forward_summed(&[&x]).unwrap();
            assert_eq!(y, b.forward(&[&x], Mode::Train).unwrap());
            let rows = train_sum_rows(y.shape()).unwrap();
            assert!(rows * spec.out_channels < y.len(), "several blocks");
            let o = spec.out_channels;
            let want = chunk_sums_by(y.as_slice().unwrap(), o, 2, rows, |_, r, acc| {
                sums_and_squares(r, acc)
            });
            assert_eq!(sums, want, "{shape:?}");
        }
    }

    /// Direct (loop) convolution in f64 on NHWC input, OHWI weights.
    fn reference(x: &Tensor, layer: &Conv2d) -> Vec<f64> {
        let sp = layer.spec();
        let x4 = as4("ref", x).unwrap();
        let (n, h, w, _) = x4.dim();
        let (oh, ow) = sp.output_hw("ref", h, w).unwrap();
        let wt = layer
            .weight
            .value
            .view()
            .into_dimensionality::<Ix4>()
            .unwrap();
        let (cpg, opg) = (sp.in_channels / sp.groups, sp.out_channels / sp.groups);
        let mut out = Vec::new();
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for o in 0..sp.out_channels {
                        let g = o / opg;
                        let mut acc = layer.bias.as_ref().map_or(0.0, |p| p.value[[o]] as f64);
                        for ky in 0..sp.kernel[0] {
                            for kx in 0..sp.kernel[1] {
                                let iy = (oy * sp.stride[0] + ky * sp.dilation[0]) as isize
                                    - sp.pads[0] as isize;
                                let ix = (ox * sp.stride[1] + kx * sp.dilation[1]) as isize
                                    - sp.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                for ci in 0..cpg {
                                    acc += x4[[b, iy as usize, ix as usize, g * cpg + ci]] as f64
                                        * wt[[o, ky, kx, ci]] as f64;
                                }
                            }
                        }
                        out.push(acc);
                    }
                }
            }
        }
        out
    }

    fn specs() -> Vec<Conv2dSpec> {
        let mut strided = Conv2dSpec::square(3, 4, 3, 2, 1);
        strided.pads = [1, 0, 2, 1];
        let mut dilated = Conv2dSpec::square(2, 2, 3, 1, 2);
        dilated.dilation = [2, 1];
        let mut grouped = Conv2dSpec::square(4, 6, 3, 1, 1);
        grouped.groups = 2;
        let mut depthwise = Conv2dSpec::square(3, 3, 3, 2, 1);
        depthwise.groups = 3;
        // Same-size outputs: the input gradient is the transposed conv's forward pass.
        let mut lopsided = Conv2dSpec::square(2, 3, 3, 1, 0);
        lopsided.kernel = [3, 2];
        lopsided.pads = [0, 1, 2, 0];
        vec![
            Conv2dSpec::square(3, 4, 3, 1, 1),
            lopsided,
            Conv2dSpec::square(3, 5, 1, 1, 0),
            strided,
            dilated,
            grouped,
            depthwise,
        ]
    }

    #[test]
    fn forward_matches_direct_convolution() {
        for (i, sp) in specs().into_iter().enumerate() {
            let mut c = conv(sp.clone(), i % 2 == 0, i as u64);
            let x = rand_tensor(&[2, 7, 6, sp.in_channels], 1.0, 50 + i as u64);
            let y = c.forward(&[&x], Mode::Eval).unwrap();
            let r = reference(&x, &c);
            assert_eq!(y.len(), r.len(), "{sp:?}");
            for (a, b) in y.iter().zip(&r) {
                assert!((*a as f64 - b).abs() < 1e-4, "{sp:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn winograd_convs_match_the_direct_conv_and_its_gradients_on_any_thread_count() {
        // 32 channels: F(2×2, 3×3) forward, input and weight gradients; 20 samples of 8×8 span
        // two blocks.
        let sp = Conv2dSpec::square(32, 24, 3, 1, 1);
        let x = rand_tensor(&[20, 8, 8, 32], 1.0, 8);
        let g = rand_tensor(&[20, 8, 8, 24], 1.0, 9);
        let run = |threads: usize, mode: Mode| {
            cptsim_testdata::with_threads(threads, || {
                let mut c = conv(sp.clone(), true, 2);
                let y = c.forward(&[&x], mode).unwrap();
                let dx = (mode == Mode::Train).then(|| c.backward(g.clone()).unwrap());
                (y, dx, c.weight.grad.clone())
            })
            .unwrap()
        };
        let (y, r) = (
            run(1, Mode::Eval).0,
            reference(&x, &conv(sp.clone(), true, 2)),
        );
        for (a, b) in y.iter().zip(&r) {
            assert!((*a as f64 - b).abs() < 1e-4, "{a} vs {b}");
        }
        let train = run(1, Mode::Train);
        assert_eq!(train, run(2, Mode::Train));
        // Training and evaluation run the same product.
        assert_eq!(train.0, y);
        // The input and weight gradients against finite differences, on a smaller batch.
        let mut c = conv(sp.clone(), true, 3);
        check_layer(
            &mut c,
            &[rand_tensor(&[2, 4, 6, 32], 1.0, 10)],
            1e-2,
            1e-2,
            25,
        )
        .unwrap();
        // Unpadded: the output is smaller than the input, so the input gradient is the column
        // gradient scattered while the weight gradient runs by Winograd on the plain input.
        let valid = Conv2dSpec::square(32, 24, 3, 1, 0);
        let g = valid.block_gemms("c", (6, 8), 2, true).unwrap().unwrap();
        assert_eq!(g.winograd, [true, false, true]);
        let mut c = conv(valid, false, 4);
        check_layer(
            &mut c,
            &[rand_tensor(&[2, 6, 8, 32], 1.0, 11)],
            1e-2,
            1e-2,
            25,
        )
        .unwrap();
    }

    #[test]
    fn gradients_match_finite_differences() {
        for (i, sp) in specs().into_iter().enumerate() {
            let mut c = conv(sp.clone(), true, 10 + i as u64);
            let x = rand_tensor(&[2, 6, 5, sp.in_channels], 1.0, 70 + i as u64);
            check_layer(&mut c, &[x], 1e-2, 1e-2, 25).unwrap();
        }
    }

    #[test]
    fn parameter_only_backward_leaves_the_same_gradients_and_state() {
        for (i, sp) in specs().into_iter().enumerate() {
            let x = rand_tensor(&[3, 6, 5, sp.in_channels], 1.0, 90 + i as u64);
            let run = |full: bool| {
                let mut c = conv(sp.clone(), true, 30 + i as u64);
                c.quant.set_bits(6, 6).unwrap();
                let y = c.forward(&[&x], Mode::Train).unwrap();
                let g = rand_tensor(y.shape(), 1.0, 7);
                if full {
                    assert_eq!(c.backward(g).unwrap().len(), 1);
                } else {
                    c.backward_params(g).unwrap();
                }
                let b = c.bias.as_ref().map(|b| b.grad.clone());
                (c.weight.grad.clone(), b, c.quant.clone())
            };
            let (full, params) = (run(true), run(false));
            assert_eq!((&full.0, &full.1), (&params.0, &params.1), "{sp:?}");
            // The error quantizer's state (its stochastic-rounding stream) advanced the same way.
            assert_eq!(format!("{:?}", full.2), format!("{:?}", params.2), "{sp:?}");
        }
    }

    #[test]
    fn batch_gemms_go_by_each_passs_blocks() {
        // 32 → 16 channels on 32 × 32 inputs: one sample per usual block (1 024 rows). F(4×4)'s
        // forward takes 4 samples a block (256 tiles, in 2 chunks of 128: one holds at most
        // 2¹⁸ / (36 · 32) = 227), the F(2×2) weight gradient and the patch-product error one
        // sample each.
        let spec = Conv2dSpec::square(32, 16, 3, 1, 1);
        let g = spec.batch_gemms("c", (32, 32), 10, true).unwrap().unwrap();
        // 2 blocks of 4 samples, then one of 2 (128 tiles, one chunk).
        let block = ([128, 32, 16], 36);
        assert_eq!(g.forward, vec![([128, 32, 16], 36 * 2 * 2), block]);
        assert_eq!(g.error, vec![([1024, 144, 32], 10)]);
        assert_eq!(g.weight, vec![([16, 256, 32], 16 * 10)]);
    }

    #[test]
    fn block_gemms_follow_the_backward_paths() {
        let same = Conv2dSpec::square(16, 32, 3, 1, 1);
        let g = same.block_gemms("c", (8, 8), 2, true).unwrap().unwrap();
        // Stride 1, 16 input channels: the forward product reads patches; the input gradient is
        // the transposed conv (32 → 16 channels) by F(4×4) Winograd: 2 samples of 2 × 2 tiles,
        // one chunk, 36 products; the weight gradient reads the patches in place (Pᵀ·g).
        assert_eq!(g.forward, vec![([128, 144, 32], 1)]);
        assert_eq!(g.error, vec![([8, 32, 16], 36)]);
        assert_eq!(g.weight, vec![([144, 128, 32], 1)]);
        assert_eq!(g.winograd, [false, true, false]);
        let no_dx = same.block_gemms("c", (8, 8), 2, false).unwrap().unwrap();
        assert_eq!(no_dx.error, vec![]);
        // 16 output channels: the transposed conv has 16 inputs, a patch product; the weight
        // gradient is F(2×2) Winograd's, output channels × tiles × input channels.
        let narrow = Conv2dSpec::square(32, 16, 3, 1, 1);
        let g = narrow.block_gemms("c", (8, 8), 2, true).unwrap().unwrap();
        assert_eq!(g.forward, vec![([8, 32, 16], 36)]);
        assert_eq!(g.error, vec![([128, 144, 32], 1)]);
        assert_eq!(g.weight, vec![([16, 32, 32], 16)]);
        assert_eq!(g.winograd, [true, false, true]);
        // An odd output: the kept padded input is not laid out as the tiles read it, so the
        // weight gradient reads the patches.
        let g = narrow.block_gemms("c", (7, 7), 1, true).unwrap().unwrap();
        assert_eq!(g.forward, vec![([4, 32, 16], 36)]);
        assert_eq!(g.weight, vec![([288, 49, 16], 1)]);
        // Stride 2: the column gradient is scattered.
        let strided = Conv2dSpec::square(16, 32, 3, 2, 1);
        let g = strided.block_gemms("c", (8, 8), 2, true).unwrap().unwrap();
        assert_eq!(
            (g.forward, g.error),
            (vec![([32, 144, 32], 1)], vec![([32, 32, 144], 1)])
        );
        // Groups: gathered columns, gᵀ·col per group.
        let mut grouped = Conv2dSpec::square(4, 6, 3, 1, 1);
        grouped.groups = 2;
        let g = grouped.block_gemms("c", (5, 5), 1, true).unwrap().unwrap();
        assert_eq!(
            (g.error, g.weight),
            (vec![([25, 3, 18], 1)], vec![([3, 25, 18], 1)])
        );
        let mut depthwise = Conv2dSpec::square(3, 3, 3, 1, 1);
        depthwise.groups = 3;
        assert_eq!(depthwise.block_gemms("c", (5, 5), 1, true).unwrap(), None);
        let e = same.block_gemms("stem", (1, 0), 1, true).unwrap_err();
        assert!(e.to_string().contains("stem"), "{e}");
    }

    #[test]
    fn a_padding_conv_keeps_its_padded_input_for_the_weight_gradient() {
        let x = rand_tensor(&[3, 5, 5, 2], 1.0, 5);
        for (sp, padded) in [
            (Conv2dSpec::square(2, 3, 3, 1, 1), true),
            (Conv2dSpec::square(2, 3, 3, 2, 1), true),
            (Conv2dSpec::square(2, 3, 3, 1, 0), false),
            (Conv2dSpec::square(2, 3, 1, 1, 0), false),
        ] {
            let mut c = conv(sp.clone(), false, 1);
            c.forward(&[&x], Mode::Train).unwrap();
            let cache = c.cache.as_ref().unwrap();
            assert_eq!(cache.padded.is_some(), padded, "{sp:?}");
            // The input is kept once: padded, or as it came.
            assert_eq!(cache.ops.x.is_empty(), padded, "{sp:?}");
            if let Some(p) = &cache.padded {
                let geo = c.geometry_of(5, 5, 2).unwrap();
                let mut want = vec![f32::NAN; p.len()];
                geo.patches("t", x.as_slice().unwrap(), &mut want).unwrap();
                assert_eq!(p, &want, "{sp:?}");
                // A buffer of the wrong size is an error naming the layer, not a panic.
                let mut short = vec![MaybeUninit::uninit(); p.len() - 1];
                let e = geo
                    .pad_into("c1", x.as_slice().unwrap(), &mut short)
                    .unwrap_err();
                assert!(e.to_string().contains("c1"), "{e}");
            }
        }
    }

    #[test]
    fn large_batch_spans_several_gemm_tiles_and_is_thread_independent() {
        let sp = Conv2dSpec::square(8, 16, 3, 1, 1);
        let x = rand_tensor(&[40, 8, 8, 8], 1.0, 3);
        let g = rand_tensor(&[40, 8, 8, 16], 1.0, 4);
        let run = |threads: usize| {
            cptsim_testdata::with_threads(threads, || {
                let mut c = conv(sp.clone(), false, 1);
                c.quant.set_bits(4, 4).unwrap();
                let y = c.forward(&[&x], Mode::Train).unwrap();
                let dx = c.backward(g.clone()).unwrap();
                (y, dx, c.weight.grad.clone())
            })
            .unwrap()
        };
        assert_eq!(run(1), run(2));
    }

    #[test]
    fn quantized_layer_uses_quantized_operands_in_all_three_gemms() {
        // With bits_bw = 0 the error stays fp32: forward and both backward GEMMs must equal an
        // fp32 layer fed with the SBM-quantized input and weights.
        let sp = Conv2dSpec::square(2, 3, 3, 1, 1);
        let x = rand_tensor(&[2, 5, 5, 2], 1.0, 8);
        let g = rand_tensor(&[2, 5, 5, 3], 1.0, 9);
        let mut q = conv(sp.clone(), false, 2);
        q.quant.set_bits(3, 0).unwrap();
        let yq = q.forward(&[&x], Mode::Train).unwrap();
        let dxq = q.backward(g.clone()).unwrap().remove(0);

        let mut f = conv(sp.clone(), false, 2);
        let w2 = f
            .weight
            .value
            .clone()
            .into_shape_with_order((3, 18))
            .unwrap();
        let wq = crate::quant::sbm::weights(w2.view(), 3);
        f.weight.value = wq.into_shape_with_order(vec![3, 3, 3, 2]).unwrap();
        let mut xq = x.clone();
        let mut ema = crate::quant::RangeEma::default();
        crate::quant::sbm::activations(xq.as_slice_mut().unwrap(), 3, &mut ema, true);
        let yf = f.forward(&[&xq], Mode::Train).unwrap();
        let dxf = f.backward(g.clone()).unwrap().remove(0);
        assert_eq!(yq, yf);
        assert_eq!(dxq, dxf);
        assert_eq!(q.weight.grad, f.weight.grad);
        assert_ne!(yq, conv(sp, false, 2).forward(&[&x], Mode::Eval).unwrap());
    }

    #[test]
    fn bad_inputs_are_errors_naming_the_layer() {
        let mut c = conv(Conv2dSpec::square(3, 4, 3, 1, 0), false, 1);
        let e = c
            .forward(&[&rand_tensor(&[1, 5, 5, 2], 1.0, 1)], Mode::Eval)
            .unwrap_err();
        assert!(
            e.to_string().contains("`c`") && e.to_string().contains("channels"),
            "{e}"
        );
        let e = c
            .forward(&[&rand_tensor(&[1, 2, 2, 3], 1.0, 1)], Mode::Eval)
            .unwrap_err();
        assert!(e.to_string().contains("smaller"), "{e}");
        let e = c.backward(rand_tensor(&[1, 3, 3, 4], 1.0, 1)).unwrap_err();
        assert!(e.to_string().contains("without a forward"), "{e}");
        let w = rand_tensor(&[4, 3, 3, 2], 1.0, 1);
        assert!(Conv2d::new(
            "c",
            Conv2dSpec::square(3, 4, 3, 1, 0),
            w,
            None,
            LayerQuant::new(QuantMethod::Sbm, 0)
        )
        .is_err());
    }

    #[test]
    fn oihw_weights_are_permuted() {
        let w = Tensor::from_shape_fn(vec![2, 3, 1, 2], |d| (d[0] * 100 + d[1] * 10 + d[3]) as f32);
        let c = Conv2d::weight_from_oihw(&w).unwrap();
        assert_eq!(c.shape(), &[2, 1, 2, 3]);
        assert_eq!(c[[1, 0, 1, 2]], 121.0);
    }
}
