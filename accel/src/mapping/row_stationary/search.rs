//! The row-stationary mapping search: every set width, stack, copy count and spad split the
//! array and scratchpads hold, with every image, filter and strip blocking of the global buffer;
//! the least energy × delay wins (energy with the ALU and RF, delay in total cycles), then the
//! fewest cycles, then the first found.

use serde::Serialize;

use crate::architecture::config::EnergyConstants;
use crate::architecture::dram::{overlap_total, Timing};
use crate::architecture::energy::{energy_of, EnergySplit};
use crate::mapping::tiling::Mapping;
use crate::workload::gemm::{ConvProblem, OperandBits};
use crate::workload::tile::{Loop, Tile};

use super::mapping::RsMapping;
use super::movement::{movement, Movement};
use super::shape::Shape;
use crate::architecture::eyeriss::RowStationary;

/// The chosen mapping of one group of a problem and its cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RsCost {
    pub mapping: RsMapping,
    pub movement: Movement,
    pub timing: Timing,
    /// GLB and array energy in `sram_j`, DRAM in `dram_j`; the per-MAC energy (ALU and RF) is
    /// added by the caller for the whole problem.
    pub energy: EnergySplit,
}

/// No row-stationary mapping fits the array, its scratchpads and its global buffer: what did not.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("no row-stationary mapping fits {0}")]
pub struct NoRowStationaryMapping(pub String);

/// `1, 2, 4, …` below `n`, then `n`.
fn sizes(n: u64) -> impl Iterator<Item = u64> {
    let n = n.max(1);
    std::iter::successors(Some(1u64), move |&k| (k < n).then(|| (k * 2).min(n)))
}

