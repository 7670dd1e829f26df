//! Softmax cross-entropy over logits `[N, K]`, averaged over the batch.

use ndarray::Array2;

use super::{as2, Tensor};
use crate::error::{Result, SimError};

/// Softmax cross-entropy loss; keeps the probabilities for [`SoftmaxCrossEntropy::backward`].
#[derive(Default)]
pub struct SoftmaxCrossEntropy {
    cache: Option<(Array2<f32>, Vec<usize>)>,
}

impl SoftmaxCrossEntropy {
    /// A new loss.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mean loss `−(1/N) Σ log softmax(z_i)[y_i]`; also returns the number of correct argmax
    /// predictions. Labels must be below `K`.
    pub fn forward(&mut self, logits: &Tensor, labels: &[usize]) -> Result<(f32, usize)> {
        let z = as2("softmax_cross_entropy", logits)?;
        let (n, k) = z.dim();
        if labels.len() != n {
            return Err(SimError::shape(
                "softmax_cross_entropy",
                format!("{n} logit rows but {} labels", labels.len()),
            ));
        }
        if let Some(&bad) = labels.iter().find(|&&l| l >= k) {
            return Err(SimError::shape(
                "softmax_cross_entropy",
                format!("label {bad} is not below the {k} classes"),
            ));
        }
        let mut p = Array2::<f32>::zeros((n, k));
        let (mut loss, mut correct) = (0.0f64, 0usize);
        // Each row's exponentials, computed once and read twice (the sum, then the row of `p`).
        let mut e = vec![0.0f64; k];
        for ((row, mut out), &y) in z.rows().into_iter().zip(p.rows_mut()).zip(labels) {
            let max = row.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            for (e, &v) in e.iter_mut().zip(&row) {
                *e = ((v - max) as f64).exp();
            }
            let sum: f64 = e.iter().sum();
            loss += sum.ln() - (row[y] - max) as f64;
            for (out, &e) in out.iter_mut().zip(&e) {
                *out = (e / sum) as f32;
            }
            let mut best = 0;
            for (j, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = j;
                }
            }
            correct += usize::from(best == y);
        }
        self.cache = Some((p, labels.to_vec()));
        Ok(((loss / n.max(1) as f64) as f32, correct))
    }

    /// Gradient of the mean loss with respect to the logits: `(softmax − onehot)/N`.
    pub fn backward(&self) -> Result<Tensor> {
        let (p, labels) = self.cache.as_ref().ok_or_else(|| SimError::NoForward {
            layer: "softmax_cross_entropy".into(),
        })?;
        let n = p.nrows().max(1) as f32;
        let mut g = p.clone();
        for (i, &y) in labels.iter().enumerate() {
            g[[i, y]] -= 1.0;
        }
        g /= n;
        Ok(g.into_dyn())
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::rand_tensor;
    use super::*;

    #[test]
    fn uniform_logits_give_log_k() {
        let mut l = SoftmaxCrossEntropy::new();
        let (loss, _) = l.forward(&Tensor::zeros(vec![3, 4]), &[0, 1, 3]).unwrap();
        assert!((loss - 4.0f32.ln()).abs() < 1e-6);
        assert!(l.forward(&Tensor::zeros(vec![3, 4]), &[0, 1, 4]).is_err());
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let z = rand_tensor(&[4, 5], 3.0, 1);
        let labels = [0, 4, 2, 2];
        let mut l = SoftmaxCrossEntropy::new();
        l.forward(&z, &labels).unwrap();
        let g = l.backward().unwrap();
        let eps = 1e-2f32;
        for j in 0..z.len() {
            let mut zp = z.clone();
            zp.as_slice_mut().unwrap()[j] += eps;
            let mut zm = z.clone();
            zm.as_slice_mut().unwrap()[j] -= eps;
            let num = (l.forward(&zp, &labels).unwrap().0 as f64
                - l.forward(&zm, &labels).unwrap().0 as f64)
                / (2.0 * eps as f64);
            let a = g.as_slice().unwrap()[j] as f64;
            assert!((a - num).abs() < 1e-3, "{j}: {a} vs {num}");
        }
    }
}
