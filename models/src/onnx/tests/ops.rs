//! The activations, norms, resampling, `ReduceL2`, `Einsum`, the tanh-form GELU and `GatherND`
//! / `Gather` at constant indices of a run-time tensor: each
//! imports to the IR op it names, with its shape and MACs, and a malformed node is an error
//! naming it.

use super::testutil::{floats, ints, named_value_info, ModelBuilder, A};
use crate::ir::{Gather, Op, Unary};
use crate::onnx::*;
use crate::{Graph, ModelError};

fn import(b: &ModelBuilder, batch: usize) -> Result<Graph, ModelError> {
    import_proto(&decode(&b.bytes(), "t.onnx")?, "t.onnx", batch)
}

fn err(b: &ModelBuilder) -> String {
    import(b, 2).map_or_else(|e| e.to_string(), |_| "imported without error".into())
}

/// `op` on a `[N, 4, 3, 3]` input with `inputs` besides `x` and attributes `attrs`.
fn one(op: &str, inputs: &[&str], attrs: Vec<(&str, A)>) -> ModelBuilder {
    let mut names = vec!["x"];
    names.extend_from_slice(inputs);
    ModelBuilder::new(18, &[None, Some(4), Some(3), Some(3)])
        .node(op, "n", &names, &["y"], attrs)
        .output("y", &[None, Some(4), Some(3), Some(3)])
}

#[test]
fn activations_import_with_their_parameters() {
    let cases: Vec<(&str, Vec<(&str, A)>, Unary)> = vec![
        ("HardSwish", vec![], Unary::HardSwish),
        (
            "HardSigmoid",
            vec![("alpha", A::F(1.0 / 6.0))],
            Unary::HardSigmoid {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            },
        ),
        ("LeakyRelu", vec![], Unary::LeakyRelu { alpha: 0.01 }),
        ("Elu", vec![("alpha", A::F(0.5))], Unary::Elu { alpha: 0.5 }),
        ("Softplus", vec![], Unary::Softplus),
        ("Mish", vec![], Unary::Mish),
        ("Exp", vec![], Unary::Exp),
        ("Erf", vec![], Unary::Erf),
    ];
    for (op, attrs, want) in cases {
        let g = import(&one(op, &[], attrs), 2).unwrap();
        assert_eq!(g.nodes.len(), 1, "{op}");
        assert_eq!(g.nodes[0].op, Op::Unary(want), "{op}");
        assert_eq!(g.nodes[0].op.name(), op);
        assert_eq!(g.shape(g.output), &[2, 4, 3, 3]);
        assert_eq!(g.summary().layers.len(), 0, "{op} is no GEMM");
    }
    let e = err(&one("LeakyRelu", &[], vec![("alpha", A::F(f32::NAN))]));
    assert!(
        e.contains("node n (LeakyRelu)") && e.contains("finite"),
        "{e}"
    );
}

#[test]
fn pow_takes_a_constant_exponent_and_prelu_a_broadcast_slope() {
    let b = one("Pow", &["p"], vec![]).init(floats("p", &[1]));
    let g = import(&b, 2).unwrap();
    assert_eq!(g.nodes[0].op, Op::Unary(Unary::Pow { exponent: 0.0 }));
    // A run-time exponent is refused by name.
    let e = err(&one("Pow", &["x"], vec![]));
    assert!(
        e.contains("node n (Pow)") && e.contains("run-time exponent"),
        "{e}"
    );
    let b = one("PRelu", &["s"], vec![]).init(floats("s", &[4, 1, 1]));
    let g = import(&b, 2).unwrap();
    assert_eq!(g.nodes[0].op.name(), "PRelu");
    assert_eq!(g.params(), 4);
    let b = one("PRelu", &["s"], vec![]).init(floats("s", &[5, 1, 1]));
    let e = err(&b);
    assert!(e.contains("node n") && e.contains("slope [5, 1, 1]"), "{e}");
}

