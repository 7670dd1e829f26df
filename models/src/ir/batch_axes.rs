//! Where the batch sits in each tensor of a graph, followed from the input through every op.
//!
//! A reshape whose target the export pinned at one batch is rebound at run time for the batch it
//! sees ([`super::rebatch`]). Element counts alone cannot always tell which target axis carries
//! the batch: Swin's window partition merges the batch with the windows (`[N·nW, 64, C]`) and
//! splits it back (`[N, H/8, W/8, 8, 8, C]`); at batch 2 with 2×2 windows, two target axes hold
//! 2. Following the batch from the input settles it: a reshape keeps the row-major stride of one
//! batch step (the element order does not change), a transpose moves the batch's axis, and the
//! other ops keep it where it was.

use super::rebatch::covering_axes;
use super::{Graph, Node, Op, ValueId};

/// The batch in a tensor: axis `axis`, of size `outer · batch · inner` (`inner` > 1 where the
/// batch is merged with a factor below it, as Swin's `[N·nW]`: inner = nW).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchAt {
    /// The axis holding the batch.
    pub axis: usize,
    /// The factor of that axis below the batch.
    pub inner: usize,
}

impl BatchAt {
    /// The row-major stride of one step of the batch in a tensor of `shape` (`None` on
    /// overflow or an axis `shape` does not have).
    pub fn stride(self, shape: &[usize]) -> Option<usize> {
        let below = shape.get(self.axis + 1..)?;
        below.iter().try_fold(self.inner, |a, &d| a.checked_mul(d))
    }

    /// The batch after a reshape of `from` to `to` (same element order): the axis of `to` whose
    /// row-major span covers the batch's stride, `None` when the target splits the batch or
    /// several axes fit.
    fn reshaped(self, from: &[usize], to: &[usize], batch: usize) -> Option<BatchAt> {
        let q = self.stride(from)?;
        let [axis] = covering_axes(to, q, batch, self.axis)?[..] else {
            return None;
        };
        let below: usize = to.get(axis + 1..)?.iter().product();
        (below != 0 && q % below == 0).then(|| BatchAt {
            axis,
            inner: q / below,
        })
    }
}

/// Where the batch sits in every tensor of `graph`, indexed by value (`None` where it is not
/// known: the input has no single axis of the batch's size (besides an image's axis 0), or an op
/// on the way changed the batch axis's size or split it).
pub fn batch_axes(graph: &Graph) -> Vec<Option<BatchAt>> {
    let mut t = BatchTracker::default();
    t.follow(graph);
    t.at
}

/// [`batch_axes`] of a graph that only grows (an import in progress): each query follows the
/// nodes added since the last one, so every node is visited once however often it is asked.
#[derive(Debug, Default)]
pub struct BatchTracker {
    at: Vec<Option<BatchAt>>,
    /// The nodes followed so far.
    seen: usize,
}

impl BatchTracker {
    /// Where the batch sits in value `v` of `graph` (the graph the earlier queries saw, grown).
    pub fn at(&mut self, graph: &Graph, v: ValueId) -> Option<BatchAt> {
        self.follow(graph);
        self.at.get(v.0).copied().flatten()
    }

    /// Follows the nodes of `graph` not seen yet.
    fn follow(&mut self, graph: &Graph) {
        if self.seen == 0 {
            self.at = vec![None; graph.values.len()];
            if let Some(slot) = self.at.get_mut(graph.input.0) {
                *slot = input_batch(graph);
            }
        }
        self.at.resize(graph.values.len(), None);
        for node in graph.nodes.get(self.seen..).unwrap_or_default() {
            let next = step(graph, node, &self.at);
            if let Some(slot) = self.at.get_mut(node.output.0) {
                *slot = next;
            }
        }
        self.seen = graph.nodes.len();
    }
}

/// The batch in the graph's input: its one axis of the batch's size (an image's axis 0).
fn input_batch(graph: &Graph) -> Option<BatchAt> {
    let input = graph.shape(graph.input);
    let of_batch: Vec<usize> = (0..input.len())
        .filter(|&i| input[i] == graph.batch)
        .collect();
    let axis = match of_batch[..] {
        _ if input.len() == 4 && input.first() == Some(&graph.batch) => Some(0),
        [a] => Some(a),
        _ => None,
    }?;
    Some(BatchAt { axis, inner: 1 })
}

