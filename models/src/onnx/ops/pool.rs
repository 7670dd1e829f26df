//! Pooling, reductions and resampling: `MaxPool`, `AveragePool`, `GlobalAveragePool`,
//! `ReduceMean`, `ReduceSum`, `ReduceL2`, `Resize`.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use super::{spatial, window};
use crate::error::ModelError;
use crate::ir::{AvgPool, Op, Pool};

/// Registers `MaxPool`, `AveragePool`, `GlobalAveragePool`, `ReduceMean`, `ReduceSum`, `ReduceL2` and
/// `Resize`.
pub fn register(reg: &mut Registry) {
    reg.insert("MaxPool", max_pool);
    reg.insert("AveragePool", average_pool);
    reg.insert("GlobalAveragePool", global_average_pool);
    reg.insert("ReduceMean", |imp, node| reduce(imp, node, Reduction::Mean));
    reg.insert("ReduceSum", |imp, node| reduce(imp, node, Reduction::Sum));
    reg.insert("ReduceL2", |imp, node| reduce(imp, node, Reduction::L2));
    reg.insert("Resize", resize);
}

fn geometry(imp: &Importer, node: &NodeView, x: crate::ir::ValueId) -> Result<Pool, ModelError> {
    let kernel = match node.sizes("kernel_shape")?.as_deref() {
        Some([kh, kw]) if *kh > 0 && *kw > 0 => [*kh, *kw],
        Some(k) => {
            return Err(node.attr_error(
                "kernel_shape",
                format!("expected 2 positive values, got {k:?}"),
            ))
        }
        None => return Err(node.attr_error("kernel_shape", "is missing")),
    };
    let hw = spatial(node, &imp.shape(x))?;
    let (strides, pads, dilations) = window(node, hw, kernel)?;
    let ceil_mode = node.attr_or("ceil_mode", false)?;
    Ok(Pool {
        kernel,
        strides,
        pads,
        dilations,
        ceil_mode,
    })
}

/// `MaxPool(X)`; only the values output (not `Indices`).
fn max_pool(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let pool = geometry(imp, node, x)?;
    imp.push(node, Op::MaxPool(pool), vec![x])
}

/// `AveragePool(X)` with `count_include_pad`.
fn average_pool(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let pool = geometry(imp, node, x)?;
    if pool.dilations != [1, 1] {
        return Err(node.err("dilated average pooling is not supported"));
    }
    let count_include_pad = node.attr_or("count_include_pad", false)?;
    imp.push(
        node,
        Op::AveragePool(AvgPool {
            pool,
            count_include_pad,
        }),
        vec![x],
    )
}

/// `GlobalAveragePool(X)`.
fn global_average_pool(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    imp.push(node, Op::GlobalAveragePool, vec![x])
}

/// The ONNX reductions of a run-time tensor.
#[derive(Clone, Copy)]
enum Reduction {
    Mean,
    Sum,
    L2,
}

/// `ReduceMean(X[, axes])`, `ReduceSum` or `ReduceL2`: axes as attribute or input (opset ≥ 18;
/// ≥ 13 for `ReduceSum`); no axes means all axes unless `noop_with_empty_axes`.
fn reduce(imp: &mut Importer, node: &NodeView, kind: Reduction) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let rank = imp.shape(x).len();
    let raw = match node.ints("axes")? {
        Some(a) => a,
        None => imp
            .opt_const(node, 1)?
            .map(|c| c.ints())
            .unwrap_or_default(),
    };
    if raw.is_empty() && node.attr_or("noop_with_empty_axes", false)? {
        return Ok(Val::Tensor(x));
    }
    let mut axes = if raw.is_empty() {
        (0..rank).collect()
    } else {
        raw.iter()
            .map(|&a| node.axis(a, rank))
            .collect::<Result<Vec<_>, _>>()?
    };
    axes.sort_unstable();
    axes.dedup();
    let keepdims = node.attr_or("keepdims", true)?;
    let op = match kind {
        Reduction::Mean => Op::ReduceMean { axes, keepdims },
        Reduction::Sum => Op::ReduceSum { axes, keepdims },
        Reduction::L2 => Op::ReduceL2 { axes, keepdims },
    };
    imp.push(node, op, vec![x])
}

/// `Resize(X[, roi][, scales][, sizes])` (opset ≥ 11; `Upsample` and opset 10's two-input form
/// are not read): the output size from `sizes`, or `floor(d · scale)` per axis from `scales`;
/// only the axes after batch and channels may change.
fn resize(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
    let x = imp.tensor(node, 0)?;
    let dims = imp.shape(x);
    if node.opset < 11 {
        return Err(node.err("Resize before opset 11 is not supported (re-export at opset ≥ 11)"));
    }
    let mode = node.attr_or("mode", "nearest".to_string())?;
    if !matches!(mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(node.attr_error("mode", format!("unknown value '{mode}'")));
    }
    let sizes = imp.opt_const(node, 3)?.map(|c| c.ints());
    let scales = imp
        .opt_const(node, 2)?
        .map(|c| c.floats())
        .filter(|s| !s.is_empty());
    let shape: Vec<usize> = match (sizes, scales) {
        (Some(s), _) if s.len() == dims.len() => s
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| node.err(format!("negative size {d}"))))
            .collect::<Result<_, _>>()?,
        (None, Some(sc)) if sc.len() == dims.len() => dims
            .iter()
            .zip(&sc)
            .map(|(&d, &f)| {
                let v = (d as f64 * f64::from(f)).floor();
                if v.is_finite() && v >= 1.0 && v <= crate::ir::shape::MAX_ELEMENTS as f64 {
                    Ok(v as usize)
                } else {
                    Err(node.err(format!("scale {f} of axis length {d} gives no valid size")))
                }
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(node.err(format!(
                "needs `sizes` or `scales` with one entry per axis of {dims:?} (constants)"
            )))
        }
    };
    imp.push(node, Op::Resize { shape, mode }, vec![x])
}
