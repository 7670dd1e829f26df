//! Precision traces: analytic schedule synthesis, the run-length-encoded trace data model and its
//! CSV and binary formats.
//!
//! A trace is a stream of [`TraceRow`]s: for a span of iterations and one layer, the bits of
//! weights, activations and errors and how many samples ran at them (bits 0 = fp32).
//! [`synthesize`] produces one from a [`schedule::Schedule`]; [`write_trace`] / [`read_trace`]
//! store and load one, checked against the model.

pub mod binary;
pub mod complete;
mod coverage;
pub mod csv_format;
mod error;
mod format;
mod meta;
pub mod row;
pub mod schedule;
pub mod scope;
mod synth;

pub use complete::{absent_layers_as_fp32, static_bits, static_rows};
pub use error::TraceError;
pub use format::{read_trace, write_trace, TraceFormat};
pub use meta::TraceMeta;
pub use row::{Bits, TraceRow};
pub use scope::QuantScope;
pub use synth::{synthesize, Synth};

#[cfg(test)]
pub(crate) mod test_model {
    //! Small model summaries for unit tests.
    use cptsim_models::{LayerInfo, LayerKind, LayerRole, ModelSummary};

    /// A model with one 3×3 conv per role, named `layer0`, `layer1`, ….
    pub fn model(roles: &[LayerRole]) -> ModelSummary {
        let layers = roles
            .iter()
            .enumerate()
            .map(|(i, &role)| LayerInfo {
                name: format!("layer{i}"),
                kind: LayerKind::Conv,
                role,
                in_shape: [16, 8, 8],
                out_shape: [16, 8, 8],
                kernel: [3, 3],
                stride: [1, 1],
                pads: [1, 1, 1, 1],
                dilation: [1, 1],
                groups: 1,
                params: 16 * 16 * 9,
                macs: 16 * 16 * 9 * 64,
                hidden: None,
            })
            .collect();
        ModelSummary {
            name: "test".into(),
            input: vec![1, 16, 8, 8],
            layers,
            bn_elements: 0,
            residual_elements: 0,
            params: 0,
        }
    }
}
