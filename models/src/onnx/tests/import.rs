//! Importer tests over models built with [`super::testutil`].

use proptest::prelude::*;

use super::testutil::{floats, ints, small_cnn, ModelBuilder, A};
use crate::ir::{BinaryKind, Op};
use crate::onnx::*;
use crate::summary::LayerRole;
use crate::{Graph, ModelError};

fn import(b: &ModelBuilder, batch: usize) -> Result<Graph, ModelError> {
    import_proto(&decode(&b.bytes(), "t.onnx")?, "t.onnx", batch)
}

fn err(b: &ModelBuilder) -> String {
    match import(b, 2) {
        Ok(_) => String::from("imported without error"),
        Err(e) => e.to_string(),
    }
}

fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

#[test]
fn small_cnn_shapes_macs_and_roles() {
    let g = import(&small_cnn(), 4).unwrap();
    assert_eq!(g.shape(g.input), &[4, 3, 8, 8]);
    assert_eq!(g.shape(g.output), &[4, 10]);
    assert_eq!(
        ops(&g),
        [
            "Conv",
            "BatchNorm",
            "Relu",
            "GlobalAveragePool",
            "Flatten",
            "Linear"
        ]
    );
    let s = g.summary();
    assert_eq!(s.layers.len(), 2);
    assert_eq!(s.layers[0].macs, 8 * 8 * 8 * 3 * 9);
    assert_eq!(s.layers[0].role, LayerRole::First);
    assert_eq!(s.layers[1].macs, 80);
    assert_eq!(s.layers[1].role, LayerRole::Last);
    assert_eq!(s.bn_elements, 8 * 8 * 8);
    assert_eq!(s.params, 216 + 80 + 10 + 16);
    assert!(!g.bn_folded);
    assert_eq!(g.validate(), Ok(()));
}

#[test]
fn gemm_without_transb_transposes_and_scales() {
    let b = ModelBuilder::new(13, &[None, Some(3)])
        .init(floats("w", &[3, 2]))
        .init(floats("c", &[2]))
        .node(
            "Gemm",
            "fc",
            &["x", "w", "c"],
            &["y"],
            vec![("alpha", A::F(2.0)), ("beta", A::F(3.0))],
        )
        .output("y", &[None, Some(2)]);
    let g = import(&b, 1).unwrap();
    let Op::Linear(l) = &g.nodes[0].op else {
        panic!("not linear")
    };
    assert_eq!(l.weight.shape(), &[2, 3]);
    // B[k][n] = 0.01·(2k+n); W[n][k] = 2·B[k][n].
    assert!((l.weight[[1, 2]] - 2.0 * 0.05).abs() < 1e-6);
    assert_eq!(
        l.bias
            .as_ref()
            .map(|b| b.iter().copied().collect::<Vec<_>>()),
        Some(vec![0.0, 0.03])
    );
}

#[test]
fn deduplicated_initializers_get_separate_storage() {
    // Exporters write BN gamma and running_var (both ones) once and alias them with Identity.
    let b = ModelBuilder::new(13, &[None, Some(2), Some(4), Some(4)])
        .init(floats("ones", &[2]))
        .init(floats("zeros", &[2]))
        .node("Identity", "alias", &["ones"], &["var"], vec![])
        .node(
            "BatchNormalization",
            "bn",
            &["x", "ones", "zeros", "zeros", "var"],
            &["y"],
            vec![],
        )
        .output("y", &[None, Some(2), Some(4), Some(4)]);
    let g = import(&b, 1).unwrap();
    let Op::BatchNorm(bn) = &g.nodes[0].op else {
        panic!("not bn")
    };
    assert_eq!(bn.scale, bn.var);
    assert_ne!(bn.scale.as_ptr(), bn.var.as_ptr());
    assert_eq!(ops(&g), ["BatchNorm"]);
}

