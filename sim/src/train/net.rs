//! A network ready for training: the layer graph plus, for each of its quantizable layers (in
//! [`Graph::quant_layers_mut`] order), the model-summary index and role the trace and the
//! layer-role precision rules use.

use cptsim_models::LayerRole;

use crate::error::{Result, SimError};
use crate::net::Graph;

/// Where one quantizable layer of the graph sits in the model summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantSlot {
    /// Index in `ModelSummary::layers` (the trace's layer index).
    pub layer: u32,
    /// Role deciding its precision rule (spec §1.4).
    pub role: LayerRole,
}

/// A trainable network with its layer mapping and data shapes.
pub struct TrainNet {
    /// The layers.
    pub graph: Graph,
    /// One slot per quantizable layer, in graph order.
    pub slots: Vec<QuantSlot>,
    /// Input image shape `[C, H, W]`.
    pub input: [usize; 3],
    /// Number of output classes.
    pub classes: usize,
}

impl TrainNet {
    /// Bundles a graph with its mapping; the slot count must equal the quantizable layers.
    pub fn new(
        mut graph: Graph,
        slots: Vec<QuantSlot>,
        input: [usize; 3],
        classes: usize,
    ) -> Result<Self> {
        let n = graph.quant_layers_mut().len();
        if n != slots.len() {
            return Err(SimError::invalid(
                "layer mapping",
                format!(
                    "{} slots for {n} quantizable layers of the network",
                    slots.len()
                ),
            ));
        }
        Ok(Self {
            graph,
            slots,
            input,
            classes,
        })
    }
}
