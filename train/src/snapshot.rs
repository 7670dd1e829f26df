//! An in-memory copy of everything a training step changes (parameters, optimiser velocities,
//! batch-norm statistics, quantizer state), taken at a policy's recovery point and restored when
//! the policy absorbs a divergence ([`super::Policy::diverged`]). Unlike a checkpoint it holds no
//! progress: the iteration counter, the trace and the data stream go on.

use super::net::TrainNet;
use super::policy::Policy;
use cptsim_nn::layers::{Param, Tensor};
use cptsim_nn::optim::Sgd;
use cptsim_nn::quant::LayerQuant;

/// The network's parameters followed by the policy's (the optimiser's order).
pub(crate) fn all_params<'b>(
    net: &'b mut TrainNet,
    policy: &'b mut dyn Policy,
) -> Vec<&'b mut Param> {
    let mut p = net.graph.params_mut();
    p.extend(policy.params_mut());
    p
}

/// The copied state.
pub(crate) struct Snapshot {
    /// The iteration it was taken before.
    pub(crate) iteration: u64,
    params: Vec<Tensor>,
    velocity: Vec<Tensor>,
    buffers: Vec<Vec<f32>>,
    quant: Vec<LayerQuant>,
}

impl Snapshot {
    /// Copies the state before iteration `iteration`.
    pub(crate) fn take(
        iteration: u64,
        net: &mut TrainNet,
        policy: &mut dyn Policy,
        opt: &Sgd,
    ) -> Self {
        Self {
            iteration,
            params: all_params(net, policy)
                .iter()
                .map(|p| p.value.clone())
                .collect(),
            velocity: opt.velocity.clone(),
            buffers: net.graph.buffer_values(),
            quant: net
                .graph
                .quant_layers_mut()
                .into_iter()
                .map(|(_, q)| q.clone())
                .collect(),
        }
    }

    /// Puts the copied state back (same network and policy it was taken from).
    pub(crate) fn restore(&self, net: &mut TrainNet, policy: &mut dyn Policy, opt: &mut Sgd) {
        for (p, v) in all_params(net, policy).into_iter().zip(&self.params) {
            p.value.clone_from(v);
        }
        opt.velocity.clone_from(&self.velocity);
        for (b, v) in net.graph.buffers_mut().into_iter().zip(&self.buffers) {
            b.clone_from(v);
        }
        for ((_, q), v) in net.graph.quant_layers_mut().into_iter().zip(&self.quant) {
            q.clone_from(v);
        }
    }
}
