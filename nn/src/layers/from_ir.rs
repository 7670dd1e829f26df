//! What a layer needs to build itself from an IR node: the builder's context ([`Ctx`]), where
//! each engine value lives ([`Layout`], [`Val`]) and the error for what training cannot run. Each
//! layer's file has the function that turns its IR op into the layer (`build`), which the
//! network builder calls for that op.
//!
//! Image tensors (the NCHW input of a CNN and what its convs, pools and norms make of it) live in
//! the engine as channels-last `[N, H, W, C]` tensors; every other tensor (features `[N, F]`,
//! token ids, sequences `[B, T, D]` or `[T, B, D]`, attention heads `[B, h, T, d]`) is held as
//! the IR holds it. A tensor's layout follows from the op that makes it, not from its rank: a
//! reshape of a sequence to four axes is not an image.

use cptsim_models::ir::{self, Node};
use rand::Rng;

use super::{Layer, Tensor, Transpose};
use crate::error::{Result, SimError};

/// Where the initial weights come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// The weights, biases and BN statistics stored in the model.
    FromModel,
    /// Fresh weights from this seed by the zoo's rule ([`cptsim_models::zoo::init`]: the weights
    /// `zoo export --seed` writes) (BN γ = 1, β = 0, running mean 0, var 1).
    Seeded(u64),
}

/// Where an IR tensor lives in the engine network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// IR `[N, C, H, W]` held as `[N, H, W, C]`.
    Image,
    /// Held as in the IR (features `[N, F]`, token ids, sequences, attention heads).
    AsIs,
}

impl Layout {
    /// The engine axis holding IR axis `axis`.
    pub(crate) fn engine_axis(self, axis: usize) -> usize {
        match (self, axis) {
            (Layout::Image, 1) => 3,
            (Layout::Image, 2) => 1,
            (Layout::Image, 3) => 2,
            _ => axis,
        }
    }

    /// The engine layout of a graph input of this shape: rank 4 is an image, ranks 2 and 3
    /// (features, token ids, sequences) are held as is.
    pub(crate) fn of_input(source: &str, shape: &[usize]) -> Result<Self> {
        match shape.len() {
            4 => Ok(Layout::Image),
            2 | 3 => Ok(Layout::AsIs),
            r => Err(SimError::shape(
                source,
                format!(
                    "rank-{r} input {shape:?}: the engine takes images [N, C, H, W], features \
                     [N, F], token ids [B, T] / [T, B] or sequences"
                ),
            )),
        }
    }
}

/// An engine value: its id in the network and its layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Val {
    pub id: usize,
    pub layout: Layout,
}

/// The network being built, as the layers' `build` functions see it.
pub(crate) trait Sink {
    /// Appends `layer` reading values `inputs`; returns the id of the value it produces.
    fn push_layer(&mut self, layer: Box<dyn Layer>, inputs: &[usize]) -> Result<usize>;
    /// The number of layers so far.
    fn layers(&self) -> usize;
}

/// What a layer's `build` function needs while translating one node.
pub(crate) struct Ctx<'a, R: Rng> {
    pub net: &'a mut dyn Sink,
    pub ir: &'a ir::Graph,
    /// Where the batch sits in each IR tensor ([`ir::batch_axes::batch_axes`] of `ir`).
    pub batch_axes: &'a [Option<ir::batch_axes::BatchAt>],
    pub init: Init,
    pub rng: &'a mut R,
}

