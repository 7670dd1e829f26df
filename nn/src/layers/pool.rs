//! Max and average pooling over `H×W` windows, and global average pooling, on `[N, H, W, C]`.

use rayon::prelude::*;

use super::from_ir::{unsupported, Ctx, Layout, Val};
use super::Flatten;
use super::{as4, cached, check_grad, expect_inputs, window_hw, Layer, Mode, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// Max or average.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// Maximum of the window (padding never wins).
    Max,
    /// Mean of the window.
    Avg,
}

/// Window geometry of a pooling layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    /// Window `[KH, KW]`.
    pub kernel: [usize; 2],
    /// Stride `[SH, SW]`.
    pub stride: [usize; 2],
    /// Padding `[top, left, bottom, right]`.
    pub pads: [usize; 4],
    /// Average pooling: divide by the full window (true) or by the in-bounds count (false, the
    /// ONNX default).
    pub count_include_pad: bool,
}

impl PoolSpec {
    /// Square window `k`, stride `s`, no padding.
    pub fn square(k: usize, s: usize) -> Self {
        Self {
            kernel: [k, k],
            stride: [s, s],
            pads: [0; 4],
            count_include_pad: false,
        }
    }
}

struct PoolCache {
    in_shape: [usize; 4],
    out_shape: [usize; 4],
    /// For max pooling: per output element, the flat in-sample input index that won.
    argmax: Vec<usize>,
}

/// A max- or average-pooling layer.
pub struct Pool2d {
    name: String,
    kind: PoolKind,
    spec: PoolSpec,
    cache: Option<PoolCache>,
}

/// The input window `[y0, y1) × [x0, x1)` of output `(oy, ox)`, clipped to the image, and the
/// divisor of average pooling (window size with or without padding, per `count_include_pad`).
fn window(
    sp: &PoolSpec,
    h: usize,
    w: usize,
    oy: usize,
    ox: usize,
) -> (usize, usize, usize, usize, usize) {
    let ys = (oy * sp.stride[0]) as isize - sp.pads[0] as isize;
    let xs = (ox * sp.stride[1]) as isize - sp.pads[1] as isize;
    let ye = (ys + sp.kernel[0] as isize).min((h + sp.pads[2]) as isize);
    let xe = (xs + sp.kernel[1] as isize).min((w + sp.pads[3]) as isize);
    let padded = ((ye - ys) * (xe - xs)).max(1) as usize;
    let c = |v: isize, hi: usize| v.clamp(0, hi as isize) as usize;
    let (y0, y1, x0, x1) = (c(ys, h), c(ye, h), c(xs, w), c(xe, w));
    let count = if sp.count_include_pad {
        padded
    } else {
        ((y1 - y0) * (x1 - x0)).max(1)
    };
    (y0, y1, x0, x1, count)
}

/// Channels per register-resident lane of a max pool.
const LANES: usize = 16;

/// `LANES` running maxima, each `a ← x if x > a else a`: of equals the first wins, and NaN
/// never does. On x86-64 they are kept in SSE registers (part of every x86-64 CPU) and `MAXPS`
/// computes exactly that; a plain loop was compiled, in some builds, to masked stores into
/// memory, which are slow on AMD cores.
#[derive(Clone, Copy)]
struct Maxima {
    #[cfg(target_arch = "x86_64")]
    v: [std::arch::x86_64::__m128; LANES / 4],
    #[cfg(not(target_arch = "x86_64"))]
    v: [f32; LANES],
}

