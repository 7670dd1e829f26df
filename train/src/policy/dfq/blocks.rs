//! Residual blocks of an imported model (spec §6.2): a block is the span of conv/linear layers
//! between consecutive residual Add outputs; the first block starts after the stem (the layers
//! before the first block's span). Only body convs are gated; the stem, 1×1 projection
//! shortcuts and the classifier run fp32 (spec §1.4, DFQ row).

use cptsim_models::ir::{BinaryKind, Op};
use cptsim_models::{Graph as IrGraph, LayerRole, ModelSummary};

use cptsim_nn::error::{Result, SimError};

/// One residual block: the summary indices of its gated layers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Body convs of the block (summary layer indices), in order.
    pub layers: Vec<u32>,
}

/// The residual blocks of `ir` in order, or an error naming the model when it has none.
pub fn find_blocks(ir: &IrGraph, summary: &ModelSummary) -> Result<Vec<Block>> {
    let mut blocks = Vec::new();
    let mut seen = 0u32;
    let mut start = 1u32;
    for node in &ir.nodes {
        match &node.op {
            Op::Conv(_) | Op::Linear(_) => seen += 1,
            Op::Binary(b) if b.kind == BinaryKind::Add && b.constant.is_none() => {
                let layers: Vec<u32> = (start..seen)
                    .filter(|&i| {
                        summary
                            .layers
                            .get(i as usize)
                            .is_some_and(|l| l.role == LayerRole::Body)
                    })
                    .collect();
                if !layers.is_empty() {
                    blocks.push(Block { layers });
                }
                start = seen;
            }
            _ => {}
        }
    }
    if blocks.is_empty() {
        return Err(SimError::invalid(
            "--policy dfq",
            format!(
                "model `{}` has no residual blocks (no Add of two computed tensors after a body \
                 conv): DFQ gates attach after residual blocks",
                summary.name
            ),
        ));
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zoo(name: &str) -> IrGraph {
        cptsim_models::load_graph(&format!("zoo:{name}"), 2).unwrap()
    }

    #[test]
    fn resnet20_has_nine_blocks_of_two_body_convs() {
        let g = zoo("resnet20");
        let blocks = find_blocks(&g, &g.summary()).unwrap();
        assert_eq!(blocks.len(), 9);
        assert!(blocks.iter().all(|b| b.layers.len() == 2), "{blocks:?}");
        assert_eq!(blocks[0].layers, vec![1, 2]);
        let s = g.summary();
        let gated: usize = blocks.iter().map(|b| b.layers.len()).sum();
        assert_eq!(gated, 18);
        assert!(blocks
            .iter()
            .flat_map(|b| &b.layers)
            .all(|&i| s.layers[i as usize].role == LayerRole::Body));
    }

    #[test]
    fn lenet5_is_a_clear_error() {
        let g = zoo("lenet5");
        let e = find_blocks(&g, &g.summary()).unwrap_err().to_string();
        assert!(e.contains("lenet5") && e.contains("residual"), "{e}");
    }
}
