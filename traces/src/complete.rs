//! Completing a trace for costing: the layers a trace does not list ran in fp32, and the static
//! baseline of a trace runs every quantized layer-sample at one precision. BitOPs accounting
//! (`cptsim_accel::BitOpsCounter`) and the accelerator costing of `cptsim run` both use these.

use crate::row::{Bits, TraceRow};

/// One fp32 row over `iterations` × `batch` for every layer of `layers` that no row of `rows`
/// lists (a trace may list only its quantized layers).
pub fn absent_layers_as_fp32(
    rows: &[TraceRow],
    layers: usize,
    iterations: u64,
    batch: u64,
) -> Vec<TraceRow> {
    let mut listed = vec![false; layers];
    for r in rows {
        if let Some(l) = listed.get_mut(r.layer as usize) {
            *l = true;
        }
    }
    (0..layers)
        .filter(|&i| !listed[i] && iterations > 0)
        .filter_map(|i| u32::try_from(i).ok())
        .map(|layer| TraceRow {
            iter_start: 0,
            iter_end: iterations,
            layer,
            bits: Bits::FP32,
            samples: batch,
        })
        .collect()
}

/// The bits the static baseline runs a layer-sample at that the trace ran at `bits`: `baseline`
/// if it was quantized, fp32 if it was not. The baseline keeps the run's scope (which layers, and
/// which samples, ran in fp32) and changes only the precision. [`static_rows`] and the BitOPs
/// counter's static totals both apply this rule.
pub fn static_bits(bits: Bits, baseline: Bits) -> Bits {
    if bits.is_fp32() {
        bits
    } else {
        baseline
    }
}

/// The static baseline of a trace: every row at [`static_bits`].
pub fn static_rows(rows: &[TraceRow], baseline: Bits) -> Vec<TraceRow> {
    rows.iter()
        .map(|r| TraceRow {
            bits: static_bits(r.bits, baseline),
            ..*r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(layer: u32, bits: Bits) -> TraceRow {
        TraceRow {
            iter_start: 0,
            iter_end: 10,
            layer,
            bits,
            samples: 4,
        }
    }

    #[test]
    fn absent_layers_become_fp32_and_the_baseline_keeps_fp32_rows() {
        let rows = [row(1, Bits::forward_backward(4, 8)), row(2, Bits::FP32)];
        let added = absent_layers_as_fp32(&rows, 4, 10, 4);
        assert_eq!(added.iter().map(|r| r.layer).collect::<Vec<_>>(), [0, 3]);
        assert!(added.iter().all(|r| r.bits.is_fp32() && r.samples == 4));
        assert!(absent_layers_as_fp32(&rows, 4, 0, 4).is_empty());
        let base = static_rows(&rows, Bits::forward_backward(8, 8));
        assert_eq!(base[0].bits, Bits::forward_backward(8, 8));
        assert!(base[1].bits.is_fp32());
    }
}