impl Maxima {
    /// All `−∞`.
    #[inline(always)]
    fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: SSE is part of x86-64.
            let v = unsafe { std::arch::x86_64::_mm_set1_ps(f32::NEG_INFINITY) };
            Self { v: [v; LANES / 4] }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self {
            v: [f32::NEG_INFINITY; LANES],
        }
    }

    /// Takes in one value per lane.
    #[inline(always)]
    fn take(&mut self, x: &[f32; LANES]) {
        #[cfg(target_arch = "x86_64")]
        for (v, x) in self.v.iter_mut().zip(x.chunks_exact(4)) {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_max_ps};
            // SAFETY: SSE is part of x86-64; `x` holds 4 values. `MAXPS(x, v)` is
            // `x > v ? x : v` per lane.
            *v = unsafe { _mm_max_ps(_mm_loadu_ps(x.as_ptr()), *v) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        for (a, &x) in self.v.iter_mut().zip(x) {
            *a = if x > *a { x } else { *a };
        }
    }

    /// The maxima.
    #[inline(always)]
    fn values(&self) -> [f32; LANES] {
        #[cfg(target_arch = "x86_64")]
        {
            let mut out = [0.0; LANES];
            for (o, v) in out.chunks_exact_mut(4).zip(&self.v) {
                // SAFETY: SSE is part of x86-64; `o` holds 4 values.
                unsafe { std::arch::x86_64::_mm_storeu_ps(o.as_mut_ptr(), *v) };
            }
            out
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.v
    }
}

cptsim_kernels::simd::multiversion! {
    /// Pools one sample, `xs` `[H, W, C]` into `ys` `[OH, OW, C]` (`dims`: `[H, W, C, OH, OW]`),
    /// the window's elements visited row by row, each a whole row of channels at a time (so
    /// the channel loop vectorises). For max pooling the first maximum in that order wins, and
    /// `am` (empty: not kept) gets its flat in-sample index.
    fn pool_sample(
        sp: &PoolSpec,
        kind: PoolKind,
        dims: [usize; 5],
        xs: &[f32],
        ys: &mut [f32],
        am: &mut [usize],
    ) {
        let [h, w, c, oh, ow] = dims;
        let track = !am.is_empty();
        for oy in 0..oh {
            for ox in 0..ow {
                let (y0, y1, x0, x1, count) = window(sp, h, w, oy, ox);
                let o = (oy * ow + ox) * c;
                let yr = &mut ys[o..o + c];
                let taps = (y0..y1).flat_map(|iy| (x0..x1).map(move |ix| (iy * w + ix) * c));
                match kind {
                    PoolKind::Max if track => {
                        let ar = &mut am[o..o + c];
                        yr.fill(f32::NEG_INFINITY);
                        ar.fill(0);
                        for i in taps {
                            let xr = &xs[i..i + c];
                            for ch in 0..c {
                                if xr[ch] > yr[ch] {
                                    yr[ch] = xr[ch];
                                    ar[ch] = i + ch;
                                }
                            }
                        }
                    }
                    PoolKind::Max => {
                        for (l, yl) in yr.chunks_mut(LANES).enumerate() {
                            let mut acc = Maxima::new();
                            for i in taps.clone() {
                                let xl = &xs[i + l * LANES..][..yl.len()];
                                match xl.first_chunk::<LANES>() {
                                    Some(full) => acc.take(full),
                                    None => {
                                        let mut part = [f32::NEG_INFINITY; LANES];
                                        part[..xl.len()].copy_from_slice(xl);
                                        acc.take(&part);
                                    }
                                }
                            }
                            yl.copy_from_slice(&acc.values()[..yl.len()]);
                        }
                    }
                    PoolKind::Avg => {
                        yr.fill(0.0);
                        for i in taps {
                            yr.iter_mut().zip(&xs[i..i + c]).for_each(|(y, x)| *y += x);
                        }
                        yr.iter_mut().for_each(|y| *y /= count as f32);
                    }
                }
            }
        }
    }
}

impl Pool2d {
    /// A new pooling layer.
    pub fn new(name: &str, kind: PoolKind, spec: PoolSpec) -> Result<Self> {
        if spec.kernel.contains(&0) || spec.stride.contains(&0) {
            return Err(SimError::shape(
                name,
                format!("invalid pooling geometry {spec:?}"),
            ));
        }
        Ok(Self {
            name: name.to_string(),
            kind,
            spec,
            cache: None,
        })
    }

    fn out_hw(&self, h: usize, w: usize) -> Result<(usize, usize)> {
        let sp = &self.spec;
        window_hw(&self.name, (h, w), sp.kernel, sp.stride, [1, 1], sp.pads)
    }
}

impl Layer for Pool2d {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let (n, h, w, c) = as4(&self.name, x)?.dim();
        let (oh, ow) = self.out_hw(h, w)?;
        let xs = x.as_standard_layout();
        let data = xs
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "input not contiguous"))?;
        let (sp, kind) = (&self.spec, self.kind);
        let mut y = vec![0.0f32; n * oh * ow * c];
        let track = kind == PoolKind::Max && mode == Mode::Train;
        let mut argmax = vec![0usize; if track { y.len() } else { 0 }];
        let per_in = h * w * c;
        let per_out = oh * ow * c;
        let mut am_chunks: Vec<&mut [usize]> = if track {
            argmax.chunks_mut(per_out.max(1)).collect()
        } else {
            (0..n).map(|_| &mut [][..]).collect()
        };
        y.par_chunks_mut(per_out.max(1))
            .zip(data.par_chunks(per_in.max(1)))
            .zip(am_chunks.par_iter_mut())
            .for_each(|((ys, xs), am)| pool_sample(sp, kind, [h, w, c, oh, ow], xs, ys, am));
        self.cache = (mode == Mode::Train).then_some(PoolCache {
            in_shape: [n, h, w, c],
            out_shape: [n, oh, ow, c],
            argmax,
        });
        Tensor::from_shape_vec(vec![n, oh, ow, c], y)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let cache = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, &cache.out_shape)?;
        let [n, h, w, c] = cache.in_shape;
        let [_, oh, ow, _] = cache.out_shape;
        let g = grad_out.as_standard_layout();
        let g = g
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        let (sp, kind) = (&self.spec, self.kind);
        let (per_in, per_out) = (h * w * c, oh * ow * c);
        let mut dx = vec![0.0f32; n * per_in];
        dx.par_chunks_mut(per_in.max(1))
            .zip(g.par_chunks(per_out.max(1)))
            .enumerate()
            .for_each(|(b, (ds, gs))| {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let (y0, y1, x0, x1, count) = window(sp, h, w, oy, ox);
                        for ch in 0..c {
                            let o = (oy * ow + ox) * c + ch;
                            match kind {
                                PoolKind::Max => {
                                    if let Some(&i) = cache.argmax.get(b * per_out + o) {
                                        ds[i] += gs[o];
                                    }
                                }
                                PoolKind::Avg => {
                                    let v = gs[o] / count as f32;
                                    for iy in y0..y1 {
                                        for ix in x0..x1 {
                                            ds[(iy * w + ix) * c + ch] += v;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            });
        Ok(vec![Tensor::from_shape_vec(vec![n, h, w, c], dx)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?])
    }
}

/// Global average pooling `[N, H, W, C] → [N, 1, 1, C]`.
pub struct GlobalAvgPool {
    name: String,
    in_shape: Option<[usize; 4]>,
}

impl GlobalAvgPool {
    /// A new global-average-pooling layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            in_shape: None,
        }
    }
}

impl Layer for GlobalAvgPool {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let x4 = as4(&self.name, x)?;
        let (n, h, w, c) = x4.dim();
        let mean = x4
            .into_shape_with_order((n, h * w, c))
            .map(|v| v.mean_axis(ndarray::Axis(1)))
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                x4.mean_axis(ndarray::Axis(1))
                    .and_then(|m| m.mean_axis(ndarray::Axis(1)))
                    .unwrap_or_else(|| ndarray::Array2::zeros((n, c)))
            });
        self.in_shape = (mode == Mode::Train).then_some([n, h, w, c]);
        mean.into_shape_with_order(vec![n, 1, 1, c])
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let [n, h, w, c] = *cached(&self.name, &self.in_shape)?;
        check_grad(&self.name, &grad_out, &[n, 1, 1, c])?;
        let scale = 1.0 / (h * w).max(1) as f32;
        let g = grad_out.as_standard_layout();
        let g = g
            .as_slice()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        // Every position of sample `b` receives `g[b]·scale`, the scaled row computed once.
        let mut dx = Vec::with_capacity(n * h * w * c);
        for gb in g.chunks_exact(c.max(1)).take(n) {
            let row: Vec<f32> = gb.iter().map(|&v| v * scale).collect();
            for _ in 0..h * w {
                dx.extend_from_slice(&row);
            }
        }
        let dx = Tensor::from_shape_vec(vec![n, h, w, c], dx)
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        Ok(vec![dx])
    }
}

