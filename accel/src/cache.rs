//! Memoised GEMM costs: a trace costs as many tiling searches as it has distinct
//! (problem geometry, operand bits) pairs; layers of equal geometry share them.

use std::collections::HashMap;

use cptsim_models::summary::LayerInfo;
use cptsim_traces::row::Bits;

use crate::accelerator::Accelerator;
pub use crate::cost::GemmSummary;
use crate::cost::{CostError, GemmCost};
use crate::gemm::{ConvProblem, GemmKind, OperandBits};

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
                let base = match self.problems.get(&pk) {
                    Some(c) => c.clone(),
                    None => {
                        let c = self.acc.cost_problem(&pk.0, pk.1, pk.2)?;
                        self.problems.insert(pk, c.clone());
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
