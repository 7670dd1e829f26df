//! What a checkpoint must satisfy beyond its checksum: a header that holds together, and a fit
//! with the run rebuilt from its settings. Each failure says what does not hold.

use super::Header;

/// Values the header's tensor list asks for (parameters, velocities when stored, buffers), or
/// `None` when the count overflows.
fn stored_values(h: &Header) -> Option<usize> {
    let params = h.params.iter().try_fold(0usize, |sum, shape| {
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        sum.checked_add(n)
    })?;
    let params = params.checked_mul(if h.velocity { 2 } else { 1 })?;
    h.buffers
        .iter()
        .try_fold(params, |sum, &n| sum.checked_add(n))
}

/// The header on its own: the trace covers exactly the iterations done, the evaluations come in
/// order within them, and the tensor sizes account for the `values` stored.
pub(super) fn header(h: &Header, values: usize) -> Result<(), String> {
    let done = h.state.iteration;
    h.state
        .recorder
        .check(done)
        .map_err(|e| format!("at iteration {done}: {e}"))?;
    let mut last = 0;
    for e in &h.state.evals {
        if e.iteration <= last || e.iteration > done {
            return Err(format!(
                "an evaluation at iteration {} follows one at {last} in a run at iteration {done}",
                e.iteration
            ));
        }
        last = e.iteration;
    }
    if h.state.pending.is_some() && (done == 0 || last == done) {
        return Err(format!(
            "an evaluation is pending at iteration {done}, which has {}",
            if done == 0 {
                "no iteration before it"
            } else {
                "its evaluation"
            }
        ));
    }
    match stored_values(h) {
        Some(n) if n == values => Ok(()),
        Some(n) => Err(format!(
            "the header lists tensors of {n} values, the file stores {values}"
        )),
        None => Err("the header's tensor sizes overflow".into()),
    }
}

/// Every stored value is finite; else the index of the first that is not, and why.
pub(super) fn finite(h: &Header, values: &[f32]) -> Result<(), (usize, String)> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => {
            let what = match stored_values(&Header {
                buffers: Vec::new(),
                ..h.clone()
            }) {
                Some(p) if i < p => "a parameter or velocity",
                _ => "a batch-norm statistic",
            };
            Err((i, format!("{what} (value {i}) is {}", values[i])))
        }
    }
}

/// What a checkpoint is checked against: the run rebuilt from its settings.
pub(super) struct Run<'a> {
    /// Iterations of the whole run.
    pub iterations: u64,
    /// Shape of each parameter, in checkpoint order.
    pub shapes: &'a [Vec<usize>],
    /// Length of each buffer.
    pub buffers: &'a [usize],
    /// Quantizable layers.
    pub quant_layers: usize,
    /// The policy's name.
    pub policy: &'a str,
    /// Model-summary indices of the layers the trace may name.
    pub layers: &'a [u32],
}

/// The header fits `run`.
pub(super) fn fits(h: &Header, run: &Run<'_>) -> Result<(), String> {
    if h.state.iteration > run.iterations {
        return Err(format!(
            "the checkpoint is at iteration {} of a run of {} iterations",
            h.state.iteration, run.iterations
        ));
    }
    if h.params.as_slice() != run.shapes {
        let first = h.params.iter().zip(run.shapes).position(|(a, b)| a != b);
        return Err(match first {
            Some(i) => format!(
                "parameter {i} is {:?} in the checkpoint, {:?} in the network",
                h.params[i], run.shapes[i]
            ),
            None => format!(
                "{} parameter tensors in the checkpoint, {} in the network",
                h.params.len(),
                run.shapes.len()
            ),
        });
    }
    if h.buffers.as_slice() != run.buffers {
        return Err("batch-norm statistics differ in size".into());
    }
    if h.quant.len() != run.quant_layers {
        return Err(format!(
            "{} quantizer states for {} layers",
            h.quant.len(),
            run.quant_layers
        ));
    }
    if h.policy.name != run.policy {
        return Err(format!(
            "the checkpoint's policy is `{}`, the run's `{}`",
            h.policy.name, run.policy
        ));
    }
    let rows = h.state.recorder.rows();
    if let Some(r) = rows.iter().find(|r| !run.layers.contains(&r.layer)) {
        return Err(format!(
            "the trace names layer {}, which the network does not quantize",
            r.layer
        ));
    }
    Ok(())
}
