//! Evaluation: the convs of an inverted-residual block — an optional expanding 1×1 conv, a
//! depthwise conv, an optional 1×1 conv reading its output, each with its epilogue — run as one
//! pass that never stores the wide tensors between them whole:
//!
//! - the depthwise output goes by parts of about [`PART_VALUES`] values (256 KiB, in L2 beside
//!   the part of the 1×1 conv's output), each part taking the depthwise bias and epilogue, then
//!   the 1×1 conv's product, bias and epilogue;
//! - with an expanding conv, each sample's depthwise output goes by bands of rows, and the
//!   expanded input by the rows those bands read: a window that keeps the rows the next band
//!   reads again and computes only the new ones, so each expanded value is computed once.
//!
//! Every value gets the operations of the convs run one after the other, in the same order
//! (each output of a conv is its own chain, whatever the rows a part covers), so the output is
//! the same bit for bit.

use std::mem::MaybeUninit;
use std::ops::Range;

use ndarray::{ArrayView2, CowArray, IxDyn};

use super::{
    add_bias, as4, block_of, data, filled_by_blocks, shape_err, weight_matrix, Conv2d, Epilogue,
    Im2col, Prepared, Tensor, PART_VALUES,
};
use crate::error::{Result, SimError};
use cptsim_kernels::gemm::{matmul_uninit, PackedB, B};

/// A conv of the block and the epilogue after it.
pub(crate) type Stage<'a> = (&'a mut Conv2d, &'a Epilogue);

impl Conv2d {
    /// Whether an evaluation pass runs this layer's product on its input and weights as they
    /// are (fp32: no quantizer, no integer GEMMs, no hook).
    fn plain_fp32(&self) -> bool {
        self.quant.bits_fw == 0 && self.quant.hook.is_none() && self.quant.integer_gemms().is_none()
    }

    /// Whether this is an fp32 1×1 conv at stride 1 without padding, of one group.
    fn plain_pointwise(&self) -> bool {
        let s = &self.spec;
        s.kernel == [1, 1]
            && s.stride == [1, 1]
            && s.pads == [0; 4]
            && s.groups == 1
            && self.plain_fp32()
    }

    /// Whether this is an fp32 depthwise conv.
    fn plain_depthwise(&self) -> bool {
        self.spec.is_depthwise() && self.plain_fp32()
    }

    /// Whether this depthwise conv and `next`, a 1×1 conv reading its output, may run as one
    /// pass ([`forward_depthwise_block`]).
    pub(crate) fn fuses_with_pointwise(&self, next: &Conv2d) -> bool {
        self.plain_depthwise()
            && next.plain_pointwise()
            && next.spec.in_channels == self.spec.out_channels
    }

    /// Whether this 1×1 conv and `dw`, a depthwise conv reading its output, may run as one
    /// pass ([`forward_depthwise_block`]).
    pub(crate) fn expands_into(&self, dw: &Conv2d) -> bool {
        self.plain_pointwise()
            && dw.plain_depthwise()
            && dw.spec.in_channels == self.spec.out_channels
    }

    /// The packed weights of this 1×1 conv's evaluation product, as its own pass packs them,
    /// kept for the next evaluation pass.
    fn eval_packed(&mut self) -> Result<&PackedB> {
        let key = self.prepared_key();
        let prepared = self.prepared.take().filter(|p| p.key == key);
        let mut prep = prepared.unwrap_or(Prepared {
            key,
            packed: None,
            wino: None,
            grouped: None,
        });
        if prep.packed.is_none() {
            let w = weight_matrix(&self.name, &self.spec, &self.weight)?;
            prep.packed = Some(PackedB::new(w.t()));
        }
        let prep = self.prepared.insert(prep);
        prep.packed
            .as_ref()
            .ok_or_else(|| SimError::shape(&self.name, "weights not packed"))
    }

    /// The fused 1×1 product of this conv and its epilogue (the conv done with its cache).
    fn product<'a>(&'a mut self, epilogue: &'a Epilogue) -> Result<Product<'a>> {
        self.cache = None;
        let bias = match &self.bias {
            Some(b) => Some(data(&self.name, &b.value)?.to_vec()),
            None => None,
        };
        let (name, k, channels) = (
            self.name.clone(),
            self.spec.in_channels,
            self.spec.out_channels,
        );
        Ok(Product {
            name,
            packed: self.eval_packed()?,
            bias,
            epilogue,
            k,
            channels,
        })
    }
}

