//! LDP's addition to a quantized layer: the step-size sensitivity `Σ dL/dQ·(Q − I)` of its
//! forward operands, recorded at every backward pass (see [`cptsim_nn::quant::lsq`]).

use std::any::Any;

use cptsim_nn::quant::hook::QuantHook;
use cptsim_nn::quant::LayerQuant;

/// The last backward pass's `Σ dL/dQ·(Q − I)` over a layer's quantized weights and input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepProbe {
    /// `Σ dL/dQ·(Q − I)` of the last backward pass (0 when the layer ran fp32).
    pub residual_dot: f64,
}

impl StepProbe {
    /// Puts a probe on `q` unless it has one (keeping the last record).
    pub fn attach(q: &mut LayerQuant) {
        if Self::of(q).is_none() {
            q.hook = Some(Box::new(StepProbe::default()));
        }
    }

    /// The probe on `q`, if LDP attached one.
    pub fn of(q: &LayerQuant) -> Option<&StepProbe> {
        q.hook.as_ref()?.as_any().downcast_ref::<StepProbe>()
    }

    /// The residual the probe on `q` recorded; 0 without a probe.
    pub fn residual_of(q: &LayerQuant) -> f64 {
        Self::of(q).map_or(0.0, |p| p.residual_dot)
    }
}

impl QuantHook for StepProbe {
    fn wants_step_residual(&self) -> bool {
        true
    }

    fn step_residual(&mut self, dot: f64) {
        self.residual_dot = dot;
    }

    fn clone_box(&self) -> Box<dyn QuantHook> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
