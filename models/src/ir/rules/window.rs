//! Window ops: `Conv` (a GEMM layer), `MaxPool` / `AveragePool` and `GlobalAveragePool`.

use super::LayerIo;
use crate::ir::op::{Conv, Pool};
use crate::ir::shape::{conv_macs, window_out};
use crate::summary::{LayerInfo, LayerKind, LayerRole};

impl Conv {
    /// `[N, C_out, H', W']` of an NCHW input, after checking the weight, groups and bias fit.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let w = self.weight.shape();
        let [n, cin, h, wd] = x else {
            return Err(format!("input {x:?} must be NCHW (rank 4)"));
        };
        let [cout, cpg, kh, kw] = w else {
            return Err(format!(
                "weight has rank {}, expected 4 ([C_out, C_in/groups, kh, kw])",
                w.len()
            ));
        };
        let g = self.groups;
        if g == 0 || cin % g != 0 || cout % g != 0 || cin / g != *cpg {
            return Err(format!(
                "weight {w:?} with group {g} does not fit input {x:?} ({cin} channels)"
            ));
        }
        if let Some(b) = &self.bias {
            if b.shape() != [*cout] {
                return Err(format!("bias has shape {:?}, expected [{cout}]", b.shape()));
            }
        }
        let [pt, pl, pb, pr] = self.pads;
        let oh = window_out(*h, pt + pb, *kh, self.strides[0], self.dilations[0], false)?;
        let ow = window_out(*wd, pl + pr, *kw, self.strides[1], self.dilations[1], false)?;
        Ok(vec![*n, *cout, oh, ow])
    }

    /// The conv as a layer: `[C, H, W]` in and out, its window, and `Depthwise` when every
    /// input channel is its own group.
    pub fn layer(&self, io: &LayerIo) -> LayerInfo {
        let kernel = self.kernel();
        let in_shape = chw(io.input);
        let out_shape = chw(io.output);
        let depthwise = self.groups > 1 && self.groups == in_shape[0];
        LayerInfo {
            name: io.name.to_string(),
            kind: LayerKind::Conv,
            role: if depthwise {
                LayerRole::Depthwise
            } else {
                LayerRole::Body
            },
            in_shape,
            out_shape,
            kernel,
            stride: self.strides,
            pads: self.pads,
            dilation: self.dilations,
            groups: self.groups,
            params: io.params,
            macs: conv_macs(out_shape, in_shape[0], self.groups, kernel),
            hidden: None,
        }
    }
}

impl Pool {
    /// `[N, C, H', W']` of an NCHW input. With `ceil_mode` the last window must start inside
    /// the input or its left/top padding.
    pub fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        let [n, c, h, w] = x else {
            return Err(format!("input {x:?} must be NCHW (rank 4)"));
        };
        let [pt, pl, pb, pr] = self.pads;
        let (k, s, d) = (self.kernel, self.strides, self.dilations);
        let mut oh = window_out(*h, pt + pb, k[0], s[0], d[0], self.ceil_mode)?;
        let mut ow = window_out(*w, pl + pr, k[1], s[1], d[1], self.ceil_mode)?;
        if self.ceil_mode {
            if (oh - 1) * s[0] >= h + pt {
                oh -= 1;
            }
            if (ow - 1) * s[1] >= w + pl {
                ow -= 1;
            }
        }
        Ok(vec![*n, *c, oh, ow])
    }
}

/// `GlobalAveragePool`: the spatial axes (2 and on) become 1.
pub fn global_pool(x: &[usize]) -> Result<Vec<usize>, String> {
    if x.len() < 3 {
        return Err(format!("input {x:?} needs rank ≥ 3"));
    }
    let mut s = x.to_vec();
    s[2..].iter_mut().for_each(|d| *d = 1);
    Ok(s)
}

/// `[C, H, W]` of an NCHW shape.
fn chw(shape: &[usize]) -> [usize; 3] {
    match shape {
        [_, c, h, w] => [*c, *h, *w],
        _ => [shape.iter().skip(1).product(), 1, 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_mode_drops_a_window_starting_in_the_padding() {
        let p = Pool {
            kernel: [2, 2],
            strides: [2, 2],
            pads: [1, 1, 1, 1],
            dilations: [1, 1],
            ceil_mode: true,
        };
        // 4 + 2 padding: ceil((6-2)/2)+1 = 3 windows, the third starts at 4 = h + pt - 1 → kept.
        assert_eq!(p.output_shape(&[1, 1, 4, 4]), Ok(vec![1, 1, 3, 3]));
        let p = Pool {
            pads: [0, 0, 1, 1],
            ..p
        };
        // 5 rows padded to 6? no: 4 + 1 = 5 → ceil(3/2)+1 = 3, third starts at 4 ≥ 4 → dropped.
        assert_eq!(p.output_shape(&[1, 1, 4, 4]), Ok(vec![1, 1, 2, 2]));
    }
}