impl RowStationary {
    /// The best row-stationary mapping of one group of `problem` at `bits` (the caller checks
    /// the bits) with DRAM at `dram_bits_per_cycle`, priced by `energy` and this array's
    /// network energy.
    pub fn map(
        &self,
        problem: &ConvProblem,
        bits: OperandBits,
        dram_bits_per_cycle: f64,
        energy: &EnergyConstants,
    ) -> Result<RsCost, NoRowStationaryMapping> {
        let no_fit = || {
            NoRowStationaryMapping(format!(
                "a {}×{} filter over {} output columns on {}×{} PEs with {} ifmap, {} filter and \
                 {} psum spad words and {} global-buffer banks of {} bits",
                problem.kernel_h,
                problem.kernel_w,
                problem.out_w,
                self.rows,
                self.cols,
                self.ifmap_spad,
                self.filter_spad,
                self.psum_spad,
                self.banks,
                self.bank_bits
            ))
        };
        let s = Shape::new(problem, bits, self).ok_or_else(no_fit)?;
        // ALU and RF energy, the same for every mapping, counts in the energy-delay product
        let mac_j = problem.macs() as f64 / problem.groups.max(1) as f64 * energy.mac_pj * 1e-12;
        let evaluate = |mp: RsMapping| -> RsCost {
            let mv = movement(&s, &mp);
            let timing = overlap_total(
                mp.compute_cycles(&s),
                mv.dram.total(),
                mv.first_load,
                mv.last_store,
                dram_bits_per_cycle,
            );
            let mut e = energy_of(energy, &timing, &mv.dram, &mv.glb);
            e.sram_j += mv.array_bits() as f64 * self.array_pj_per_bit * 1e-12;
            RsCost {
                mapping: mp,
                movement: mv,
                timing,
                energy: e,
            }
        };
        // (energy × total cycles, total cycles, the cost)
        let mut best: Option<(f64, u64, RsCost)> = None;
        let vs = self.rows / s.rr;
        for e in (1..=s.e.min(self.cols)).rev() {
            let hs = self.cols / e;
            let strips = s.e.div_ceil(e);
            for r in (1..=vs.min(s.c)).rev() {
                let t_max = ((vs / r) * hs).min(s.m);
                for q in (1..=(self.ifmap_spad / s.ss).min(s.c.div_ceil(r))).rev() {
                    let p_room = self.psum_spad.min(self.filter_spad / (q * s.ss));
                    for t in (1..=t_max).rev() {
                        for p in (1..=p_room.min(s.m.div_ceil(t))).rev() {
                            let array = RsMapping {
                                e,
                                r,
                                t,
                                q,
                                p,
                                n: 1,
                                m: p * t,
                                sr: 1,
                            };
                            // no blocking brings the product below MAC energy × compute cycles
                            let floor = mac_j * array.compute_cycles(&s) as f64;
                            if best.as_ref().is_some_and(|b| floor >= b.0)
                                || !array.fits_array(&s, self)
                            {
                                continue;
                            }
                            for n in sizes(s.n) {
                                for sr in sizes(strips) {
                                    let Some(mp) =
                                        self.largest_block(&s, RsMapping { n, sr, ..array })
                                    else {
                                        continue;
                                    };
                                    let cost = evaluate(mp);
                                    let total = cost.timing.total_cycles;
                                    let edp = (mac_j + cost.energy.total_j()) * total as f64;
                                    let better = best.as_ref().is_none_or(|b| {
                                        (edp, total)
                                            .partial_cmp(&(b.0, b.1))
                                            .is_some_and(|o| o.is_lt())
                                    });
                                    if better {
                                        best = Some((edp, total, cost));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        best.map(|b| b.2).ok_or_else(no_fit)
    }

    /// `mp` with the most filters per block (`m`, a multiple of `p·t`, or all of them) whose
    /// partial sums fit the banks its ifmap chunk leaves, or `None` when not even one group fits.
    fn largest_block(&self, s: &Shape, mp: RsMapping) -> Option<RsMapping> {
        let bank = self.bank_bits.max(1);
        let ifmap_banks = mp.ifmap_chunk_bits(s).div_ceil(bank);
        let free = u128::from(self.banks.checked_sub(ifmap_banks)?) * u128::from(bank);
        // psum bits of one filter: n · rows · F words, scaled
        let per_filter =
            u128::from(mp.n * mp.block_rows(s) * s.f * s.b_out) * u128::from(s.output_scale.num);
        let most = free * u128::from(s.output_scale.den.max(1)) / per_filter.max(1);
        let group = mp.p * mp.t;
        let m = if most >= u128::from(s.m) {
            s.m
        } else {
            (u64::try_from(most).ok()? / group) * group
        };
        let mp = RsMapping { m, ..mp };
        (m > 0 && mp.glb_banks(s, self) <= self.banks).then_some(mp)
    }
}

impl RsCost {
    /// The mapping in the shared tiler's terms: the GLB block as the tile (images, filters,
    /// output rows, columns, channels of a group) and the block loops with more than one trip,
    /// outermost first.
    pub fn as_tiling(&self, problem: &ConvProblem) -> Mapping {
        let mp = &self.mapping;
        let e_rows = (mp.sr * mp.e).min(problem.out_h.max(1));
        let tile = Tile {
            b: mp.n,
            oc: mp.m.min(problem.out_ch.max(1)),
            oh: e_rows,
            ow: problem.out_w.max(1),
            ic: (mp.q * mp.r).min(problem.in_ch.max(1)),
        };
        let order = [
            (Loop::B, problem.batch.max(1).div_ceil(tile.b)),
            (Loop::Oc, problem.out_ch.max(1).div_ceil(tile.oc)),
            (Loop::Oh, problem.out_h.max(1).div_ceil(tile.oh)),
            (Loop::Ic, problem.in_ch.max(1).div_ceil(tile.ic)),
        ]
        .into_iter()
        .filter(|&(_, trips)| trips > 1)
        .map(|(l, _)| l)
        .collect();
        Mapping {
            tile,
            order,
            timing: self.timing,
            dram: self.movement.dram,
            sram: self.movement.glb,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip() -> (RowStationary, EnergyConstants, f64) {
        let c = crate::architecture::config::load("eyeriss").unwrap();
        let w = c.dram_bits_per_cycle();
        (RowStationary::of(&c).unwrap(), c.energy.clone(), w)
    }

    const B16: OperandBits = OperandBits {
        stream: 16,
        stationary: 16,
    };

    #[test]
    fn sizes_are_clipped_powers_of_two() {
        assert_eq!(sizes(16).collect::<Vec<_>>(), vec![1, 2, 4, 8, 16]);
        assert_eq!(sizes(5).collect::<Vec<_>>(), vec![1, 2, 4, 5]);
        assert_eq!(sizes(1).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn an_fc_layer_stacks_whole_columns_and_moves_its_compulsory_words() {
        // 4096 → 1000 at batch 16 on 1×1 sets. Per image a mapping takes ⌈C/(q·r)⌉·q ×
        // ⌈M/(p·t)⌉·p cycles, r ≤ 12 stacked, t ≤ (12/r)·14 copies. The fewest would be
        // 1 024 × 24 = 24 576 (r = 4, q = 1), but each output then makes 1 024 round trips
        // through the GLB (6× an access each way). The energy-delay product takes 12 stacked
        // channel sets × 14 copies, q = 9, p = 24: 38 channel groups × 9 = 342 and 3 filter
        // groups × 24 = 72, so 342 × 72 = 24 624 cycles per image (0.2 % more) and 38 trips.
        let (hw, en, w) = chip();
        let p = ConvProblem::fc(16, 4096, 1000);
        let c = hw.map(&p, B16, w, &en).unwrap();
        assert_eq!((c.mapping.r, c.mapping.t), (12, 14));
        assert_eq!(c.timing.compute_cycles, 16 * 342 * 72);
        assert_eq!(c.movement.glb.output_write, 16 * 1000 * 16 * 38);
        // every word once: inputs 16·4096, weights 4096·1000, outputs 16·1000
        assert_eq!(c.movement.dram.input, 16 * 4096 * 16);
        assert_eq!(c.movement.dram.weight, 4096 * 1000 * 16);
        assert_eq!(c.movement.dram.output_write, 16 * 1000 * 16);
    }

    #[test]
    fn on_16x16_pes_convs_take_the_bit_fusion_authors_eyeriss_cycles() {
        // eyeriss-256pe: the authors' Eyeriss results list these compute cycles (batch 16)
        let c = crate::architecture::config::load("eyeriss-256pe").unwrap();
        let hw = RowStationary::of(&c).unwrap();
        let w = c.dram_bits_per_cycle();
        for (p, cycles) in [
            // SVHN conv2, conv5; LeNet-5 conv1; CIFAR-10 conv3
            (ConvProblem::conv(16, 64, 128, 16, 3, 1, 1), 1_277_952),
            (ConvProblem::conv(16, 256, 256, 8, 3, 1, 1), 2_555_904),
            (ConvProblem::conv(16, 32, 64, 16, 5, 1, 2), 901_120),
            (ConvProblem::conv(16, 256, 256, 16, 3, 1, 1), 10_223_616),
        ] {
            let got = hw.map(&p, B16, w, &c.energy).unwrap();
            assert_eq!(
                got.timing.compute_cycles, cycles,
                "{p:?}: {:?}",
                got.mapping
            );
        }
    }

    #[test]
    fn the_chosen_mapping_fits_and_is_no_slower_than_alexnet_conv1_by_hand() {
        let (hw, en, w) = chip();
        let p = ConvProblem::conv(16, 3, 48, 227, 11, 4, 0);
        let c = hw.map(&p, B16, w, &en).unwrap();
        let s = Shape::new(&p, B16, &hw).unwrap();
        assert!(c.mapping.fits_array(&s, &hw));
        assert!(c.mapping.glb_banks(&s, &hw) <= hw.banks);
        assert!(c.timing.compute_cycles <= 5_575_680, "{:?}", c.mapping);
    }

    #[test]
    fn dram_traffic_is_at_least_compulsory_and_partial_sums_stay_on_chip() {
        let (hw, en, w) = chip();
        for p in [
            ConvProblem::conv(16, 64, 64, 32, 3, 1, 1),
            ConvProblem::conv(16, 3, 64, 224, 7, 2, 3),
            ConvProblem::conv(16, 256, 512, 14, 1, 2, 0),
            ConvProblem::conv(4, 512, 512, 7, 3, 1, 1),
            ConvProblem::fc(16, 9216, 4096),
        ] {
            let c = hw.map(&p, B16, w, &en).unwrap();
            let floor = p.compulsory_bits_at(B16, 16);
            let moved = c.movement.dram.total();
            assert!(moved >= floor, "{p:?}: {moved} < {floor}");
            assert_eq!(c.movement.dram.output_read, 0);
            assert!(
                moved < 3 * floor,
                "{p:?}: {moved} vs {floor} ({:?})",
                c.mapping
            );
        }
    }

    #[test]
    fn nothing_maps_onto_an_array_without_storage() {
        let c = crate::architecture::config::load("eyeriss").unwrap();
        let hw = RowStationary {
            banks: 0,
            bank_bits: 0,
            ifmap_spad: 0,
            filter_spad: 0,
            psum_spad: 0,
            ..RowStationary::of(&c).unwrap()
        };
        let p = ConvProblem::fc(1, 8, 8);
        let e = hw.map(&p, B16, 192.0, &c.energy).unwrap_err().to_string();
        assert!(e.contains("row-stationary"), "{e}");
    }

    #[test]
    fn a_row_wider_than_the_global_buffer_is_an_error() {
        let (hw, en, w) = chip();
        // one 1×3 row of 600 000 columns: 1.2 MB of ifmap words for a 108 KiB buffer
        let mut p = ConvProblem::conv(1, 1, 1, 3, 3, 1, 1);
        p.out_w = 600_000;
        let e = hw.map(&p, B16, w, &en).unwrap_err().to_string();
        assert!(e.contains("global-buffer banks"), "{e}");
    }
}