#[test]
fn shape_subgraph_folds_into_a_static_reshape() {
    // view(x.size(0), -1) as the legacy exporter writes it.
    let b = ModelBuilder::new(11, &[None, Some(2), Some(3), Some(3)])
        .init(ints("idx0", &[0]))
        .node("Shape", "shape", &["x"], &["s"], vec![])
        .node(
            "Constant",
            "zero",
            &[],
            &["i"],
            vec![(
                "value",
                A::T({
                    let mut t = ints("", &[0]);
                    t.dims.clear();
                    t
                }),
            )],
        )
        .node(
            "Gather",
            "gather",
            &["s", "i"],
            &["n"],
            vec![("axis", A::I(0))],
        )
        .node(
            "Unsqueeze",
            "unsq",
            &["n"],
            &["n1"],
            vec![("axes", A::Is(vec![0]))],
        )
        .node(
            "Constant",
            "minus1",
            &[],
            &["m1"],
            vec![("value", A::T(ints("", &[-1])))],
        )
        .node(
            "Concat",
            "cat",
            &["n1", "m1"],
            &["shape2"],
            vec![("axis", A::I(0))],
        )
        .node("Reshape", "view", &["x", "shape2"], &["y"], vec![])
        .output("y", &[None, Some(18)]);
    let g = import(&b, 5).unwrap();
    assert_eq!(ops(&g), ["Reshape"]);
    assert_eq!(g.shape(g.output), &[5, 18]);
}

#[test]
fn fpad_chain_folds_to_onnx_pads() {
    // F.pad(x, (l=1, r=2, t=3, b=0)) as the legacy exporter builds the pads tensor.
    let b = ModelBuilder::new(11, &[None, Some(1), Some(4), Some(4)])
        .init(ints("p", &[1, 2, 3, 0]))
        .init(ints("four", &[4]))
        .init(ints("m12", &[-1, 2]))
        .init(ints("st", &[-1]))
        .init(ints("en", &[i64::MIN]))
        .init(ints("ax", &[0]))
        .init(ints("stp", &[-1]))
        .init(ints("flat", &[-1]))
        .node(
            "ConstantOfShape",
            "zeros",
            &["four"],
            &["z"],
            vec![("value", A::T(ints("", &[0])))],
        )
        .node(
            "Concat",
            "cat",
            &["p", "z"],
            &["pz"],
            vec![("axis", A::I(0))],
        )
        .node("Reshape", "r1", &["pz", "m12"], &["pairs"], vec![])
        .node(
            "Slice",
            "rev",
            &["pairs", "st", "en", "ax", "stp"],
            &["rp"],
            vec![],
        )
        .node(
            "Transpose",
            "tr",
            &["rp"],
            &["tp"],
            vec![("perm", A::Is(vec![1, 0]))],
        )
        .node("Reshape", "r2", &["tp", "flat"], &["onnx_pads"], vec![])
        .node(
            "Cast",
            "cast",
            &["onnx_pads"],
            &["pads"],
            vec![("to", A::I(7))],
        )
        .node(
            "Pad",
            "pad",
            &["x", "pads", ""],
            &["y"],
            vec![("mode", A::S("constant"))],
        )
        .output("y", &[None, Some(1), Some(7), Some(7)]);
    let g = import(&b, 1).unwrap();
    assert_eq!(ops(&g), ["Pad"]);
    let Op::Pad { pads, value } = &g.nodes[0].op else {
        panic!("not pad")
    };
    assert_eq!(pads, &[(0, 0), (0, 0), (3, 0), (1, 2)]);
    assert_eq!(*value, 0.0);
}

