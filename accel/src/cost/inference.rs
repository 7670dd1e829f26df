//! Inference costing: the forward GEMM of every conv / linear layer of a model at per-layer
//! (activation, weight) bits and a batch, on one accelerator (`cptsim infer`).

use cptsim_models::summary::{LayerRole, ModelSummary};
use serde::Serialize;

use crate::cost::accelerator::{Accelerator, CostError};
use crate::cost::cache::GemmSummary;
use crate::cost::trace::{CostTotals, LayerGemmCost};
use crate::workload::gemm::{training_gemm, GemmKind, OperandBits};

/// One model's inference on one accelerator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InferenceCost {
    pub accelerator: String,
    /// Images per batch.
    pub batch: u64,
    /// The whole batch.
    pub totals: CostTotals,
    /// One entry per layer (the forward GEMM), whole batch.
    pub per_layer: Vec<LayerGemmCost>,
}

impl InferenceCost {
    /// Seconds per image.
    pub fn latency_per_image_s(&self) -> f64 {
        self.totals.latency_s / self.batch as f64
    }

    /// Joules per image.
    pub fn energy_per_image_j(&self) -> f64 {
        self.totals.energy_j() / self.batch as f64
    }
}

/// Why an inference cannot be costed.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    #[error("the batch must be at least 1")]
    ZeroBatch,
    #[error("{given} bit pairs for the {layers} conv/linear layers of model `{model}`")]
    BitsCount {
        given: usize,
        layers: usize,
        model: String,
    },
    #[error("layer `{layer}`: {bits}-bit operands: bits must be 1 to 32")]
    Bits { layer: String, bits: u8 },
    #[error("layer `{layer}` on accelerator `{accel}`: {error}")]
    Cost {
        layer: String,
        accel: String,
        /// Why (in the message, not a separate `source()`, so `{:#}` prints it once).
        error: CostError,
    },
    #[error("layer `{layer}` on accelerator `{accel}`: the cost is not a finite number ({what})")]
    NotFinite {
        layer: String,
        accel: String,
        what: &'static str,
    },
}

/// Costs the forward pass of `model` on `acc` for a batch of `batch` images, layer `i` at
/// `bits[i]` = (activation bits, weight bits).
pub fn cost_inference(
    model: &ModelSummary,
    bits: &[(u8, u8)],
    batch: u64,
    acc: &Accelerator,
) -> Result<InferenceCost, InferenceError> {
    if batch == 0 {
        return Err(InferenceError::ZeroBatch);
    }
    if bits.len() != model.layers.len() {
        return Err(InferenceError::BitsCount {
            given: bits.len(),
            layers: model.layers.len(),
            model: model.name.clone(),
        });
    }
    let cycle_s = acc.config.cycle_s();
    let mut totals = CostTotals::default();
    let mut per_layer = Vec::with_capacity(model.layers.len());
    for (i, (layer, &(a, w))) in model.layers.iter().zip(bits).enumerate() {
        for b in [a, w] {
            if b == 0 || b > 32 {
                return Err(InferenceError::Bits {
                    layer: layer.name.clone(),
                    bits: b,
                });
            }
        }
        let err = |error| InferenceError::Cost {
            layer: layer.name.clone(),
            accel: acc.name().to_string(),
            error,
        };
        let Some(problem) = training_gemm(layer, GemmKind::Forward, batch) else {
            continue;
        };
        let ob = OperandBits {
            stream: u32::from(a),
            stationary: u32::from(w),
        };
        let first = layer.role == LayerRole::First;
        let cost = acc.cost_problem(&problem, ob, first).map_err(err)?;
        let mut t = CostTotals::default();
        t.add(&GemmSummary::from(&cost), 1.0, cycle_s);
        if let Some(what) = t.non_finite() {
            return Err(InferenceError::NotFinite {
                layer: layer.name.clone(),
                accel: acc.name().to_string(),
                what,
            });
        }
        totals.add(&GemmSummary::from(&cost), 1.0, cycle_s);
        per_layer.push(LayerGemmCost {
            layer: i,
            name: layer.name.clone(),
            gemm: GemmKind::Forward,
            totals: t,
        });
    }
    Ok(InferenceCost {
        accelerator: acc.name().to_string(),
        batch,
        totals,
        per_layer,
    })
}

/// Geometric mean of positive values (`None` when empty or any is not positive and finite).
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> ModelSummary {
        let proto = cptsim_models::zoo::build(name, None, 0).unwrap();
        cptsim_models::onnx::import_proto(&proto, name, 1)
            .unwrap()
            .summary()
    }

    #[test]
    fn lenet_on_bitfusion_is_the_sum_of_its_forward_layers() {
        let m = model("bf-lenet5");
        let bits = cptsim_models::zoo::bf_bits("bf-lenet5").unwrap();
        let acc = Accelerator::load("bitfusion").unwrap();
        let c = cost_inference(&m, &bits, 16, &acc).unwrap();
        assert_eq!(c.per_layer.len(), 4);
        let mut cycles = 0;
        for (l, &(a, w)) in m.layers.iter().zip(&bits) {
            let p = training_gemm(l, GemmKind::Forward, 16).unwrap();
            let ob = OperandBits {
                stream: u32::from(a),
                stationary: u32::from(w),
            };
            let first = l.role == LayerRole::First;
            cycles += acc.cost_problem(&p, ob, first).unwrap().timing.total_cycles;
        }
        assert_eq!(c.totals.cycles, cycles as f64);
        assert!((c.latency_per_image_s() * 16.0 - c.totals.latency_s).abs() < 1e-15);
    }

    #[test]
    fn lower_bits_are_cheaper_on_bitfusion_not_on_eyeriss() {
        let m = model("bf-cifar10");
        let n = m.layers.len();
        let (bf, ey) = (
            Accelerator::load("bitfusion").unwrap(),
            Accelerator::load("eyeriss").unwrap(),
        );
        let at = |acc: &Accelerator, b: u8| {
            cost_inference(&m, &vec![(b, b); n], 16, acc)
                .unwrap()
                .totals
                .compute_cycles
        };
        assert!(at(&bf, 2) * 2.0 < at(&bf, 8));
        // Eyeriss: only the tiling (buffer footprints shrink with the bits) changes
        assert!((at(&ey, 2) / at(&ey, 8) - 1.0).abs() < 0.01);
    }

    #[test]
    fn bad_inputs_are_named() {
        let m = model("bf-rnn");
        let acc = Accelerator::load("eyeriss").unwrap();
        let e = cost_inference(&m, &[(4, 4), (4, 4)], 16, &acc).unwrap_err();
        assert!(e.to_string().contains("2 bit pairs"), "{e}");
        let e = cost_inference(&m, &[(0, 4)], 16, &acc).unwrap_err();
        assert!(e.to_string().contains("matmul"), "{e}");
        assert!(cost_inference(&m, &[(4, 4)], 0, &acc).is_err());
        assert_eq!(geomean(&[2.0, 8.0]), Some(4.0));
        assert_eq!(geomean(&[]), None);
    }
}
