//! Elementwise ops with parameters: `BatchNorm`, `LayerNorm`, `GroupNorm`, `PRelu`, `Binary` and
//! `Where` (broadcasting) and `Dropout`. None is a GEMM; all keep the input's shape but `Binary`
//! and `Where`, which broadcast.

use crate::ir::op::{BatchNorm, Binary, GroupNorm, LayerNorm, Where};
use crate::ir::shape::broadcast;

impl BatchNorm {
    /// The input's shape, after checking every parameter is `[C]` for the channels on axis 1.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let [_, ch, ..] = x else {
            return Err(format!("BatchNorm input {x:?} needs rank ≥ 2"));
        };
        for (what, t) in [
            ("scale", &self.scale),
            ("bias", &self.bias),
            ("mean", &self.mean),
            ("var", &self.var),
        ] {
            if t.shape() != [*ch] {
                return Err(format!(
                    "{what} has shape {:?}, expected [{ch}] for input {x:?}",
                    t.shape()
                ));
            }
        }
        Ok(x.to_vec())
    }
}

impl LayerNorm {
    /// The input's shape, after checking scale and bias are `[D]` for its last axis.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let d = x.last().copied().unwrap_or(0);
        for (what, t) in [("scale", &self.scale), ("bias", &self.bias)] {
            if t.shape() != [d] {
                return Err(format!(
                    "{what} has shape {:?}, expected [{d}] for input {x:?}",
                    t.shape()
                ));
            }
        }
        Ok(x.to_vec())
    }
}

impl GroupNorm {
    /// The input's shape, after checking it is `[N, C, …]` with `C` a multiple of the groups
    /// and scale and bias are `[C]`.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let [_, ch, _, ..] = x else {
            return Err(format!("GroupNorm input {x:?} needs rank ≥ 3"));
        };
        if self.groups == 0 || !ch.is_multiple_of(self.groups) {
            return Err(format!(
                "{ch} channels do not divide into {} groups",
                self.groups
            ));
        }
        for (what, t) in [("scale", &self.scale), ("bias", &self.bias)] {
            if t.shape() != [*ch] {
                return Err(format!(
                    "{what} has shape {:?}, expected [{ch}] for input {x:?}",
                    t.shape()
                ));
            }
        }
        Ok(x.to_vec())
    }
}

/// `PRelu`: the input's shape, when the slope broadcasts onto it without enlarging it.
pub fn prelu(slope: &[usize], x: &[usize]) -> Result<Vec<usize>, String> {
    match broadcast(x, slope) {
        Ok(s) if s == x => Ok(x.to_vec()),
        _ => Err(format!(
            "slope {slope:?} does not broadcast onto the input {x:?}"
        )),
    }
}

impl Binary {
    /// The broadcast of the two tensor inputs, or of the one input and the constant.
    pub fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        match (&self.constant, inputs) {
            (None, [a, b]) => broadcast(a, b),
            (Some(c), [x]) => broadcast(x, c.value.shape()),
            _ => Err(format!(
                "expected {} tensor input(s), got {}",
                if self.constant.is_none() { 2 } else { 1 },
                inputs.len()
            )),
        }
    }
}

impl Where {
    /// The broadcast of the condition, the tensor input(s) and the fill.
    pub fn output_shape(&self, inputs: &[&[usize]]) -> Result<Vec<usize>, String> {
        let other = match (&self.fill, inputs) {
            (None, [_, b]) => b.to_vec(),
            (Some(f), [_]) => f.shape().to_vec(),
            _ => {
                return Err(format!(
                    "expected {} tensor input(s), got {}",
                    if self.fill.is_none() { 2 } else { 1 },
                    inputs.len()
                ))
            }
        };
        broadcast(&broadcast(inputs[0], self.keep.shape())?, &other)
    }
}

/// `Dropout`: the input's shape, for a ratio in `[0, 1)`.
pub fn dropout(ratio: f32, x: &[usize]) -> Result<Vec<usize>, String> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(format!("dropout ratio {ratio} is not in [0, 1)"));
    }
    Ok(x.to_vec())
}
