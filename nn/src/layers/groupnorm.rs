//! Group normalisation (ONNX `GroupNormalization`; `InstanceNormalization` is one group per
//! channel): per sample, the channels fall into groups, each normalised over its channels and
//! positions with batch-independent statistics, then scaled and shifted per channel.

use ndarray::{Array3, IxDyn};

use super::from_ir::{one_any, unsupported, Ctx, Layout, Val};
use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Param, Tensor};
use crate::error::{Result, SimError};
use cptsim_models::ir::{self, Node};
use rand::Rng;

/// What backward needs: the normalised input `[N, C, S]` and `1/σ` per (sample, group).
struct Cache {
    xhat: Array3<f32>,
    inv_std: Vec<f32>,
    shape: Vec<usize>,
}

/// A group-norm layer over an image (`[N, H, W, C]`, channels last) or a tensor with the
/// channels on axis 1 (`[N, C, …]`).
pub struct GroupNorm {
    name: String,
    groups: usize,
    eps: f32,
    channels_last: bool,
    gamma: Param,
    beta: Param,
    cache: Option<Cache>,
}

impl GroupNorm {
    /// A layer with `groups` groups over `gamma.len()` channels, identity-initialised.
    pub fn new(name: &str, groups: usize, channels: usize, eps: f32, channels_last: bool) -> Self {
        Self {
            name: name.to_string(),
            groups,
            eps,
            channels_last,
            gamma: Param::new("gamma", Tensor::ones(vec![channels]), false),
            beta: Param::new("beta", Tensor::zeros(vec![channels]), false),
            cache: None,
        }
    }

    /// The layer of an IR `GroupNorm` node.
    pub(crate) fn build<R: Rng>(
        ctx: &mut Ctx<'_, R>,
        node: &Node,
        n: &ir::GroupNorm,
        ins: &[Val],
    ) -> Result<Val> {
        let x = one_any(node, ins)?;
        let c = n.scale.len();
        if n.groups == 0 || !c.is_multiple_of(n.groups) || n.bias.len() != c {
            return Err(unsupported(
                node,
                format!("{c} channels, {} groups, {} biases", n.groups, n.bias.len()),
            ));
        }
        let mut gn = GroupNorm::new(
            &node.name,
            n.groups,
            c,
            n.epsilon,
            x.layout == Layout::Image,
        );
        let flat = |t: &Tensor| Tensor::from_shape_vec(vec![c], t.iter().copied().collect());
        let (g, b) = (flat(&n.scale), flat(&n.bias));
        if let (Ok(g), Ok(b)) = (g, b) {
            gn.gamma.value = ctx.weight(&g, |_| Tensor::ones(vec![c]));
            gn.beta.value = ctx.weight(&b, |_| Tensor::zeros(vec![c]));
        }
        ctx.same_layout(gn, x)
    }

    /// The input as `[N, C, S]` in standard layout.
    fn to_ncs(&self, x: &Tensor) -> Result<Array3<f32>> {
        let c = self.gamma.value.len();
        let (n, len) = (x.shape().first().copied().unwrap_or(0), x.len());
        let s = if n == 0 || c == 0 { 0 } else { len / (n * c) };
        let bad = || {
            SimError::shape(
                &self.name,
                format!("input {:?} does not hold {c} channels", x.shape()),
            )
        };
        if n * c * s != len || s == 0 {
            return Err(bad());
        }
        let x = standard(x.view());
        if self.channels_last {
            let v = x.into_shape_with_order((n, s, c)).map_err(|_| bad())?;
            Ok(v.permuted_axes([0, 2, 1]).as_standard_layout().into_owned())
        } else {
            x.into_shape_with_order((n, c, s)).map_err(|_| bad())
        }
    }

    /// `[N, C, S]` back to the engine's `shape`.
    fn from_ncs(&self, y: Array3<f32>, shape: &[usize]) -> Result<Tensor> {
        let y = if self.channels_last {
            y.permuted_axes([0, 2, 1]).as_standard_layout().into_owned()
        } else {
            y
        };
        y.into_shape_with_order(IxDyn(shape))
            .map_err(|e| SimError::shape(&self.name, e.to_string()))
    }
}

