//! One group of a GEMM problem in row-stationary terms: Eyeriss's shape names (N, C, M, R, S,
//! E, F, U), the filter folded onto the array and the scratchpads, and the stored word widths.

use crate::workload::gemm::{ConvProblem, OperandBits, Ratio};

use crate::architecture::eyeriss::{output_bits, stored_bits, RowStationary, NATIVE_BITS};

/// One group of a problem, as the RS model maps it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Shape {
    /// Images, channels, filters.
    pub n: u64,
    pub c: u64,
    pub m: u64,
    /// Filter rows and columns, output rows and columns, stride.
    pub r: u64,
    pub s: u64,
    pub e: u64,
    pub f: u64,
    pub u: u64,
    /// Filter-row folds `⌈R/rows⌉` and the filter rows of each (`rr ≤ rows`).
    pub fr: u64,
    pub rr: u64,
    /// Filter-column folds `⌈S/ifmap_spad⌉` and the columns of each (`ss ≤` ifmap spad).
    pub fs: u64,
    pub ss: u64,
    pub input_scale: Ratio,
    pub weight_scale: Ratio,
    pub output_scale: Ratio,
    /// Stored bits of an ifmap, filter and output word.
    pub b_in: u64,
    pub b_w: u64,
    pub b_out: u64,
    /// Passes of the multi-pass extension (1 up to 16 bits).
    pub passes: u64,
}

impl Shape {
    /// The shape of one group of `p` at `bits`, or `None` when the array has no rows, columns
    /// or scratchpad words to map it onto.
    pub fn new(p: &ConvProblem, bits: OperandBits, hw: &RowStationary) -> Option<Self> {
        if hw.rows == 0 || hw.cols == 0 || hw.ifmap_spad == 0 {
            return None;
        }
        let (r, s) = (p.kernel_h.max(1), p.kernel_w.max(1));
        let fr = r.div_ceil(hw.rows);
        let fs = s.div_ceil(hw.ifmap_spad);
        let stored = stored_bits(bits);
        let pass = |b: u32| u64::from(b.max(1).div_ceil(NATIVE_BITS));
        Some(Self {
            n: p.batch.max(1),
            c: p.in_ch.max(1),
            m: p.out_ch.max(1),
            r,
            s,
            e: p.out_h.max(1),
            f: p.out_w.max(1),
            u: p.stride.max(1),
            fr,
            rr: r.div_ceil(fr),
            fs,
            ss: s.div_ceil(fs),
            input_scale: p.input_scale,
            weight_scale: p.weight_scale,
            output_scale: p.output_scale,
            b_in: u64::from(stored.stream),
            b_w: u64::from(stored.stationary),
            b_out: u64::from(output_bits(bits)),
            passes: pass(bits.stream) * pass(bits.stationary),
        })
    }

    /// Input rows that the windows of `g` consecutive output rows touch with `k` filter rows
    /// (a stride wider than the kernel skips rows), as [`ConvProblem::compulsory_bits`] counts.
    pub fn rowspan(&self, g: u64, k: u64) -> u64 {
        if g == 0 {
            return 0;
        }
        ((g - 1) * self.u + k).min(g * k)
    }

    /// Input columns that a whole output row touches with `k` filter columns.
    pub fn colspan(&self, k: u64) -> u64 {
        ((self.f - 1) * self.u + k).min(self.f * k)
    }

    /// Filter words of the whole group (before any weight scale).
    pub fn weights(&self) -> u64 {
        self.m * self.c * self.r * self.s
    }

    /// Output elements of the whole group.
    pub fn outputs(&self) -> u64 {
        self.n * self.m * self.e * self.f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `p` at `a`/`w` bits on the Eyeriss chip.
    fn on_chip(p: &ConvProblem, a: u32, w: u32) -> Shape {
        let hw = RowStationary::of(&crate::architecture::config::load("eyeriss").unwrap()).unwrap();
        let bits = OperandBits {
            stream: a,
            stationary: w,
        };
        Shape::new(p, bits, &hw).unwrap()
    }

    #[test]
    fn spans_follow_the_windows() {
        // 3×3 stride 1 on 8×8 → 8×8 (pad 1): 4 output rows touch 6 input rows, a row 10 columns
        let s = on_chip(&ConvProblem::conv(2, 4, 8, 8, 3, 1, 1), 8, 8);
        assert_eq!((s.rowspan(4, 3), s.colspan(3), s.rowspan(0, 3)), (6, 10, 0));
        assert_eq!((s.b_in, s.b_w, s.b_out, s.passes), (16, 16, 16, 1));
        // 1×1 stride 2: every other row is skipped
        let t = on_chip(&ConvProblem::conv(1, 4, 4, 8, 1, 2, 0), 8, 8);
        assert_eq!((t.rowspan(4, 1), t.colspan(1)), (4, 4));
    }

    #[test]
    fn filters_wider_than_the_array_or_spad_fold() {
        // 13 filter rows on 12 PE rows: 2 folds of 7; 13 columns on a 12-word ifmap spad: 2 of 7
        let s = on_chip(&ConvProblem::conv(1, 1, 1, 32, 13, 1, 0), 32, 16);
        assert_eq!((s.fr, s.rr, s.fs, s.ss), (2, 7, 2, 7));
        assert_eq!((s.b_in, s.b_out, s.passes), (32, 32, 2));
    }
}
