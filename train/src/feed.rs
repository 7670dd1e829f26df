//! Where a run's batches come from: an image dataset through its [`Loader`], a text corpus
//! read window by window in order (the word_language_model example's order: the same windows
//! every epoch, no shuffling), or labelled token sequences read batch by batch in order.

use cptsim_nn::data::text::{TextData, TokenLayout};
use cptsim_nn::data::tokens::TokenSet;
use cptsim_nn::data::{Dataset, Loader};
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::Tensor;

/// Training, test and optional validation sets.
pub struct TrainData {
    /// Training images.
    pub train: Dataset,
    /// Test images.
    pub test: Dataset,
    /// Held-out part of the training set (`--val-split`).
    pub val: Option<Dataset>,
}

/// Labelled token sequences of a sequence classifier (one class per sequence).
pub struct TokenData {
    /// Training sequences.
    pub train: TokenSet,
    /// Test sequences (whole batches).
    pub test: TokenSet,
    /// The model's token layout.
    pub layout: TokenLayout,
    /// Sequences per batch (the model's batch).
    pub batch: usize,
}

/// The training data of a run.
pub(crate) enum Feed<'a> {
    /// Images and labels.
    Images {
        data: &'a TrainData,
        loader: Loader<'a>,
    },
    /// Token streams; `next` is the window the next iteration reads.
    Text { data: &'a TextData, next: u64 },
    /// Token sequences; `next` is the batch the next iteration reads.
    Tokens { data: &'a TokenData, next: u64 },
}

/// One iteration's input and the target of every output row.
pub(crate) struct FeedBatch {
    /// The model input (engine layout).
    pub input: Tensor,
    /// One target per output row (per image, or per token).
    pub targets: Vec<usize>,
    /// Samples in the batch: images, or token streams (a trace's sample is a model input).
    pub samples: usize,
}

impl Feed<'_> {
    /// The next training batch.
    pub fn next_batch(&mut self) -> Result<FeedBatch> {
        match self {
            Feed::Images { loader, .. } => {
                let b = loader.next_batch()?;
                let samples = b.labels.len();
                Ok(FeedBatch {
                    input: b.images,
                    targets: b.labels,
                    samples,
                })
            }
            Feed::Text { data, next } => {
                let b = data.batch(&data.train, *next)?;
                *next += 1;
                Ok(FeedBatch {
                    input: b.ids,
                    targets: b.targets,
                    samples: data.train.batch,
                })
            }
            Feed::Tokens { data, next } => {
                let (input, targets) = data.train.batch(*next, data.batch, data.layout)?;
                *next += 1;
                Ok(FeedBatch {
                    input,
                    targets,
                    samples: data.batch,
                })
            }
        }
    }

    /// Puts the stream where it is after `iterations` batches.
    pub fn seek(&mut self, iterations: u64) {
        match self {
            Feed::Images { loader, .. } => loader.seek(iterations),
            Feed::Text { next, .. } | Feed::Tokens { next, .. } => *next = iterations,
        }
    }
}

/// Logits `[…, V]` as the rows `[R, V]` the loss reads, with the shape to give its gradient back.
pub fn logits_rows(out: Tensor) -> Result<(Tensor, Vec<usize>)> {
    let shape = out.shape().to_vec();
    if shape.len() <= 2 {
        return Ok((out, shape));
    }
    let v = shape.last().copied().unwrap_or(1).max(1);
    let rows = out.len() / v;
    // A standard-layout output (every layer's) is reshaped in place, not copied.
    let out = cptsim_nn::layers::standard(out);
    let flat = out
        .into_shape_with_order(vec![rows, v])
        .map_err(|e| SimError::shape("model output", e.to_string()))?;
    Ok((flat, shape))
}

/// A loss gradient `[R, V]` back in the output's shape.
pub fn rows_back(grad: Tensor, shape: &[usize]) -> Result<Tensor> {
    if grad.shape() == shape {
        return Ok(grad);
    }
    grad.into_shape_with_order(shape.to_vec())
        .map_err(|e| SimError::shape("model output", e.to_string()))
}