#[test]
fn clip_bounds_as_attributes_or_inputs() {
    let attr = ModelBuilder::new(6, &[None, Some(4)])
        .node(
            "Clip",
            "c",
            &["x"],
            &["y"],
            vec![("min", A::F(0.0)), ("max", A::F(6.0))],
        )
        .output("y", &[None, Some(4)]);
    let g = import(&attr, 1).unwrap();
    assert_eq!(g.nodes[0].op, Op::Clip { min: 0.0, max: 6.0 });
    let mut six = floats("six", &[]);
    six.float_data = vec![6.0];
    let inputs = ModelBuilder::new(13, &[None, Some(4)])
        .init(six)
        .node("Clip", "c", &["x", "", "six"], &["y"], vec![])
        .output("y", &[None, Some(4)]);
    let g = import(&inputs, 1).unwrap();
    assert_eq!(
        g.nodes[0].op,
        Op::Clip {
            min: f32::NEG_INFINITY,
            max: 6.0
        }
    );
}

#[test]
fn reduce_mean_axes_from_attribute_or_input() {
    let attr = ModelBuilder::new(13, &[None, Some(4), Some(2), Some(2)])
        .node(
            "ReduceMean",
            "m",
            &["x"],
            &["y"],
            vec![("axes", A::Is(vec![-1, 2])), ("keepdims", A::I(0))],
        )
        .output("y", &[None, Some(4)]);
    let g = import(&attr, 3).unwrap();
    assert_eq!(g.shape(g.output), &[3, 4]);
    let input = ModelBuilder::new(18, &[None, Some(4), Some(2), Some(2)])
        .init(ints("ax", &[2, 3]))
        .node("ReduceMean", "m", &["x", "ax"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(1), Some(1)]);
    let g = import(&input, 3).unwrap();
    assert_eq!(
        g.nodes[0].op,
        Op::ReduceMean {
            axes: vec![2, 3],
            keepdims: true
        }
    );
}

#[test]
fn slice_with_int64_max_and_negative_steps_on_a_tensor() {
    let b = ModelBuilder::new(13, &[None, Some(6), Some(5)])
        .init(ints("s", &[1, -1]))
        .init(ints("e", &[i64::MAX, i64::MIN]))
        .init(ints("a", &[1, 2]))
        .init(ints("st", &[2, -2]))
        .node("Slice", "sl", &["x", "s", "e", "a", "st"], &["y"], vec![])
        .output("y", &[None, Some(3), Some(3)]);
    let g = import(&b, 1).unwrap();
    assert_eq!(g.shape(g.output), &[1, 3, 3]);
}

#[test]
fn matmul_with_constant_is_linear_and_with_tensor_is_matmul() {
    let b = ModelBuilder::new(13, &[None, Some(4)])
        .init(floats("w", &[4, 3]))
        .node("MatMul", "mm", &["x", "w"], &["h"], vec![])
        .node(
            "Unsqueeze",
            "u",
            &["h"],
            &["h3"],
            vec![("axes", A::Is(vec![2]))],
        )
        .node(
            "Unsqueeze",
            "v",
            &["h"],
            &["h4"],
            vec![("axes", A::Is(vec![1]))],
        )
        .node("MatMul", "outer", &["h3", "h4"], &["y"], vec![])
        .output("y", &[None, Some(3), Some(3)]);
    let g = import(&b, 2).unwrap();
    assert_eq!(ops(&g), ["Linear", "Reshape", "Reshape", "MatMul"]);
    assert_eq!(g.summary().layers[0].macs, 12);
}

