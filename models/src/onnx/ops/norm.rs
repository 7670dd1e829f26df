//! `BatchNormalization` in its inference and `training_mode` forms.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{BatchNorm, Op};

/// `BatchNormalization(X, scale, B, mean, var)` with constant parameters. Only the first output
/// is available; the running-statistics outputs of the training form are not.
pub fn batch_norm(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let op = Op::BatchNorm(BatchNorm {
        scale: imp.constant(node, 1)?.to_f32(),
        bias: imp.constant(node, 2)?.to_f32(),
        mean: imp.constant(node, 3)?.to_f32(),
        var: imp.constant(node, 4)?.to_f32(),
        epsilon: node.float("epsilon")?.unwrap_or(1e-5),
        momentum: node.float("momentum")?.unwrap_or(0.9),
        training_mode: node.int("training_mode")?.unwrap_or(0) != 0,
    });
    imp.push(node, op, vec![x])
}
