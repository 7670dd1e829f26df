//! Evaluation: a depthwise conv and the 1×1 conv reading its output, run by parts of about
//! [`PART_VALUES`] depthwise outputs (256 KiB: in L2 beside the part of the 1×1 conv's output),
//! each part taking the depthwise conv's bias and epilogue, then the 1×1 conv's product, bias
//! and epilogue, instead of writing the whole depthwise output to memory and reading it back.
//! Every value gets the operations of the two convs run one after the other, in the same order
//! (each output of either conv is its own chain, whatever the rows a part covers), so the
//! output is the same bit for bit.

use std::mem::MaybeUninit;

use ndarray::{ArrayView2, CowArray, IxDyn};

use super::{
    add_bias, as4, block_of, data, filled_by_blocks, shape_err, weight_matrix, Conv2d, Epilogue,
    Prepared, Tensor, PART_VALUES,
};
use crate::error::{Result, SimError};
use cptsim_kernels::gemm::{matmul_uninit, PackedB, B};

impl Conv2d {
    /// Whether an evaluation pass runs this layer's product on its input and weights as they
    /// are (fp32: no quantizer, no integer GEMMs, no hook).
    fn plain_fp32(&self) -> bool {
        self.quant.bits_fw == 0 && self.quant.hook.is_none() && self.quant.integer_gemms().is_none()
    }

    /// Whether this layer and `next`, reading its output, may run as
    /// [`Conv2d::forward_depthwise_then_pointwise`]: a depthwise conv then a 1×1 conv at stride 1
    /// without padding, of one group, on its channels, both fp32.
    pub(crate) fn fuses_with_pointwise(&self, next: &Conv2d) -> bool {
        let (a, b) = (&self.spec, &next.spec);
        a.is_depthwise()
            && b.kernel == [1, 1]
            && b.stride == [1, 1]
            && b.pads == [0; 4]
            && b.groups == 1
            && b.in_channels == a.out_channels
            && self.plain_fp32()
            && next.plain_fp32()
    }

    /// The packed weights of this 1×1 conv's evaluation product, as its own pass packs them,
    /// kept for the next evaluation pass.
    fn eval_packed(&mut self) -> Result<&PackedB> {
        let key = self.prepared_key();
        let prepared = self.prepared.take().filter(|p| p.key == key);
        let mut prep = prepared.unwrap_or(Prepared {
            key,
            packed: None,
            wino: None,
            grouped: None,
        });
        if prep.packed.is_none() {
            let w = weight_matrix(&self.name, &self.spec, &self.weight)?;
            prep.packed = Some(PackedB::new(w.t()));
        }
        let prep = self.prepared.insert(prep);
        prep.packed
            .as_ref()
            .ok_or_else(|| SimError::shape(&self.name, "weights not packed"))
    }

    /// The evaluation pass of this depthwise conv with epilogue `first`, then of the 1×1 conv
    /// `pw` reading its output with epilogue `second` ([`Conv2d::fuses_with_pointwise`]), part
    /// by part (see the module's notes). The depthwise output is never stored whole.
    pub(crate) fn forward_depthwise_then_pointwise(
        &mut self,
        x: CowArray<'_, f32, IxDyn>,
        first: &Epilogue,
        pw: &mut Conv2d,
        second: &Epilogue,
    ) -> Result<Tensor> {
        if !self.fuses_with_pointwise(pw) {
            return Err(SimError::shape(
                &self.name,
                format!("cannot run with {} as one pass", pw.name),
            ));
        }
        let x4 = as4(&self.name, &x)?;
        let n = x4.dim().0;
        let geo = self.geometry(&x4)?;
        let (oh, ow) = geo.out_hw;
        let (c, o) = (self.spec.out_channels, pw.spec.out_channels);
        let name = self.name.as_str();
        let w = weight_matrix(name, &self.spec, &self.weight)?;
        let dw_t_arr = w.t().as_standard_layout().into_owned();
        let dw_t = dw_t_arr
            .as_slice()
            .ok_or_else(|| SimError::shape(name, "weights not contiguous"))?;
        let dw_bias = self
            .bias
            .as_ref()
            .map(|b| data(name, &b.value))
            .transpose()?;
        let pw_name = pw.name.clone();
        let pw_bias = pw
            .bias
            .as_ref()
            .map(|b| data(&pw_name, &b.value).map(<[f32]>::to_vec))
            .transpose()?;
        pw.cache = None;
        let packed = pw.eval_packed()?;
        let xs = data(name, &x)?;
        let spb = geo.samples_per_block();
        let rows = spb * geo.rows_per_sample();
        let part_rows = (PART_VALUES / c.max(1)).max(1);
        let len = [oh, ow, o]
            .iter()
            .try_fold(n, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| SimError::shape(&pw_name, "output size overflows"))?;
        let y = filled_by_blocks(len, rows * o, |i, yb| {
            let xb = block_of(xs, spb * geo.in_per_sample(), i);
            let mut mid =
                vec![MaybeUninit::<f32>::uninit(); part_rows.min(yb.len() / o.max(1)) * c];
            let (start_mid, start_y) = (i * rows * c, i * rows * o);
            for (p, part) in yb.chunks_mut(part_rows * o).enumerate() {
                let (row0, pr) = (p * part_rows, part.len() / o.max(1));
                let m = geo.depthwise_forward_rows(xb, dw_t, dw_bias, row0..row0 + pr, &mut mid);
                first.apply(m, c, start_mid + row0 * c)?;
                let mv = ArrayView2::from_shape((pr, c), &*m).map_err(shape_err(name))?;
                let part = matmul_uninit(part, mv, B::Packed(packed))?;
                add_bias(part, pw_bias.as_deref());
                second.apply(part, o, start_y + row0 * o)?;
            }
            // SAFETY: the parts cover the block, and each was written above.
            Ok(unsafe { &mut *(std::ptr::from_mut(yb) as *mut [f32]) })
        })?;
        first.check_shape(&[n, oh, ow, c])?;
        self.cache = None;
        if x.is_owned() {
            crate::arena::give(x.into_owned());
        }
        Tensor::from_shape_vec(vec![n, oh, ow, o], y).map_err(shape_err(&pw_name))
    }
}

#[cfg(test)]
mod tests;