impl Pool2d {
    /// The layer of an IR `MaxPool` or `AveragePool` node; `ceil_mode` becomes extra
    /// bottom/right padding (not for an average that counts padding).
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        kind: PoolKind,
        p: &ir::Pool,
        count_include_pad: bool,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::Image)?;
        if p.dilations != [1, 1] {
            return Err(unsupported(node, format!("dilation {:?}", p.dilations)));
        }
        let (ins, outs) = (ctx.shape(node.inputs[0]), ctx.shape(node.output));
        let ([_, _, ih, iw], [_, _, oh, ow]) = (ins, outs) else {
            return Err(unsupported(node, format!("{ins:?} → {outs:?} is not 2-D")));
        };
        // `ceil_mode` keeps a last window that overhangs the bottom/right padding: as much
        // padding again there (which neither wins a maximum nor counts in an average that
        // excludes padding) gives that window with the engine's floor rounding.
        let mut pads = p.pads;
        for (i, (len, out)) in [(*ih, *oh), (*iw, *ow)].into_iter().enumerate() {
            let need = out
                .saturating_sub(1)
                .saturating_mul(p.strides[i])
                .saturating_add(p.kernel[i]);
            let extra = need.saturating_sub(len + p.pads[i] + p.pads[i + 2]);
            if extra > 0 && kind == PoolKind::Avg && count_include_pad {
                return Err(unsupported(
                    node,
                    "ceil_mode with count_include_pad: a window past the padding has no \
                     engine layer (export with count_include_pad=False or ceil_mode=False)",
                ));
            }
            pads[i + 2] += extra;
        }
        let spec = PoolSpec {
            kernel: p.kernel,
            stride: p.strides,
            pads,
            count_include_pad,
        };
        let floor = |i: usize, len: usize| {
            (len + pads[i] + pads[i + 2])
                .checked_sub(p.kernel[i])
                .map(|d| d / p.strides[i] + 1)
        };
        if floor(0, *ih) != Some(*oh) || floor(1, *iw) != Some(*ow) {
            return Err(unsupported(
                node,
                format!("output {outs:?} of input {ins:?} is not the engine's window count"),
            ));
        }
        let layer = Pool2d::new(&node.name, kind, spec)?;
        ctx.push(layer, &[x.id], Layout::Image)
    }
}

