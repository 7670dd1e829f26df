//! Memoised GEMM costs: a trace costs as many tiling searches as it has distinct
//! (problem geometry, operand bits as the accelerator maps them) pairs; layers of equal geometry
//! share them.

use std::collections::HashMap;

use cptsim_models::summary::LayerInfo;
use cptsim_traces::row::Bits;

use crate::cost::accelerator::Accelerator;
pub use crate::cost::gemm_cost::GemmSummary;
use crate::cost::gemm_cost::{CostError, GemmCost};
use crate::workload::gemm::{ConvProblem, GemmKind, OperandBits};

type ProblemKey = (ConvProblem, OperandBits, bool);
type LayerKey = (usize, GemmKind, u64, Bits);

/// Costs of one accelerator, memoised per problem and per (layer, GEMM, samples, bits).
pub struct GemmCache<'a> {
    acc: &'a Accelerator,
    problems: HashMap<ProblemKey, GemmCost>,
    layers: HashMap<LayerKey, Option<GemmSummary>>,
}

impl<'a> GemmCache<'a> {
    /// An empty cache for `acc`.
    pub fn new(acc: &'a Accelerator) -> Self {
        Self {
            acc,
            problems: HashMap::new(),
            layers: HashMap::new(),
        }
    }

    /// Tiling searches run so far (distinct problems).
    pub fn evaluations(&self) -> usize {
        self.problems.len()
    }

    /// Cost of `gemm` of layer `index` (= `layer`) for one iteration, or `None` when the layer has
    /// no such GEMM.
    pub fn cost(
        &mut self,
        index: usize,
        layer: &LayerInfo,
        gemm: GemmKind,
        samples: u64,
        bits: Bits,
    ) -> Result<Option<GemmSummary>, CostError> {
        let key = (index, gemm, samples, bits);
        if let Some(s) = self.layers.get(&key) {
            return Ok(*s);
        }
        let summary = match Accelerator::training_problem(layer, gemm, samples, bits) {
            None => None,
            Some(pk) => {
                // Keyed by the bits the mapping sees, so bit widths an accelerator stores alike
                // (Eyeriss: every width up to 16) share one search.
                self.acc.check_bits(pk.1)?;
                let search_key = (pk.0, self.acc.mapped_bits(pk.1), pk.2);
                let base = match self.problems.get(&search_key) {
                    Some(c) => c.clone(),
                    None => {
                        let c = self.acc.cost_problem(&pk.0, pk.1, pk.2)?;
                        self.problems.insert(search_key, c.clone());
                        c
                    }
                };
                Some(GemmSummary::from(
                    &self.acc.with_passes(base, layer, gemm, samples, pk.1),
                ))
            }
        };
        self.layers.insert(key, summary);
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_models::summary::LayerRole;

    #[test]
    fn widths_an_accelerator_stores_alike_share_one_search_and_cost() {
        let layer = crate::workload::gemm::tests::conv_layer(LayerRole::Body, 16, 32, 8, 1);
        let at = |w: u8| Bits { w, a: w, g: 8 };
        for (name, searches) in [("eyeriss", 1), ("bitfusion", 2)] {
            let acc = Accelerator::load(name).unwrap();
            let mut cache = GemmCache::new(&acc);
            let four = cache.cost(0, &layer, GemmKind::Forward, 4, at(4)).unwrap();
            let eight = cache.cost(0, &layer, GemmKind::Forward, 4, at(8)).unwrap();
            assert_eq!(cache.evaluations(), searches, "{name}");
            // Each equals the uncached cost at its own bits.
            for (got, w) in [(four, 4), (eight, 8)] {
                let (p, ob, first) =
                    Accelerator::training_problem(&layer, GemmKind::Forward, 4, at(w)).unwrap();
                let direct = acc.cost_problem(&p, ob, first).unwrap();
                let want =
                    GemmSummary::from(&acc.with_passes(direct, &layer, GemmKind::Forward, 4, ob));
                assert_eq!(got, Some(want), "{name} at {w} bits");
            }
        }
    }
}