#[test]
fn group_and_instance_norms_normalise_channel_groups() {
    let b = one(
        "GroupNormalization",
        &["g", "b"],
        vec![("num_groups", A::I(2))],
    )
    .init(floats("g", &[4]))
    .init(floats("b", &[4]));
    let g = import(&b, 2).unwrap();
    let Op::GroupNorm(n) = &g.nodes[0].op else {
        panic!("{:?}", g.nodes[0].op)
    };
    assert_eq!((n.groups, n.scale.len()), (2, 4));
    // Opset 18's per-group scale is spread over the group's channels.
    let b = one(
        "GroupNormalization",
        &["g", "b"],
        vec![("num_groups", A::I(2))],
    )
    .init(floats("g", &[2]))
    .init(floats("b", &[2]));
    let g = import(&b, 2).unwrap();
    let Op::GroupNorm(n) = &g.nodes[0].op else {
        panic!()
    };
    assert_eq!(
        n.scale.iter().copied().collect::<Vec<_>>(),
        [0.0, 0.0, 0.01, 0.01]
    );
    let b = one("InstanceNormalization", &["g", "b"], vec![])
        .init(floats("g", &[4]))
        .init(floats("b", &[4]));
    let g = import(&b, 2).unwrap();
    assert!(matches!(&g.nodes[0].op, Op::GroupNorm(n) if n.groups == 4));
    let b = one(
        "GroupNormalization",
        &["g", "b"],
        vec![("num_groups", A::I(3))],
    )
    .init(floats("g", &[4]))
    .init(floats("b", &[4]));
    let e = err(&b);
    assert!(e.contains("node n") && e.contains("3 groups"), "{e}");
}

#[test]
fn resize_and_reduce_l2_shapes() {
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3), Some(3)])
        .node(
            "Resize",
            "up",
            &["x", "", "sc"],
            &["y"],
            vec![("mode", A::S("nearest"))],
        )
        .output("y", &[None, Some(4), Some(6), Some(6)]);
    let mut sc = floats("sc", &[4]);
    sc.float_data = vec![1.0, 1.0, 2.0, 2.0];
    let g = import(&b.init(sc), 2).unwrap();
    assert_eq!(g.shape(g.output), &[2, 4, 6, 6]);
    assert_eq!(g.nodes[0].op.name(), "Resize");
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3), Some(3)])
        .init(ints("sz", &[2, 5, 6, 6]))
        .node("Resize", "up", &["x", "", "", "sz"], &["y"], vec![])
        .output("y", &[None, Some(5), Some(6), Some(6)]);
    let e = err(&b);
    assert!(e.contains("node up") && e.contains("cannot resize"), "{e}");
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3), Some(3)])
        .node(
            "ReduceL2",
            "n",
            &["x"],
            &["y"],
            vec![("axes", A::Is(vec![-1]))],
        )
        .output("y", &[None, Some(4), Some(3), Some(1)]);
    let g = import(&b, 2).unwrap();
    assert_eq!(g.shape(g.output), &[2, 4, 3, 1]);
    // ReduceSum of a run-time tensor, axes as an input (opset 13), axes dropped
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3), Some(3)])
        .init(ints("axes", &[1, -1]))
        .node(
            "ReduceSum",
            "s",
            &["x", "axes"],
            &["y"],
            vec![("keepdims", A::I(0))],
        )
        .output("y", &[None, Some(3)]);
    let g = import(&b, 2).unwrap();
    assert_eq!(
        g.nodes[0].op,
        Op::ReduceSum {
            axes: vec![1, 3],
            keepdims: false
        }
    );
    assert_eq!(g.shape(g.output), &[2, 3]);
}

/// `Einsum(equation)` of a `[N, 2, 5, 3]` input with itself, through `Identity` copies.
fn einsum(equation: &'static str, out: &[&str]) -> ModelBuilder {
    ModelBuilder::new(12, &[None])
        .input_info(named_value_info("x", &["N", "2", "5", "3"], 1))
        .node("Identity", "k", &["x"], &["k"], vec![])
        .node(
            "Einsum",
            "e",
            &["x", "k"],
            &["y"],
            vec![("equation", A::S(equation))],
        )
        .output_info(named_value_info("y", out, 1))
}

