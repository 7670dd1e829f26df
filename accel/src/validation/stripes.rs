//! Compute cycles of the Stripes group's own simulator (DNNsim) that cptsim reproduces: its
//! first-layer space-to-depth rule on AlexNet's conv1.

use super::{Row, Tolerance, ValidationError};
use crate::architecture::law::ArrayLaw;
use crate::architecture::stripes::{space_to_depth, StripesLaw};
use crate::workload::gemm::{ConvProblem, OperandBits};
use crate::workload::tile::Tile;

/// DaDianNao's 16 tiles × 16 filters × 16 inputs.
const DADIANNAO: StripesLaw = StripesLaw {
    input_lanes: 16,
    filter_lanes: 256,
    serial: false,
};

/// The Stripes rows: AlexNet conv1 (3 → 96, 11×11 stride 4, 227 → 55) runs as 48 channels with
/// a 3×3 kernel in DNNsim, 81 675 DaDianNao cycles per image.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let conv1 = space_to_depth(&ConvProblem::conv(1, 3, 96, 227, 11, 4, 0));
    let full = OperandBits {
        stream: 16,
        stationary: 16,
    };
    let cycles = DADIANNAO.tile_cycles(&conv1, &Tile::whole(&conv1), full);
    Ok(vec![Row {
        group: "Stripes/DaDianNao: DNNsim compute cycles",
        model: "AlexNet conv1".into(),
        quantity: "DaDianNao cycles per image".into(),
        reference: 81_675.0,
        cptsim: cycles as f64,
        tolerance: Tolerance::Exact,
    }])
}
