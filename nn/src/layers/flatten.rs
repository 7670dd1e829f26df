//! Flatten `[N, H, W, C]` to `[N, C·H·W]` in **channel-major (NCHW) order**, so that a following
//! linear layer uses ONNX/PyTorch weights unchanged (2-D inputs pass through), and its inverse
//! [`Unflatten`], `[N, C·H·W]` in NCHW order to `[N, H, W, C]` (`view(b, c, 1, 1)` of a
//! squeeze-and-excitation gate; with a flatten before it, any reshape of an image that keeps the
//! batch).

use super::{cached, check_grad, expect_inputs, standard, Layer, Mode, Tensor};
use crate::error::{Result, SimError};

/// Side of the tiles [`transposed`] moves (16 × 16 values: a tile's rows and columns in L1).
const TILE: usize = 16;

/// `t`, each of its `[rows, cols]` samples (row-major, in order) transposed to `[cols, rows]`,
/// as `shape`: between an image's channels-last order (`rows` pixels of `cols` channels) and
/// its channel-major one. Tile by tile, so both sides are read and written in runs.
fn transposed(
    layer: &str,
    t: &Tensor,
    rows: usize,
    cols: usize,
    shape: &[usize],
) -> Result<Tensor> {
    let t = standard(t.view());
    let src = t
        .as_slice()
        .ok_or_else(|| SimError::shape(layer, "tensor is not contiguous"))?;
    let per = rows * cols;
    let mut out = vec![0.0f32; src.len()];
    if per > 0 {
        for (s, d) in src.chunks_exact(per).zip(out.chunks_exact_mut(per)) {
            for r0 in (0..rows).step_by(TILE) {
                for c0 in (0..cols).step_by(TILE) {
                    for r in r0..(r0 + TILE).min(rows) {
                        let row = &s[r * cols..(r + 1) * cols];
                        for c in c0..(c0 + TILE).min(cols) {
                            d[c * rows + r] = row[c];
                        }
                    }
                }
            }
        }
    }
    Tensor::from_shape_vec(shape.to_vec(), out).map_err(|e| SimError::shape(layer, e.to_string()))
}

/// `[N, H, W, C]` → its `N` samples' pixels and channels.
fn image_dims(layer: &str, shape: &[usize]) -> Result<[usize; 4]> {
    match *shape {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => Err(SimError::shape(
            layer,
            format!("expected [N, H, W, C], got {shape:?}"),
        )),
    }
}

/// The flatten layer.
pub struct Flatten {
    name: String,
    in_shape: Option<Vec<usize>>,
}

impl Flatten {
    /// A new flatten layer.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            in_shape: None,
        }
    }
}

impl Layer for Flatten {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        self.in_shape = (mode == Mode::Train).then(|| x.shape().to_vec());
        if x.ndim() == 2 {
            return Ok(x.clone());
        }
        let [n, h, w, c] = image_dims(&self.name, x.shape())?;
        transposed(&self.name, x, h * w, c, &[n, c * h * w])
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let shape = cached(&self.name, &self.in_shape)?;
        if shape.len() == 2 {
            check_grad(&self.name, &grad_out, shape)?;
            return Ok(vec![grad_out.clone()]);
        }
        let (n, h, w, c) = (shape[0], shape[1], shape[2], shape[3]);
        check_grad(&self.name, &grad_out, &[n, c * h * w])?;
        Ok(vec![transposed(
            &self.name,
            &grad_out,
            c,
            h * w,
            &[n, h, w, c],
        )?])
    }
}

/// `[N, C·H·W]` (channel-major, as ONNX and PyTorch order it) to `[N, H, W, C]`.
pub struct Unflatten {
    name: String,
    chw: [usize; 3],
    /// The batch of the last training forward pass.
    batch: Option<usize>,
}

impl Unflatten {
    /// A layer giving each sample the image shape `[c, h, w]` (IR order).
    pub fn new(name: &str, chw: [usize; 3]) -> Self {
        Self {
            name: name.to_string(),
            chw,
            batch: None,
        }
    }
}

impl Layer for Unflatten {
    fn name(&self) -> &str {
        &self.name
    }

    fn forward(&mut self, inputs: &[&Tensor], mode: Mode) -> Result<Tensor> {
        let x = expect_inputs(&self.name, inputs, 1)?[0];
        let [c, h, w] = self.chw;
        let n = x.shape().first().copied().unwrap_or(0);
        if x.shape() != [n, c * h * w] {
            return Err(SimError::shape(
                &self.name,
                format!(
                    "expects [N, {}] to view as [N, {c}, {h}, {w}], got {:?}",
                    c * h * w,
                    x.shape()
                ),
            ));
        }
        self.batch = (mode == Mode::Train).then_some(n);
        transposed(&self.name, x, c, h * w, &[n, h, w, c])
    }

    fn backward(&mut self, grad_out: Tensor) -> Result<Vec<Tensor>> {
        let n = *cached(&self.name, &self.batch)?;
        let [c, h, w] = self.chw;
        check_grad(&self.name, &grad_out, &[n, h, w, c])?;
        Ok(vec![transposed(
            &self.name,
            &grad_out,
            h * w,
            c,
            &[n, c * h * w],
        )?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::gradcheck::{check_layer, rand_tensor};
    use super::*;

    #[test]
    fn channel_major_order_and_gradient() {
        // x[0, h, w, c] = 100c + 10h + w; NCHW flatten lists c slowest.
        let x = Tensor::from_shape_fn(vec![1, 2, 2, 3], |d| (100 * d[3] + 10 * d[1] + d[2]) as f32);
        let y = Flatten::new("f").forward(&[&x], Mode::Eval).unwrap();
        assert_eq!(&y.as_slice().unwrap()[..5], &[0.0, 1.0, 10.0, 11.0, 100.0]);
        check_layer(
            &mut Flatten::new("f"),
            &[rand_tensor(&[2, 3, 2, 4], 1.0, 1)],
            1e-2,
            1e-3,
            20,
        )
        .unwrap();
    }

    #[test]
    fn unflatten_inverts_flatten_and_has_its_gradient() {
        let x = rand_tensor(&[2, 3, 2, 4], 1.0, 4);
        let flat = Flatten::new("f").forward(&[&x], Mode::Eval).unwrap();
        let back = Unflatten::new("u", [4, 3, 2])
            .forward(&[&flat], Mode::Eval)
            .unwrap();
        assert_eq!(back, x);
        // [N, C] → [N, C, 1, 1]: the SE gate's view(b, c, 1, 1) keeps the element order
        let s = Tensor::from_shape_fn(vec![2, 5], |d| (10 * d[0] + d[1]) as f32);
        let y = Unflatten::new("u", [5, 1, 1])
            .forward(&[&s], Mode::Eval)
            .unwrap();
        assert_eq!(y.shape(), &[2, 1, 1, 5]);
        assert_eq!(y.as_slice().unwrap(), s.as_slice().unwrap());
        check_layer(
            &mut Unflatten::new("u", [2, 3, 2]),
            &[rand_tensor(&[2, 12], 1.0, 5)],
            1e-2,
            1e-3,
            20,
        )
        .unwrap();
        let e = Unflatten::new("u", [2, 3, 2])
            .forward(&[&rand_tensor(&[2, 11], 1.0, 5)], Mode::Eval)
            .unwrap_err()
            .to_string();
        assert!(e.contains("[N, 12]") && e.contains("[2, 11]"), "{e}");
        let mut u = Unflatten::new("u", [2, 3, 2]);
        assert!(
            u.backward(rand_tensor(&[2, 3, 2, 2], 1.0, 5)).is_err(),
            "no forward"
        );
    }
}