#[test]
fn residual_projection_is_a_shortcut_and_depthwise_is_found() {
    let b = ModelBuilder::new(13, &[None, Some(4), Some(8), Some(8)])
        .init(floats("w0", &[8, 4, 3, 3]))
        .init(floats("wa", &[16, 8, 3, 3]))
        .init(floats("ws", &[16, 8, 1, 1]))
        .init(floats("wd", &[16, 1, 3, 3]))
        .init(floats("g", &[16]))
        .init(floats("fc", &[16, 10]))
        .node(
            "Conv",
            "stem",
            &["x", "w0"],
            &["s"],
            vec![("pads", A::Is(vec![1, 1, 1, 1]))],
        )
        .node(
            "Conv",
            "a",
            &["s", "wa"],
            &["a"],
            vec![
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("strides", A::Is(vec![2, 2])),
            ],
        )
        .node(
            "BatchNormalization",
            "bna",
            &["a", "g", "g", "g", "g"],
            &["ba"],
            vec![],
        )
        .node(
            "Conv",
            "proj",
            &["s", "ws"],
            &["p"],
            vec![("strides", A::Is(vec![2, 2]))],
        )
        .node(
            "BatchNormalization",
            "bnp",
            &["p", "g", "g", "g", "g"],
            &["bp"],
            vec![],
        )
        .node("Add", "add", &["ba", "bp"], &["r"], vec![])
        .node(
            "Conv",
            "dw",
            &["r", "wd"],
            &["d"],
            vec![("group", A::I(16)), ("auto_pad", A::S("SAME_UPPER"))],
        )
        .node("GlobalAveragePool", "gap", &["d"], &["gp"], vec![])
        .node("Flatten", "f", &["gp"], &["fl"], vec![])
        .node("MatMul", "fc", &["fl", "fc"], &["y"], vec![])
        .output("y", &[None, Some(10)]);
    let g = import(&b, 1).unwrap();
    let roles: Vec<LayerRole> = g.summary().layers.iter().map(|l| l.role).collect();
    use LayerRole::*;
    assert_eq!(roles, [First, Body, Shortcut, Depthwise, Last]);
    let s = g.summary();
    assert_eq!(s.layers[3].out_shape, [16, 4, 4]);
    assert_eq!(s.layers[3].macs, 16 * 16 * 9);
    assert_eq!(s.bn_elements, 2 * 16 * 4 * 4);
    assert!(
        matches!(g.nodes[5].op, Op::Binary(ref b) if b.kind == BinaryKind::Add && b.constant.is_none())
    );
}

#[test]
fn folded_batchnorm_is_recorded() {
    let b = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .init(floats("w", &[2, 3, 1, 1]))
        .init(floats("b", &[2]))
        .node("Conv", "c", &["x", "w", "b"], &["y"], vec![])
        .output("y", &[None, Some(2), Some(4), Some(4)]);
    let g = import(&b, 1).unwrap();
    assert!(g.bn_folded);
    assert_eq!(g.summary().bn_elements, 0);
}

#[test]
fn fixed_batch_must_match_and_symbolic_batch_binds() {
    let b = ModelBuilder::new(13, &[Some(1), Some(4)])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y", &[Some(1), Some(4)]);
    assert!(import(&b, 1).is_ok());
    // A batch-agnostic graph with a fixed batch is rebound.
    let g = import(&b, 2).unwrap();
    assert_eq!(g.shape(g.output), &[2, 4]);
}

#[test]
fn a_fixed_batch_carried_by_a_reshape_target_is_rebound() {
    // `x.view(x.size(0), -1)` traced at batch 1: Reshape(x, [1, -1]).
    let b = ModelBuilder::new(13, &[Some(1), Some(4), Some(2), Some(2)])
        .init(ints("target", &[1, -1]))
        .init(floats("fc.w", &[3, 16]))
        .node("Reshape", "view", &["x", "target"], &["f"], vec![])
        .node(
            "Gemm",
            "fc",
            &["f", "fc.w"],
            &["y"],
            vec![("transB", A::I(1))],
        )
        .output("y", &[Some(1), Some(3)]);
    let g = import(&b, 4).unwrap();
    assert_eq!(g.shape(g.output), &[4, 3]);
    assert_eq!(import(&b, 1).unwrap().shape(g.output), &[1, 3]);
}

