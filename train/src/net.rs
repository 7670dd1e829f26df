//! A network ready for training: the layer graph plus, for each of its quantizable layers (in
//! [`Graph::quant_layers_mut`] order), the model-summary index the trace uses and whether the
//! layer follows the precision policy (spec §1.4 scope) or stays fp32.

use cptsim_traces::Bits;

use cptsim_nn::build::Network;
use cptsim_nn::data::text::TokenLayout;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::net::Graph;

/// Where one quantizable layer of the graph sits in the model summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantSlot {
    /// Index in `ModelSummary::layers` (the trace's layer index).
    pub layer: u32,
    /// Whether it follows the precision policy (otherwise fp32).
    pub quantized: bool,
    /// A precision that overrides the policy for this layer (e.g. depthwise convs at 8/16).
    pub fixed: Option<Bits>,
}

/// A trainable network with its layer mapping and data shapes.
pub struct TrainNet {
    /// The layers.
    pub graph: Graph,
    /// One slot per quantizable layer, in graph order.
    pub slots: Vec<QuantSlot>,
    /// Input image shape `[C, H, W]`.
    pub input: [usize; 3],
    /// Number of output classes (a language model: its vocabulary).
    pub classes: usize,
    /// A language model's token layout and input shape (`None` for image and feature models).
    pub tokens: Option<(TokenLayout, Vec<usize>)>,
    /// The vocabulary of a token input: its ids lie in `0..vocab`.
    pub vocab: Option<usize>,
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
            tokens: None,
            vocab: None,
        })
    }

    /// Runs every in-scope layer whose summary index satisfies `pick` at the fixed precision
    /// `bits` instead of the policy's; returns how many layers that covers.
    pub fn fix_bits(&mut self, pick: impl Fn(u32) -> bool, bits: Bits) -> usize {
        let mut n = 0;
        for s in self
            .slots
            .iter_mut()
            .filter(|s| s.quantized && pick(s.layer))
        {
            s.fixed = Some(bits);
            n += 1;
        }
        n
    }

    /// The network built from an imported model; the classes are the output features.
    pub fn from_network(net: Network) -> Result<Self> {
        let input = net.input_chw();
        let tokens = net.tokens().map(|l| (l, net.summary().input.clone()));
        let vocab = net.token_vocab();
        let (graph, summary, quantized) = net.into_parts();
        let classes = summary.layers.last().map_or(0, |l| l.out_shape[0]);
        if classes == 0 {
            return Err(SimError::invalid(
                "model",
                format!("`{}` has no classifier layer", summary.name),
            ));
        }
        let slots = quantized
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let layer =
                    u32::try_from(i).map_err(|_| SimError::invalid("model", "too many layers"))?;
                Ok(QuantSlot {
                    layer,
                    quantized: q,
                    fixed: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut train = Self::new(graph, slots, input, classes)?;
        train.tokens = tokens;
        train.vocab = vocab;
        Ok(train)
    }
}