/// A 1×1 conv's evaluation product with its bias and epilogue.
struct Product<'a> {
    name: String,
    packed: &'a PackedB,
    bias: Option<Vec<f32>>,
    epilogue: &'a Epilogue,
    /// Inputs and outputs per row.
    k: usize,
    channels: usize,
}

impl Product<'_> {
    /// `out` = the product of `rows` (whole rows of inputs), plus the bias, then the epilogue,
    /// `out` starting at value `start` of the conv's output.
    fn run<'o>(
        &self,
        rows: &[f32],
        out: &'o mut [MaybeUninit<f32>],
        start: usize,
    ) -> Result<&'o mut [f32]> {
        let k = self.k.max(1);
        let rv =
            ArrayView2::from_shape((rows.len() / k, k), rows).map_err(shape_err(&self.name))?;
        let out = matmul_uninit(out, rv, B::Packed(self.packed))?;
        add_bias(out, self.bias.as_deref());
        self.epilogue.apply(out, self.channels, start)?;
        Ok(out)
    }
}

/// `v`, every value of which has been written, as `f32`s.
fn written(v: &mut [MaybeUninit<f32>]) -> &mut [f32] {
    // SAFETY: callers pass only values they wrote (`MaybeUninit<f32>` has the layout of `f32`).
    unsafe { &mut *(std::ptr::from_mut(v) as *mut [f32]) }
}

/// The depthwise conv of the block and what follows it, for one part of its output.
struct Depthwise<'a> {
    geo: Im2col<'a>,
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    epilogue: &'a Epilogue,
    pointwise: Option<Product<'a>>,
}

impl Depthwise<'_> {
    /// Output rows `rows` of the block, from input `x` holding rows `first_row` on of its
    /// sample (0: whole samples), into `out`: the depthwise rows with their epilogue (value
    /// `start` of the depthwise output on), then the 1×1 conv's, if any (value `start_out` of
    /// its output on), through `mid`.
    fn part(
        &self,
        x: &[f32],
        first_row: usize,
        rows: Range<usize>,
        (start, start_out): (usize, usize),
        mid: &mut [MaybeUninit<f32>],
        out: &mut [MaybeUninit<f32>],
    ) -> Result<()> {
        let c = self.geo.spec.out_channels;
        let Some(pw) = &self.pointwise else {
            let d = self
                .geo
                .depthwise_forward_window(x, first_row, self.w, self.bias, rows, out);
            return self.epilogue.apply(d, c, start);
        };
        let m = self
            .geo
            .depthwise_forward_window(x, first_row, self.w, self.bias, rows, mid);
        self.epilogue.apply(m, c, start)?;
        pw.run(m, out, start_out).map(drop)
    }
}

