//! Pooling and reductions: `MaxPool`, `AveragePool`, `GlobalAveragePool`, `ReduceMean`.

use super::super::context::Importer;
use super::super::node::NodeView;
use super::super::registry::Registry;
use super::super::value::Val;
use super::{spatial, window};
use crate::error::ModelError;
use crate::ir::{AvgPool, Op, Pool};

/// Registers `MaxPool`, `AveragePool`, `GlobalAveragePool` and `ReduceMean`.
pub fn register(reg: &mut Registry) {
    reg.insert("MaxPool", max_pool);
    reg.insert("AveragePool", average_pool);
    reg.insert("GlobalAveragePool", global_average_pool);
    reg.insert("ReduceMean", reduce_mean);
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

/// `ReduceMean(X[, axes])`: axes as attribute (opset < 18) or input (opset ≥ 18); no axes means
/// all axes unless `noop_with_empty_axes`.
fn reduce_mean(imp: &mut Importer, node: &NodeView) -> Result<Val, ModelError> {
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
    imp.push(node, Op::ReduceMean { axes, keepdims }, vec![x])
}
