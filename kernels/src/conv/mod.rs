//! The inner loops of a 2-D convolution, channels-last: its geometry ([`Conv2dSpec`]), im2col
//! gather and scatter and the padded copy the GEMM reads patches from ([`im2col`]), the direct
//! depthwise loops ([`depthwise`]), the direct loops of grouped convs ([`grouped`]), and Winograd's minimal filtering for 3×3 convs
//! ([`winograd`]), with the per-thread scratch buffers they share.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use crate::error::{KernelError, Result};

pub mod depthwise;
pub mod grouped;
pub mod im2col;
mod lanes;
pub mod winograd;

pub use im2col::Im2col;

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
            return Err(KernelError::shape(
                layer,
                format!("invalid conv geometry {self:?} (zero size, or channels not divisible by groups)"),
            ));
        }
        Ok(())
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

thread_local! {
    /// Per-thread column buffers reused across blocks and calls (every use overwrites the part it
    /// reads, so no zeroing is needed).
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs `f` with two scratch buffers of the given lengths (contents unspecified).
pub fn with_scratch<R>(a: usize, b: usize, f: impl FnOnce(&mut [f32], &mut [f32]) -> R) -> R {
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
pub fn zeroed(b: &mut [MaybeUninit<f32>]) -> &mut [f32] {
    b.fill(MaybeUninit::new(0.0));
    // SAFETY: every element was just written (`MaybeUninit<f32>` has the layout of `f32`).
    unsafe { &mut *(std::ptr::from_mut(b) as *mut [f32]) }
}

/// Maps an ndarray shape error to a shape error naming the layer.
fn shape_err(layer: &str) -> impl Fn(ndarray::ShapeError) -> KernelError + '_ {
    move |e| KernelError::shape(layer, e.to_string())
}

#[cfg(test)]
pub(crate) mod testing {
    use super::Conv2dSpec;

    /// `spec`'s output `(OH, OW)` on an `H×W` input (floor division), `None` when the window
    /// does not fit.
    pub(crate) fn output_hw(spec: &Conv2dSpec, h: usize, w: usize) -> Option<(usize, usize)> {
        let dim = |axis: usize, len: usize| {
            let span = spec.dilation[axis] * (spec.kernel[axis] - 1) + 1;
            let padded = len + spec.pads[axis] + spec.pads[axis + 2];
            (padded >= span).then(|| (padded - span) / spec.stride[axis] + 1)
        };
        Some((dim(0, h)?, dim(1, w)?))
    }
}
