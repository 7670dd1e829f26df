//! Closed-form timing of an R×C systolic array on an im2col GEMM (accelerators.md §4), the
//! timing core of the ZC706 engines: `Npx` output pixels, `Nf` filters, reduction length `T`.

/// Output stationary: `ceil(Npx/R) · ceil(Nf/C) · (T + R + C − 2)`.
pub fn os_cycles(npx: u64, nf: u64, t: u64, r: u64, c: u64) -> u64 {
    npx.div_ceil(r) * nf.div_ceil(c) * (t + r + c - 2)
}

/// Weight stationary: `ceil(T/R) · ceil(Nf/C) · (Npx + 2R + C − 2)`.
pub fn ws_cycles(npx: u64, nf: u64, t: u64, r: u64, c: u64) -> u64 {
    t.div_ceil(r) * nf.div_ceil(c) * (npx + 2 * r + c - 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_stationary_hand_values() {
        // 32×32 output map, 16 filters, 3×3×16 reduction on a 16×16 array:
        // 64 · 1 · (144 + 30) = 11 136
        assert_eq!(os_cycles(1024, 16, 144, 16, 16), 11_136);
        // partial folds pad: 1000 pixels → 63 folds, 20 filters → 2 folds on 16×16
        assert_eq!(os_cycles(1000, 20, 144, 16, 16), 63 * 2 * 174);
        // a 1×1 array degenerates to one MAC per cycle
        assert_eq!(os_cycles(7, 5, 3, 1, 1), 7 * 5 * 3);
    }

    #[test]
    fn weight_stationary_hand_values() {
        // same GEMM: ceil(144/16) · 1 · (1024 + 32 + 16 − 2) = 9 · 1070 = 9 630
        assert_eq!(ws_cycles(1024, 16, 144, 16, 16), 9_630);
        assert_eq!(ws_cycles(7, 5, 3, 1, 1), 3 * 5 * 8);
        // SCALE-Sim's convention adds one cycle per run
        assert_eq!(ws_cycles(1024, 16, 144, 16, 16) + 1, 9_631);
    }
}
