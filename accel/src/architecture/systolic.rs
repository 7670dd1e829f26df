//! Closed-form timing of an R×C systolic array on an im2col GEMM (docs/src/accelerators/zc706.md), the
//! timing core of the ZC706 engines: `Npx` output pixels, `Nf` filters, reduction length `T`.
//!
//! SCALE-Sim (v2) builds, per fold, a demand matrix of exactly these many rows (OS: `T` operand
//! rows + `C − 1` drain rows, skewed by `R − 1`), so the closed forms count its cycles. Its
//! reported total is the 0-based cycle *index* of the last output write, i.e. the closed form
//! **minus one** for a whole run (not plus one): [`scale_sim_report`].

/// Output stationary: `ceil(Npx/R) · ceil(Nf/C) · (T + R + C − 2)`.
pub fn os_cycles(npx: u64, nf: u64, t: u64, r: u64, c: u64) -> u64 {
    npx.div_ceil(r) * nf.div_ceil(c) * (t + r + c - 2)
}

/// Weight stationary: `ceil(T/R) · ceil(Nf/C) · (Npx + 2R + C − 2)`.
pub fn ws_cycles(npx: u64, nf: u64, t: u64, r: u64, c: u64) -> u64 {
    t.div_ceil(r) * nf.div_ceil(c) * (npx + 2 * r + c - 2)
}

/// The total SCALE-Sim prints for a run of `cycles` closed-form cycles (no memory stalls): the
/// index of its last cycle, counting from 0.
pub fn scale_sim_report(cycles: u64) -> u64 {
    cycles.saturating_sub(1)
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
        // SCALE-Sim reports the last cycle's 0-based index: one fewer
        assert_eq!(scale_sim_report(ws_cycles(1024, 16, 144, 16, 16)), 9_629);
    }

    #[test]
    fn scale_sim_reports_one_cycle_fewer_than_the_closed_form() {
        // A published SCALE-Sim sweep on a 128×128 weight-stationary array, one fold (T ≤ 128,
        // Nf ≤ 128): totals 383, 389, 413, 509, 893 for Npx = 2, 8, 32, 128, 512, i.e. Npx + 381 =
        // (Npx + 2·128 + 128 − 2) − 1.
        for (npx, reported) in [(2, 383), (8, 389), (32, 413), (128, 509), (512, 893)] {
            assert_eq!(
                scale_sim_report(ws_cycles(npx, 128, 128, 128, 128)),
                reported
            );
        }
    }
}
