//! Op handlers, one module per op family. Each handler reads one ONNX node and either folds it
//! to a constant or appends the equivalent IR node(s). Each family registers its op types in its
//! own `register`; [`register_all`] gathers them into the importer's [`Registry`].

pub mod activation;
pub mod constant;
pub mod conv;
pub mod einsum;
pub mod elementwise;
pub mod fold_only;
pub mod ids;
pub mod linear;
pub mod mask;
pub mod norm;
pub mod pool;
pub mod recurrent;
pub mod reshape;
pub mod select;

use std::sync::OnceLock;

use super::node::NodeView;
use super::registry::Registry;
use crate::error::ModelError;

/// The importer's table: every family's op types, registered on first use.
pub fn registry() -> &'static Registry {
    static TABLE: OnceLock<Registry> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut reg = Registry::default();
        register_all(&mut reg);
        reg
    })
}

/// Registers every family's op types (the first two, `Conv` and `BatchNormalization`, lead the
/// list of supported ops in errors).
fn register_all(reg: &mut Registry) {
    let families: [fn(&mut Registry); 13] = [
        conv::register,
        norm::register,
        activation::register,
        recurrent::register,
        select::register,
        mask::register,
        ids::register,
        elementwise::register,
        einsum::register,
        pool::register,
        reshape::register,
        linear::register,
        constant::register,
    ];
    for register in families {
        register(reg);
    }
    for &op in fold_only::FOLD_ONLY {
        reg.insert(op, fold_only::only_folds);
    }
}

/// `(strides, pads [top, left, bottom, right], dilations)` of a 2-D window op.
pub type WindowGeometry = ([usize; 2], [usize; 4], [usize; 2]);

/// Strides, explicit pads `[top, left, bottom, right]` and dilations of a 2-D window op
/// (Conv, MaxPool, AveragePool) reading an input of spatial size `hw` with kernel `kernel`;
/// resolves `auto_pad`.
pub fn window(
    node: &NodeView,
    hw: [usize; 2],
    kernel: [usize; 2],
) -> Result<WindowGeometry, ModelError> {
    let pair = |name: &str| -> Result<[usize; 2], ModelError> {
        match node.sizes(name)?.as_deref() {
            None => Ok([1, 1]),
            Some([a, b]) if *a > 0 && *b > 0 => Ok([*a, *b]),
            Some(v) => Err(node.attr_error(name, format!("expected 2 positive values, got {v:?}"))),
        }
    };
    let strides = pair("strides")?;
    let dilations = pair("dilations")?;
    let auto_pad: String = node.attr_or("auto_pad", String::new())?;
    let pads = match auto_pad.as_str() {
        "" | "NOTSET" => match node.sizes("pads")?.as_deref() {
            None => [0; 4],
            Some([t, l, b, r]) => [*t, *l, *b, *r],
            Some(v) => return Err(node.attr_error("pads", format!("expected 4 values, got {v:?}"))),
        },
        "VALID" => [0; 4],
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut p = [0; 4];
            for i in 0..2 {
                let out = hw[i].div_ceil(strides[i]);
                let span = (kernel[i].max(1) - 1) * dilations[i] + 1;
                let total = ((out - 1) * strides[i] + span).saturating_sub(hw[i]);
                let small = total / 2;
                let (begin, end) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                p[i] = begin;
                p[i + 2] = end;
            }
            p
        }
        other => return Err(node.attr_error("auto_pad", format!("unknown value '{other}'"))),
    };
    Ok((strides, pads, dilations))
}

/// Spatial size `[H, W]` of an NCHW shape.
pub fn spatial(node: &NodeView, shape: &[usize]) -> Result<[usize; 2], ModelError> {
    match shape {
        [_, _, h, w] => Ok([*h, *w]),
        _ => Err(node.err(format!(
            "input {shape:?} must be NCHW (rank 4); only 2-D ops are supported"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_type_is_registered_by_exactly_one_family() {
        let mut reg = Registry::default();
        register_all(&mut reg);
        assert!(reg.duplicates().is_empty(), "{:?}", reg.duplicates());
        assert_eq!(reg.op_types().len(), 92);
        assert_eq!(&reg.op_types()[..2], ["Conv", "BatchNormalization"]);
        for op in reg.op_types() {
            assert!(registry().get(op).is_some(), "{op}");
        }
        assert!(registry().get("Einsum").is_some());
        assert!(registry().get("NonZero").is_none());
    }
}
