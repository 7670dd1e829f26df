//! LDP's forward-cost loss (spec §8): `C = Σ_l MAC_l·b_l²` (the spec's `/32` and fp32-BitOps
//! normalisation cancel in the balanced gradient), its gradient with respect to β, the balancing
//! of task and cost gradients, and the cost ratio a trace reached.

use cptsim_traces::TraceRow;

/// `C = Σ_l MAC_l·b_l²`.
pub fn forward_cost(macs: &[f64], bits: &[u8]) -> f64 {
    macs.iter()
        .zip(bits)
        .map(|(m, &b)| m * f64::from(b) * f64::from(b))
        .sum()
}

/// `G_C,l = ∂C/∂β_l = MAC_l·2·b_l·n` when `cost ≥ target`, else 0 (the hinge `L_cost = C` above
/// the target, 0 below); `n = ∂b/∂β`.
pub fn cost_grad(macs: &[f64], bits: &[u8], n: f64, cost: f64, target: f64) -> Vec<f64> {
    let active = cost >= target;
    macs.iter()
        .zip(bits)
        .map(|(m, &b)| {
            if active {
                m * 2.0 * f64::from(b) * n
            } else {
                0.0
            }
        })
        .collect()
}

fn mean_abs(v: &[f64]) -> f64 {
    v.iter().map(|x| x.abs()).sum::<f64>() / v.len().max(1) as f64
}

/// `G_l = G_T,l + α·G_C,l·mean|G_T| / (mean|G_C| + ε)`.
pub fn balanced(task: &[f64], cost: &[f64], alpha: f64, eps: f64) -> Vec<f64> {
    let scale = alpha * mean_abs(task) / (mean_abs(cost) + eps);
    task.iter().zip(cost).map(|(t, c)| t + scale * c).collect()
}

/// Mean of `C(t)/T_static` over the iterations `from..to` of a trace, where `layers` lists the
/// (trace layer index, MAC) pairs of the LDP-controlled layers and `C(t)` charges each at its
/// forward bits (`Bits::w`). `None` for an empty window or a zero `t_static`.
pub fn mean_ratio(
    rows: &[TraceRow],
    layers: &[(u32, f64)],
    t_static: f64,
    from: u64,
    to: u64,
) -> Option<f64> {
    if to <= from || t_static <= 0.0 {
        return None;
    }
    let mut sum = 0.0;
    for r in rows {
        let Some(&(_, mac)) = layers.iter().find(|(l, _)| *l == r.layer) else {
            continue;
        };
        let overlap = r.iter_end.min(to).saturating_sub(r.iter_start.max(from));
        let b = f64::from(r.bits.w);
        sum += mac * b * b * overlap as f64;
    }
    Some(sum / (t_static * (to - from) as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_traces::Bits;

    #[test]
    fn cost_gradient_matches_finite_differences_and_hinges_at_the_target() {
        let macs = [3.0, 1.0, 7.5];
        let bits = [4u8, 6, 5];
        let n = 8.0;
        let c = forward_cost(&macs, &bits);
        assert_eq!(c, 3.0 * 16.0 + 36.0 + 7.5 * 25.0);
        let g = cost_grad(&macs, &bits, n, c, c);
        // C as a function of continuous β (b = β·n): central difference per layer.
        let h = 1e-4;
        for (l, &gl) in g.iter().enumerate() {
            let cont = |db: f64| -> f64 {
                (0..3)
                    .map(|k| {
                        let b = f64::from(bits[k]) + if k == l { db * n } else { 0.0 };
                        macs[k] * b * b
                    })
                    .sum()
            };
            let fd = (cont(h) - cont(-h)) / (2.0 * h);
            assert!((fd - gl).abs() < 1e-6 * fd.abs(), "{l}: {fd} vs {gl}");
        }
        assert!(cost_grad(&macs, &bits, n, c, c + 1.0)
            .iter()
            .all(|&v| v == 0.0));
    }

    #[test]
    fn balancing_rescales_the_cost_gradient_to_the_task_gradient() {
        let g = balanced(&[1.0, -3.0], &[10.0, 30.0], 1.0, 0.0);
        // mean|G_T| = 2, mean|G_C| = 20: G_C scaled by 0.1.
        assert_eq!(g, vec![2.0, 0.0]);
        assert_eq!(
            balanced(&[1.0, -3.0], &[0.0, 0.0], 1.0, 1e-8),
            vec![1.0, -3.0]
        );
    }

    #[test]
    fn mean_ratio_weights_spans_by_their_overlap() {
        let row = |s, e, layer, fw| TraceRow {
            iter_start: s,
            iter_end: e,
            layer,
            bits: Bits::forward_backward(fw, 8),
            samples: 4,
        };
        let rows = [
            row(0, 5, 0, 8),
            row(0, 5, 1, 8),
            row(0, 5, 2, 8),
            row(5, 10, 0, 4),
            row(5, 10, 1, 8),
            row(5, 10, 2, 8),
        ];
        let layers = [(0, 1.0), (1, 3.0)];
        let t_static = 4.0 * 64.0;
        assert_eq!(mean_ratio(&rows, &layers, t_static, 0, 5), Some(1.0));
        // Iterations 5..10: (16 + 3·64)/256.
        let late = (16.0 + 192.0) / 256.0;
        assert_eq!(mean_ratio(&rows, &layers, t_static, 5, 10), Some(late));
        assert_eq!(
            mean_ratio(&rows, &layers, t_static, 3, 7),
            Some((2.0 + 2.0 * late) / 4.0)
        );
        assert_eq!(mean_ratio(&rows, &layers, t_static, 5, 5), None);
    }
}
