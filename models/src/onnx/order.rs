//! The order nodes import in: each after the nodes whose outputs it reads.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use onnx_protobuf::NodeProto;

/// The nodes in an order where each runs after the nodes whose outputs it reads (ONNX files are
/// sorted already; some tools write them unsorted): of the nodes whose inputs are all available,
/// the one first in the file goes first, so a sorted file keeps its order. An input no node
/// produces (an initializer, the graph input, or a dangling name the op handler reports) does
/// not constrain the order. A value produced by two nodes, or a cycle, is an error naming the
/// nodes. Time O(E log V) for V nodes reading E produced values.
pub fn topological<'a>(nodes: &[&'a NodeProto]) -> Result<Vec<&'a NodeProto>, String> {
    sort(nodes).map(|(order, _)| order)
}

/// [`topological`], by Kahn's algorithm with the ready nodes in a min-heap of file positions;
/// also returns how many producer → reader edges it followed (each once).
fn sort<'a>(nodes: &[&'a NodeProto]) -> Result<(Vec<&'a NodeProto>, usize), String> {
    let producer = producers(nodes)?;
    // waiting[i]: inputs of node i whose producer is not placed yet; readers[p]: nodes reading
    // an output of node p (once per input read).
    let mut waiting = vec![0usize; nodes.len()];
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for x in n.input.iter().filter(|x| !x.is_empty()) {
            if let Some(&p) = producer.get(x.as_str()) {
                waiting[i] += 1;
                readers[p].push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut placed = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    let mut followed = 0;
    while let Some(Reverse(i)) = ready.pop() {
        placed[i] = true;
        order.push(nodes[i]);
        for &r in &readers[i] {
            followed += 1;
            waiting[r] -= 1;
            if waiting[r] == 0 {
                ready.push(Reverse(r));
            }
        }
    }
    if let Some(start) = placed.iter().position(|&p| !p) {
        return Err(cycle(nodes, &producer, &placed, start));
    }
    Ok((order, followed))
}

/// The node producing each (non-empty) value name; a value produced twice is an error.
fn producers<'a>(nodes: &[&'a NodeProto]) -> Result<HashMap<&'a str, usize>, String> {
    let mut producer: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(&first) = producer.get(out.as_str()) {
                return Err(format!(
                    "value '{out}' is produced by two nodes, {} and {}",
                    describe(nodes, first),
                    describe(nodes, i)
                ));
            }
            producer.insert(out, i);
        }
    }
    Ok(producer)
}

/// `name (Op)` of node `i`, or `#i (Op)` for an unnamed one.
fn describe(nodes: &[&NodeProto], i: usize) -> String {
    let n = nodes[i];
    if n.name.is_empty() {
        format!("#{i} ({})", n.op_type)
    } else {
        format!("{} ({})", n.name, n.op_type)
    }
}

/// Loops of more nodes than this are listed by their first and last nodes.
const LISTED: usize = 12;

/// The message for a cycle among the nodes not placed: from `start`, follow an input that an
/// unplaced node produces until a node repeats, then list that loop (each node is visited at
/// most once).
fn cycle(
    nodes: &[&NodeProto],
    producer: &HashMap<&str, usize>,
    placed: &[bool],
    start: usize,
) -> String {
    let mut path: Vec<usize> = Vec::new();
    let mut on_path = vec![None; nodes.len()];
    let mut at = start;
    let first = loop {
        if let Some(pos) = on_path[at] {
            break pos;
        }
        on_path[at] = Some(path.len());
        path.push(at);
        let next = nodes[at]
            .input
            .iter()
            .filter_map(|x| producer.get(x.as_str()).copied())
            .find(|&p| !placed[p]);
        match next {
            Some(p) => at = p,
            // cannot happen: an unplaced node that waits for nothing would have been placed
            None => break path.len() - 1,
        }
    };
    // path[k] reads an output of path[k + 1]; print the loop in data-flow order
    let lp: Vec<usize> = path[first..].iter().rev().copied().collect();
    let names = |ks: &[usize]| -> Vec<String> { ks.iter().map(|&k| describe(nodes, k)).collect() };
    let listed = if lp.len() <= LISTED {
        names(&lp).join(" → ")
    } else {
        let (head, tail) = (&lp[..LISTED - 3], &lp[lp.len() - 3..]);
        format!(
            "{} → … ({} more nodes) … → {}",
            names(head).join(" → "),
            lp.len() - LISTED,
            names(tail).join(" → ")
        )
    };
    format!(
        "the graph has a cycle{}: {listed} → {} (each node reads the one before)",
        if lp.len() > LISTED {
            format!(" of {} nodes", lp.len())
        } else {
            String::new()
        },
        describe(nodes, lp[0])
    )
}