impl GlobalAvgPool {
    /// The layer of an IR `GlobalAveragePool` node (`keepdims` true) or of a `ReduceMean` over
    /// the spatial axes, flattened after it unless it keeps them.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        ins: &[Val],
        keepdims: bool,
    ) -> Result<Val> {
        let x = ctx.one_as(node, ins, Layout::Image)?;
        let name = node.name.as_str();
        let pooled = ctx.push(GlobalAvgPool::new(name), &[x.id], Layout::Image)?;
        if keepdims {
            return Ok(pooled);
        }
        let flat_name = format!("{name}/flatten");
        ctx.push(Flatten::new(&flat_name), &[pooled.id], Layout::AsIs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn max_pool_values_and_gradient() {
        let x = Tensor::from_shape_vec(vec![1, 2, 2, 1], vec![1.0, 5.0, 3.0, 2.0]).unwrap();
        let mut p = Pool2d::new("mp", PoolKind::Max, PoolSpec::square(2, 2)).unwrap();
        assert_eq!(
            p.forward(&[&x], Mode::Eval).unwrap().as_slice().unwrap(),
            &[5.0]
        );
        // Distinct, well-separated values so no window has a near tie.
        let mut x = rand_tensor(&[2, 5, 5, 3], 1.0, 1);
        x.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i as f32 * 0.37).sin() * 3.0 + i as f32 * 1e-3);
        let mut spec = PoolSpec::square(3, 2);
        spec.pads = [1, 1, 1, 1];
        check_layer(
            &mut Pool2d::new("mp", PoolKind::Max, spec).unwrap(),
            &[x],
            1e-3,
            1e-2,
            40,
        )
        .unwrap();
    }

    #[test]
    fn max_pool_matches_a_scan_of_each_window_in_both_modes() {
        // Channel counts below, at and across the 16-channel lanes; values with ties (±0, which
        // the first of a window's equals decides) and NaN (which never wins).
        for c in [1, 5, 16, 21, 40] {
            let (n, h, w) = (2, 6, 5);
            let mut x = rand_tensor(&[n, h, w, c], 1.0, c as u64);
            x.iter_mut().enumerate().for_each(|(i, v)| match i % 7 {
                0 => *v = -0.0,
                3 => *v = 0.0,
                5 if i % 3 == 0 => *v = f32::NAN,
                _ => *v = v.min(0.0),
            });
            let mut spec = PoolSpec::square(3, 2);
            spec.pads = [1, 0, 1, 1];
            for mode in [Mode::Eval, Mode::Train] {
                let mut p = Pool2d::new("mp", PoolKind::Max, spec.clone()).unwrap();
                let y = p.forward(&[&x], mode).unwrap();
                let (oh, ow) = (y.shape()[1], y.shape()[2]);
                for (b, oy, ox, ch) in ndarray::indices((n, oh, ow, c)) {
                    let (y0, y1, x0, x1, _) = window(&spec, h, w, oy, ox);
                    let mut best = f32::NEG_INFINITY;
                    for iy in y0..y1 {
                        for ix in x0..x1 {
                            let v = x[[b, iy, ix, ch]];
                            if v > best {
                                best = v;
                            }
                        }
                    }
                    let got = y[[b, oy, ox, ch]];
                    assert_eq!(
                        got.to_bits(),
                        best.to_bits(),
                        "c {c} {mode:?} {b} {oy} {ox} {ch}"
                    );
                }
            }
        }
    }

    #[test]
    fn avg_pool_padding_modes_and_gradient() {
        let x = Tensor::ones(vec![1, 2, 2, 1]);
        let mut spec = PoolSpec::square(2, 2);
        spec.pads = [1, 1, 1, 1];
        let mut p = Pool2d::new("ap", PoolKind::Avg, spec.clone()).unwrap();
        assert_eq!(p.forward(&[&x], Mode::Eval).unwrap()[[0, 0, 0, 0]], 1.0);
        spec.count_include_pad = true;
        let mut q = Pool2d::new("ap", PoolKind::Avg, spec.clone()).unwrap();
        assert_eq!(q.forward(&[&x], Mode::Eval).unwrap()[[0, 0, 0, 0]], 0.25);
        for s in [spec.clone(), PoolSpec::square(3, 1)] {
            let mut p = Pool2d::new("ap", PoolKind::Avg, s).unwrap();
            check_layer(
                &mut p,
                &[rand_tensor(&[2, 5, 4, 2], 1.0, 2)],
                1e-2,
                1e-3,
                30,
            )
            .unwrap();
        }
    }

    #[test]
    fn global_avg_pool() {
        let x = rand_tensor(&[2, 3, 4, 5], 1.0, 3);
        let y = GlobalAvgPool::new("g").forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(y.shape(), &[2, 1, 1, 5]);
        let want: f32 = (0..3)
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .map(|(i, j)| x[[1, i, j, 2]])
            .sum::<f32>()
            / 12.0;
        assert!((y[[1, 0, 0, 2]] - want).abs() < 1e-6);
        check_layer(&mut GlobalAvgPool::new("g"), &[x], 1e-2, 1e-3, 30).unwrap();
    }
}