impl<R: Rng> Ctx<'_, R> {
    /// The IR shape of value `id`.
    pub(crate) fn shape(&self, id: ir::ValueId) -> &[usize] {
        self.ir.shape(id)
    }

    /// The row-major stride of one batch step in IR tensor `id`, where the graph tells it.
    pub(crate) fn batch_stride(&self, id: ir::ValueId) -> Option<usize> {
        self.batch_axes
            .get(id.0)
            .copied()
            .flatten()?
            .stride(self.shape(id))
    }

    /// Appends `layer` reading `inputs`; its output has `layout`.
    pub(crate) fn push(
        &mut self,
        layer: impl Layer + 'static,
        inputs: &[usize],
        layout: Layout,
    ) -> Result<Val> {
        let id = self.net.push_layer(Box::new(layer), inputs)?;
        Ok(Val { id, layout })
    }

    /// The single input of `node` in `layout`: a rank-4 tensor held in the other layout is
    /// permuted into it by a layer named after the node (`…/to_nhwc`, `…/to_nchw`), so a value
    /// keeps whichever layout the op that made it gave it and each reader gets the one it needs.
    pub(crate) fn one_as(&mut self, node: &Node, ins: &[Val], layout: Layout) -> Result<Val> {
        let v = one_any(node, ins)?;
        let rank = node.inputs.first().map(|&i| self.shape(i).len());
        self.convert(node, v, rank, layout, "")
    }

    /// The inputs of a node reading several tensors (concat, element-wise) in one layout: as
    /// they are when they share one, else all rank-4 inputs as images.
    pub(crate) fn shared_layout(&mut self, node: &Node, ins: &[Val]) -> Result<Vec<Val>> {
        if ins.windows(2).all(|w| w[0].layout == w[1].layout) {
            return Ok(ins.to_vec());
        }
        let mut out = Vec::with_capacity(ins.len());
        for (i, (v, &id)) in ins.iter().zip(&node.inputs).enumerate() {
            let rank = Some(self.shape(id).len());
            out.push(self.convert(node, *v, rank, Layout::Image, &i.to_string())?);
        }
        Ok(out)
    }

    /// Every input of `node` in `layout`, each rank-4 one held in the other layout through a
    /// permuting layer as in [`Ctx::one_as`].
    pub(crate) fn all_as(&mut self, node: &Node, ins: &[Val], layout: Layout) -> Result<Vec<Val>> {
        let mut out = Vec::with_capacity(ins.len());
        for (i, (v, &id)) in ins.iter().zip(&node.inputs).enumerate() {
            let rank = Some(self.shape(id).len());
            out.push(self.convert(node, *v, rank, layout, &i.to_string())?);
        }
        Ok(out)
    }

    /// `v` (of IR rank `rank`) in `layout`, through a permuting layer when it is held in the
    /// other one; `tag` tells apart the layers of one node.
    fn convert(
        &mut self,
        node: &Node,
        v: Val,
        rank: Option<usize>,
        layout: Layout,
        tag: &str,
    ) -> Result<Val> {
        if v.layout == layout {
            return Ok(v);
        }
        if rank != Some(4) {
            return Err(unsupported(
                node,
                format!(
                    "an input of rank {} held {:?} where {layout:?} is needed",
                    rank.unwrap_or(0),
                    v.layout
                ),
            ));
        }
        let (perm, suffix) = match layout {
            Layout::Image => ([0, 2, 3, 1], "to_nhwc"),
            Layout::AsIs => ([0, 3, 1, 2], "to_nchw"),
        };
        let name = format!("{}/{suffix}{tag}", node.name);
        self.push(Transpose::new(&name, perm.to_vec())?, &[v.id], layout)
    }

    /// Appends a one-input layer whose output has its input's layout.
    pub(crate) fn same_layout(&mut self, layer: impl Layer + 'static, x: Val) -> Result<Val> {
        self.push(layer, &[x.id], x.layout)
    }

    /// A tensor the model stores, or a fresh one from `seeded` (see [`Init`]).
    pub(crate) fn weight(
        &mut self,
        stored: &Tensor,
        seeded: impl FnOnce(&mut R) -> Tensor,
    ) -> Tensor {
        match self.init {
            Init::FromModel => owned(stored),
            Init::Seeded(_) => seeded(self.rng),
        }
    }
}

/// Half-width of the uniform initialisation of embeddings (PyTorch's word_language_model
/// example initialises its encoder with U(±0.1)).
pub(crate) const EMBED_INIT: f32 = 0.1;
/// Half-width of the uniform initialisation of learned positions and class tokens (small, as
/// ViT/GPT implementations draw them with σ = 0.02).
pub(crate) const POSITION_INIT: f32 = 0.02;

/// The error for an IR op (or an attribute of it) the engine cannot run: the importer and the
/// cost models take every IR op, so the message says that only training stops here.
pub(crate) fn unsupported(node: &Node, why: impl std::fmt::Display) -> SimError {
    SimError::shape(
        &node.name,
        format!(
            "op {}: import and cost work, training does not: {why}",
            node.op.name()
        ),
    )
}

/// The single input of a node, whatever its layout.
pub(crate) fn one_any(node: &Node, ins: &[Val]) -> Result<Val> {
    match ins {
        [v] => Ok(*v),
        _ => Err(unsupported(
            node,
            format!("{} inputs, expected 1", ins.len()),
        )),
    }
}

/// A tensor's data as an owned standard-layout engine tensor.
pub(crate) fn owned(t: &ndarray::ArrayD<f32>) -> Tensor {
    t.as_standard_layout().into_owned()
}