/// The nodes the first graph output needs, in their order. Further graph outputs (the hidden
/// state a word-language-model returns beside its logits) are not computed: the nodes only they
/// need are dropped, which is an error when one of those multiplies (a second head would lose
/// its MACs), naming the output and node.
pub fn needed_for_first_output<'a>(
    nodes: &[&'a NodeProto],
    outputs: &[onnx_protobuf::ValueInfoProto],
) -> Result<Vec<&'a NodeProto>, String> {
    let producer: std::collections::HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
        .collect();
    let reach = |from: &str| {
        let mut seen = vec![false; nodes.len()];
        let mut stack: Vec<usize> = producer.get(from).copied().into_iter().collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            stack.extend(
                nodes[i]
                    .input
                    .iter()
                    .filter_map(|x| producer.get(x.as_str())),
            );
        }
        seen
    };
    let Some(first) = outputs.first() else {
        return Ok(nodes.to_vec());
    };
    let main = reach(&first.name);
    for extra in &outputs[1..] {
        if !producer.contains_key(extra.name.as_str()) {
            return Err(format!(
                "graph output '{}' is not produced by any node",
                extra.name
            ));
        }
        let reached = reach(&extra.name);
        let gemm = reached.iter().enumerate().find(|&(i, &r)| {
            r && !main[i]
                && matches!(
                    nodes[i].op_type.as_str(),
                    "Conv"
                        | "ConvTranspose"
                        | "Gemm"
                        | "MatMul"
                        | "Einsum"
                        | "LSTM"
                        | "GRU"
                        | "RNN"
                )
        });
        if let Some((i, _)) = gemm {
            return Err(format!(
                "graph output '{}' needs node {} ({}) that the first output '{}' does not: \
                 only one output is costed (export the model with one output)",
                extra.name, nodes[i].name, nodes[i].op_type, first.name
            ));
        }
    }
    Ok(nodes
        .iter()
        .zip(main)
        .filter_map(|(n, keep)| keep.then_some(*n))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes `r{i}` reading `v{i}` and writing `v{i+1}`, for each `i` of `order`, in that order.
    fn chain(order: impl Iterator<Item = usize>) -> Vec<NodeProto> {
        order
            .map(|i| NodeProto {
                op_type: "Relu".into(),
                name: format!("r{i}"),
                input: vec![format!("v{i}")],
                output: vec![format!("v{}", i + 1)],
                ..Default::default()
            })
            .collect()
    }

    fn names(order: &[&NodeProto]) -> Vec<String> {
        order.iter().map(|n| n.name.clone()).collect()
    }

    #[test]
    fn a_long_chain_sorts_in_any_order_following_each_edge_once() {
        let n = 100_000;
        let want: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
        // forward, reversed, and interleaved (even positions first, then the odd ones)
        let orders: [Vec<usize>; 3] = [
            (0..n).collect(),
            (0..n).rev().collect(),
            (0..n).step_by(2).chain((1..n).step_by(2)).collect(),
        ];
        for o in orders {
            let nodes = chain(o.into_iter());
            let refs: Vec<&NodeProto> = nodes.iter().collect();
            let (order, followed) = sort(&refs).unwrap();
            assert_eq!(names(&order), want);
            // n − 1 produced values are read, once each
            assert_eq!(followed, n - 1);
        }
    }

    #[test]
    fn ready_nodes_keep_their_file_order() {
        // two independent chains interleaved in the file: the file order is already valid
        let r = chain(0..3);
        let mut s = chain(0..3);
        for (k, n) in s.iter_mut().enumerate() {
            n.name = format!("s{k}");
            n.input[0] = format!("w{k}");
            n.output[0] = format!("w{}", k + 1);
        }
        let refs = [&s[0], &r[0], &s[1], &r[1], &r[2], &s[2]];
        let sorted = topological(&refs).unwrap();
        assert_eq!(names(&sorted), ["s0", "r0", "s1", "r1", "r2", "s2"]);
    }

    #[test]
    fn a_long_cycle_is_found_and_listed_briefly() {
        let n = 100_000;
        let mut nodes = chain(0..n);
        nodes[0].input[0] = format!("v{n}");
        let refs: Vec<&NodeProto> = nodes.iter().collect();
        let e = topological(&refs).unwrap_err();
        assert!(
            e.starts_with(
                "the graph has a cycle of 100000 nodes: r1 (Relu) → r2 (Relu) → r3 (Relu)"
            ),
            "{e}"
        );
        assert!(
            e.ends_with(
                "r9 (Relu) → … (99988 more nodes) … → r99998 (Relu) → r99999 (Relu) → r0 (Relu) \
                 → r1 (Relu) (each node reads the one before)"
            ),
            "{e}"
        );
        // a short cycle is listed whole
        let mut nodes = chain(0..2);
        nodes[0].input[0] = "v2".into();
        let refs: Vec<&NodeProto> = nodes.iter().collect();
        assert_eq!(
            topological(&refs).unwrap_err(),
            "the graph has a cycle: r1 (Relu) → r0 (Relu) → r1 (Relu) (each node reads the one \
             before)"
        );
    }
}
