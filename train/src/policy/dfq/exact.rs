//! `--dfq-exec all`: the reference's block execution (spec §6.3). Every candidate runs the
//! whole block over the whole batch, `y_k = block(x; a_k, g_k)`; the block output mixes them
//! with the one-hot masks, `x' = Σ_k m[:,k]·y_k`; backward sends `m[:,k]·dL/dx'` through
//! candidate `k` (batch norm couples the samples, as in the reference) and gives the gate its
//! task gradient `dL/dm[s,k] = ⟨dL/dx'[s], y_k[s]⟩` for every `k`.
//!
//! The engine's layers keep their backward caches, so each candidate runs on its own replica
//! of the network. Before a block runs, replica `k` takes the main network's parameters and
//! quantizer state; running statistics (batch norm, activation ranges) are chained through the
//! candidates in order, as the reference updates its shared statistics once per candidate, and
//! go back to the main network afterwards. Parameter gradients of the replicas are summed into
//! the main network. Candidate 0 uses the main network's noise seed, so one candidate
//! reproduces the selected-only path bit for bit.

use std::ops::Range;

use ndarray::{Array2, Axis};

use super::sample_bits::PerSampleBits;
use cptsim_nn::error::{Result, SimError};
use cptsim_nn::layers::{Layer, Mode, Tensor};
use cptsim_nn::net::Graph;
use cptsim_nn::quant::mix64;

/// The replicas and the per-pass cache of the exact execution.
pub(crate) struct Exact {
    replicas: Vec<Graph>,
    /// Node range of each gated block (input value `start`, output value `end`).
    pub(crate) ranges: Vec<Range<usize>>,
    /// Candidate outputs of each block of the last training pass.
    pub(crate) ys: Vec<Vec<Tensor>>,
}

fn missing(node: usize) -> SimError {
    SimError::invalid("--dfq-exec all", format!("replica has no node {node}"))
}

/// Node ranges of the blocks whose inputs are `attach[i]` and last gated nodes `last[i]`: a
/// block ends where the next begins; the last ends as far after its last gated node as the
/// one before it (after the residual add and its activation), else at the first point that
/// closes it. Every range must be a single-input, single-output region.
pub(crate) fn block_ranges(
    graph: &Graph,
    attach: &[usize],
    last: &[usize],
) -> Result<Vec<Range<usize>>> {
    let n = attach.len();
    let mut ranges = Vec::with_capacity(n);
    for i in 0..n {
        let end = if i + 1 < n {
            Some(attach[i + 1])
        } else {
            let mirrored = (i > 0)
                .then(|| last[i] + (attach[i] - last[i - 1]))
                .filter(|&e| graph.is_closed(attach[i]..e));
            mirrored
                .or_else(|| (last[i] + 1..=graph.len()).find(|&e| graph.is_closed(attach[i]..e)))
        };
        match end.filter(|&e| e > last[i] && graph.is_closed(attach[i]..e)) {
            Some(e) => ranges.push(attach[i]..e),
            None => {
                return Err(SimError::invalid(
                    "--dfq-exec all",
                    format!(
                        "block {i} (nodes from {}) is not a single-input, single-output part of \
                         the network; run the candidates per sample (--dfq-exec selected)",
                        attach[i]
                    ),
                ))
            }
        }
    }
    Ok(ranges)
}

impl Exact {
    /// One replica per candidate, each built like `main`.
    pub(crate) fn new(
        main: &Graph,
        replicas: Vec<Graph>,
        ranges: Vec<Range<usize>>,
    ) -> Result<Self> {
        if let Some(r) = replicas.iter().find(|r| r.len() != main.len()) {
            return Err(SimError::invalid(
                "--dfq-exec all",
                format!(
                    "a replica has {} nodes, the network {}",
                    r.len(),
                    main.len()
                ),
            ));
        }
        Ok(Self {
            replicas,
            ranges,
            ys: Vec::new(),
        })
    }

