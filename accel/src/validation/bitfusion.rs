//! Rows of the Bit Fusion authors' published simulator output (their Eyeriss-iso sweep: batch
//! 16, 192-bit DRAM) that cptsim's Bit Fusion model reproduces exactly: LeNet-5, SVHN, CIFAR-10
//! and AlexNet layers, the im2col'ed first layers among them.

use super::{Row, Tolerance, ValidationError};
use crate::cost::accelerator::Accelerator;
use crate::workload::gemm::{ConvProblem, OperandBits};

/// The quantities of a row, in order.
pub const QUANTITIES: [&str; 10] = [
    "cycles",
    "memory wait cycles",
    "WBUF read bits",
    "WBUF write bits",
    "OBUF read bits",
    "OBUF write bits",
    "IBUF read bits",
    "IBUF write bits",
    "DRAM read bits",
    "DRAM write bits",
];

/// One row of the sweep: layer, problem, bits, first layer, then the [`QUANTITIES`].
pub type SweepRow = (&'static str, ConvProblem, OperandBits, bool, [u64; 10]);

const fn bits(stream: u32, stationary: u32) -> OperandBits {
    OperandBits { stream, stationary }
}

/// The rows cptsim ships.
pub fn sweep_rows() -> [SweepRow; 6] {
    [
        (
            "LeNet-5 fc2",
            ConvProblem::fc(16, 512, 10),
            bits(2, 2),
            false,
            [
                342, 310, 163_840, 10_240, 21_504, 21_504, 163_840, 16_384, 43_008, 16_384,
            ],
        ),
        (
            "LeNet-5 conv1",
            ConvProblem::conv(16, 32, 64, 16, 5, 1, 2),
            bits(2, 2),
            false,
            [
                205_635,
                835,
                419_430_400,
                131_072,
                16_777_216,
                16_777_216,
                419_430_400,
                13_107_200,
                21_626_880,
                8_388_608,
            ],
        ),
        (
            "LeNet-5 conv0",
            ConvProblem::conv(16, 1, 32, 32, 5, 1, 2),
            bits(2, 2),
            true,
            [
                179_116, 162_732, 26_214_400, 16_384, 33_554_432, 33_554_432, 26_214_400, 819_200,
                17_612_800, 16_777_216,
            ],
        ),
        (
            "SVHN conv0",
            ConvProblem::conv(16, 3, 64, 32, 3, 1, 1),
            bits(8, 1),
            true,
            [
                367_979,
                335_211,
                28_311_552,
                4_096,
                67_108_864,
                67_108_864,
                226_492_416,
                3_538_944,
                37_097_472,
                33_554_432,
            ],
        ),
        (
            "CIFAR10 conv1",
            ConvProblem::conv(16, 128, 128, 32, 3, 1, 1),
            bits(2, 2),
            false,
            [
                799_062,
                209_238,
                4_831_838_208,
                327_680,
                134_217_728,
                134_217_728,
                4_831_838_208,
                18_874_368,
                86_310_912,
                67_108_864,
            ],
        ),
        (
            "AlexNet (WRPN 2x) fc3",
            ConvProblem::fc(16, 8192, 1000),
            bits(8, 8),
            false,
            [
                398_679,
                136_535,
                1_073_741_824,
                67_108_864,
                8_388_608,
                8_388_608,
                1_073_741_824,
                1_048_576,
                72_351_744,
                4_194_304,
            ],
        ),
    ]
}

/// cptsim's [`QUANTITIES`] of `row` on `bf`.
pub fn computed(bf: &Accelerator, row: &SweepRow) -> Result<[u64; 10], ValidationError> {
    let (name, p, b, first, _) = row;
    let c = bf
        .cost_problem(p, *b, *first)
        .map_err(|e| ValidationError::of(*name, e))?;
    let (s, d) = (c.mapping.sram, c.mapping.dram);
    Ok([
        c.timing.total_cycles,
        c.timing.stall_cycles,
        s.weight_read,
        s.weight_write,
        s.output_read,
        s.output_write,
        s.input_read,
        s.input_write,
        d.input + d.weight + d.output_read,
        d.output_write,
    ])
}

/// The Bit Fusion rows, one per layer and quantity.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let bf = Accelerator::load("bitfusion").map_err(|e| ValidationError::of("bitfusion", e))?;
    let mut v = Vec::new();
    for row in sweep_rows() {
        let got = computed(&bf, &row)?;
        for ((q, want), got) in QUANTITIES.iter().zip(row.4).zip(got) {
            v.push(Row {
                group: "Bit Fusion: the authors' simulator (Eyeriss-iso sweep)",
                model: row.0.into(),
                quantity: (*q).into(),
                reference: want as f64,
                cptsim: got as f64,
                tolerance: Tolerance::Exact,
            });
        }
    }
    Ok(v)
}
