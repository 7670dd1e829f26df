//! `LSTM`, `GRU` and `RNN`: one IR [`Recurrent`] layer per direction (sequence-first
//! `layout = 0`, default activations, zero initial state). The forward direction reads the
//! sequence as it is; the reverse one reads it through a time-reversing `Slice` and its output is
//! reversed back, so step `t` of either is its hidden state at time `t`. ONNX's `Y`
//! `[T, num_directions, B, H]` is their outputs concatenated on axis 1 (forward first), `Y_h`
//! `[num_directions, B, H]` each direction's final state (the forward one's last step, the
//! reverse one's first). `Y_c` (the LSTM's final cell state) is not produced: a node reading it
//! fails as reading an unknown tensor.

use ndarray::{ArrayD, Axis, IxDyn};

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::{Const, Val};
use crate::error::ModelError;
use crate::ir::{CellKind, Op, Recurrent, SliceAxis, ValueId};

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

/// Direction `d` of `W`, `R` or `B`, whose leading axis holds the `dirs` directions.
fn one_direction(
    node: &NodeView,
    c: &Const,
    what: &str,
    d: usize,
    dirs: usize,
) -> Result<ArrayD<f32>, ModelError> {
    let a = c.to_f32();
    match a.shape().first() {
        Some(&n) if n == dirs => Ok(a.index_axis_move(Axis(0), d)),
        _ => Err(node.err(format!(
            "{what} has shape {:?}; expected a leading num_directions axis of {dirs}",
            a.shape()
        ))),
    }
}

/// Which directions a node runs, from its `direction` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

impl Direction {
    fn of(node: &NodeView) -> Result<Self, ModelError> {
        match node.attr_or("direction", "forward".to_string())?.as_str() {
            "forward" => Ok(Direction::Forward),
            "reverse" => Ok(Direction::Reverse),
            "bidirectional" => Ok(Direction::Bidirectional),
            other => Err(node.attr_error(
                "direction",
                format!("unknown value '{other}' (forward, reverse or bidirectional)"),
            )),
        }
    }

    /// Per weight slot `d` (the order of the ONNX weights' leading axis), whether it reads the
    /// sequence reversed.
    fn reversed(self) -> &'static [bool] {
        match self {
            Direction::Forward => &[false],
            Direction::Reverse => &[true],
            Direction::Bidirectional => &[false, true],
        }
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
    let direction = Direction::of(node)?;
    let dirs = direction.reversed().len();
    let layers = (0..dirs)
        .map(|d| weights(imp, node, kind, d, dirs).map(Op::Recurrent))
        .collect::<Result<Vec<_>, _>>()?;
    check_sequence_and_states(imp, node, cell, imp.shape(x).first().copied().unwrap_or(0))?;
    outputs(imp, node, layers, direction, x)
}