#[test]
fn attention_einsums_are_batched_matmuls() {
    // Scores q·kᵀ: [N, h, i, d] × [N, h, j, d] → [N, h, i, j]; 5·5·3 MACs per head.
    let g = import(&einsum("bhid,bhjd->bhij", &["N", "2", "5", "5"]), 4).unwrap();
    assert_eq!(g.shape(g.output), &[4, 2, 5, 5]);
    let s = g.summary();
    assert_eq!(s.layers.len(), 1);
    assert_eq!(s.layers[0].macs, 2 * 5 * 5 * 3);
    // Output in another order: a transpose after the matmul, named after the node.
    let g = import(&einsum("bhid,bhjd->bihj", &["N", "5", "2", "5"]), 4).unwrap();
    assert_eq!(g.shape(g.output), &[4, 5, 2, 5]);
    assert_eq!(g.nodes.last().map(|n| n.name.as_str()), Some("e"));
    // A letter summed inside one operand is refused by name.
    let e = err(&einsum("bhid,bhjd->bhi", &["N", "2", "5"]));
    assert!(e.contains("node e (Einsum)") && e.contains("'j'"), "{e}");
    // The implicit output keeps the letters that occur once: `ij`, everything else summed.
    let e = err(&einsum("bhid,bhjd", &["N", "2", "5", "5"]));
    assert!(e.contains("computes [5, 5]"), "{e}");
}

#[test]
fn tanh_gelu_chains_fuse_in_both_exporters_orders() {
    // GPT-2's NewGELUActivation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    let scalar = |name: &str, v: f32| {
        let mut t = floats(name, &[]);
        t.float_data = vec![v];
        t
    };
    let b = ModelBuilder::new(17, &[None, Some(4)])
        .init(scalar("three", 3.0))
        .init(scalar("c", 0.044715))
        .init(scalar("k", 0.797_884_6))
        .init(scalar("one", 1.0))
        .init(scalar("half", 0.5))
        .node("Mul", "h", &["x", "half"], &["xh"], vec![])
        .node("Pow", "p", &["x", "three"], &["x3"], vec![])
        .node("Mul", "m", &["x3", "c"], &["cx3"], vec![])
        .node("Add", "a", &["x", "cx3"], &["inner"], vec![])
        .node("Mul", "s", &["inner", "k"], &["scaled"], vec![])
        .node("Tanh", "t", &["scaled"], &["th"], vec![])
        .node("Add", "o", &["th", "one"], &["th1"], vec![])
        .node("Mul", "y", &["xh", "th1"], &["y"], vec![])
        .output("y", &[None, Some(4)]);
    let g = import(&b, 2).unwrap();
    assert_eq!(g.nodes.len(), 1);
    assert_eq!(g.nodes[0].op, Op::Gelu { tanh_approx: true });
    assert_eq!(g.nodes[0].name, "y");
}

#[test]
fn nan_guards_after_a_softmax_import_as_the_softmax() {
    let mut zero = floats("zero", &[]);
    zero.float_data = vec![0.0];
    let b = ModelBuilder::new(17, &[None, Some(4)])
        .init(zero)
        .node("Softmax", "sm", &["x"], &["p"], vec![("axis", A::I(-1))])
        .node("IsNaN", "nan", &["p"], &["isnan"], vec![])
        .node("Where", "w", &["isnan", "zero", "p"], &["y"], vec![])
        .output("y", &[None, Some(4)]);
    let g = import(&b, 2).unwrap();
    assert_eq!(g.nodes.len(), 1);
    assert_eq!(g.nodes[0].op.name(), "Softmax");
    // A NaN test read elsewhere stays, and is refused by name.
    let b = b.node("Cast", "peek", &["isnan"], &["z"], vec![("to", A::I(1))]);
    let e = err(&b);
    assert!(e.contains("node nan (IsNaN)"), "{e}");
}

