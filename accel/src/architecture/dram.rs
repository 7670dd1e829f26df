//! The double-buffered DRAM roofline: memory transfers overlap compute, except the first tile's
//! load and the last tile's store (docs/src/accelerators/bitfusion.md).

use serde::Serialize;

/// Cycle breakdown of one mapped problem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Timing {
    /// Cycles the array computes.
    pub compute_cycles: u64,
    /// Cycles the array waits for memory.
    pub stall_cycles: u64,
    /// `compute_cycles + stall_cycles`.
    pub total_cycles: u64,
    /// Cycles of DRAM traffic that can overlap compute (`ceil(bits / width)`).
    pub mem_cycles: u64,
}

impl Timing {
    /// Adds `cycles` of memory traffic that overlaps compute like the rest (double-buffered): only
    /// the part that no longer hides behind compute adds stalls.
    pub fn with_overlapped_memory(self, cycles: u64) -> Self {
        let mem = self.mem_cycles + cycles;
        let extra = mem.saturating_sub(self.compute_cycles)
            - self.mem_cycles.saturating_sub(self.compute_cycles);
        Self {
            stall_cycles: self.stall_cycles + extra,
            total_cycles: self.total_cycles + extra,
            mem_cycles: mem,
            ..self
        }
    }

    /// This timing repeated `n` times (independent groups run back to back).
    pub fn times(self, n: u64) -> Self {
        Self {
            compute_cycles: self.compute_cycles * n,
            stall_cycles: self.stall_cycles * n,
            total_cycles: self.total_cycles * n,
            mem_cycles: self.mem_cycles * n,
        }
    }
}

/// Cycles to move `bits` over an interface of `bits_per_cycle`.
pub fn transfer_cycles(bits: u64, bits_per_cycle: f64) -> u64 {
    if bits == 0 {
        return 0;
    }
    (bits as f64 / bits_per_cycle).ceil() as u64
}

/// Overlaps `compute` cycles with `dram_bits` of traffic: stalls are the memory time not hidden
/// behind compute plus the unhidden first load and last store.
pub fn overlap(
    compute: u64,
    dram_bits: u64,
    first_load_bits: u64,
    last_store_bits: u64,
    bits_per_cycle: f64,
) -> Timing {
    let mem = transfer_cycles(dram_bits, bits_per_cycle);
    let stall = mem
        .saturating_sub(compute)
        .saturating_add(transfer_cycles(first_load_bits, bits_per_cycle))
        .saturating_add(transfer_cycles(last_store_bits, bits_per_cycle));
    Timing {
        compute_cycles: compute,
        stall_cycles: stall,
        total_cycles: compute.saturating_add(stall),
        mem_cycles: mem,
    }
}

/// [`overlap`] of a mapping that moves `total_bits`, of which the first load and the last store
/// are not overlapped.
pub fn overlap_total(
    compute: u64,
    total_bits: u64,
    first_load_bits: u64,
    last_store_bits: u64,
    bits_per_cycle: f64,
) -> Timing {
    let middle = total_bits.saturating_sub(first_load_bits.saturating_add(last_store_bits));
    overlap(
        compute,
        middle,
        first_load_bits,
        last_store_bits,
        bits_per_cycle,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_bound_pays_only_prologue_and_epilogue() {
        let t = overlap(1000, 192 * 100, 192 * 3, 190, 192.0);
        assert_eq!(t.mem_cycles, 100);
        assert_eq!(t.stall_cycles, 3 + 1);
        assert_eq!(t.total_cycles, 1004);
    }

    #[test]
    fn memory_bound_pays_the_difference() {
        let t = overlap(10, 1000, 0, 0, 10.0);
        assert_eq!(t.stall_cycles, 90);
        assert_eq!(t.total_cycles, 100);
        let u = t.times(2);
        assert_eq!(
            (u.total_cycles, u.stall_cycles, u.compute_cycles),
            (200, 180, 20)
        );
    }
}