/// The IR cell of `node`, after checking that its attributes ask for nothing the IR's
/// recurrent layers do not do (batch-first layout, clipping, coupled gates, other activations).
fn cell_kind(node: &NodeView, cell: Cell) -> Result<CellKind, ModelError> {
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

/// Direction `d` of `dirs`: `W`, `R` and `B` (split into its `Wb` and `Rb` halves; zeros when
/// absent) and the hidden size (the attribute, or the rows of `W` over the gates).
fn weights(
    imp: &Importer,
    node: &NodeView,
    kind: CellKind,
    d: usize,
    dirs: usize,
) -> Result<Recurrent, ModelError> {
    let w = one_direction(node, &imp.constant(node, 1)?, "W", d, dirs)?;
    let r = one_direction(node, &imp.constant(node, 2)?, "R", d, dirs)?;
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
            let b = one_direction(node, &b, "B", d, dirs)?;
            if b.shape() != [2 * g] {
                return Err(node.err(format!(
                    "B has shape [{dirs}, {:?}]; expected [{dirs}, {}] (Wb and Rb)",
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

/// The whole time axis of a `[T, …]` tensor, walked backwards.
fn reversed_time(t: usize) -> Op {
    Op::Slice {
        axes: vec![SliceAxis {
            axis: 0,
            start: t - 1,
            len: t,
            step: -1,
        }],
    }
}

/// Adds one recurrent layer per direction on `x` (named after the node, the reverse one of a
/// bidirectional node `NODE/reverse`), then `Y_h` when read and `Y` when named.
fn outputs(
    imp: &mut Importer,
    node: &NodeView,
    layers: Vec<Op>,
    direction: Direction,
    x: ValueId,
) -> Result<Val, ModelError> {
    let y_name = match node.proto.output.first().filter(|n| !n.is_empty()) {
        Some(n) => n.clone(),
        None => format!("{}/Y", node.name),
    };
    let t = imp.shape(x).first().copied().unwrap_or(0);
    if t == 0 {
        return Err(node.err("the input has no time steps"));
    }
    // Adds `op` as IR node `name` with output `name/out`.
    let tensor = |imp: &mut Importer, name: String, op: Op, inputs: Vec<ValueId>| match imp
        .push_named(node, &name, op, inputs, &format!("{name}/out"))?
    {
        Val::Tensor(v) => Ok(v),
        Val::Const(_) => Err(node.err("internal: a run-time op produced a constant")),
    };
    // Per direction: its output in time order [T, B, H] and its final state [1, B, H].
    let mut seqs = Vec::with_capacity(layers.len());
    let mut finals = Vec::with_capacity(layers.len());
    for (op, &rev) in layers.into_iter().zip(direction.reversed()) {
        let layer = if rev && direction == Direction::Bidirectional {
            format!("{}/reverse", node.name)
        } else {
            node.name.clone()
        };
        let input = if rev {
            tensor(
                imp,
                format!("{layer}/reversed_input"),
                reversed_time(t),
                vec![x],
            )?
        } else {
            x
        };
        let out = tensor(imp, layer.clone(), op, vec![input])?;
        let last = Op::Slice {
            axes: vec![SliceAxis {
                axis: 0,
                start: t - 1,
                len: 1,
                step: 1,
            }],
        };
        finals.push((format!("{layer}/Y_h"), last, out));
        seqs.push(if rev {
            tensor(
                imp,
                format!("{layer}/time_order"),
                reversed_time(t),
                vec![out],
            )?
        } else {
            out
        });
    }
    if let Some(yh) = node.proto.output.get(1).filter(|n| !n.is_empty()) {
        let mut parts = Vec::with_capacity(finals.len());
        for (name, op, seq) in finals {
            parts.push(tensor(imp, name, op, vec![seq])?);
        }
        let v = match parts[..] {
            [one] => Val::Tensor(one),
            _ => imp.push_named(
                node,
                &format!("{}/Y_h", node.name),
                Op::Concat { axis: 0 },
                parts,
                yh,
            )?,
        };
        imp.vals.insert(yh.clone(), v);
    }
    if node.proto.output.first().is_none_or(|n| n.is_empty()) {
        // Nobody reads Y: the first direction's sequence stands for it.
        return Ok(Val::Tensor(seqs[0]));
    }
    let [_, b, h] = imp.shape(seqs[0])[..] else {
        return Err(node.err("internal: recurrent output is not [T, B, H]"));
    };
    let name = format!("{}/Y", node.name);
    if let [one] = seqs[..] {
        return imp.push_named(
            node,
            &name,
            Op::Reshape {
                shape: vec![t, 1, b, h],
            },
            vec![one],
            &y_name,
        );
    }
    let mut parts = Vec::with_capacity(seqs.len());
    for (d, seq) in seqs.into_iter().enumerate() {
        let shape = vec![t, 1, b, h];
        parts.push(tensor(
            imp,
            format!("{name}/{d}"),
            Op::Reshape { shape },
            vec![seq],
        )?);
    }
    imp.push_named(node, &name, Op::Concat { axis: 1 }, parts, &y_name)
}