/// Stochastic depth as both exporters write it in training mode (`bernoulli_(t) / d` times
/// the branch), with survival rate `t` and divisor `d`.
fn stochastic_depth(t: f32, d: f32) -> ModelBuilder {
    let scalar = |name: &str, v: f32| {
        let mut c = floats(name, &[]);
        c.float_data = vec![v];
        c
    };
    ModelBuilder::new(17, &[None, Some(4), Some(3), Some(3)])
        .init(scalar("t", t))
        .init(scalar("d", d))
        .node("Relu", "relu", &["x"], &["r"], vec![])
        .node(
            "RandomUniformLike",
            "draw",
            &["r"],
            &["u"],
            vec![("high", A::F(1.0))],
        )
        .node("Less", "lt", &["u", "t"], &["keep"], vec![])
        .node("Cast", "cast", &["keep"], &["mask"], vec![("to", A::I(1))])
        .node("Div", "scale", &["mask", "d"], &["noise"], vec![])
        .node("Mul", "sd", &["r", "noise"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(3), Some(3)])
}

#[test]
fn stochastic_depth_of_a_training_mode_export_imports_as_its_expectation() {
    let g = import(&stochastic_depth(0.8, 0.8), 2).unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names, ["Relu"]);
    assert_eq!(g.shape(g.output), [2, 4, 3, 3]);
    // A mask whose expectation is not 1 is no stochastic depth: the draw is refused by name.
    let e = err(&stochastic_depth(0.8, 0.5));
    assert!(
        e.contains("node draw") && e.contains("RandomUniformLike"),
        "{e}"
    );
}

/// The dynamo exporter's `AdaptiveAvgPool2d((2, 2))` of a `[N, 2, 4, 4]` map: the map
/// transposed to `[H, W, N, C]`, `GatherND` at constant `[2, 2, 2, 2, 2]` index tuples (window
/// `(i, j)`, element `(a, b)` reads `(2i + a, 2j + b)`), transposed back to
/// `[N, C, 2, 2, 2, 2]` and averaged over the window axes.
fn adaptive_pool(indices: onnx_protobuf::TensorProto, batch_dims: i64) -> ModelBuilder {
    ModelBuilder::new(18, &[None, Some(2), Some(4), Some(4)])
        .init(indices)
        .init(ints("axes", &[-2, -1]))
        .node(
            "Transpose",
            "hwnc",
            &["x"],
            &["t"],
            vec![("perm", A::Is(vec![2, 3, 0, 1]))],
        )
        .node(
            "GatherND",
            "windows",
            &["t", "idx"],
            &["w"],
            vec![("batch_dims", A::I(batch_dims))],
        )
        .node(
            "Transpose",
            "back",
            &["w"],
            &["wb"],
            vec![("perm", A::Is(vec![4, 5, 0, 1, 2, 3]))],
        )
        .node(
            "ReduceMean",
            "mean",
            &["wb", "axes"],
            &["y"],
            vec![("keepdims", A::I(0))],
        )
        .output("y", &[None, Some(2), Some(2), Some(2)])
}

fn window_indices() -> onnx_protobuf::TensorProto {
    let mut v = Vec::new();
    for i in 0..2 {
        for j in 0..2 {
            for a in 0..2 {
                for b in 0..2 {
                    v.extend([2 * i + a, 2 * j + b]);
                }
            }
        }
    }
    let mut t = ints("idx", &v);
    t.dims = vec![2, 2, 2, 2, 2];
    t
}

