//! What a trace file says about its run besides the rows, and the checks of rows and metadata
//! against the model the trace is read for.

use cptsim_models::ModelSummary;

use crate::error::TraceError;
use crate::TraceRow;

/// Run-level facts of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceMeta {
    /// Model name.
    pub model: String,
    /// Layer names in index order (the model's conv / linear layers).
    pub layer_names: Vec<String>,
    /// Samples per iteration.
    pub batch: u64,
    /// Iterations of the run.
    pub iterations: u64,
}

impl TraceMeta {
    /// The metadata of a run of `model`.
    pub fn for_model(model: &ModelSummary, batch: u64, iterations: u64) -> TraceMeta {
        TraceMeta {
            model: model.name.clone(),
            layer_names: model.layers.iter().map(|l| l.name.clone()).collect(),
            batch,
            iterations,
        }
    }

    /// Why these layer names do not fit `model`, if they do not.
    pub fn layer_mismatch(&self, model: &ModelSummary) -> Option<String> {
        if self.layer_names.len() != model.layers.len() {
            return Some(format!(
                "trace has {} layers, model has {}",
                self.layer_names.len(),
                model.layers.len()
            ));
        }
        let (i, (t, m)) = self
            .layer_names
            .iter()
            .zip(model.layers.iter().map(|l| &l.name))
            .enumerate()
            .find(|(_, (t, m))| t != m)?;
        Some(format!(
            "layer {i} is '{t}' in the trace but '{m}' in the model"
        ))
    }
}

/// Why a row is impossible for a trace of `layers` layers (and, when known, `meta`'s iterations
/// and batch), if it is.
pub fn row_problem(row: &TraceRow, layers: usize, meta: Option<&TraceMeta>) -> Option<String> {
    if row.layer as usize >= layers {
        return Some(format!(
            "layer index {} out of range (model has {layers} layers)",
            row.layer
        ));
    }
    if row.iter_start >= row.iter_end {
        return Some(format!("empty span {}..{}", row.iter_start, row.iter_end));
    }
    if let Some(b) = [row.bits.w, row.bits.a, row.bits.g]
        .into_iter()
        .find(|&b| b > 32)
    {
        return Some(format!("bit-width {b} out of range 0..32"));
    }
    if row.samples == 0 {
        return Some("zero samples".to_string());
    }
    if row.iterations().checked_mul(row.samples).is_none() {
        return Some(format!(
            "span {}..{} of {} samples per iteration overflows the sample count",
            row.iter_start, row.iter_end, row.samples
        ));
    }
    if let Some(m) = meta {
        if row.iter_end > m.iterations {
            return Some(format!(
                "span ends at {} beyond the run's {} iterations",
                row.iter_end, m.iterations
            ));
        }
        if row.samples > m.batch {
            return Some(format!(
                "{} samples exceed the batch of {}",
                row.samples, m.batch
            ));
        }
    }
    None
}

/// Refuses to write row number `n` when it is impossible for `meta` (a zero-sample row would
/// also be indistinguishable from the binary format's end marker).
pub fn check_for_writing(
    path: &std::path::Path,
    n: u64,
    row: &TraceRow,
    meta: &TraceMeta,
) -> Result<(), TraceError> {
    match row_problem(row, meta.layer_names.len(), Some(meta)) {
        Some(problem) => Err(TraceError::malformed(
            path,
            format!("row {n}"),
            format!("refusing to write: {problem}"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_model::model;
    use crate::Bits;
    use cptsim_models::LayerRole;

    #[test]
    fn mismatched_layers_are_named() {
        let m = model(&[LayerRole::First, LayerRole::Last]);
        let mut meta = TraceMeta::for_model(&m, 128, 10);
        assert_eq!(meta.layer_mismatch(&m), None);
        meta.layer_names[1] = "fc".into();
        assert!(meta.layer_mismatch(&m).unwrap().contains("layer 1 is 'fc'"));
        meta.layer_names.pop();
        assert!(meta
            .layer_mismatch(&m)
            .unwrap()
            .contains("1 layers, model has 2"));
    }

    #[test]
    fn impossible_rows_are_found() {
        let m = model(&[LayerRole::Body]);
        let meta = TraceMeta::for_model(&m, 128, 10);
        let ok = TraceRow {
            iter_start: 0,
            iter_end: 10,
            layer: 0,
            bits: Bits::forward_backward(4, 8),
            samples: 128,
        };
        assert_eq!(row_problem(&ok, 1, Some(&meta)), None);
        let bad = [
            TraceRow { layer: 1, ..ok },
            TraceRow { iter_end: 0, ..ok },
            TraceRow {
                bits: Bits { w: 33, a: 4, g: 4 },
                ..ok
            },
            TraceRow { samples: 0, ..ok },
            TraceRow { iter_end: 11, ..ok },
            TraceRow { samples: 129, ..ok },
            TraceRow {
                iter_end: u64::MAX,
                samples: 2,
                ..ok
            },
        ];
        for r in bad {
            assert!(row_problem(&r, 1, Some(&meta)).is_some(), "{r:?}");
        }
    }
}
