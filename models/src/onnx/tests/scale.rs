//! Import scales linearly with the node count: chains of 100 000 nodes, listed in file order
//! and reversed, import correctly (each would take hours with a quadratic step on the way:
//! ordering, bias absorption, pruning, the summary's shortcut search).

use super::testutil::{floats, ModelBuilder, A};
use crate::ir::Op;
use crate::onnx::*;
use crate::summary::LayerRole;
use crate::Graph;

const N: usize = 100_000;

fn import(b: &ModelBuilder) -> Graph {
    let proto = decode(&b.bytes(), "chain.onnx").unwrap();
    import_proto(&proto, "chain.onnx", 2).unwrap()
}

fn reversed(mut b: ModelBuilder) -> ModelBuilder {
    b.model.graph.mut_or_insert_default().node.reverse();
    b
}

/// `x → Relu → … → Relu` (`n` nodes) on a `[N, 8]` input.
fn relu_chain(n: usize) -> ModelBuilder {
    let mut b = ModelBuilder::new(13, &[None, Some(8)]);
    let mut x = "x".to_string();
    for i in 0..n {
        let y = format!("t{i}");
        b = b.node("Relu", &format!("relu{i}"), &[&x], &[&y], vec![]);
        x = y;
    }
    b.output(&x, &[None, Some(8)])
}

#[test]
fn a_relu_chain_of_100k_nodes_imports_in_either_order() {
    for b in [relu_chain(N), reversed(relu_chain(N))] {
        let g = import(&b);
        assert_eq!(g.nodes.len(), N);
        assert!(g.nodes.iter().all(|n| n.op == Op::Relu));
        // the IR is in data-flow order whatever the file's order
        assert_eq!(g.nodes[0].name, "relu0");
        assert_eq!(g.nodes[N - 1].name, format!("relu{}", N - 1));
        assert!(g.nodes.windows(2).all(|w| w[1].inputs == [w[0].output]));
        assert_eq!(g.shape(g.output), &[2, 8]);
        assert_eq!(g.validate(), Ok(()));
    }
}

/// `MatMul` by `[8, 8]`, `Add` of a bias `[8]`, `Relu`, `layers` times on `[N, 4, 8]` (the
/// rank-3 `nn.Linear` export whose bias the importer moves into the linear layer).
fn linear_chain(layers: usize) -> ModelBuilder {
    let mut b = ModelBuilder::new(13, &[None, Some(4), Some(8)]);
    let mut x = "x".to_string();
    for i in 0..layers {
        let (w, c) = (format!("w{i}"), format!("b{i}"));
        let (m, a, r) = (format!("m{i}"), format!("a{i}"), format!("r{i}"));
        b = b
            .init(floats(&w, &[8, 8]))
            .init(floats(&c, &[8]))
            .node("MatMul", &format!("mm{i}"), &[&x, &w], &[&m], vec![])
            .node("Add", &format!("add{i}"), &[&m, &c], &[&a], vec![])
            .node("Relu", &format!("relu{i}"), &[&a], &[&r], vec![]);
        x = r;
    }
    b.output(&x, &[None, Some(4), Some(8)])
}

#[test]
fn a_linear_chain_of_100k_nodes_absorbs_every_bias_in_either_order() {
    let layers = N / 3;
    for b in [linear_chain(layers), reversed(linear_chain(layers))] {
        let g = import(&b);
        // each Add became its linear layer's bias and was pruned
        assert_eq!(g.nodes.len(), 2 * layers);
        let linears = g.nodes.iter().filter(|n| match &n.op {
            Op::Linear(l) => l.bias.as_ref().is_some_and(|b| b.shape() == [8]),
            _ => false,
        });
        assert_eq!(linears.count(), layers);
        let s = g.summary();
        assert_eq!(s.layers.len(), layers);
        assert!(s.layers.iter().all(|l| l.macs == 4 * 8 * 8));
        assert_eq!(s.params, (layers * (64 + 8)) as u64);
        assert_eq!(g.validate(), Ok(()));
    }
}

/// `x` feeds a 100 000-node chain nobody reads, and one `Sigmoid` that is the output.
fn dead_branch() -> ModelBuilder {
    let mut b = relu_chain(N);
    b.model.graph.mut_or_insert_default().output.clear();
    b.node("Sigmoid", "out", &["x"], &["y"], vec![])
        .output("y", &[None, Some(8)])
}

#[test]
fn a_dead_branch_of_100k_nodes_is_pruned() {
    for b in [dead_branch(), reversed(dead_branch())] {
        let g = import(&b);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].op, Op::Sigmoid);
    }
}

#[test]
fn the_summary_finds_50k_residual_projections_in_a_100k_node_graph() {
    // x → Conv 1×1 → Add(·, x) → …: every conv's input also feeds the Add, its output reaches
    // the Add directly: a projection on a residual shortcut.
    let blocks = N / 2;
    let mut b = ModelBuilder::new(13, &[None, Some(2), Some(1), Some(1)]);
    let mut x = "x".to_string();
    for i in 0..blocks {
        let (w, c, a) = (format!("w{i}"), format!("c{i}"), format!("a{i}"));
        b = b
            .init(floats(&w, &[2, 2, 1, 1]))
            .node(
                "Conv",
                &format!("conv{i}"),
                &[&x, &w],
                &[&c],
                vec![("kernel_shape", A::Is(vec![1, 1]))],
            )
            .node("Add", &format!("add{i}"), &[&c, &x], &[&a], vec![]);
        x = a;
    }
    let b = b.output(&x, &[None, Some(2), Some(1), Some(1)]);
    let s = import(&b).summary();
    assert_eq!(s.layers.len(), blocks);
    let roles: Vec<LayerRole> = s.layers.iter().map(|l| l.role).collect();
    assert_eq!(roles[0], LayerRole::First);
    assert_eq!(roles[blocks - 1], LayerRole::Last);
    assert!(roles[1..blocks - 1]
        .iter()
        .all(|&r| r == LayerRole::Shortcut));
    assert_eq!(s.residual_elements, (blocks * 2) as u64);
}