#[test]
fn gather_nd_at_constant_indices_of_a_run_time_tensor_is_a_gather_of_its_block() {
    let g = import(&adaptive_pool(window_indices(), 0), 3).unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names, ["Transpose", "Gather", "Transpose", "ReduceMean"]);
    let mut positions = Vec::new();
    for i in 0..2 {
        for j in 0..2 {
            for a in 0..2 {
                for b in 0..2 {
                    positions.push((2 * i + a) * 4 + 2 * j + b);
                }
            }
        }
    }
    let want = Gather {
        axis: 0,
        block: vec![4, 4],
        grid: vec![2, 2, 2, 2],
        positions,
    };
    assert_eq!(g.nodes[1].op, Op::Gather(want));
    assert_eq!(g.shape(g.nodes[1].output), [2, 2, 2, 2, 3, 2]);
    assert_eq!(g.shape(g.output), [3, 2, 2, 2]);
    assert_eq!(g.summary().layers.len(), 0, "a gather is no GEMM");
    // index tuples out of range, batch_dims and run-time indices are errors naming the node
    let mut bad = window_indices();
    bad.int64_data[0] = 4;
    let e = err(&adaptive_pool(bad, 0));
    assert!(
        e.contains("node windows (GatherND)") && e.contains("index 4 out of range for axis 0"),
        "{e}"
    );
    let e = err(&adaptive_pool(window_indices(), 1));
    assert!(e.contains("windows") && e.contains("batch_dims"), "{e}");
    let b = ModelBuilder::new(18, &[None, Some(2)])
        .node("GatherND", "dyn", &["x", "x"], &["y"], vec![])
        .output("y", &[None]);
    let e = err(&b);
    assert!(e.contains("dyn") && e.contains("run-time indices"), "{e}");
}

#[test]
fn gather_at_uneven_constant_indices_of_a_run_time_tensor_is_a_gather_of_one_axis() {
    let mut idx = ints("idx", &[2, 0, 0, 3]);
    idx.dims = vec![2, 2];
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3)])
        .init(idx)
        .node(
            "Gather",
            "pick",
            &["x", "idx"],
            &["y"],
            vec![("axis", A::I(1))],
        )
        .output("y", &[None, Some(2), Some(2), Some(3)]);
    let g = import(&b, 2).unwrap();
    let want = Gather {
        axis: 1,
        block: vec![4],
        grid: vec![2, 2],
        positions: vec![2, 0, 0, 3],
    };
    assert_eq!(g.nodes[0].op, Op::Gather(want));
    assert_eq!(g.shape(g.output), [2, 2, 2, 3]);
}

/// ConvNeXt's dynamo export reads its pooled `[N, C, 1, 1]` through `as_strided`: flattened to
/// `[N·C]` and gathered at `0, 1, …, N·C − 1` (indices computed from the batch at import). Every
/// index in order is no selection, so only the reshape is left, which the engine rebinds to
/// any batch; a `Slice` of a whole axis likewise leaves nothing.
#[test]
fn gathers_and_slices_of_a_whole_axis_select_nothing() {
    let mut idx = ints("idx", &(0..8).collect::<Vec<i64>>());
    idx.dims = vec![2, 4, 1, 1];
    let b = ModelBuilder::new(13, &[None, Some(4), Some(1), Some(1)])
        .init(ints("flat", &[-1]))
        .init(idx)
        .node("Reshape", "r", &["x", "flat"], &["f"], vec![])
        .node("Gather", "as_strided", &["f", "idx"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(1), Some(1)]);
    let g = import(&b, 2).unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names, ["Reshape", "Reshape"]);
    assert_eq!(g.shape(g.output), [2, 4, 1, 1]);
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3)])
        .init(ints("starts", &[0, 1]))
        .init(ints("ends", &[i64::MAX, 3]))
        .init(ints("axes", &[0, 2]))
        .node(
            "Slice",
            "s",
            &["x", "starts", "ends", "axes"],
            &["y"],
            vec![],
        )
        .output("y", &[None, Some(4), Some(2)]);
    let g = import(&b, 2).unwrap();
    match &g.nodes[..] {
        [n] => assert_eq!(
            n.op,
            Op::Slice {
                axes: vec![crate::ir::SliceAxis {
                    axis: 2,
                    start: 1,
                    len: 2,
                    step: 1
                }]
            }
        ),
        other => panic!("{other:?}"),
    }
}

