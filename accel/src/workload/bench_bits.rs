//! Per-layer bits of the Bit Fusion paper's eight benchmarks (the `bf-` zoo models): as the
//! benchmark definitions state them ([`stated`]), or as the authors' published Bit Fusion sweep
//! ran them ([`paper_sweep`]).
//!
//! The sweep's result file (the 192-bit Eyeriss-iso rows the paper's headline is computed from)
//! gives AlexNet's and ResNet-18's low-bit layers the cycles of 8×8-bit products: ResNet-18's
//! `conv2_1_b` (64→64, 3×3, 56×56, batch 16, 1 849 688 064 MACs, 4/4 bits) takes
//! 3 612 672 = MACs / 512 Fusion Units cycles, one 8×8 product per unit and cycle, every 4/4
//! ResNet-18 layer takes 4× the cycles of its stated bits, and AlexNet's `fc2` (4096 × 4096, 4/4)
//! takes 524 288 = 4096 · 4096 · 16 / 512. On the six other benchmarks the file's cycles and
//! energies are those of the stated bits. So the sweep ran every operand of those two networks at
//! 8 bits at least: that is the `paper-sweep` variant, the stated bits everywhere else.

/// The benchmarks whose sweep rows ran at 8-bit throughput.
const EIGHT_BIT_SWEEP: [&str; 2] = ["bf-alexnet", "bf-resnet18"];

/// The stated (activation, weight) bits per conv / linear layer of benchmark `name`, or `None`
/// when it is not one of the eight.
pub fn stated(name: &str) -> Option<Vec<(u8, u8)>> {
    cptsim_models::zoo::bf_bits(name)
}

/// The bits per layer the authors' published sweep ran benchmark `name` at: the stated bits,
/// with AlexNet's and ResNet-18's operands raised to at least 8 bits.
pub fn paper_sweep(name: &str) -> Option<Vec<(u8, u8)>> {
    let bits = stated(name)?;
    if !EIGHT_BIT_SWEEP.contains(&name) {
        return Some(bits);
    }
    Some(
        bits.into_iter()
            .map(|(a, w)| (a.max(8), w.max(8)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_alexnet_and_resnet18_change_and_only_upwards() {
        for name in [
            "bf-alexnet",
            "bf-svhn",
            "bf-cifar10",
            "bf-lenet5",
            "bf-vgg7",
            "bf-resnet18",
            "bf-rnn",
            "bf-lstm",
        ] {
            let (s, p) = (stated(name).unwrap(), paper_sweep(name).unwrap());
            assert_eq!(s.len(), p.len(), "{name}");
            if EIGHT_BIT_SWEEP.contains(&name) {
                assert!(p.iter().all(|&(a, w)| a == 8 && w == 8), "{name}: {p:?}");
                assert!(s != p, "{name}");
            } else {
                assert_eq!(s, p, "{name}");
            }
        }
        assert!(paper_sweep("resnet20").is_none());
    }
}