#[test]
fn a_window_partition_of_a_fixed_batch_is_rebound_at_any_batch() {
    // Swin's window partition traced at batch 2 (2×2 windows of 2×2 over a 4×4 map of 5
    // channels): [2, 4, 4, 5] → [2, 2, 2, 2, 2, 5] → permute → [8, 4, 5] → [2, 2, 2, 2, 2, 5];
    // the last target has two axes of 2, the batch and the window rows
    let b = ModelBuilder::new(13, &[Some(2), Some(4), Some(4), Some(5)])
        .init(ints("part", &[2, 2, 2, 2, 2, 5]))
        .init(ints("merge", &[8, 4, 5]))
        .init(ints("unpart", &[2, 2, 2, 2, 2, 5]))
        .node("Reshape", "p", &["x", "part"], &["a"], vec![])
        .node(
            "Transpose",
            "t",
            &["a"],
            &["b"],
            vec![("perm", A::Is(vec![0, 1, 3, 2, 4, 5]))],
        )
        .node("Reshape", "m", &["b", "merge"], &["c"], vec![])
        .node("Relu", "r", &["c"], &["d"], vec![])
        .node("Reshape", "u", &["d", "unpart"], &["y"], vec![])
        .output("y", &[Some(2), Some(2), Some(2), Some(2), Some(2), Some(5)]);
    for n in [1, 2, 3, 6] {
        let g = import(&b, n).unwrap();
        assert_eq!(g.shape(g.output), &[n, 2, 2, 2, 2, 5], "batch {n}");
    }
}

#[test]
fn a_node_that_pins_the_fixed_batch_is_named() {
    // [2, 6] → [3, 4] at batch 2 splits the batch across both target axes
    let b = ModelBuilder::new(13, &[Some(2), Some(6)])
        .init(ints("target", &[3, 4]))
        .node("Reshape", "pin", &["x", "target"], &["y"], vec![])
        .output("y", &[Some(3), Some(4)]);
    assert!(import(&b, 2).is_ok());
    let e = import(&b, 4).unwrap_err().to_string();
    assert!(
        e.contains("node pin (Reshape)")
            && e.contains("fixed batch of 2 and this node pins it")
            && e.contains("batch 4"),
        "{e}"
    );
    // at batch 1, [1, 16] → [2, 8] is the batch merged with a factor of 2: [N·2, 8]
    let b = ModelBuilder::new(13, &[Some(1), Some(4), Some(2), Some(2)])
        .init(ints("target", &[2, 8]))
        .node("Reshape", "merge", &["x", "target"], &["y"], vec![])
        .output("y", &[Some(2), Some(8)]);
    let g = import(&b, 3).unwrap();
    assert_eq!(g.shape(g.output), &[6, 8]);
}

/// The constant operands of `g`'s binary nodes, by node name.
fn binary_constants(g: &Graph) -> Vec<(&str, Vec<usize>)> {
    g.nodes
        .iter()
        .filter_map(|n| match &n.op {
            Op::Binary(b) => Some((n.name.as_str(), b.constant.as_ref()?.value.shape().to_vec())),
            _ => None,
        })
        .collect()
}

/// The dynamo exporter's attention mask on scores `[N, 2, 4, 4]`: a constant `[1, 1, 4, 1]`
/// expanded to `[N, 1, 4, 4]` from the input's shape and added; then a product by a constant
/// that repeats along the heads axis (of the batch's size at batch 2, but not the batch's),
/// and, with `per_sample`, one by a constant `[2, 1, 1, 1]` that differs per sample.
fn expanded_mask(per_sample: bool) -> ModelBuilder {
    let mut samples = floats("per_sample", &[2, 1, 1, 1]);
    samples.float_data = vec![1.0, 2.0];
    let mut heads = floats("per_head", &[1, 2, 1, 1]);
    heads.float_data = vec![0.5, 0.5];
    let b = ModelBuilder::new(15, &[None, Some(2), Some(4), Some(4)])
        .init(floats("rows", &[1, 1, 4, 1]))
        .init(ints("rest", &[1, 4, 4]))
        .init(heads)
        .init(samples)
        .node(
            "Shape",
            "shape",
            &["x"],
            &["s"],
            vec![("start", A::I(0)), ("end", A::I(1))],
        )
        .node(
            "Concat",
            "dims",
            &["s", "rest"],
            &["d"],
            vec![("axis", A::I(0))],
        )
        .node("Expand", "expand", &["rows", "d"], &["mask"], vec![])
        .node("Add", "masked", &["x", "mask"], &["m"], vec![])
        .node("Mul", "heads", &["m", "per_head"], &["h"], vec![]);
    if per_sample {
        b.node("Mul", "samples", &["h", "per_sample"], &["y"], vec![])
            .output("y", &[None, Some(2), Some(4), Some(4)])
    } else {
        b.output("h", &[None, Some(2), Some(4), Some(4)])
    }
}

