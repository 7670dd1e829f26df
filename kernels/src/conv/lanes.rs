//! Lane-wise formulas over slices in fixed groups of 8 floats.
//!
//! The Winograd transforms apply a small formula to every channel of a tile: runs of 16–64
//! lanes. LLVM vectorises a plain loop over such a run as 4 vectors at a time and leaves shorter
//! runs (16 or 24 lanes) to its scalar remainder, so the transforms ran one float at a time.
//! Here a formula is written once, generically over [`Lane`], and applied to [`F32x8`] groups
//! (each operation one 256-bit vector operation under AVX2) and then to the remaining lanes one
//! by one. Both compute each lane by the same operations in the same order, so the result does
//! not depend on where a lane falls.

use std::mem::MaybeUninit;
use std::ops::{Add, Mul, Neg, Sub};

/// Floats per group.
pub const WIDTH: usize = 8;

/// What a lane-wise formula may do: add, subtract, negate and scale by a constant.
pub trait Lane:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<f32, Output = Self> + Neg<Output = Self>
{
}

impl Lane for f32 {}

/// A group of 8 lanes, operated on element by element.
#[derive(Clone, Copy)]
pub struct F32x8([f32; WIDTH]);

impl Lane for F32x8 {}

impl F32x8 {
    /// `f` on each pair of lanes. (A plain loop: `array::map` and `from_fn` are not inlined
    /// into the AVX2 copies of the transforms, and ran as calls per group.)
    #[inline(always)]
    #[allow(
        clippy::needless_range_loop,
        reason = "index loops, no iterator adapters"
    )]
    fn zip(self, o: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        let mut r = [0.0; WIDTH];
        for k in 0..WIDTH {
            r[k] = f(self.0[k], o.0[k]);
        }
        Self(r)
    }
}

impl Add for F32x8 {
    type Output = Self;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.zip(o, |a, b| a + b)
    }
}

impl Sub for F32x8 {
    type Output = Self;
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.zip(o, |a, b| a - b)
    }
}

impl Mul<f32> for F32x8 {
    type Output = Self;
    #[inline(always)]
    fn mul(self, s: f32) -> Self {
        self.zip(self, |a, _| a * s)
    }
}

impl Neg for F32x8 {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        self.zip(self, |a, _| -a)
    }
}

/// A lane-wise formula from `I` inputs to `O` outputs, at any [`Lane`] type.
pub trait Formula<const I: usize, const O: usize> {
    fn apply<T: Lane>(x: [T; I]) -> [T; O];
}

/// `out[j][l] = F(ins[0][l], …, ins[I − 1][l])[j]` for every lane `l` of `out[0]` (the inputs
/// at least as long).
#[inline(always)]
#[allow(
    clippy::needless_range_loop,
    reason = "index loops, no iterator adapters"
)]
pub fn lanewise<F: Formula<I, O>, const I: usize, const O: usize>(
    out: [&mut [MaybeUninit<f32>]; O],
    ins: [&[f32]; I],
) {
    let n = if O > 0 { out[0].len() } else { 0 };
    let mut cut = [&[][..]; I];
    for i in 0..I {
        cut[i] = &ins[i][..n];
    }
    let whole = n - n % WIDTH;
    let mut at = 0;
    while at < whole {
        let mut x = [F32x8([0.0; WIDTH]); I];
        for i in 0..I {
            for k in 0..WIDTH {
                x[i].0[k] = cut[i][at + k];
            }
        }
        let y = F::apply(x);
        for j in 0..O {
            let o = &mut out[j][at..at + WIDTH];
            for k in 0..WIDTH {
                o[k].write(y[j].0[k]);
            }
        }
        at += WIDTH;
    }
    for l in whole..n {
        let mut x = [0.0; I];
        for i in 0..I {
            x[i] = cut[i][l];
        }
        let y = F::apply(x);
        for j in 0..O {
            out[j][l].write(y[j]);
        }
    }
}

/// `s` as written-to `MaybeUninit`s.
pub fn uninit(s: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and only floats are written through it.
    unsafe { &mut *(std::ptr::from_mut(s) as *mut [MaybeUninit<f32>]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Formula3;
    impl Formula<3, 2> for Formula3 {
        fn apply<T: Lane>([a, b, c]: [T; 3]) -> [T; 2] {
            [(a + b) * 0.5 - c, -(a - c)]
        }
    }

    #[test]
    fn groups_and_remainder_compute_each_lane_alike() {
        for n in [0, 3, 8, 16, 21] {
            let v = |s: f32| {
                (0..n)
                    .map(|i| (i as f32 * s).sin() * 3.7)
                    .collect::<Vec<f32>>()
            };
            let (a, b, c) = (v(0.3), v(1.1), v(2.9));
            let (mut y0, mut y1) = (vec![f32::NAN; n], vec![f32::NAN; n]);
            lanewise::<Formula3, 3, 2>([uninit(&mut y0), uninit(&mut y1)], [&a, &b, &c]);
            for l in 0..n {
                let [w0, w1] = Formula3::apply([a[l], b[l], c[l]]);
                assert_eq!(
                    (y0[l].to_bits(), y1[l].to_bits()),
                    (w0.to_bits(), w1.to_bits())
                );
            }
        }
    }
}