    /// Runs block `block` of every candidate on `x` (training mode); `gated` are its nodes
    /// quantized at the candidates' `bits` (activation, error). Returns the outputs `y_k`.
    pub(crate) fn forward_block(
        &mut self,
        main: &mut Graph,
        block: usize,
        gated: &[usize],
        bits: &[(u32, u32)],
        x: &Tensor,
    ) -> Result<Vec<Tensor>> {
        let range = self.ranges[block].clone();
        let batch = x.shape().first().copied().unwrap_or(0);
        let mut ys = Vec::with_capacity(self.replicas.len());
        for k in 0..self.replicas.len() {
            let (before, rest) = self.replicas.split_at_mut(k);
            let replica = &mut rest[0];
            for j in range.clone() {
                let m = main.layer_mut(j).ok_or_else(|| missing(j))?;
                let r = replica.layer_mut(j).ok_or_else(|| missing(j))?;
                for (rp, mp) in r.params_mut().into_iter().zip(m.params_mut()) {
                    rp.value.assign(&mp.value);
                }
                if let (Some(rq), Some(mq)) = (r.quant_mut(), m.quant_mut()) {
                    *rq = mq.clone();
                    if k > 0 {
                        rq.seed = mix64(mq.seed ^ k as u64);
                    }
                    rq.hook = match gated.contains(&j) {
                        true => PerSampleBits::hook(vec![bits[k]; batch]),
                        false => None,
                    };
                }
                let source = match k {
                    0 => m,
                    _ => before[k - 1].layer_mut(j).ok_or_else(|| missing(j))?,
                };
                copy_running(r, source);
            }
            ys.push(replica.forward_range(range.clone(), x.clone(), Mode::Train)?);
        }
        if let Some(last) = self.replicas.last_mut() {
            for j in range {
                let m = main.layer_mut(j).ok_or_else(|| missing(j))?;
                copy_running(m, last.layer_mut(j).ok_or_else(|| missing(j))?);
            }
        }
        Ok(ys)
    }

    /// Backward of block `block` given the gradient `g` of its mixed output and the choices
    /// `pick`: each chosen candidate back-propagates its masked gradient; the replicas'
    /// parameter gradients are summed into `main`. Returns the gradient of the block input.
    pub(crate) fn backward_block(
        &mut self,
        main: &mut Graph,
        block: usize,
        pick: &[usize],
        g: &Tensor,
    ) -> Result<Tensor> {
        let range = self.ranges[block].clone();
        let mut dx: Option<Tensor> = None;
        let mut ran = Vec::new();
        for (k, replica) in self.replicas.iter_mut().enumerate() {
            if !pick.contains(&k) {
                continue;
            }
            let mut gk = g.clone();
            for (s, mut row) in gk.axis_iter_mut(Axis(0)).enumerate() {
                if pick.get(s) != Some(&k) {
                    row.fill(0.0);
                }
            }
            let d = replica.backward_range(range.clone(), gk)?;
            dx = Some(match dx {
                Some(mut acc) => {
                    acc += &d;
                    acc
                }
                None => d,
            });
            ran.push(k);
        }
        for j in range {
            let m = main.layer_mut(j).ok_or_else(|| missing(j))?;
            for p in m.params_mut() {
                p.grad.fill(0.0);
            }
            for &k in &ran {
                let r = self.replicas[k].layer_mut(j).ok_or_else(|| missing(j))?;
                for (mp, rp) in m.params_mut().into_iter().zip(r.params_mut()) {
                    mp.grad += &rp.grad;
                }
                if let (Some(mq), Some(rq)) = (m.quant_mut(), r.quant_mut()) {
                    mq.error_calls = mq.error_calls.max(rq.error_calls);
                }
            }
        }
        dx.ok_or_else(|| {
            SimError::invalid("dfq", format!("block {block}: no sample chose a candidate"))
        })
    }
}

/// Batch-norm statistics and the activation ranges of `src` into `dst`.
fn copy_running(dst: &mut dyn Layer, src: &mut dyn Layer) {
    for (d, s) in dst.buffers_mut().into_iter().zip(src.buffers_mut()) {
        d.clone_from(s);
    }
    if let (Some(d), Some(s)) = (dst.quant_mut(), src.quant_mut()) {
        d.act_range = s.act_range;
        d.act_range_b = s.act_range_b;
    }
}

