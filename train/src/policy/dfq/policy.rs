//! DFQ and FracTrain as a [`Policy`]: the gate runs the forward and backward passes, the trace
//! holds one row per candidate chosen, the gate's parameters train with the network, FracTrain's
//! plateau indicator observes the losses, and `dfq.csv` logs the cp per iteration.

use std::io::Write;
use std::path::Path;

use cptsim_traces::schedule::Precision;
use cptsim_traces::{Bits, TraceRow};

use super::cost::reg_sign;
use super::Dfq;
use crate::policy::{from_state, to_state};
use crate::{Policy, PolicyReport, Recorder, TrainNet};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Mode, Param, Tensor};

/// File name of the per-iteration log in the output directory.
pub const LOG: &str = "dfq.csv";

impl Policy for Dfq {
    fn name(&self) -> &'static str {
        match self.config.fractrain {
            Some(_) => "fractrain",
            None => "dfq",
        }
    }

    /// The dearest candidate's activation and error bits (the actual bits vary per sample).
    fn precision(&self, _t: u64) -> Precision {
        let to8 = |b: u32| u8::try_from(b).unwrap_or(u8::MAX);
        let cands = &self.config.candidates;
        Precision {
            fw: to8(cands.iter().map(|c| c.act).max().unwrap_or(0)),
            bw: to8(cands.iter().map(|c| c.err).max().unwrap_or(0)),
        }
    }

    fn apply(&mut self, _t: u64, net: &mut TrainNet, _quantize: bool) -> Result<Vec<(u32, Bits)>> {
        let slots: Vec<u32> = net.slots.iter().map(|s| s.layer).collect();
        self.apply_bits(&mut net.graph, &slots)
    }

    fn forward(&mut self, net: &mut TrainNet, x: Tensor, mode: Mode) -> Result<Tensor> {
        Dfq::forward(self, &mut net.graph, x, mode)
    }

    fn backward(&mut self, net: &mut TrainNet, grad: Tensor) -> Result<()> {
        Dfq::backward(self, &mut net.graph, grad)?;
        Ok(())
    }

    /// The ungated layers' rows with the whole batch, the gated layers' per candidate chosen;
    /// reports the highest activation/error bits the gate chose.
    fn record(
        &mut self,
        t: u64,
        bits: &[(u32, Bits)],
        samples: u64,
        recorder: &mut Recorder,
    ) -> Precision {
        let mut rows: Vec<(u32, Bits, u64)> = bits.iter().map(|&(l, b)| (l, b, samples)).collect();
        rows.extend(self.trace_rows());
        rows.sort_by_key(|r| r.0);
        let chosen = rows.iter().filter(|r| r.2 > 0).map(|r| r.1);
        let precision = Precision {
            fw: chosen.clone().map(|b| b.a).max().unwrap_or(0),
            bw: chosen.map(|b| b.g).max().unwrap_or(0),
        };
        recorder.record_mix(t, &rows);
        precision
    }

    fn observe(&mut self, loss: f32, _train_acc: f64) -> Result<()> {
        if let Some(p) = &mut self.state.pfq {
            p.observe(loss);
        }
        Ok(())
    }

    fn check(&mut self, t: u64) {
        if let (Some(p), Some(f)) = (&mut self.state.pfq, &self.config.fractrain) {
            p.check(t, &f.plateau());
        }
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        self.gate.params_mut()
    }

    fn state(&self) -> Result<serde_json::Value> {
        to_state(self.name(), &self.state)
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        let state: super::DfqState = from_state(self.name(), state)?;
        if state.pfq.is_some() != self.config.fractrain.is_some() {
            return Err(SimError::invalid(
                "checkpoint",
                "FracTrain's indicator state in only one of run and checkpoint",
            ));
        }
        self.state = state;
        Ok(())
    }

    /// The cp target at the end and the mean cp of the last 10 % of iterations (percent);
    /// FracTrain adds its turning points.
    fn report(&self, _net: &mut TrainNet, _rows: &[TraceRow], _iterations: u64) -> PolicyReport {
        PolicyReport {
            target: Some(self.target()),
            achieved: Some(self.achieved()),
            turns: self.state.pfq.as_ref().map(|p| p.turns.clone()),
            ..PolicyReport::default()
        }
    }

    /// Writes `dfq.csv`: per training iteration the measured cp, the target in force, the sign
    /// of the cost term, the gate's confidence (mean probability of the chosen options; near 1
    /// the softmax is saturated and the cost term barely moves it) and, under the exact
    /// execution, the task-to-cost ratio of the gate's logit gradient.
    fn write_artefacts(&self, dir: &Path, _iterations: u64) -> Result<()> {
        let path = dir.join(LOG);
        let s = &self.state;
        let mut text = String::from("iteration,cp,target,reg,confidence,task_to_cost\n");
        for (t, &cp) in s.cp.iter().enumerate() {
            let target = self.target_at(t as u64);
            let reg = reg_sign(cp, target, self.config.relax);
            let conf = s.confidence.get(t).copied().unwrap_or(f64::NAN);
            let ratio = s
                .task_to_cost
                .get(t)
                .map_or(String::new(), |r| format!("{r:.6}"));
            text.push_str(&format!(
                "{t},{cp:.6},{target:.6},{reg},{conf:.6},{ratio}\n"
            ));
        }
        cptsim_models::atomic::write_atomically(
            &path,
            |out| {
                out.write_all(text.as_bytes())
                    .map_err(|e| SimError::io(&path, e))
            },
            SimError::io,
        )
    }
}
