//! What the conv layer makes of a [`Conv2dSpec`]: its output size and im2col geometry on an
//! input, the transposed conv its input gradient runs as, and the GEMMs its passes run.

use cptsim_kernels::conv::{winograd, Conv2dSpec, Im2col};

use super::super::window_hw;
use crate::error::Result;

/// Output `(OH, OW)` of conv `layer` with geometry `spec` on an `H×W` input.
pub fn output_hw(spec: &Conv2dSpec, layer: &str, h: usize, w: usize) -> Result<(usize, usize)> {
    window_hw(
        layer,
        (h, w),
        spec.kernel,
        spec.stride,
        spec.dilation,
        spec.pads,
    )
}

/// The im2col geometry of `spec`'s conv on inputs of `in_hw` pixels.
pub fn geometry<'s>(
    spec: &'s Conv2dSpec,
    layer: &str,
    in_hw: (usize, usize),
) -> Result<Im2col<'s>> {
    let out_hw = output_hw(spec, layer, in_hw.0, in_hw.1)?;
    Ok(Im2col {
        spec,
        in_hw,
        out_hw,
    })
}

/// The convolution whose forward pass gives this one's input gradient from its output
/// gradient, where that is a plain one doing the same multiply-adds: stride 1, no dilation,
/// one group, output as large as the input (a "full" convolution, padded by kernel − 1 − pad
/// on each side, of the output gradient with the weights of `flipped_weights`; for a
/// smaller output it would multiply the padding's zeros). `None` otherwise.
pub(super) fn transposed_spec(geo: &Im2col<'_>) -> Option<Conv2dSpec> {
    let sp = geo.spec;
    let [kh, kw] = sp.kernel;
    let plain =
        sp.stride == [1, 1] && sp.dilation == [1, 1] && sp.groups == 1 && geo.out_hw == geo.in_hw;
    let pads = [
        (kh - 1).checked_sub(sp.pads[0])?,
        (kw - 1).checked_sub(sp.pads[1])?,
        (kh - 1).checked_sub(sp.pads[2])?,
        (kw - 1).checked_sub(sp.pads[3])?,
    ];
    let t = Conv2dSpec {
        in_channels: sp.out_channels,
        out_channels: sp.in_channels,
        pads,
        ..*sp
    };
    let fits = output_hw(&t, "", geo.out_hw.0, geo.out_hw.1).ok() == Some(geo.in_hw);
    (plain && fits && !geo.input_is_columns()).then_some(t)
}

/// A GEMM `[m, k, n]` (`C[m, n] = A[m, k]·B[k, n]`) and how many times a pass runs it.
pub type Gemms = ([usize; 3], usize);

/// The GEMMs a training step of a conv runs per group on one block of samples (or a batch:
/// [`batch_gemms`]), by the rules of its forward and backward passes.
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

/// [`BlockGemms`] of conv `layer` with geometry `spec` for a block of `samples` samples of
/// `in_hw` pixels, with or without the input gradient; `None` for a depthwise conv (no GEMM).
pub fn block_gemms(
    spec: &Conv2dSpec,
    layer: &str,
    in_hw: (usize, usize),
    samples: usize,
    input_grad: bool,
) -> Result<Option<BlockGemms>> {
    if spec.is_depthwise() {
        return Ok(None);
    }
    let geo = geometry(spec, layer, in_hw)?;
    let (kg, opg) = (spec.k_per_group(), spec.out_channels / spec.groups);
    let rows = samples * geo.rows_per_sample();
    let mut error_winograd = false;
    let error = match transposed_spec(&geo) {
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
                        spec.in_channels,
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

/// The GEMMs a training step of conv `layer` with geometry `spec` runs per group on a batch of
/// `batch` samples: each pass's [`block_gemms`] over the blocks of samples it works in (F(4×4)
/// Winograd takes more samples per block than the other passes), counts summed.
pub fn batch_gemms(
    spec: &Conv2dSpec,
    layer: &str,
    in_hw: (usize, usize),
    batch: usize,
    input_grad: bool,
) -> Result<Option<BlockGemms>> {
    let Some(mut total) = block_gemms(spec, layer, in_hw, 0, input_grad)? else {
        return Ok(None);
    };
    let geo = geometry(spec, layer, in_hw)?;
    let usual = geo.samples_per_block();
    let block_of = |g: &Im2col<'_>| winograd::samples_per_block(g, winograd::forward_tile(g));
    let transposed = transposed_spec(&geo);
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
            if let Some(mut g) = block_gemms(spec, layer, in_hw, samples, input_grad)? {
                gemms.extend(pick(&mut g).iter().map(|&(s, n)| (s, n * count)));
            }
        }
        *pick(&mut total) = gemms;
    }
    Ok(Some(total))
}
