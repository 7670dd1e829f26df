//! `LSTM`, `GRU` and `RNN`: one IR [`Recurrent`] layer each (forward direction, sequence-first
//! `layout = 0`, default activations, zero initial state), then a `Reshape` to ONNX's `Y`
//! `[T, 1, B, H]`; `Y_h` is the last step of `Y`. `Y_c` (the LSTM's final cell state) is not
//! produced: a node reading it fails as reading an unknown tensor.

use ndarray::{ArrayD, Axis, IxDyn};

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::{CellKind, Op, Recurrent, SliceAxis};

/// Registers `LSTM`, `GRU` and `RNN`.
pub fn register(reg: &mut Registry) {
    reg.insert("LSTM", |imp, node| recurrent(imp, node, Cell::Lstm));
    reg.insert("GRU", |imp, node| recurrent(imp, node, Cell::Gru));
    reg.insert("RNN", |imp, node| recurrent(imp, node, Cell::Rnn));
}

/// The cell an ONNX op type runs (GRU's `linear_before_reset` comes from the node).
#[derive(Clone, Copy, Debug)]
pub enum Cell {
    /// `RNN`.
    Rnn,
    /// `LSTM`.
    Lstm,
    /// `GRU`.
    Gru,
}

/// The ONNX default activations of each cell; anything else is refused.
fn default_activations(cell: Cell) -> &'static [&'static str] {
    match cell {
        Cell::Rnn => &["Tanh"],
        Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        Cell::Gru => &["Sigmoid", "Tanh"],
    }
}

/// `W`, `R` or `B` with its `num_directions` axis of 1 dropped.
fn one_direction(node: &NodeView, c: Const, what: &str) -> Result<ArrayD<f32>, ModelError> {
    let a = c.to_f32();
    match a.shape().first() {
        Some(1) => Ok(a.index_axis_move(Axis(0), 0)),
        _ => Err(node.err(format!(
            "{what} has shape {:?}; expected a leading num_directions axis of 1",
            a.shape()
        ))),
    }
}

/// Optional input `i` that must be absent or a constant of zeros (initial states, peepholes).
fn zero_or_absent(imp: &Importer, node: &NodeView, i: usize, what: &str) -> Result<(), ModelError> {
    match imp.opt_input(node, i)? {
        None => Ok(()),
        Some(Val::Const(c)) if c.floats().iter().all(|&v| v == 0.0) => Ok(()),
        Some(_) => Err(node.err(format!(
            "{what} (input {i}) must be absent or all zeros: the IR's recurrent layers start \
             from a zero state"
        ))),
    }
}

/// Imports one `LSTM` / `GRU` / `RNN` node.
fn recurrent(imp: &mut Importer, node: &NodeView, cell: Cell) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let kind = cell_kind(node, cell)?;
    let op = Op::Recurrent(weights(imp, node, kind)?);
    check_sequence_and_states(imp, node, cell, imp.shape(x).first().copied().unwrap_or(0))?;
    outputs(imp, node, op, x)
}

/// The IR cell of `node`, after checking that its attributes ask for nothing the IR's
/// recurrent layers do not do (other directions, batch-first layout, clipping, coupled gates,
/// other activations).
fn cell_kind(node: &NodeView, cell: Cell) -> Result<CellKind, ModelError> {
    let direction = node.attr_or("direction", "forward".to_string())?;
    if direction != "forward" {
        return Err(node.attr_error(
            "direction",
            format!("'{direction}' is not supported (only 'forward'; a bidirectional layer is two layers to cptsim)"),
        ));
    }
    match node.attr_or("layout", 0i64)? {
        0 => {}
        1 => {
            return Err(node.attr_error(
                "layout",
                "1 (batch-first) is not supported; export with the default sequence-first layout",
            ))
        }
        v => return Err(node.attr_error("layout", format!("expected 0 or 1, got {v}"))),
    }
    if node.attr_opt::<f32>("clip")?.is_some() {
        return Err(node.attr_error("clip", "cell clipping is not supported"));
    }
    if node.attr_or("input_forget", false)? {
        return Err(node.attr_error(
            "input_forget",
            "coupled input-forget gates are not supported",
        ));
    }
    if let Some(acts) = node.strings("activations")? {
        let want = default_activations(cell);
        if !acts.iter().map(String::as_str).eq(want.iter().copied()) {
            return Err(node.attr_error(
                "activations",
                format!("{acts:?} are not supported (only the defaults {want:?})"),
            ));
        }
    }
    Ok(match cell {
        Cell::Rnn => CellKind::Rnn,
        Cell::Lstm => CellKind::Lstm,
        Cell::Gru => CellKind::Gru {
            linear_before_reset: node.attr_or("linear_before_reset", false)?,
        },
    })
}

