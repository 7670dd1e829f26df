//! The order nodes import in: each after the nodes whose outputs it reads.

use std::collections::{HashMap, HashSet};

use onnx_protobuf::NodeProto;

/// The nodes in an order where each runs after the nodes whose outputs it reads (ONNX files are
/// sorted already; some tools write them unsorted). An input no node produces (an initializer,
/// the graph input, or a dangling name the op handler reports) does not constrain the order. A
/// value produced by two nodes, or a cycle, is an error naming the nodes.
pub fn topological(nodes: &[NodeProto]) -> Result<Vec<&NodeProto>, String> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
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
    let mut ready: HashSet<&str> = HashSet::new();
    let mut done = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    while order.len() < nodes.len() {
        let waits_for = |i: usize| {
            nodes[i].input.iter().find(|x| {
                !x.is_empty() && !ready.contains(x.as_str()) && producer.contains_key(x.as_str())
            })
        };
        let Some(i) = (0..nodes.len()).find(|&i| !done[i] && waits_for(i).is_none()) else {
            let start = (0..nodes.len()).find(|&i| !done[i]).unwrap_or(0);
            return Err(cycle(nodes, &producer, &done, start));
        };
        done[i] = true;
        ready.extend(nodes[i].output.iter().map(String::as_str));
        order.push(&nodes[i]);
    }
    Ok(order)
}

/// `name (Op)` of node `i`, or `#i (Op)` for an unnamed one.
fn describe(nodes: &[NodeProto], i: usize) -> String {
    let n = &nodes[i];
    if n.name.is_empty() {
        format!("#{i} ({})", n.op_type)
    } else {
        format!("{} ({})", n.name, n.op_type)
    }
}

/// The message for a cycle among the nodes not yet placed: from `start`, follow an input that an
/// unplaced node produces until a node repeats, then list that loop.
fn cycle(
    nodes: &[NodeProto],
    producer: &HashMap<&str, usize>,
    done: &[bool],
    start: usize,
) -> String {
    let mut path: Vec<usize> = Vec::new();
    let mut at = start;
    let first = loop {
        if let Some(pos) = path.iter().position(|&p| p == at) {
            break pos;
        }
        path.push(at);
        let next = nodes[at]
            .input
            .iter()
            .filter_map(|x| producer.get(x.as_str()).copied())
            .find(|&p| !done[p]);
        match next {
            Some(p) => at = p,
            // cannot happen: an unplaced node that waits for nothing would have been placed
            None => break path.len() - 1,
        }
    };
    // path[k] reads an output of path[k + 1]; print the loop in data-flow order
    let lp: Vec<String> = path[first..]
        .iter()
        .rev()
        .map(|&i| describe(nodes, i))
        .collect();
    format!(
        "the graph has a cycle: {} → {} (each node reads the one before)",
        lp.join(" → "),
        lp[0]
    )
}
