//! [`Graph::summary`]: the per-layer view (geometry, MACs, roles) other crates work from.

use super::{BinaryKind, Graph, Op, ValueId};
use crate::summary::{LayerInfo, LayerKind, LayerRole, ModelSummary};

impl Graph {
    /// Per-sample conv/linear geometry, MACs and roles, BN and residual-add output elements and
    /// parameters.
    ///
    /// Roles: the first conv/linear in topological order is `First`, the last is `Last` (the
    /// classifier; a one-layer model's only layer is `Last`), a depthwise conv is `Depthwise`, a
    /// 1×1 conv is `Shortcut` when its input also feeds another node and its output reaches an
    /// `Add` through nothing but BatchNorm (a projection on a residual branch); the rest `Body`.
    pub fn summary(&self) -> ModelSummary {
        let mut layers = Vec::new();
        let mut bn_elements = 0u64;
        let mut residual_elements = 0u64;
        for (i, node) in self.nodes.iter().enumerate() {
            let x = self.shape(node.inputs.first().copied().unwrap_or(self.input));
            let y = self.shape(node.output);
            match &node.op {
                Op::Conv(c) => {
                    let [kh, kw] = c.kernel();
                    let in_shape = chw(x);
                    let out_shape = chw(y);
                    let depthwise = c.groups > 1 && c.groups == in_shape[0];
                    let role = if depthwise {
                        LayerRole::Depthwise
                    } else if kh == 1 && kw == 1 && self.is_shortcut(i) {
                        LayerRole::Shortcut
                    } else {
                        LayerRole::Body
                    };
                    let macs = super::shape::conv_macs(out_shape, in_shape[0], c.groups, [kh, kw]);
                    layers.push(LayerInfo {
                        name: node.name.clone(),
                        kind: LayerKind::Conv,
                        role,
                        in_shape,
                        out_shape,
                        kernel: [kh, kw],
                        stride: c.strides,
                        pads: c.pads,
                        dilation: c.dilations,
                        groups: c.groups,
                        params: node.op.params(),
                        macs,
                    });
                }
                Op::Linear(l) => {
                    // Leading axes other than the batch multiply the work (a token axis, say).
                    let rows = per_sample(x) / l.in_features().max(1);
                    layers.push(LayerInfo {
                        name: node.name.clone(),
                        kind: LayerKind::Linear,
                        role: LayerRole::Body,
                        in_shape: [l.in_features(), 1, 1],
                        out_shape: [l.out_features(), 1, 1],
                        kernel: [1, 1],
                        stride: [1, 1],
                        pads: [0; 4],
                        dilation: [1, 1],
                        groups: 1,
                        params: node.op.params(),
                        macs: super::shape::linear_macs(rows, l.in_features(), l.out_features()),
                    });
                }
                Op::BatchNorm(_) => bn_elements += per_sample(y) as u64,
                Op::Binary(b) if b.kind == BinaryKind::Add && b.constant.is_none() => {
                    residual_elements += per_sample(y) as u64
                }
                _ => {}
            }
        }
        if let Some(first) = layers.first_mut() {
            first.role = LayerRole::First;
        }
        if let Some(last) = layers.last_mut() {
            last.role = LayerRole::Last;
        }
        ModelSummary {
            name: self.name.clone(),
            input: self.shape(self.input).to_vec(),
            layers,
            bn_elements,
            residual_elements,
            params: self.params(),
        }
    }

    /// Whether node `i` (a 1×1 conv) is a projection on a residual shortcut.
    fn is_shortcut(&self, i: usize) -> bool {
        let node = &self.nodes[i];
        let Some(&input) = node.inputs.first() else {
            return false;
        };
        if self.consumers(input).len() < 2 {
            return false;
        }
        let mut cur: ValueId = node.output;
        loop {
            let users = self.consumers(cur);
            let [u] = users.as_slice() else {
                return false;
            };
            match &self.nodes[*u].op {
                Op::BatchNorm(_) => cur = self.nodes[*u].output,
                Op::Binary(b) => return b.kind == super::BinaryKind::Add && b.constant.is_none(),
                _ => return false,
            }
        }
    }

    /// Elements per sample of tensor `id`.
    pub fn elements_per_sample(&self, id: ValueId) -> usize {
        per_sample(self.shape(id))
    }
}

fn per_sample(shape: &[usize]) -> usize {
    shape.iter().skip(1).product()
}

/// `[C, H, W]` of an NCHW shape.
fn chw(shape: &[usize]) -> [usize; 3] {
    match shape {
        [_, c, h, w] => [*c, *h, *w],
        _ => [per_sample(shape), 1, 1],
    }
}
