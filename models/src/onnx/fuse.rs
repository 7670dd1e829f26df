//! Rewrites, before import, of op chains that older exporters emit for one PyTorch module into the
//! single ONNX op the importer maps: the decomposed layer norm (opset < 17) and the `Erf` form of
//! GELU (opset < 20). A chain is fused only when every intermediate tensor feeds nothing else;
//! otherwise the nodes stay as they are (and import fails on the op it has no handler for).
//!
//! - `ReduceMean(x) → Sub(x, ·) = d → Pow(d, 2) | Mul(d, d) → ReduceMean → Add(·, ε) → Sqrt →
//!   Div(d, ·)` [`→ Mul(·, γ)` [`→ Add(·, β)`]] becomes `LayerNormalization(x, γ, β)` with
//!   `epsilon = ε` and `axis` the reduced one (a missing γ is read as ones).
//! - `Div(x, √2) | Mul(x, 1/√2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5)` (the two `Mul`s in
//!   either order) becomes `Gelu(x)`.
//! - The tanh form (GPT-2's `NewGELUActivation`, `F.gelu(approximate="tanh")` before opset 20):
//!   `Pow(x, 3) → Mul(·, 0.044715) → Add(x, ·) → Mul(·, √(2/π)) → Tanh → Add(·, 1)`, then
//!   `Mul(Mul(x, 0.5), ·)` or `Mul(x, ·) → Mul(·, 0.5)`, becomes `Gelu(x, approximate="tanh")`.
//! - `Where(IsNaN(p), c, p)` for a constant `c` (the dynamo exporter's scaled-dot-product
//!   attention zeroes NaN probabilities after its softmax) becomes `Identity(p)`: the IR's
//!   softmax makes no NaN (its causal masks keep every row's diagonal), and a NaN anywhere else
//!   is an error of its own.
//! - Stochastic depth as a training-mode export draws it (torchvision's `StochasticDepth`,
//!   `bernoulli_(p) / p`): `RandomUniformLike → Less(·, t) → Cast → Div(·, d) → Mul(x, ·)` whose
//!   mask has expectation 1 (`P(u < t) = d`) becomes `Identity(x)`, the layer's expectation and
//!   its evaluation-mode value: cptsim trains such a network without stochastic depth.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, NodeProto, TensorProto, ValueInfoProto};

use super::node::read_attr;
use super::ops::constant;
use super::tensor;

/// The graph's nodes with the fusable chains replaced (file order otherwise kept); the nodes
/// that stay are borrowed, not copied.
pub fn fuse<'a>(
    nodes: &'a [NodeProto],
    initializers: &'a [TensorProto],
    outputs: &'a [ValueInfoProto],
) -> Vec<Cow<'a, NodeProto>> {
    // Every fused chain starts at one of these: without one, nothing to index.
    let starts = ["Erf", "Tanh", "IsNaN", "ReduceMean", "RandomUniformLike"];
    if !nodes.iter().any(|n| starts.contains(&n.op_type.as_str())) {
        return nodes.iter().map(Cow::Borrowed).collect();
    }
    let g = Chains::new(nodes, initializers, outputs);
    let mut replaced: HashMap<usize, NodeProto> = HashMap::new();
    let mut dropped = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let found = match n.op_type.as_str() {
            "Erf" => g.gelu(i),
            "Tanh" => g.gelu_tanh(i),
            "IsNaN" => g.nan_to_constant(i),
            "ReduceMean" => g.layer_norm(i),
            "RandomUniformLike" => g.stochastic_depth(i),
            _ => None,
        };
        let Some((remove, last, mut fused)) = found else {
            continue;
        };
        // The fused node keeps where the replaced one came from (its PyTorch module).
        fused.metadata_props = nodes[last].metadata_props.clone();
        if remove
            .iter()
            .chain([&last])
            .any(|&k| dropped[k] || replaced.contains_key(&k))
        {
            continue;
        }
        for k in remove {
            dropped[k] = true;
        }
        replaced.insert(last, fused);
    }
    nodes
        .iter()
        .enumerate()
        .filter(|(k, _)| !dropped[*k])
        .map(|(k, n)| replaced.remove(&k).map_or(Cow::Borrowed(n), Cow::Owned))
        .collect()
}

/// A fused chain: the nodes it removes, the node it replaces, the replacement.
type Found = (Vec<usize>, usize, NodeProto);