/// `W`, `R` and `B` (split into its `Wb` and `Rb` halves; zeros when absent) and the hidden
/// size (the attribute, or the rows of `W` over the gates).
fn weights(imp: &Importer, node: &NodeView, kind: CellKind) -> Result<Recurrent, ModelError> {
    let w = one_direction(node, imp.constant(node, 1)?, "W")?;
    let r = one_direction(node, imp.constant(node, 2)?, "R")?;
    let rows = w.shape().first().copied().unwrap_or(0);
    let gates = kind.gates();
    let hidden = match node.attr_opt::<i64>("hidden_size")? {
        Some(h) => usize::try_from(h)
            .ok()
            .filter(|&h| h > 0)
            .ok_or_else(|| node.attr_error("hidden_size", format!("{h} is not positive")))?,
        None => rows / gates,
    };
    let g = gates * hidden;
    let (bias_w, bias_r) = match imp.opt_const(node, 3)? {
        None => (ArrayD::zeros(IxDyn(&[g])), ArrayD::zeros(IxDyn(&[g]))),
        Some(b) => {
            let b = one_direction(node, b, "B")?;
            if b.shape() != [2 * g] {
                return Err(node.err(format!(
                    "B has shape [1, {:?}]; expected [1, {}] (Wb and Rb)",
                    b.shape(),
                    2 * g
                )));
            }
            let wb = b.slice_axis(Axis(0), (0..g).into()).to_owned();
            let rb = b.slice_axis(Axis(0), (g..2 * g).into()).to_owned();
            (wb, rb)
        }
    };
    Ok(Recurrent {
        kind,
        hidden,
        w,
        r,
        bias_w,
        bias_r,
    })
}

/// Checks that `sequence_lens` covers all `steps` and the initial states (and an LSTM's
/// peepholes) are absent or zero.
fn check_sequence_and_states(
    imp: &Importer,
    node: &NodeView,
    cell: Cell,
    steps: usize,
) -> Result<(), ModelError> {
    match imp.opt_input(node, 4)? {
        None => {}
        Some(Val::Const(c)) if c.ints().iter().all(|&l| l == steps as i64) => {}
        Some(_) => {
            return Err(node.err(format!(
                "sequence_lens (input 4) must be absent or all {steps} (the full sequence)"
            )))
        }
    }
    zero_or_absent(imp, node, 5, "initial_h")?;
    if matches!(cell, Cell::Lstm) {
        zero_or_absent(imp, node, 6, "initial_c")?;
        zero_or_absent(imp, node, 7, "P (peepholes)")?;
    }
    Ok(())
}

/// Adds the recurrent layer `op` on `x`, then `Y_h` (its last step) when read and `Y` (its
/// output reshaped to ONNX's `[T, 1, B, H]`) when named.
fn outputs(
    imp: &mut Importer,
    node: &NodeView,
    op: Op,
    x: crate::ir::ValueId,
) -> Result<Val, ModelError> {
    let y_name = match node.proto.output.first().filter(|n| !n.is_empty()) {
        Some(n) => n.clone(),
        None => format!("{}/Y", node.name),
    };
    let seq_name = format!("{y_name}/seq");
    let Val::Tensor(seq) = imp.push_named(node, &node.name, op, vec![x], &seq_name)? else {
        return Err(node.err("internal: a recurrent layer produced a constant"));
    };
    let [t, b, h] = imp.shape(seq)[..] else {
        return Err(node.err("internal: recurrent output is not [T, B, H]"));
    };
    if let Some(yh) = node.proto.output.get(1).filter(|n| !n.is_empty()) {
        let last = SliceAxis {
            axis: 0,
            start: t - 1,
            len: 1,
            step: 1,
        };
        let name = format!("{}/Y_h", node.name);
        let v = imp.push_named(node, &name, Op::Slice { axes: vec![last] }, vec![seq], yh)?;
        imp.vals.insert(yh.clone(), v);
    }
    let name = format!("{}/Y", node.name);
    let shape = vec![t, 1, b, h];
    if node.proto.output.first().is_none_or(|n| n.is_empty()) {
        // Nobody reads Y: the recurrent layer's own output stands for it.
        return Ok(Val::Tensor(seq));
    }
    imp.push_named(node, &name, Op::Reshape { shape }, vec![seq], &y_name)
}