/// A boolean tensor.
fn bools(name: &str, dims: &[i64], values: &[bool]) -> onnx_protobuf::TensorProto {
    let mut t = ints(name, &values.iter().map(|&b| b as i64).collect::<Vec<_>>());
    t.dims = dims.to_vec();
    t.data_type = 9;
    t.int32_data = t.int64_data.iter().map(|&v| v as i32).collect();
    t.int64_data.clear();
    t
}

/// `Where(cond, …)` on `[N, 4, 3, 3]` with `cond = Less(rows, 2)` of rows `[3, 1]` = 0, 1, 2,
/// folded at import: keeps rows 0 and 1 of each map.
fn where_of(branches: [&str; 2], zero_scalar: bool) -> ModelBuilder {
    let mut rows = ints("rows", &[0, 1, 2]);
    rows.dims = vec![3, 1];
    let dims: &[i64] = if zero_scalar { &[] } else { &[3, 3] };
    let mut zero = floats("zero", dims);
    zero.float_data.iter_mut().for_each(|v| *v = -*v);
    ModelBuilder::new(18, &[None, Some(4), Some(3), Some(3)])
        .init(rows)
        .init(ints("two", &[2]))
        .init(zero)
        .node("Less", "lt", &["rows", "two"], &["cond"], vec![])
        .node("Relu", "relu", &["x"], &["r"], vec![])
        .node(
            "Where",
            "masked_fill",
            &["cond", branches[0], branches[1]],
            &["y"],
            vec![],
        )
        .output("y", &[None, Some(4), Some(3), Some(3)])
}

#[test]
fn where_at_a_condition_known_at_import_chooses_per_element_with_no_macs() {
    let rows_kept = |keep: bool| {
        ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[3, 1]), |i| (i[0] < 2) == keep)
    };
    // The constant on the chosen side: the condition is negated so the tensor comes first.
    let g = import(&where_of(["zero", "r"], true), 2).unwrap();
    let want = crate::ir::Where {
        keep: rows_kept(false),
        fill: Some(ndarray::ArrayD::zeros(ndarray::IxDyn(&[]))),
    };
    assert_eq!(g.nodes[1].op, Op::Where(want));
    assert_eq!(g.shape(g.output), [2, 4, 3, 3]);
    assert_eq!(g.summary().total_macs(), 0);
    // A fill of its own shape, on the other side.
    let g = import(&where_of(["r", "zero"], false), 2).unwrap();
    let Op::Where(w) = &g.nodes[1].op else {
        panic!("{:?}", g.nodes[1].op)
    };
    assert_eq!(w.keep, rows_kept(true));
    assert_eq!(
        w.fill.as_ref().map(|f| f.shape().to_vec()),
        Some(vec![3, 3])
    );
    // Two run-time branches.
    let g = import(&where_of(["r", "x"], true), 2).unwrap();
    assert_eq!(g.nodes[1].inputs, [g.nodes[0].output, g.input]);
    assert_eq!(
        g.nodes[1].op,
        Op::Where(crate::ir::Where {
            keep: rows_kept(true),
            fill: None
        })
    );
}

#[test]
fn where_that_chooses_the_tensor_everywhere_is_no_node_and_a_run_time_condition_is_an_error() {
    let all = ModelBuilder::new(18, &[None, Some(4), Some(3), Some(3)])
        .init(bools("cond", &[3, 1], &[true, true, true]))
        .init(floats("zero", &[]))
        .node("Relu", "relu", &["x"], &["r"], vec![])
        .node("Where", "w", &["cond", "r", "zero"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(3), Some(3)]);
    let g = import(&all, 2).unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names, ["Relu"]);
    let run_time = ModelBuilder::new(18, &[None, Some(4), Some(3), Some(3)])
        .init(floats("zero", &[]))
        .node("Where", "w", &["x", "x", "zero"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(3), Some(3)]);
    let e = err(&run_time);
    assert!(
        e.contains("node w") && e.contains("run-time condition"),
        "{e}"
    );
}
