//! Seeded synthetic token sequences for sequence classifiers (token ids in, one class per
//! sequence out): each class has a prototype sequence of ids drawn from the model's vocabulary,
//! and a sample is its class's prototype with each token replaced, with probability
//! [`REPLACED`], by a random id. Batches are read in order, whole batches only (a model's token
//! input has a fixed shape).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::text::TokenLayout;
use crate::error::{Result, SimError};
use crate::layers::Tensor;

/// The chance that a sample's token differs from its class's prototype.
pub const REPLACED: f64 = 0.25;

/// Labelled token sequences of one length.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenSet {
    /// Token ids, `len = n·seq`, sequence after sequence.
    pub ids: Vec<u32>,
    /// One label per sequence, below `classes`.
    pub labels: Vec<u16>,
    /// Tokens per sequence.
    pub seq: usize,
    /// Ids lie in `0..vocab`.
    pub vocab: usize,
    /// Number of classes.
    pub classes: usize,
}

impl TokenSet {
    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no sequences.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Keeps the first `n` sequences (all if fewer).
    pub fn truncate(&mut self, n: usize) {
        let n = n.min(self.len());
        self.ids.truncate(n * self.seq);
        self.labels.truncate(n);
    }

    /// The sequences from `from` on, as a set of their own.
    pub fn split_off(&mut self, from: usize) -> TokenSet {
        let from = from.min(self.len());
        TokenSet {
            ids: self.ids.split_off(from * self.seq),
            labels: self.labels.split_off(from),
            ..self.clone_empty()
        }
    }

    fn clone_empty(&self) -> TokenSet {
        TokenSet {
            ids: Vec::new(),
            labels: Vec::new(),
            ..*self
        }
    }

    /// Whole batches of `batch` sequences in the set.
    pub fn batches(&self, batch: usize) -> usize {
        self.len().checked_div(batch).unwrap_or(0)
    }

    /// Batch `k` (cycling over the whole batches) of `batch` sequences: ids as f32 in the
    /// model's layout (`[B, T]` or `[T, B]`) and one label per sequence.
    pub fn batch(&self, k: u64, batch: usize, layout: TokenLayout) -> Result<(Tensor, Vec<usize>)> {
        let n = self.batches(batch);
        if n == 0 {
            return Err(SimError::invalid(
                "token sequences",
                format!("{} sequences hold no batch of {batch}", self.len()),
            ));
        }
        let first = (k % n as u64) as usize * batch;
        let (t, b) = (self.seq, batch);
        let seq = |i: usize| &self.ids[(first + i) * t..(first + i + 1) * t];
        let (shape, ids): (Vec<usize>, Vec<f32>) = match layout {
            TokenLayout::BatchFirst => (
                vec![b, t],
                (0..b)
                    .flat_map(|i| seq(i).iter().map(|&v| v as f32))
                    .collect(),
            ),
            TokenLayout::SeqFirst => (
                vec![t, b],
                (0..t)
                    .flat_map(|s| (0..b).map(move |i| (s, i)))
                    .map(|(s, i)| seq(i)[s] as f32)
                    .collect(),
            ),
        };
        let labels = self.labels[first..first + b]
            .iter()
            .map(|&l| usize::from(l))
            .collect();
        let ids = Tensor::from_shape_vec(shape, ids)
            .map_err(|e| SimError::invalid("token batch", e.to_string()))?;
        Ok((ids, labels))
    }
}

/// `n` seeded sequences of `seq` ids in `0..vocab` over `classes` classes (see the module docs).
pub fn synthetic_tokens(
    n: usize,
    seq: usize,
    vocab: usize,
    classes: usize,
    seed: u64,
) -> Result<TokenSet> {
    let fits = u32::try_from(vocab).is_ok() && classes <= usize::from(u16::MAX);
    if seq == 0 || vocab == 0 || classes == 0 || !fits || n.checked_mul(seq).is_none() {
        return Err(SimError::invalid(
            "synthetic token sequences",
            format!("{n} sequences of {seq} tokens over {vocab} ids and {classes} classes"),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let id = |rng: &mut ChaCha8Rng| rng.random_range(0..vocab as u32);
    let protos: Vec<Vec<u32>> = (0..classes)
        .map(|_| (0..seq).map(|_| id(&mut rng)).collect())
        .collect();
    let mut ids = Vec::with_capacity(n * seq);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let k = rng.random_range(0..classes);
        labels.push(k as u16);
        for &p in &protos[k] {
            let v = if rng.random_bool(REPLACED) {
                id(&mut rng)
            } else {
                p
            };
            ids.push(v);
        }
    }
    Ok(TokenSet {
        ids,
        labels,
        seq,
        vocab,
        classes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_tokens_are_seeded_in_range_and_batch_in_either_layout() {
        let a = synthetic_tokens(12, 5, 30, 3, 7).unwrap();
        assert_eq!(a, synthetic_tokens(12, 5, 30, 3, 7).unwrap());
        assert_ne!(a.ids, synthetic_tokens(12, 5, 30, 3, 8).unwrap().ids);
        assert!(a.ids.iter().all(|&v| v < 30) && a.labels.iter().all(|&l| l < 3));
        assert_eq!(a.batches(4), 3);
        let (bf, labels) = a.batch(1, 4, TokenLayout::BatchFirst).unwrap();
        let (sf, same) = a.batch(1, 4, TokenLayout::SeqFirst).unwrap();
        assert_eq!((bf.shape(), sf.shape()), (&[4, 5][..], &[5, 4][..]));
        assert_eq!(labels, same);
        assert_eq!(labels[0], usize::from(a.labels[4]));
        assert_eq!(bf[&[2, 3][..]], a.ids[6 * 5 + 3] as f32);
        assert!(sf.t() == bf);
        // Batch k cycles over the whole batches.
        assert_eq!(a.batch(4, 4, TokenLayout::BatchFirst).unwrap().0, bf);
        // Two samples of a class share about (1 − REPLACED)² of their tokens; of two classes,
        // next to none.
        let s = synthetic_tokens(40, 50, 1000, 2, 3).unwrap();
        let agree = |i: usize, j: usize| {
            let (x, y) = (&s.ids[i * 50..(i + 1) * 50], &s.ids[j * 50..(j + 1) * 50]);
            x.iter().zip(y).filter(|(a, b)| a == b).count() as f64 / 50.0
        };
        let pairs = |same: bool| -> Vec<f64> {
            let mut v = Vec::new();
            for i in 0..40 {
                for j in i + 1..40 {
                    if (s.labels[i] == s.labels[j]) == same {
                        v.push(agree(i, j));
                    }
                }
            }
            v
        };
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        assert!(mean(pairs(true)) > 0.45 && mean(pairs(false)) < 0.05);
        let mut kept = a.clone();
        let test = kept.split_off(9);
        assert_eq!((kept.len(), test.len(), test.seq), (9, 3, 5));
        assert!(a.batch(0, 13, TokenLayout::BatchFirst).is_err());
        assert!(synthetic_tokens(4, 0, 30, 3, 1).is_err());
        assert!(synthetic_tokens(4, 5, 0, 3, 1).is_err());
    }
}