struct Chains<'a> {
    nodes: &'a [NodeProto],
    producer: HashMap<&'a str, usize>,
    consumers: HashMap<&'a str, Vec<usize>>,
    graph_outputs: HashSet<&'a str>,
    initializers: HashMap<&'a str, &'a TensorProto>,
}

impl<'a> Chains<'a> {
    fn new(
        nodes: &'a [NodeProto],
        initializers: &'a [TensorProto],
        outputs: &'a [ValueInfoProto],
    ) -> Self {
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            for o in &n.output {
                producer.insert(o.as_str(), i);
            }
            for x in n.input.iter().filter(|x| !x.is_empty()) {
                consumers.entry(x.as_str()).or_default().push(i);
            }
        }
        Chains {
            nodes,
            producer,
            consumers,
            graph_outputs: outputs.iter().map(|o| o.name.as_str()).collect(),
            initializers: initializers.iter().map(|t| (t.name.as_str(), t)).collect(),
        }
    }

    fn out(&self, i: usize) -> &'a str {
        self.nodes[i].output.first().map_or("", String::as_str)
    }

    /// The single node reading node `i`'s output, when it is of type `op` and the output is no
    /// graph output.
    fn only_consumer(&self, i: usize, op: &str) -> Option<usize> {
        let out = self.out(i);
        if self.graph_outputs.contains(out) {
            return None;
        }
        match self.consumers.get(out).map(Vec::as_slice) {
            Some([c]) if self.nodes[*c].op_type == op => Some(*c),
            _ => None,
        }
    }

    /// The node producing `name`, when it is of type `op`.
    fn made_by(&self, name: &str, op: &str) -> Option<usize> {
        self.producer
            .get(name)
            .copied()
            .filter(|&p| self.nodes[p].op_type == op)
    }

    /// The value of a one-element constant (an initializer or a `Constant` node's output);
    /// larger initializers are not decoded.
    fn scalar(&self, name: &str) -> Option<f32> {
        let c = match self.initializers.get(name) {
            Some(t) if t.dims.iter().any(|&d| d != 1) => return None,
            Some(t) => tensor::decode(t).ok()?,
            None => constant::value_of(&self.nodes[self.made_by(name, "Constant")?]).ok()?,
        };
        match c.floats().as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The input of binary node `i` other than `name`.
    fn other(&self, i: usize, name: &str) -> Option<&'a str> {
        match self.nodes[i].input.as_slice() {
            [a, b] if a == name => Some(b.as_str()),
            [a, b] if b == name => Some(a.as_str()),
            _ => None,
        }
    }

    /// Whether `name` is a one-element constant within `tol` of `want`.
    fn is_const(&self, name: &str, want: f32, tol: f32) -> bool {
        self.scalar(name).is_some_and(|v| (v - want).abs() <= tol)
    }

    /// GELU from its `Erf` node `e`.
    fn gelu(&self, e: usize) -> Option<Found> {
        let d = self.nodes[e].input.first()?;
        let scale = self.producer.get(d.as_str()).copied()?;
        let sn = &self.nodes[scale];
        let x = match (sn.op_type.as_str(), sn.input.as_slice()) {
            ("Div", [x, c]) if self.is_const(c, std::f32::consts::SQRT_2, 1e-3) => x,
            ("Mul", [x, c]) | ("Mul", [c, x])
                if self.is_const(c, std::f32::consts::FRAC_1_SQRT_2, 1e-3) =>
            {
                x
            }
            _ => return None,
        };
        self.only_consumer(scale, "Erf")?;
        let add = self.only_consumer(e, "Add")?;
        if !self.is_const(self.other(add, self.out(e))?, 1.0, 1e-6) {
            return None;
        }
        let m1 = self.only_consumer(add, "Mul")?;
        let m2 = self.only_consumer(m1, "Mul")?;
        let a = self.other(m1, self.out(add))?;
        let b = self.other(m2, self.out(m1))?;
        let ok = (a == x && self.is_const(b, 0.5, 1e-6)) || (b == x && self.is_const(a, 0.5, 1e-6));
        if !ok {
            return None;
        }
        let last = &self.nodes[m2];
        let fused = node(
            "Gelu",
            &last.name,
            vec![x.clone()],
            last.output.clone(),
            vec![string_attr("approximate", "none")],
        );
        Some((vec![scale, e, add, m1], m2, fused))
    }

    /// Tanh-form GELU from its `Tanh` node `t`.
    fn gelu_tanh(&self, t: usize) -> Option<Found> {
        const SQRT_2_OVER_PI: f32 = 0.797_884_6;
        let s = self.made_by(self.nodes[t].input.first()?, "Mul")?;
        let a_out = self.other_const(s, SQRT_2_OVER_PI, 1e-4)?;
        let a = self.made_by(a_out, "Add")?;
        let [p_in, q_in] = self.nodes[a].input.as_slice() else {
            return None;
        };
        // Add(x, Mul(Pow(x, 3), 0.044715)), either operand order.
        let (x, m) = [(p_in, q_in), (q_in, p_in)]
            .into_iter()
            .find_map(|(x, m)| {
                let m = self.made_by(m, "Mul")?;
                let p = self.made_by(self.other_const(m, 0.044_715, 1e-5)?, "Pow")?;
                let [base, exp] = self.nodes[p].input.as_slice() else {
                    return None;
                };
                (base == x && self.is_const(exp, 3.0, 0.0)).then_some((x, (m, p)))
            })?;
        let (m, p) = m;
        for (from, to) in [(p, m), (m, a), (a, s), (s, t)] {
            (self.only_consumer(from, &self.nodes[to].op_type)? == to).then_some(())?;
        }
        let one = self.only_consumer(t, "Add")?;
        if !self.is_const(self.other(one, self.out(t))?, 1.0, 1e-6) {
            return None;
        }
        let m1 = self.only_consumer(one, "Mul")?;
        let other = self.other(m1, self.out(one))?;
        let mut remove = vec![p, m, a, s, t, one];
        let last = if other == x.as_str() {
            // Mul(x, ·) → Mul(·, 0.5)
            let m2 = self.only_consumer(m1, "Mul")?;
            self.is_const(self.other(m2, self.out(m1))?, 0.5, 1e-6)
                .then_some(())?;
            remove.push(m1);
            m2
        } else {
            // Mul(Mul(x, 0.5), ·)
            let h = self.made_by(other, "Mul")?;
            (self.other_const(h, 0.5, 1e-6)? == x.as_str()).then_some(())?;
            (self.only_consumer(h, "Mul")? == m1).then_some(())?;
            remove.push(h);
            m1
        };
        let node_last = &self.nodes[last];
        let fused = node(
            "Gelu",
            &node_last.name,
            vec![x.clone()],
            node_last.output.clone(),
            vec![string_attr("approximate", "tanh")],
        );
        Some((remove, last, fused))
    }

    /// `Where(IsNaN(p), c, p)` from its `IsNaN` node `i`.
    fn nan_to_constant(&self, i: usize) -> Option<Found> {
        let p = self.nodes[i].input.first()?;
        let w = self.only_consumer(i, "Where")?;
        let wn = &self.nodes[w];
        match wn.input.as_slice() {
            [cond, c, x] if cond == self.out(i) && x == p && self.scalar(c).is_some() => {}
            _ => return None,
        }
        let fused = node(
            "Identity",
            &wn.name,
            vec![p.clone()],
            wn.output.clone(),
            vec![],
        );
        Some((vec![i], w, fused))
    }

    /// Stochastic depth `x · (Cast(Less(RandomUniformLike(·), t)) / d)` from its
    /// `RandomUniformLike` node `r`, when the mask's expectation `P(u < t) / d` is 1.
    fn stochastic_depth(&self, r: usize) -> Option<Found> {
        let rn = &self.nodes[r];
        let low = read_attr::<f32>(rn, "low").ok()?.unwrap_or(0.0);
        let high = read_attr::<f32>(rn, "high").ok()?.unwrap_or(1.0);
        let less = self.only_consumer(r, "Less")?;
        let t = match self.nodes[less].input.as_slice() {
            [u, t] if u == self.out(r) => self.scalar(t)?,
            _ => return None,
        };
        let cast = self.only_consumer(less, "Cast")?;
        let div = self.only_consumer(cast, "Div")?;
        let d = match self.nodes[div].input.as_slice() {
            [m, d] if m == self.out(cast) => self.scalar(d)?,
            _ => return None,
        };
        let mul = self.only_consumer(div, "Mul")?;
        let x = self.other(mul, self.out(div))?;
        let kept = ((t - low) / (high - low)).clamp(0.0, 1.0);
        if !(high > low && d > 0.0 && (kept / d - 1.0).abs() <= 1e-6) {
            return None;
        }
        let mn = &self.nodes[mul];
        let fused = node(
            "Identity",
            &mn.name,
            vec![x.to_string()],
            mn.output.clone(),
            vec![],
        );
        Some((vec![r, less, cast, div], mul, fused))
    }

    /// The input of binary node `i` beside a one-element constant within `tol` of `want`.
    fn other_const(&self, i: usize, want: f32, tol: f32) -> Option<&'a str> {
        match self.nodes[i].input.as_slice() {
            [a, c] | [c, a] if self.is_const(c, want, tol) => Some(a.as_str()),
            _ => None,
        }
    }

    /// The single reduced axis of a `ReduceMean` (attribute or input 1), with keepdims on. An
    /// invalid attribute leaves the chain unfused, for the `ReduceMean` handler to report.
    fn mean_axis(&self, i: usize) -> Option<i64> {
        let n = &self.nodes[i];
        if !read_attr(n, "keepdims").ok()?.unwrap_or(true) {
            return None;
        }
        let axes = match read_attr::<Vec<i64>>(n, "axes").ok()? {
            Some(a) => a,
            None => {
                let name = n.input.get(1)?;
                let t = self.initializers.get(name.as_str())?;
                tensor::decode(t).ok()?.ints()
            }
        };
        match axes.as_slice() {
            [a] => Some(*a),
            _ => None,
        }
    }

    /// A layer norm from its first `ReduceMean` node `m` (the mean of `x`).
    fn layer_norm(&self, m: usize) -> Option<Found> {
        let axis = self.mean_axis(m)?;
        let x = self.nodes[m].input.first()?;
        let sub = self.only_consumer(m, "Sub")?;
        if self.nodes[sub].input.as_slice() != [x.clone(), self.out(m).to_string()] {
            return None;
        }
        let d = self.out(sub);
        // d feeds the square and the division.
        let users = self.consumers.get(d)?;
        let (sq, div) = match users.as_slice() {
            [a, b] if self.nodes[*b].op_type == "Div" => (*a, *b),
            [a, b] if self.nodes[*a].op_type == "Div" => (*b, *a),
            _ => return None,
        };
        let sqn = &self.nodes[sq];
        let squares = match (sqn.op_type.as_str(), sqn.input.as_slice()) {
            ("Pow", [a, p]) => a == d && self.is_const(p, 2.0, 0.0),
            ("Mul", [a, b]) => a == d && b == d,
            _ => false,
        };
        if !squares || self.nodes[div].input.first().map(String::as_str) != Some(d) {
            return None;
        }
        let var = self.only_consumer(sq, "ReduceMean")?;
        if self.mean_axis(var)? != axis {
            return None;
        }
        let add = self.only_consumer(var, "Add")?;
        let eps = self.scalar(self.other(add, self.out(var))?)?;
        let sqrt = self.only_consumer(add, "Sqrt")?;
        if self.only_consumer(sqrt, "Div")? != div {
            return None;
        }
        let mut chain = vec![m, sub, sq, var, add, sqrt];
        let mut last = div;
        let mut inputs = vec![x.clone(), String::new()];
        if let Some(mul) = self.only_consumer(div, "Mul") {
            inputs[1] = self.other(mul, self.out(div))?.to_string();
            chain.push(last);
            last = mul;
            if let Some(bias) = self.only_consumer(mul, "Add") {
                inputs.push(self.other(bias, self.out(mul))?.to_string());
                chain.push(last);
                last = bias;
            }
        }
        let ln = &self.nodes[last];
        let attrs = vec![int_attr("axis", axis), float_attr("epsilon", eps)];
        let fused = node(
            "LayerNormalization",
            &ln.name,
            inputs,
            ln.output.clone(),
            attrs,
        );
        Some((chain, last, fused))
    }
}

fn node(
    op: &str,
    name: &str,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: op.to_string(),
        name: name.to_string(),
        input: inputs,
        output: outputs,
        attribute: attrs,
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        i: v,
        type_: AttributeType::INT.into(),
        ..Default::default()
    }
}

fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        f: v,
        type_: AttributeType::FLOAT.into(),
        ..Default::default()
    }
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        s: v.as_bytes().to_vec(),
        type_: AttributeType::STRING.into(),
        ..Default::default()
    }
}