#[test]
fn a_mask_expanded_over_the_batch_is_kept_at_one_sample() {
    let g = import(&expanded_mask(true), 2).unwrap();
    assert_eq!(
        binary_constants(&g),
        [
            ("masked", vec![1, 1, 4, 4]),
            ("heads", vec![1, 2, 1, 1]),
            ("samples", vec![2, 1, 1, 1])
        ]
    );
    let Op::Binary(b) = &g.nodes[0].op else {
        panic!("{:?}", g.nodes[0].op)
    };
    let mask = b.constant.as_ref().map(|c| c.value.clone()).unwrap();
    let rows: Vec<f32> = mask.iter().step_by(4).copied().collect();
    assert_eq!(rows, [0.0, 0.01, 0.02, 0.03]);
    assert!(mask
        .rows()
        .into_iter()
        .all(|r| r.iter().all(|&v| v == r[0])));
    // at batch 3 the mask is the same one sample, and broadcasts
    let g = import(&expanded_mask(false), 3).unwrap();
    assert_eq!(binary_constants(&g)[0], ("masked", vec![1, 1, 4, 4]));
    assert_eq!(g.shape(g.output), &[3, 2, 4, 4]);
}

// ---- bad input ----

#[test]
fn empty_random_and_truncated_bytes_are_rejected() {
    assert_eq!(
        decode(&[], "e.onnx").unwrap_err().to_string(),
        "e.onnx: empty file, not an ONNX model"
    );
    let random: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    assert!(decode(&random, "r.onnx")
        .unwrap_err()
        .to_string()
        .starts_with("r.onnx: "));
    let bytes = small_cnn().bytes();
    let cut = decode(&bytes[..bytes.len() / 2], "cut.onnx")
        .unwrap_err()
        .to_string();
    assert!(cut.starts_with("cut.onnx: "), "{cut}");
}

#[test]
fn unsupported_op_names_op_node_file_and_supported_list() {
    let b = ModelBuilder::new(13, &[None, Some(4)])
        .node("NonZero", "prob", &["x"], &["y"], vec![])
        .output("y", &[None, Some(4)]);
    let e = err(&b);
    assert!(
        e.starts_with("t.onnx: node prob: unsupported op type 'NonZero'"),
        "{e}"
    );
    assert!(e.contains("supported ops: Conv, BatchNormalization"), "{e}");
}

#[test]
fn missing_initializer_is_named() {
    let b = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .node("Conv", "conv1", &["x", "conv1.weight"], &["y"], vec![])
        .output("y", &[None, Some(2), Some(4), Some(4)]);
    assert_eq!(
        err(&b),
        "t.onnx: node conv1 (Conv): input 'conv1.weight' is not produced by any node, initializer or graph input"
    );
}

#[test]
fn inconsistent_shapes_are_reported_at_the_node() {
    let b = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .init(floats("w", &[2, 5, 3, 3]))
        .node("Conv", "conv1", &["x", "w"], &["y"], vec![])
        .output("y", &[None, Some(2), Some(2), Some(2)]);
    assert!(
        err(&b).starts_with(
            "t.onnx: node conv1 (Conv): weight [2, 5, 3, 3] with group 1 does not fit input"
        ),
        "{}",
        err(&b)
    );
    let add = ModelBuilder::new(13, &[None, Some(3)])
        .init(floats("c", &[4]))
        .node("Add", "plus", &["x", "c"], &["y"], vec![])
        .output("y", &[None, Some(3)]);
    assert_eq!(
        err(&add),
        "t.onnx: node plus (Add): shapes [2, 3] and [4] do not broadcast"
    );
    let out = small_cnn().output("extra", &[None]);
    assert!(
        err(&out).contains("graph output 'extra' is not produced by any node"),
        "{}",
        err(&out)
    );
}

