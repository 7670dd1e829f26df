//! The op-type → handler table of the importer.

use super::context::Importer;
use super::node::NodeView;
use super::ops::recurrent::{self, Cell};
use super::ops::{
    activation, arith, constant, conv, elementwise, linear, mask, norm, pool, reshape, select,
};
use super::value::Val;
use crate::error::ModelError;
use crate::ir::BinaryKind;

/// A handler reads one node and returns what its first output stands for.
pub type Handler = fn(&mut Importer, &NodeView) -> Result<Val, ModelError>;

/// Every supported ONNX op type (default domain) and its handler.
const HANDLERS: &[(&str, Handler)] = &[
    ("Conv", conv::conv),
    ("BatchNormalization", norm::batch_norm),
    ("Relu", activation::relu),
    ("Clip", activation::clip),
    ("Sigmoid", activation::sigmoid),
    ("Tanh", activation::tanh),
    ("Gelu", activation::gelu),
    ("Softmax", activation::softmax),
    ("LogSoftmax", activation::log_softmax),
    ("LayerNormalization", norm::layer_norm),
    ("LSTM", |i, n| recurrent::recurrent(i, n, Cell::Lstm)),
    ("GRU", |i, n| recurrent::recurrent(i, n, Cell::Gru)),
    ("RNN", |i, n| recurrent::recurrent(i, n, Cell::Rnn)),
    ("Split", select::split),
    ("Where", mask::where_),
    ("Expand", mask::expand),
    ("Mod", arith::modulo),
    ("Equal", |i, n| arith::compare(i, n, |a, b| a == b)),
    ("Less", |i, n| arith::compare(i, n, |a, b| a < b)),
    ("Greater", |i, n| arith::compare(i, n, |a, b| a > b)),
    ("Not", arith::not),
    ("Sqrt", arith::sqrt),
    ("Trilu", arith::trilu),
    ("Add", |i, n| elementwise::binary(i, n, BinaryKind::Add)),
    ("Sub", |i, n| elementwise::binary(i, n, BinaryKind::Sub)),
    ("Mul", |i, n| elementwise::binary(i, n, BinaryKind::Mul)),
    ("Div", |i, n| elementwise::binary(i, n, BinaryKind::Div)),
    ("MaxPool", pool::max_pool),
    ("AveragePool", pool::average_pool),
    ("GlobalAveragePool", pool::global_average_pool),
    ("ReduceMean", pool::reduce_mean),
    ("Flatten", reshape::flatten),
    ("Reshape", reshape::reshape),
    ("Squeeze", reshape::squeeze),
    ("Unsqueeze", reshape::unsqueeze),
    ("Transpose", reshape::transpose),
    ("Gemm", linear::gemm),
    ("MatMul", linear::matmul),
    ("Concat", select::concat),
    ("Slice", select::slice),
    ("Gather", select::gather),
    ("Pad", select::pad),
    ("Identity", constant::pass_through),
    ("Dropout", constant::pass_through),
    ("Cast", constant::cast),
    ("Constant", constant::constant),
    ("ConstantOfShape", constant::constant_of_shape),
    ("Shape", constant::shape),
];

/// The handler for an op type of the default ONNX domain.
pub fn lookup(op_type: &str) -> Option<Handler> {
    HANDLERS
        .iter()
        .find(|(name, _)| *name == op_type)
        .map(|(_, h)| *h)
}

/// The supported op types, in table order.
pub fn supported_ops() -> Vec<&'static str> {
    HANDLERS.iter().map(|(name, _)| *name).collect()
}