impl Layer for GroupNorm {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let mut v = self.to_ncs(x)?;
        let (n, c, s) = v.dim();
        let per = c / self.groups;
        let mut inv_std = Vec::with_capacity(n * self.groups);
        let data = v
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "input not contiguous"))?;
        for block in data.chunks_mut(per * s) {
            let m = block.len() as f64;
            let mean = block.iter().map(|&a| f64::from(a)).sum::<f64>() / m;
            let var = block
                .iter()
                .map(|&a| (f64::from(a) - mean).powi(2))
                .sum::<f64>()
                / m;
            let r = (1.0 / (var + f64::from(self.eps)).sqrt()) as f32;
            let mean = mean as f32;
            block.iter_mut().for_each(|a| *a = (*a - mean) * r);
            inv_std.push(r);
        }
        let (gamma, beta) = (&self.gamma.value, &self.beta.value);
        let mut y = v.clone();
        for ((_, ch, _), a) in y.indexed_iter_mut() {
            *a = *a * gamma[ch] + beta[ch];
        }
        self.cache = (mode == Mode::Train).then(|| Cache {
            xhat: v,
            inv_std,
            shape: x.shape().to_vec(),
        });
        self.from_ncs(y, x.shape())
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let cache = cached(&self.name, &self.cache)?;
        check_grad(&self.name, &grad_out, &cache.shape)?;
        let g = self.to_ncs(&grad_out)?;
        let (_, c, s) = g.dim();
        let per = c / self.groups;
        let mut dgamma = vec![0.0f64; c];
        let mut dbeta = vec![0.0f64; c];
        let mut dx = Array3::<f32>::zeros(g.dim());
        let (gs, xs) = (
            g.as_slice().unwrap_or_default(),
            cache.xhat.as_slice().unwrap_or_default(),
        );
        let dxs = dx
            .as_slice_mut()
            .ok_or_else(|| SimError::shape(&self.name, "gradient not contiguous"))?;
        let gamma = &self.gamma.value;
        let block = per * s;
        for (b, ((gb, xb), db)) in gs
            .chunks(block)
            .zip(xs.chunks(block))
            .zip(dxs.chunks_mut(block))
            .enumerate()
        {
            let first = (b % self.groups) * per;
            let (mut sum, mut dot) = (0.0f64, 0.0f64);
            for (k, (&gv, &xv)) in gb.iter().zip(xb).enumerate() {
                let ch = first + k / s;
                let d = f64::from(gv * gamma[ch]);
                sum += d;
                dot += d * f64::from(xv);
                dgamma[ch] += f64::from(gv) * f64::from(xv);
                dbeta[ch] += f64::from(gv);
            }
            let m = block as f64;
            let (mean_d, mean_dx) = ((sum / m) as f32, (dot / m) as f32);
            let r = cache.inv_std.get(b).copied().unwrap_or(0.0);
            for (k, ((o, &gv), &xv)) in db.iter_mut().zip(gb).zip(xb).enumerate() {
                let ch = first + k / s;
                *o = r * (gv * gamma[ch] - mean_d - xv * mean_dx);
            }
        }
        self.gamma.grad =
            Tensor::from_shape_vec(vec![c], dgamma.iter().map(|&v| v as f32).collect())
                .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        self.beta.grad = Tensor::from_shape_vec(vec![c], dbeta.iter().map(|&v| v as f32).collect())
            .map_err(|e| SimError::shape(&self.name, e.to_string()))?;
        let shape = cache.shape.clone();
        Ok(vec![self.from_ncs(dx, &shape)?])
    }

    fn params_mut(&mut self) -> Vec<&mut Param> {
        vec![&mut self.gamma, &mut self.beta]
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    fn layer(groups: usize, channels_last: bool) -> GroupNorm {
        let mut g = GroupNorm::new("gn", groups, 4, 1e-5, channels_last);
        g.gamma.value = rand_tensor(&[4], 1.0, 7).mapv(|v| v + 1.5);
        g.beta.value = rand_tensor(&[4], 1.0, 8);
        g
    }

    #[test]
    fn each_group_is_normalised_over_its_channels_and_positions() {
        // NCHW [1, 4, 1, 3] as channels-last [1, 1, 3, 4]; two groups of two channels.
        let x = rand_tensor(&[1, 1, 3, 4], 3.0, 1);
        let mut gn = GroupNorm::new("gn", 2, 4, 0.0, true);
        let y = gn.forward(&[&x], Mode::Eval).unwrap();
        for grp in 0..2 {
            let vals: Vec<f32> = (0..3)
                .flat_map(|w| (0..2).map(move |k| (w, grp * 2 + k)))
                .map(|(w, ch)| y[[0, 0, w, ch]])
                .collect();
            let mean: f32 = vals.iter().sum::<f32>() / 6.0;
            let var: f32 = vals.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 6.0;
            assert!(
                mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3,
                "{mean} {var}"
            );
        }
    }

    #[test]
    fn gradients_of_input_scale_and_shift() {
        for (groups, last, shape) in [
            (2, true, vec![2, 2, 3, 4]),
            (4, true, vec![2, 3, 2, 4]),
            (1, false, vec![2, 4, 5]),
        ] {
            let x = rand_tensor(&shape, 2.0, 3);
            check_layer(&mut layer(groups, last), &[x], 1e-3, 3e-3, 30).unwrap();
        }
        assert!(layer(2, true)
            .forward(&[&Tensor::ones(vec![2, 3])], Mode::Eval)
            .is_err());
    }
}
