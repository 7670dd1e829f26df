//! Panels of a transposed `B` (a linear layer's `Wᵀ`, a conv's weights in a forward product):
//! each column of `B` is a run of adjacent values, each row of a panel takes one value from
//! each of [`NR`] such runs.
//!
//! Element by element that is a load and a store per value; the classifier of a CIFAR ResNet
//! (`128 × 64 · 64 × 100`, `Wᵀ` packed per call) spent 15 % of its product doing it. On
//! AVX-512, blocks of `16 × 16` values are transposed in registers instead. Only values move,
//! so every path packs the same panels.

use super::kernel::NR;
use crate::VectorPath;

/// Fills `panel` (rows of [`NR`] values) from columns of a transposed matrix: column `j < cols`
/// is the run of `panel.len() / NR` adjacent values at `src + j·cs`, the columns from `cols` on
/// are zero.
///
/// # Safety
/// Those runs are valid; `cols ≤ NR`; `path` runs on this CPU.
pub(super) unsafe fn columns_into_panel(
    path: VectorPath,
    src: *const f32,
    cs: isize,
    cols: usize,
    panel: &mut [f32],
) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if path == VectorPath::Avx512 {
        done = panel.len() / (NR * NR) * NR * NR;
        // SAFETY: the CPU runs AVX-512F (caller's contract); the runs hold `done / NR` values.
        unsafe { x86::avx512(src, cs, cols, &mut panel[..done]) };
    }
    let _ = path;
    for (i, row) in panel.chunks_exact_mut(NR).enumerate().skip(done / NR) {
        let (values, zeros) = row.split_at_mut(cols);
        for (j, x) in values.iter_mut().enumerate() {
            // SAFETY: value `i` of run `j` is valid (caller's contract).
            *x = unsafe { *src.offset(j as isize * cs).add(i) };
        }
        zeros.fill(0.0);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::NR;
    use std::arch::x86_64::*;

    /// [`super::columns_into_panel`] for a panel of whole `16 × 16` blocks: each block's 16
    /// runs (zeros past `cols`) loaded as vectors and transposed by 32-bit, 64-bit and twice
    /// 128-bit interleaves.
    ///
    /// # Safety
    /// AVX-512F; `panel.len()` is a multiple of `NR²`; the runs hold `panel.len() / NR` values.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512(src: *const f32, cs: isize, cols: usize, panel: &mut [f32]) {
        const { assert!(NR == 16) };
        for (b, block) in panel.chunks_exact_mut(NR * NR).enumerate() {
            let mut r = [_mm512_setzero_ps(); NR];
            for (j, v) in r.iter_mut().enumerate().take(cols) {
                let run = src.wrapping_offset(j as isize * cs).wrapping_add(b * NR);
                // SAFETY: values b·16..b·16+16 of run `j` are valid (caller's contract).
                *v = unsafe { _mm512_loadu_ps(run) };
            }
            let columns = transpose(r);
            for (i, v) in columns.iter().enumerate() {
                // SAFETY: row `i` of the block, 16 values inside `panel`.
                unsafe { _mm512_storeu_ps(block.as_mut_ptr().add(i * NR), *v) };
            }
        }
    }

    /// The 16 columns of the `16 × 16` matrix whose rows are `r`.
    #[target_feature(enable = "avx512f")]
    fn transpose(r: [__m512; NR]) -> [__m512; NR] {
        let (pd, ps) = (_mm512_castps_pd, _mm512_castpd_ps);
        // t[2k], t[2k+1]: in 128-bit lane l, values 4l, 4l+1 and 4l+2, 4l+3 of rows 2k, 2k+1
        // interleaved.
        let mut t = [_mm512_setzero_ps(); NR];
        for k in 0..NR / 2 {
            t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
        }
        // u[4q+e]: in lane l, value 4l+e of rows 4q..4q+4.
        let mut u = [_mm512_setzero_ps(); NR];
        for q in 0..NR / 4 {
            let (a, b, c, d) = (
                pd(t[4 * q]),
                pd(t[4 * q + 1]),
                pd(t[4 * q + 2]),
                pd(t[4 * q + 3]),
            );
            u[4 * q] = ps(_mm512_unpacklo_pd(a, c));
            u[4 * q + 1] = ps(_mm512_unpackhi_pd(a, c));
            u[4 * q + 2] = ps(_mm512_unpacklo_pd(b, d));
            u[4 * q + 3] = ps(_mm512_unpackhi_pd(b, d));
        }
        // Column 4l+e: lane l of u[e], u[4+e], u[8+e], u[12+e].
        let mut out = [_mm512_setzero_ps(); NR];
        for e in 0..4 {
            let v0 = _mm512_shuffle_f32x4::<0x44>(u[e], u[4 + e]);
            let v1 = _mm512_shuffle_f32x4::<0xEE>(u[e], u[4 + e]);
            let w0 = _mm512_shuffle_f32x4::<0x44>(u[8 + e], u[12 + e]);
            let w1 = _mm512_shuffle_f32x4::<0xEE>(u[8 + e], u[12 + e]);
            out[e] = _mm512_shuffle_f32x4::<0x88>(v0, w0);
            out[4 + e] = _mm512_shuffle_f32x4::<0xDD>(v0, w0);
            out[8 + e] = _mm512_shuffle_f32x4::<0x88>(v1, w1);
            out[12 + e] = _mm512_shuffle_f32x4::<0xDD>(v1, w1);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_packs_the_columns_of_every_size_of_panel() {
        // Runs of 37 values (two whole blocks and a partial one), 20 floats apart.
        let src: Vec<f32> = (0..NR * 20 + 37).map(|v| v as f32).collect();
        for p in VectorPath::ALL.into_iter().filter(|p| !p.runs_here()) {
            cptsim_testdata::skip(&format!("the {} path: this CPU does not run it", p.name()));
        }
        for path in VectorPath::runnable() {
            for (kc, cols) in [(37, 16), (37, 5), (16, 1), (32, 16), (3, 7)] {
                let mut panel = vec![-1.0f32; kc * NR];
                // SAFETY: runs j·20 .. j·20+kc lie in `src` for j < cols.
                unsafe { columns_into_panel(path, src.as_ptr(), 20, cols, &mut panel) };
                for (i, row) in panel.chunks_exact(NR).enumerate() {
                    for (j, &x) in row.iter().enumerate() {
                        let want = if j < cols { (j * 20 + i) as f32 } else { 0.0 };
                        assert_eq!(x, want, "{} kc {kc} cols {cols} ({i}, {j})", path.name());
                    }
                }
            }
        }
    }
}
