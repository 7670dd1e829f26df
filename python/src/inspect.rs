//! `inspect`: a model's conv/linear layers with their GEMM dimensions, MACs and parameters.

use cptsim_models::{GemmOperands, ModelSummary};
use pyo3::prelude::*;
use serde_json::json;

use crate::errors::Failure;

/// Loads `model` (`zoo:NAME` or an ONNX path) at `batch`; the error names the argument.
pub fn load(model: &str, batch: u64, seq_len: Option<usize>) -> Result<ModelSummary, Failure> {
    if batch == 0 {
        return Err(Failure::usage("batch: a batch needs at least 1 sample"));
    }
    let batch = usize::try_from(batch).map_err(|_| Failure::usage("batch: too large"))?;
    cptsim_models::load_shapes(model, batch, seq_len)
        .map(|g| g.summary())
        .map_err(|e| Failure::of(&format!("model {model}"), &e))
}

/// The JSON document of `model`'s layers and totals at `batch` samples per GEMM.
#[pyfunction]
#[pyo3(signature = (model, batch=1, seq_len=None))]
pub fn inspect_json(model: &str, batch: u64, seq_len: Option<usize>) -> PyResult<String> {
    let s = load(model, batch, seq_len)?;
    Ok(document(&s, batch).to_string())
}

fn document(s: &ModelSummary, batch: u64) -> serde_json::Value {
    let layers: Vec<_> = s
        .layers
        .iter()
        .enumerate()
        .map(|(index, l)| {
            let (g, m, n, k) = l.gemm_dims(batch);
            let operands = match l.kind.operands() {
                GemmOperands::WeightActivation => "weight_activation",
                GemmOperands::ActivationActivation => "activation_activation",
            };
            json!({
                "index": index, "name": l.name, "op": l.kind.name(),
                "role": format!("{:?}", l.role).to_lowercase(),
                "in_shape": l.in_shape, "out_shape": l.out_shape, "kernel": l.kernel,
                "stride": l.stride, "groups": l.groups, "params": l.params, "macs": l.macs,
                "operands": operands, "gemm_groups": g, "m": m, "n": n, "k": k,
                "batch_macs": l.macs.saturating_mul(batch),
            })
        })
        .collect();
    json!({
        "model": s.name,
        "input": s.input,
        "batch": batch,
        "layers": layers,
        "totals": {
            "layers": s.layers.len(), "macs": s.total_macs(),
            "batch_macs": s.total_macs().saturating_mul(batch), "bn_elements": s.bn_elements,
            "ops_per_image": s.ops_per_image(), "params": s.params,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_and_totals_agree() {
        let s = load("zoo:lenet5", 4, None).unwrap();
        let d = document(&s, 4);
        let layers = d["layers"].as_array().unwrap();
        assert_eq!(layers.len(), s.layers.len());
        let macs: u64 = layers.iter().map(|l| l["macs"].as_u64().unwrap()).sum();
        assert_eq!(macs, d["totals"]["macs"].as_u64().unwrap());
        assert_eq!(d["totals"]["batch_macs"].as_u64().unwrap(), 4 * macs);
        assert!(load("zoo:lenet5", 0, None).is_err());
    }
}
