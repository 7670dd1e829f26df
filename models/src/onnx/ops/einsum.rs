//! `Einsum` of two run-time operands in the forms attention uses (`bhid,bhjd->bhij`,
//! `bhij,bhjd->bhid`, `bij,bjk->bik`, any letters and order): every letter is a batch axis (in
//! both operands and the output), a contracted axis (in both operands only) or a free axis of
//! one operand (and the output). It becomes a batched `MatMul` between the `Transpose`s and
//! `Reshape`s that bring the operands to `[batch…, M, K]` and `[batch…, K, N]` and the product
//! to the output's order, so its MACs are the matmul's. Ellipses, repeated letters (diagonals),
//! letters summed within one operand and other operand counts are errors naming the node.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use crate::error::ModelError;
use crate::ir::{Op, ValueId};

/// Registers `Einsum`.
pub fn register(reg: &mut Registry) {
    reg.insert("Einsum", einsum);
}

/// The equation's operand terms and output term, explicit (`->`) or implicit (the letters
/// that occur once, in alphabetical order).
fn parse(node: &NodeView, eq: &str) -> Result<(Vec<Vec<char>>, Vec<char>), ModelError> {
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(node.attr_error("equation", format!("'{eq}': ellipses are not supported")));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let out: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut once: Vec<char> = terms
                .iter()
                .flatten()
                .copied()
                .filter(|c| terms.iter().flatten().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    for t in terms.iter().chain([&out]) {
        if let Some(c) = t.iter().find(|c| !c.is_ascii_alphabetic()) {
            return Err(node.attr_error("equation", format!("'{eq}': '{c}' is not a letter")));
        }
        if t.iter().enumerate().any(|(i, c)| t[..i].contains(c)) {
            return Err(node.attr_error(
                "equation",
                format!("'{eq}': a letter repeated within a term (a diagonal) is not supported"),
            ));
        }
    }
    Ok((terms, out))
}

/// Adds IR node `NODE/what` with output of the same name and returns the output.
fn step(
    imp: &mut Importer,
    node: &NodeView,
    what: &str,
    op: Op,
    inputs: Vec<ValueId>,
) -> Result<ValueId, ModelError> {
    let name = format!("{}/{what}", node.name);
    match imp.push_named(node, &name, op, inputs, &name)? {
        Val::Tensor(v) => Ok(v),
        Val::Const(_) => Err(node.err("internal: a run-time op produced a constant")),
    }
}

/// `x` with its axes reordered to `order` (letters of `term`) and reshaped to `shape`; no node
/// for a step that changes nothing.
fn arrange(
    imp: &mut Importer,
    node: &NodeView,
    what: &str,
    x: ValueId,
    term: &[char],
    order: &[char],
    shape: Vec<usize>,
) -> Result<ValueId, ModelError> {
    let perm: Vec<usize> = order
        .iter()
        .filter_map(|c| term.iter().position(|t| t == c))
        .collect();
    let mut v = x;
    if perm.iter().enumerate().any(|(i, &p)| i != p) {
        v = step(
            imp,
            node,
            &format!("{what}_transpose"),
            Op::Transpose { perm },
            vec![v],
        )?;
    }
    if imp.shape(v) != shape {
        v = step(
            imp,
            node,
            &format!("{what}_reshape"),
            Op::Reshape { shape },
            vec![v],
        )?;
    }
    Ok(v)
}

/// `Einsum(A, B)` as a batched matmul.
fn einsum(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let eq: String = node.attr("equation")?;
    let (terms, out) = parse(node, &eq)?;
    let [ta, tb] = &terms[..] else {
        return Err(node.attr_error(
            "equation",
            format!("'{eq}': {} operands (only two are supported)", terms.len()),
        ));
    };
    let (a, b) = (imp.tensor(node, 0)?, imp.tensor(node, 1)?);
    let (sa, sb) = (imp.shape(a), imp.shape(b));
    if sa.len() != ta.len() || sb.len() != tb.len() {
        return Err(node.err(format!(
            "'{eq}' does not fit operands of shapes {sa:?} and {sb:?}"
        )));
    }
    let size = |c: char| -> Result<usize, ModelError> {
        let da = ta.iter().position(|&t| t == c).map(|i| sa[i]);
        let db = tb.iter().position(|&t| t == c).map(|i| sb[i]);
        match (da, db) {
            (Some(x), Some(y)) if x != y => Err(node.err(format!(
                "'{eq}': letter '{c}' is {x} in A but {y} in B (broadcasting is not supported)"
            ))),
            (Some(x), _) | (None, Some(x)) => Ok(x),
            (None, None) => Err(node.err(format!("'{eq}': output letter '{c}' is in no operand"))),
        }
    };
    let in_a = |c: &char| ta.contains(c);
    let in_b = |c: &char| tb.contains(c);
    let in_out = |c: &char| out.contains(c);
    if let Some(c) = ta
        .iter()
        .chain(tb)
        .find(|c| !in_out(c) && !(in_a(c) && in_b(c)))
    {
        return Err(node.attr_error(
            "equation",
            format!("'{eq}': '{c}' is summed within one operand (not supported)"),
        ));
    }
    let batch: Vec<char> = out.iter().copied().filter(|c| in_a(c) && in_b(c)).collect();
    let free_a: Vec<char> = ta.iter().copied().filter(|c| !in_b(c)).collect();
    let free_b: Vec<char> = tb.iter().copied().filter(|c| !in_a(c)).collect();
    let contr: Vec<char> = ta
        .iter()
        .copied()
        .filter(|c| in_b(c) && !in_out(c))
        .collect();
    let prod = |cs: &[char]| -> Result<usize, ModelError> {
        cs.iter().try_fold(1usize, |acc, &c| {
            acc.checked_mul(size(c)?)
                .ok_or_else(|| node.err(format!("'{eq}': sizes overflow")))
        })
    };
    let batch_dims = batch
        .iter()
        .map(|&c| size(c))
        .collect::<Result<Vec<_>, _>>()?;
    let (m, n, k) = (prod(&free_a)?, prod(&free_b)?, prod(&contr)?);
    let with = |tail: &[usize]| [batch_dims.as_slice(), tail].concat();
    let order_a = [batch.as_slice(), &free_a, &contr].concat();
    let order_b = [batch.as_slice(), &contr, &free_b].concat();
    let a2 = arrange(imp, node, "a", a, ta, &order_a, with(&[m, k]))?;
    let b2 = arrange(imp, node, "b", b, tb, &order_b, with(&[k, n]))?;
    // The product [batch…, M, N] as [batch…, free_a…, free_b…], then in the output's order.
    let got = [batch.as_slice(), &free_a, &free_b].concat();
    let full = got
        .iter()
        .map(|&c| size(c))
        .collect::<Result<Vec<_>, _>>()?;
    let perm: Vec<usize> = out
        .iter()
        .filter_map(|c| got.iter().position(|g| g == c))
        .collect();
    let mut post = Vec::new();
    if full != with(&[m, n]) {
        post.push(Op::Reshape { shape: full });
    }
    if perm.iter().enumerate().any(|(i, &p)| i != p) {
        post.push(Op::Transpose { perm });
    }
    let Some(last) = post.pop() else {
        return imp.push(node, Op::MatMul, vec![a2, b2]);
    };
    let mut v = step(imp, node, "matmul", Op::MatMul, vec![a2, b2])?;
    for (i, op) in post.into_iter().enumerate() {
        v = step(imp, node, &format!("out{i}"), op, vec![v])?;
    }
    imp.push(node, last, vec![v])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(proto: &onnx_protobuf::NodeProto) -> NodeView<'_> {
        NodeView {
            proto,
            name: "e".into(),
            label: "e".into(),
            file: "t.onnx",
            opset: 12,
        }
    }

    #[test]
    fn equations_parse_explicit_and_implicit() {
        let p = onnx_protobuf::NodeProto::new();
        let (t, o) = parse(&view(&p), "bhid, bhjd -> bhij").unwrap();
        assert_eq!(t, [vec!['b', 'h', 'i', 'd'], vec!['b', 'h', 'j', 'd']]);
        assert_eq!(o, ['b', 'h', 'i', 'j']);
        let (_, o) = parse(&view(&p), "ij,jk").unwrap();
        assert_eq!(o, ['i', 'k']);
        assert!(parse(&view(&p), "...ij,jk").is_err());
        assert!(parse(&view(&p), "ii,ij->j").is_err());
    }
}
