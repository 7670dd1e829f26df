//! Training a sequence classifier on labelled token sequences ([`TokenData`]): one label per
//! sequence, batches in order.

use cptsim_nn::data::tokens::TokenSet;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::Mode;

use super::{Stop, TrainConfig, Trainer};
use crate::feed::{logits_rows, Feed, TokenData};
use crate::net::TrainNet;
use crate::policy::Policy;

impl<'a> Trainer<'a> {
    /// A sequence-classifier run at iteration 0 on `data`, whose batches must be the model's
    /// token input and whose classes must fit its outputs.
    pub fn new_tokens(
        net: TrainNet,
        data: &'a TokenData,
        config: TrainConfig,
        policy: Box<dyn Policy>,
    ) -> Result<Self> {
        let what = "token sequences";
        let Some((layout, shape)) = net.tokens.clone() else {
            return Err(SimError::invalid(what, "the model takes no token ids"));
        };
        let (ids, _) = data.train.batch(0, data.batch, layout)?;
        if layout != data.layout || ids.shape() != shape.as_slice() {
            return Err(SimError::invalid(
                what,
                format!(
                    "batches of {} sequences of {} tokens are ids {:?}; the model takes {shape:?}",
                    data.batch,
                    data.train.seq,
                    ids.shape()
                ),
            ));
        }
        if data.train.classes > net.classes || data.test.classes > net.classes {
            return Err(SimError::invalid(
                what,
                format!(
                    "{} classes but the model outputs {}",
                    data.train.classes, net.classes
                ),
            ));
        }
        Self::with_feed(net, config, policy, Feed::Tokens { data, next: 0 })
    }

    /// Mean loss and accuracy over the whole batches of `set`, in evaluation mode at the
    /// current bits.
    pub(super) fn evaluate_tokens_with(
        &mut self,
        data: &TokenData,
        set: &TokenSet,
        stop: Stop<'_>,
    ) -> Result<(f64, f64)> {
        let (mut loss, mut correct, mut seen) = (0.0f64, 0usize, 0usize);
        for k in 0..set.batches(data.batch) {
            self.interrupted(stop)?;
            let (ids, labels) = set.batch(k as u64, data.batch, data.layout)?;
            let out = self.policy.forward(&mut self.net, ids, Mode::Eval)?;
            let (out, _) = logits_rows(out)?;
            let (l, c) = self.loss.forward(&out, &labels)?;
            loss += f64::from(l) * labels.len() as f64;
            correct += c;
            seen += labels.len();
        }
        if seen == 0 {
            return Err(SimError::invalid(
                "token sequences",
                format!(
                    "the test set's {} sequences hold no batch of {}",
                    set.len(),
                    data.batch
                ),
            ));
        }
        let n = seen as f64;
        Ok((loss / n, correct as f64 / n))
    }
}