/// The block output with one-hot masks: sample `s` takes `ys[pick[s]][s]`.
pub(crate) fn mix(ys: &[Tensor], pick: &[usize]) -> Result<Tensor> {
    let first = ys
        .first()
        .ok_or_else(|| SimError::invalid("dfq", "no candidate outputs"))?;
    let mut out = first.clone();
    for (s, &k) in pick.iter().enumerate() {
        if k != 0 {
            let y = ys
                .get(k)
                .ok_or_else(|| SimError::invalid("dfq", format!("no candidate {k}")))?;
            out.index_axis_mut(Axis(0), s)
                .assign(&y.index_axis(Axis(0), s));
        }
    }
    Ok(out)
}

/// The task gradient of the masks, `dL/dm[s,k] = ⟨g[s], ys[k][s]⟩`, as `[B, K]`.
pub(crate) fn task_dprobs(g: &Tensor, ys: &[Tensor]) -> Array2<f32> {
    let b = g.shape().first().copied().unwrap_or(0);
    Array2::from_shape_fn((b, ys.len()), |(s, k)| {
        let gs = g.index_axis(Axis(0), s);
        let ys = ys[k].index_axis(Axis(0), s);
        gs.iter()
            .zip(ys.iter())
            .map(|(a, y)| f64::from(a * y))
            .sum::<f64>() as f32
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, IxDyn};

    #[test]
    fn a_block_that_is_not_a_closed_region_is_a_clear_error() {
        let ir = cptsim_models::load_graph("zoo:resnet20", 2).unwrap();
        let opts = cptsim_nn::build::BuildOptions::default();
        let net =
            crate::TrainNet::from_network(cptsim_nn::build::build_network(&ir, &opts).unwrap());
        let mut g = net.unwrap().graph;
        // the first block: body convs = quantized layers 1 and 2, input = the first conv's input
        let convs = g.quant_nodes();
        let attach = g.node_inputs(convs[1]).unwrap()[0];
        let ranges = block_ranges(&g, &[attach], &[convs[2]]).unwrap();
        assert!(ranges[0].start == attach && ranges[0].end > convs[2]);
        // a next block starting inside the first cuts its skip connection: the residual add
        // still reads the first block's input
        let inner = g.node_inputs(convs[2]).unwrap()[0];
        let e = block_ranges(&g, &[attach, inner], &[convs[1], convs[2]])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--dfq-exec") && e.contains("block 0") && e.contains("single-input"),
            "{e}"
        );
    }

    #[test]
    fn mixing_picks_rows_and_the_mask_gradient_is_the_inner_product() {
        let y = |base: f32| {
            ArrayD::from_shape_fn(IxDyn(&[3, 2, 2]), |i| {
                base + (i[0] * 4 + i[1] * 2 + i[2]) as f32
            })
        };
        let ys = vec![y(0.0), y(100.0)];
        let pick = [1, 0, 1];
        let x = mix(&ys, &pick).unwrap();
        assert_eq!(x.index_axis(Axis(0), 0), ys[1].index_axis(Axis(0), 0));
        assert_eq!(x.index_axis(Axis(0), 1), ys[0].index_axis(Axis(0), 1));
        // L = Σ w·x with x = Σ_k m_k y_k and continuous masks: dL/dm[s,k] by finite differences
        let w = ArrayD::from_shape_fn(IxDyn(&[3, 2, 2]), |i| {
            ((i[0] + 2 * i[1] + 3 * i[2]) as f32).sin()
        });
        let d = task_dprobs(&w, &ys);
        let loss = |m: &Array2<f32>| -> f64 {
            let mut acc = 0.0;
            for s in 0..3 {
                for (k, yk) in ys.iter().enumerate() {
                    let dot: f32 = w
                        .index_axis(Axis(0), s)
                        .iter()
                        .zip(yk.index_axis(Axis(0), s))
                        .map(|(a, b)| a * b)
                        .sum();
                    acc += f64::from(m[[s, k]] * dot);
                }
            }
            acc
        };
        let mut m = Array2::from_shape_fn((3, 2), |(s, k)| f32::from(u8::from(pick[s] == k)));
        for s in 0..3 {
            for k in 0..2 {
                m[[s, k]] += 0.5;
                let up = loss(&m);
                m[[s, k]] -= 1.0;
                let down = loss(&m);
                m[[s, k]] += 0.5;
                assert!((up - down - f64::from(d[[s, k]])).abs() < 1e-2, "{s},{k}");
            }
        }
        assert!(mix(&[], &pick).is_err() && mix(&ys, &[2]).is_err());
    }
}
