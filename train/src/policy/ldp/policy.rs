//! LDP as a [`Policy`]: every in-scope layer at the widest learned precision, then each
//! controlled layer at its own; β steps right after the backward pass; the summary reports the
//! target, the achieved cost ratio and the final per-layer bits.

use cptsim_traces::schedule::Precision;
use cptsim_traces::{Bits, TraceRow};

use super::{cost, Ldp};
use crate::policy::{from_state, to_state};
use crate::{apply_uniform, LayerBits, LayerBitsReport, Policy, PolicyReport, TrainNet};
use cptsim_nn::error::Result;
use cptsim_nn::layers::Tensor;

impl Policy for Ldp {
    fn name(&self) -> &'static str {
        "ldp"
    }

    fn precision(&self, _t: u64) -> Precision {
        Ldp::precision(self)
    }

    fn apply(&mut self, t: u64, net: &mut TrainNet, quantize: bool) -> Result<Vec<(u32, Bits)>> {
        let mut bits = apply_uniform(net, Policy::precision(self, t), quantize)?;
        Ldp::apply(self, net, &mut bits)?;
        Ok(bits)
    }

    fn backward(&mut self, net: &mut TrainNet, grad: Tensor) -> Result<()> {
        net.graph.backward_params(grad)?;
        self.learn(net);
        Ok(())
    }

    fn state(&self) -> Result<serde_json::Value> {
        to_state("ldp", &self.state)
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        Ldp::restore(self, from_state("ldp", state)?)
    }

    /// Target and achieved `C/T_static` (mean over the last 10 % of the iterations in `rows`) and
    /// the final bits read from the layers with the inference cost they give.
    fn report(&self, net: &mut TrainNet, rows: &[TraceRow], iterations: u64) -> PolicyReport {
        let from = iterations - iterations.div_ceil(10);
        let achieved = cost::mean_ratio(
            rows,
            &self.trace_layers(),
            self.static_cost(),
            from,
            iterations,
        );
        let quants = net.graph.quant_layers_mut();
        let final_bits: Vec<LayerBits> = self
            .layers()
            .iter()
            .map(|l| LayerBits {
                layer: l.name.clone(),
                bits: quants
                    .get(l.slot)
                    .map_or(0, |(_, q)| u8::try_from(q.bits_fw).unwrap_or(u8::MAX)),
            })
            .collect();
        let macs: Vec<f64> = self.layers().iter().map(|l| l.macs).collect();
        let bits: Vec<u8> = final_bits.iter().map(|b| b.bits).collect();
        PolicyReport {
            target: Some(self.config.target),
            achieved,
            layers: Some(LayerBitsReport {
                inference_gbitops: cost::forward_cost(&macs, &bits) / 1e9,
                static_inference_gbitops: self.static_cost() / 1e9,
                final_bits,
            }),
            ..PolicyReport::default()
        }
    }
}