/// The batch in `node`'s output, from the first of its inputs whose batch `at` knows.
fn step(graph: &Graph, node: &Node, at: &[Option<BatchAt>]) -> Option<BatchAt> {
    let (b, from) = node
        .inputs
        .iter()
        .find_map(|&v| Some((at.get(v.0).copied().flatten()?, graph.shape(v))))?;
    let out = graph.shape(node.output);
    match &node.op {
        Op::Reshape { .. } | Op::Flatten { .. } => b.reshaped(from, out, graph.batch),
        Op::Transpose { perm } => perm.iter().position(|&p| p == b.axis).map(|axis| BatchAt {
            axis,
            inner: b.inner,
        }),
        // Same rank: the batch axis keeps its size; another rank (an embedding's extra
        // axis, a reduction's lost one): the axes up to the batch's are unchanged.
        _ if out.len() == from.len() => (out.get(b.axis) == from.get(b.axis)).then_some(b),
        _ => {
            (out.get(..=b.axis).is_some() && out.get(..=b.axis) == from.get(..=b.axis)).then_some(b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Graph, Op};

    /// Swin's window partition and merge at batch 2 with 2×2 windows of 2×2 on a 4×4 map of 3
    /// channels: `[2, 4, 4, 3]` → `[2, 2, 2, 2, 2, 3]` → transpose → `[8, 4, 3]` → `[2, 2, 2, 2,
    /// 2, 3]`.
    fn windows() -> (Graph, Vec<crate::ir::ValueId>) {
        let mut g = Graph::new("w", "test", 2, "x", vec![2, 4, 4, 3]);
        let reshape = |shape: &[usize]| Op::Reshape {
            shape: shape.to_vec(),
        };
        let a = g
            .push("part", reshape(&[2, 2, 2, 2, 2, 3]), vec![g.input], "a")
            .unwrap();
        let perm = vec![0, 1, 3, 2, 4, 5];
        let b = g
            .push("perm", Op::Transpose { perm }, vec![a], "b")
            .unwrap();
        let c = g.push("merge", reshape(&[8, 4, 3]), vec![b], "c").unwrap();
        let d = g.push("relu", Op::Relu, vec![c], "d").unwrap();
        let e = g
            .push("unpart", reshape(&[2, 2, 2, 2, 2, 3]), vec![d], "e")
            .unwrap();
        g.output = e;
        let ids = vec![g.input, a, b, c, d, e];
        (g, ids)
    }

    #[test]
    fn the_batch_is_followed_through_a_window_partition_and_merge() {
        let (g, ids) = windows();
        let at = batch_axes(&g);
        let seen: Vec<_> = ids.iter().map(|v| at[v.0]).collect();
        let b = |axis, inner| Some(BatchAt { axis, inner });
        // the merged [N·nW] keeps the batch outer (inner = 4 windows); the split puts it back on
        // axis 0, not on axis 2 of the same size
        assert_eq!(seen, [b(0, 1), b(0, 1), b(0, 1), b(0, 4), b(0, 4), b(0, 1)]);
        assert_eq!(at[ids[3].0].unwrap().stride(&[8, 4, 3]), Some(48));
    }

    #[test]
    fn a_tracker_asked_as_the_graph_grows_agrees_with_the_whole_pass() {
        let (full, ids) = windows();
        let want = batch_axes(&full);
        let mut g = Graph::new("w", "test", 2, "x", vec![2, 4, 4, 3]);
        let mut t = BatchTracker::default();
        assert_eq!(t.at(&g, g.input), want[ids[0].0]);
        for (node, &id) in full.nodes.iter().zip(&ids[1..]) {
            let v = g
                .push(&node.name, node.op.clone(), node.inputs.clone(), "v")
                .unwrap();
            assert_eq!((v, t.at(&g, v)), (id, want[id.0]), "{}", node.name);
        }
    }

    /// `[2, 6]` reshaped to `shape`, then a ReLU: where the batch is in each.
    fn after_reshape(shape: &[usize]) -> (Option<BatchAt>, Option<BatchAt>) {
        let mut g = Graph::new("s", "test", 2, "x", vec![2, 6]);
        let op = Op::Reshape {
            shape: shape.to_vec(),
        };
        let a = g.push("reshape", op, vec![g.input], "a").unwrap();
        let b = g.push("relu", Op::Relu, vec![a], "b").unwrap();
        let at = batch_axes(&g);
        assert_eq!(at[g.input.0], Some(BatchAt { axis: 0, inner: 1 }));
        (at[a.0], at[b.0])
    }

    #[test]
    fn a_lost_batch_is_none_from_there_on() {
        // [2, 6] → [3, 4] splits the batch across two axes; the relu after it knows no batch
        assert_eq!(after_reshape(&[3, 4]), (None, None));
        // [2, 6] → [4, 3] keeps it as the outer factor of axis 0
        let merged = Some(BatchAt { axis: 0, inner: 2 });
        assert_eq!(after_reshape(&[4, 3]), (merged, merged));
        // a sequence-first [T, B] input with T = B has no single batch axis
        let g = Graph::new("t", "test", 3, "x", vec![3, 3]);
        assert_eq!(batch_axes(&g)[g.input.0], None);
        let g = Graph::new("t", "test", 3, "x", vec![5, 3]);
        assert_eq!(
            batch_axes(&g)[g.input.0],
            Some(BatchAt { axis: 1, inner: 1 })
        );
    }
}