#[test]
fn extra_outputs_without_products_are_dropped_and_a_second_head_is_an_error() {
    // A second output read off the pooled features (like an LM's returned state): dropped.
    let side = small_cnn()
        .node("Relu", "side", &["p"], &["s"], vec![])
        .output("s", &[None, Some(8), Some(1), Some(1)]);
    let g = import(&side, 2).unwrap();
    assert_eq!(g.shape(g.output), &[2, 10]);
    assert!(g.nodes.iter().all(|n| n.name != "side"));
    // A second head multiplies: it would lose its MACs, so it is refused by name.
    let head = small_cnn()
        .init(floats("w2", &[8, 3]))
        .node("MatMul", "head2", &["f", "w2"], &["z"], vec![])
        .output("z", &[None, Some(3)]);
    let e = err(&head);
    assert!(
        e.contains("graph output 'z' needs node head2 (MatMul)"),
        "{e}"
    );
}

#[test]
fn conv_weight_of_wrong_rank() {
    let b = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .init(floats("w", &[2, 3, 3]))
        .node("Conv", "conv1", &["x", "w"], &["y"], vec![])
        .output("y", &[None, Some(2), Some(2), Some(2)]);
    assert!(
        err(&b).starts_with("t.onnx: node conv1 (Conv): weight 'w' has rank 3"),
        "{}",
        err(&b)
    );
}

#[test]
fn zero_size_dimensions_are_rejected() {
    let b = ModelBuilder::new(13, &[None, Some(0), Some(4)])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y", &[None, Some(0), Some(4)]);
    assert!(
        err(&b).contains("graph input 'x': dimension 1 has size 0"),
        "{}",
        err(&b)
    );
    let w = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .init(floats("w", &[0, 3, 1, 1]))
        .node("Conv", "c", &["x", "w"], &["y"], vec![])
        .output("y", &[None, Some(2), Some(4), Some(4)]);
    assert!(
        err(&w).contains("initializer 'w': zero-size dimension"),
        "{}",
        err(&w)
    );
}

#[test]
fn attribute_type_errors_read_naturally() {
    let b = ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .init(floats("w", &[2, 3, 1, 1]))
        .node(
            "Conv",
            "conv1",
            &["x", "w"],
            &["y"],
            vec![("strides", A::F(2.0))],
        )
        .output("y", &[None, Some(2), Some(4), Some(4)]);
    assert_eq!(
        err(&b),
        "t.onnx: node conv1 (Conv), attribute 'strides': expected ints, got float"
    );
}

#[test]
fn validate_catches_a_tampered_shape() {
    let mut g = import(&small_cnn(), 1).unwrap();
    let out = g.nodes[0].output;
    g.values[out.0].shape = vec![1, 8, 9, 9];
    assert!(g.validate().is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), batch in 1usize..4) {
        if let Ok(p) = decode(&bytes, "fuzz.onnx") {
            let _ = import_proto(&p, "fuzz.onnx", batch);
        }
    }

    #[test]
    fn mutated_models_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8), cut in any::<prop::sample::Index>()) {
        let mut bytes = small_cnn().bytes();
        for (i, v) in edits {
            let k = i.index(bytes.len());
            bytes[k] = v;
        }
        let keep = bytes.len() - cut.index(bytes.len() / 4);
        bytes.truncate(keep);
        if let Ok(p) = decode(&bytes, "fuzz.onnx") {
            let _ = import_proto(&p, "fuzz.onnx", 2);
        }
    }
}

