//! The im2col matrix of a convolution read in place: row `i` of `A` is the patch of output pixel
//! `i` (of a block of samples), and its terms (kernel row, kernel column, channel) lie in a
//! zero-padded channels-last input as one run per kernel row — kernel columns × channels adjacent
//! floats — the runs `seg_step` floats apart. No column matrix is written.

use std::marker::PhantomData;

use crate::error::{KernelError, Result};

/// The patches of a stride-`(sy, sx)`, dilation-`(dy, 1)` convolution with one group over
/// `samples` zero-padded `[hp, wp, c]` inputs (padding already applied, so every patch lies
/// inside its sample). `A` is `samples·oh·ow × kh·kw·c`, in im2col order.
#[derive(Clone, Copy)]
pub struct Patches<'a> {
    pub(super) base: *const f32,
    /// Floats per padded sample.
    pub(super) sample: isize,
    /// Output pixels per sample and per output row.
    pub(super) pixels: usize,
    pub(super) ow: usize,
    /// Floats between vertically / horizontally adjacent output pixels' patches.
    pub(super) row_step: isize,
    pub(super) col_step: isize,
    /// Terms per kernel row (`kw·c`) and floats between kernel rows.
    pub(super) seg: usize,
    pub(super) seg_step: isize,
    /// Rows and terms of `A`.
    pub(super) rows: usize,
    pub(super) terms: usize,
    _input: PhantomData<&'a [f32]>,
}

/// The geometry of [`Patches::new`]: padded input `[hp, wp, c]`, output `(oh, ow)`, kernel
/// `(kh, kw)`, strides `(sy, sx)` and vertical dilation `dy`.
#[derive(Clone, Copy, Debug)]
pub struct PatchGeometry {
    pub padded: [usize; 3],
    pub out: (usize, usize),
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub dilation_y: usize,
}

impl<'a> Patches<'a> {
    /// The patches of the samples in `input` (`samples` padded inputs back to back). Errors when
    /// a patch would read outside `input` or a size overflows.
    pub fn new(input: &'a [f32], samples: usize, g: PatchGeometry) -> Result<Self> {
        let [hp, wp, c] = g.padded;
        let ((oh, ow), (kh, kw), (sy, sx)) = (g.out, g.kernel, g.stride);
        let err = |what: &str| KernelError::shape("conv patches", format!("{what}: {g:?}"));
        let size = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(|| err("size overflows"))
        };
        let sample = size(&[hp, wp, c])?;
        if [samples, oh, ow, kh, kw, c, sy, sx, g.dilation_y].contains(&0) {
            return Err(err("empty geometry"));
        }
        if size(&[samples, sample])? > input.len() {
            return Err(err("input shorter than its samples"));
        }
        // The last term of a sample's last patch: bottom-right pixel of its last kernel row.
        let last_row = size(&[oh - 1, sy])?
            .checked_add(size(&[kh - 1, g.dilation_y])?)
            .ok_or_else(|| err("size overflows"))?;
        let last_col = size(&[ow - 1, sx])?
            .checked_add(kw - 1)
            .ok_or_else(|| err("size overflows"))?;
        if last_row >= hp || last_col >= wp {
            return Err(err("a patch reaches outside the padded input"));
        }
        let isz = |v: usize| isize::try_from(v).map_err(|_| err("size overflows"));
        Ok(Patches {
            base: input.as_ptr(),
            sample: isz(sample)?,
            pixels: size(&[oh, ow])?,
            ow,
            row_step: isz(size(&[sy, wp, c])?)?,
            col_step: isz(size(&[sx, c])?)?,
            seg: size(&[kw, c])?,
            seg_step: isz(size(&[g.dilation_y, wp, c])?)?,
            rows: size(&[samples, oh, ow])?,
            terms: size(&[kh, kw, c])?,
            _input: PhantomData,
        })
    }

    /// Rows and terms of `A`.
    pub fn dim(&self) -> (usize, usize) {
        (self.rows, self.terms)
    }

    /// The first term of row `i`.
    #[inline(always)]
    pub(super) fn row(&self, i: usize) -> *const f32 {
        self.base.wrapping_offset(self.pixel(i))
    }

    /// Offset of row `i`'s first term from the input's start.
    #[inline(always)]
    pub(super) fn pixel(&self, i: usize) -> isize {
        let (n, q) = (i / self.pixels, i % self.pixels);
        n as isize * self.sample
            + (q / self.ow) as isize * self.row_step
            + (q % self.ow) as isize * self.col_step
    }

    /// Offset of term `p` from the first term of a row.
    pub(super) fn term(&self, p: usize) -> isize {
        (p / self.seg) as isize * self.seg_step + (p % self.seg) as isize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> PatchGeometry {
        PatchGeometry {
            padded: [6, 7, 2],
            out: (2, 3),
            kernel: (3, 2),
            stride: (2, 2),
            dilation_y: 1,
        }
    }

    #[test]
    fn terms_walk_each_kernel_row_then_jump_to_the_next() {
        let x: Vec<f32> = (0..2 * 6 * 7 * 2).map(|v| v as f32).collect();
        let p = Patches::new(&x, 2, geometry()).unwrap();
        assert_eq!(p.dim(), (12, 12));
        // Row 4 = sample 0, output (1, 1): input pixel (2, 2) onwards.
        let at = |i: usize, t: usize| unsafe { *p.row(i).offset(p.term(t)) };
        assert_eq!(at(4, 0), ((2 * 7 + 2) * 2) as f32);
        assert_eq!(at(4, 3), ((2 * 7 + 3) * 2 + 1) as f32);
        assert_eq!(at(4, 4), ((3 * 7 + 2) * 2) as f32);
        // Row 6 = sample 1, output (0, 0).
        assert_eq!(at(6, 11), (6 * 7 * 2 + (2 * 7 + 1) * 2 + 1) as f32);
    }

    #[test]
    fn patches_outside_the_input_are_errors() {
        let x = vec![0.0; 2 * 6 * 7 * 2];
        assert!(Patches::new(&x[1..], 2, geometry()).is_err());
        let mut g = geometry();
        g.out = (3, 3);
        assert!(Patches::new(&x, 2, g).is_err());
        g = geometry();
        g.kernel = (3, 0);
        assert!(Patches::new(&x, 2, g).is_err());
        g = geometry();
        g.padded = [usize::MAX, 7, 2];
        assert!(Patches::new(&x, 2, g).is_err());
    }
}