/// The evaluation pass of the block's convs on `x` (see the module's notes): `expand` (a 1×1
/// conv, [`Conv2d::expands_into`]), then the depthwise conv `dw`, then `pointwise` (a 1×1 conv,
/// [`Conv2d::fuses_with_pointwise`]), each with its epilogue.
pub(crate) fn forward_depthwise_block(
    x: CowArray<'_, f32, IxDyn>,
    expand: Option<Stage<'_>>,
    dw: Stage<'_>,
    pointwise: Option<Stage<'_>>,
) -> Result<Tensor> {
    let (dw, first) = dw;
    let fits = dw.plain_depthwise()
        && expand.as_ref().is_none_or(|(e, _)| e.expands_into(dw))
        && pointwise
            .as_ref()
            .is_none_or(|(p, _)| dw.fuses_with_pointwise(p));
    if !fits {
        return Err(SimError::shape(
            &dw.name,
            "cannot run with the 1×1 convs beside it as one pass",
        ));
    }
    let name = dw.name.clone();
    let x4 = as4(&name, &x)?;
    let (n, h, w, cin) = x4.dim();
    let c = dw.spec.in_channels;
    dw.cache = None;
    let geo = dw.geometry_of(h, w, c)?;
    let (oh, ow) = geo.out_hw;
    let wm = weight_matrix(&name, &dw.spec, &dw.weight)?;
    let dw_t = wm.t().as_standard_layout().into_owned();
    let dw_t = dw_t
        .as_slice()
        .ok_or_else(|| SimError::shape(&name, "weights not contiguous"))?;
    let dw_bias = dw
        .bias
        .as_ref()
        .map(|b| data(&name, &b.value))
        .transpose()?;
    let expand = match expand {
        Some((e, ep)) => {
            if cin != e.spec.in_channels {
                return Err(SimError::shape(
                    &e.name,
                    format!(
                        "input has {cin} channels, layer expects {}",
                        e.spec.in_channels
                    ),
                ));
            }
            Some(e.product(ep)?)
        }
        None if cin != c => {
            return Err(SimError::shape(
                &name,
                format!("input has {cin} channels, layer expects {c}"),
            ));
        }
        None => None,
    };
    let pointwise = pointwise.map(|(p, ep)| p.product(ep)).transpose()?;
    let o = pointwise.as_ref().map_or(c, |p| p.channels);
    let stage = Depthwise {
        geo,
        w: dw_t,
        bias: dw_bias,
        epilogue: first,
        pointwise,
    };
    let geo = &stage.geo;
    let xs = data(&name, &x)?;
    let len = [oh, ow, o]
        .iter()
        .try_fold(n, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| SimError::shape(&name, "output size overflows"))?;
    let y = match &expand {
        None => {
            // Blocks of samples, by parts of about `PART_VALUES` depthwise outputs.
            let spb = geo.samples_per_block();
            let rows = spb * geo.rows_per_sample();
            let part_rows = (PART_VALUES / c.max(1)).max(1);
            filled_by_blocks(len, rows * o, |i, yb| {
                let xb = block_of(xs, spb * geo.in_per_sample(), i);
                let mut mid = mid_buffer(&stage, part_rows.min(yb.len() / o.max(1)) * c);
                for (p, part) in yb.chunks_mut(part_rows * o).enumerate() {
                    let (row0, pr) = (p * part_rows, part.len() / o.max(1));
                    let at = (i * rows + row0) * c;
                    let at_out = (i * rows + row0) * o;
                    stage.part(xb, 0, row0..row0 + pr, (at, at_out), &mut mid, part)?;
                }
                Ok(written(yb))
            })?
        }
        Some(ex) => {
            // Sample by sample, by bands of output rows, from a window of expanded rows.
            let (sy, pad) = (geo.spec.stride[0], geo.spec.pads[0]);
            let span = geo.spec.kernel[0].saturating_sub(1) * geo.spec.dilation[0];
            let band = (PART_VALUES / (ow * c).max(1)).max(1);
            let (row_in, row_x) = (w * c, w * cin);
            let window_rows = ((band - 1) * sy + span + 1).min(h);
            filled_by_blocks(len, oh * ow * o, |s, yb| {
                let xs = block_of(xs, h * row_x, s);
                let mut window = Vec::<MaybeUninit<f32>>::with_capacity(window_rows * row_in);
                window.resize(window_rows * row_in, MaybeUninit::uninit());
                let mut mid = mid_buffer(&stage, band * ow * c);
                // The window holds expanded rows `lo..hi` of the sample.
                let (mut lo, mut hi) = (0, 0);
                for r0 in (0..oh).step_by(band) {
                    let r1 = (r0 + band).min(oh);
                    let need = (r0 * sy).saturating_sub(pad).min(h)
                        ..((r1 - 1) * sy + span + 1).saturating_sub(pad).min(h);
                    if need.start < hi {
                        let keep = need.start.max(lo);
                        window.copy_within((keep - lo) * row_in..(hi - lo) * row_in, 0);
                        lo = keep;
                    } else {
                        (lo, hi) = (need.start, need.start);
                    }
                    if need.end > hi {
                        let dst = &mut window[(hi - lo) * row_in..(need.end - lo) * row_in];
                        let src = &xs[hi * row_x..need.end * row_x];
                        ex.run(src, dst, (s * h + hi) * row_in)?;
                        hi = need.end;
                    }
                    let win = written(&mut window[..(hi - lo) * row_in]);
                    let out = &mut yb[r0 * ow * o..r1 * ow * o];
                    let at = (s * oh + r0) * ow;
                    stage.part(win, lo, r0 * ow..r1 * ow, (at * c, at * o), &mut mid, out)?;
                }
                Ok(written(yb))
            })?
        }
    };
    first.check_shape(&[n, oh, ow, c])?;
    if let Some(ex) = &expand {
        ex.epilogue.check_shape(&[n, h, w, c])?;
    }
    if x.is_owned() {
        crate::arena::give(x.into_owned());
    }
    Tensor::from_shape_vec(vec![n, oh, ow, o], y).map_err(shape_err(&name))
}

/// Scratch for `values` depthwise outputs when a 1×1 conv reads them (none otherwise).
fn mid_buffer(stage: &Depthwise<'_>, values: usize) -> Vec<MaybeUninit<f32>> {
    let len = if stage.pointwise.is_some() { values } else { 0 };
    vec![MaybeUninit::uninit(); len]
}

#[cfg(test)]
mod tests;