#[test]
fn every_pytorch_fixture_imports_and_validates() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("bad_") || !name.ends_with(".onnx") {
            continue;
        }
        let g = import_file(&path, 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.validate(), Ok(()), "{name}");
        assert_eq!(g.shape(g.input)[0], 3, "{name}");
        // Shape subgraphs leave no trace in the IR: no layer is named after a Shape node or a
        // Gather that reads one (a Gather on run-time data, as legacy attention's q/k/v pick,
        // stays).
        let proto = decode(&std::fs::read(&path).unwrap(), &name).unwrap();
        let nodes = &proto.graph.node;
        let shape_out: Vec<&String> = nodes
            .iter()
            .filter(|n| n.op_type == "Shape")
            .flat_map(|n| &n.output)
            .collect();
        let folded: Vec<&String> = nodes
            .iter()
            .filter(|n| {
                n.op_type == "Shape"
                    || (n.op_type == "Gather"
                        && n.input.first().is_some_and(|i| shape_out.contains(&i)))
            })
            .map(|n| &n.name)
            .collect();
        assert!(g.nodes.iter().all(|n| !folded.contains(&&n.name)), "{name}");
        n += 1;
    }
    assert_eq!(n, 10);
}

#[test]
fn non_finite_weights_are_errors_naming_the_initializer() {
    let mut w = floats("w1", &[8, 3, 3, 3]);
    w.float_data[5] = f32::NAN;
    let e = err(&small_cnn().init(w));
    assert!(
        e.contains("initializer 'w1' holds NaN at element 5 of 216"),
        "{e}"
    );
    let mut b = floats("fc.b", &[10]);
    b.float_data[9] = f32::INFINITY;
    assert!(err(&small_cnn().init(b)).contains("'fc.b' holds inf at element 9"));
    // A scalar infinity is a bound (Clip's max, a pad value), not a weight.
    let mut inf = floats("unused_bound", &[]);
    inf.float_data = vec![f32::INFINITY];
    assert!(import(&small_cnn().init(inf), 2).is_ok());
}

#[test]
fn clip_variants_attributes_inputs_and_one_sided() {
    let clip = |opset, b: ModelBuilder| {
        let b = b.output("y", &[None, Some(4)]);
        let g = import(&b, 2).unwrap_or_else(|e| panic!("opset {opset}: {e}"));
        match &g.nodes[0].op {
            Op::Clip { min, max } => (*min, *max),
            op => panic!("{op:?}"),
        }
    };
    let base = |opset| ModelBuilder::new(opset, &[None, Some(4)]);
    // Opset < 11: attributes.
    let b = base(6).node(
        "Clip",
        "c",
        &["x"],
        &["y"],
        vec![("min", A::F(0.0)), ("max", A::F(6.0))],
    );
    assert_eq!(clip(6, b), (0.0, 6.0));
    let b = base(6).node("Clip", "c", &["x"], &["y"], vec![("max", A::F(2.0))]);
    assert_eq!(clip(6, b), (f32::NEG_INFINITY, 2.0));
    // Opset >= 11: inputs, either one absent ("" keeps the position of max).
    let scalar = |name: &str, v: f32| {
        let mut t = floats(name, &[]);
        t.float_data = vec![v];
        t
    };
    let b = base(13)
        .init(scalar("lo", -1.0))
        .init(scalar("hi", 1.0))
        .node("Clip", "c", &["x", "lo", "hi"], &["y"], vec![]);
    assert_eq!(clip(13, b), (-1.0, 1.0));
    let b = base(13)
        .init(scalar("lo", 0.5))
        .node("Clip", "c", &["x", "lo"], &["y"], vec![]);
    assert_eq!(clip(13, b), (0.5, f32::INFINITY));
    let b = base(13)
        .init(scalar("hi", 3.0))
        .node("Clip", "c", &["x", "", "hi"], &["y"], vec![]);
    assert_eq!(clip(13, b), (f32::NEG_INFINITY, 3.0));
    let b = base(13)
        .init(scalar("lo", f32::NAN))
        .node("Clip", "c", &["x", "lo"], &["y"], vec![])
        .output("y", &[None, Some(4)]);
    assert!(err(&b).contains("NaN"), "{}", err(&b));
}
