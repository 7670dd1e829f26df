//! Where a run's batches come from: an image dataset through its [`Loader`], or a text corpus
//! read window by window in order (the word_language_model example's order: the same windows
//! every epoch, no shuffling).

use cptsim_nn::data::text::TextData;
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

/// The training data of a run.
pub(crate) enum Feed<'a> {
    /// Images and labels.
    Images {
        data: &'a TrainData,
        loader: Loader<'a>,
    },
    /// Token streams; `next` is the window the next iteration reads.
    Text { data: &'a TextData, next: u64 },
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
        }
    }

    /// Puts the stream where it is after `iterations` batches.
    pub fn seek(&mut self, iterations: u64) {
        match self {
            Feed::Images { loader, .. } => loader.seek(iterations),
            Feed::Text { next, .. } => *next = iterations,
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
