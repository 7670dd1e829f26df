//! Evaluator tests: each op on small constants, and whole shape-only subgraphs folding inside
//! an imported graph.

use ndarray::{ArrayD, IxDyn};
use onnx_protobuf::NodeProto;

use crate::onnx::fold::evaluator;
use crate::onnx::ops::fold_only::FOLD_ONLY;
use crate::onnx::tests::testutil::{ints, ModelBuilder, A};
use crate::onnx::value::Const;
use crate::onnx::{decode, import_proto, supported_ops};

fn i64s(shape: &[usize], v: &[i64]) -> Option<Const> {
    Some(Const::I64(
        ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap(),
    ))
}

fn f32s(shape: &[usize], v: &[f32]) -> Option<Const> {
    Some(Const::F32(
        ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap(),
    ))
}

/// Evaluates `op` with attributes from a one-node test model on `inputs`.
fn eval(op: &str, attrs: Vec<(&str, A)>, inputs: &[Option<Const>]) -> Result<Const, String> {
    let b = ModelBuilder::new(18, &[None, Some(1)]).node(op, "n", &["a"], &["y"], attrs);
    let proto: NodeProto = b.model.graph.node[0].clone();
    let view = crate::onnx::node::NodeView {
        proto: &proto,
        name: "n".into(),
        label: "n".into(),
        file: "t.onnx",
        opset: 18,
    };
    let f = evaluator(op).ok_or("no evaluator")?;
    f(&view, inputs).map_err(|e| e.to_string())
}

fn vals(c: &Const) -> (Vec<usize>, Vec<f32>) {
    (c.shape().to_vec(), c.floats())
}

#[test]
fn range_counts_like_onnx() {
    let r = eval(
        "Range",
        vec![],
        &[i64s(&[], &[0]), i64s(&[], &[5]), i64s(&[], &[2])],
    )
    .unwrap();
    assert_eq!(r.ints(), [0, 2, 4]);
    assert!(matches!(r, Const::I64(_)));
    let r = eval(
        "Range",
        vec![],
        &[f32s(&[], &[1.0]), f32s(&[], &[0.0]), f32s(&[], &[-0.5])],
    );
    assert_eq!(r.unwrap().floats(), [1.0, 0.5]);
    let empty = eval(
        "Range",
        vec![],
        &[i64s(&[], &[3]), i64s(&[], &[1]), i64s(&[], &[1])],
    );
    assert_eq!(empty.unwrap().shape(), &[0]);
    let e = eval(
        "Range",
        vec![],
        &[i64s(&[], &[0]), i64s(&[], &[1 << 40]), i64s(&[], &[1])],
    );
    assert!(e.unwrap_err().contains("more than"));
    let e = eval(
        "Range",
        vec![],
        &[i64s(&[], &[0]), i64s(&[], &[4]), i64s(&[], &[0])],
    );
    assert!(e.unwrap_err().contains("node n"));
}

#[test]
fn cumsum_honours_exclusive_and_reverse() {
    let x = i64s(&[4], &[1, 2, 3, 4]);
    let ax = i64s(&[], &[0]);
    let go = |attrs| {
        eval("CumSum", attrs, &[x.clone(), ax.clone()])
            .unwrap()
            .ints()
    };
    assert_eq!(go(vec![]), [1, 3, 6, 10]);
    assert_eq!(go(vec![("exclusive", A::I(1))]), [0, 1, 3, 6]);
    assert_eq!(go(vec![("reverse", A::I(1))]), [10, 9, 7, 4]);
    assert_eq!(
        go(vec![("reverse", A::I(1)), ("exclusive", A::I(1))]),
        [9, 7, 4, 0]
    );
}

#[test]
fn comparisons_and_logic_give_booleans() {
    let (a, b) = (i64s(&[3], &[1, 2, 3]), i64s(&[], &[2]));
    let go = |op| eval(op, vec![], &[a.clone(), b.clone()]).unwrap().ints();
    assert_eq!(go("Equal"), [0, 1, 0]);
    assert_eq!(go("Less"), [1, 0, 0]);
    assert_eq!(go("LessOrEqual"), [1, 1, 0]);
    assert_eq!(go("Greater"), [0, 0, 1]);
    assert_eq!(go("GreaterOrEqual"), [0, 1, 1]);
    assert_eq!(go("And"), [1, 1, 1]);
    assert_eq!(go("Min"), [1, 2, 2]);
    assert_eq!(go("Max"), [2, 2, 3]);
    assert_eq!(go("Mod"), [1, 0, 1]);
    assert_eq!(go("Div"), [0, 1, 1]);
    let nan = eval("IsNaN", vec![], &[f32s(&[2], &[f32::NAN, 1.0])]).unwrap();
    assert_eq!(nan.ints(), [1, 0]);
    let e = eval("Div", vec![], &[a.clone(), i64s(&[], &[0])]).unwrap_err();
    assert!(e.contains("division by zero"), "{e}");
}

#[test]
fn unary_math_and_pow_keep_onnx_types() {
    let x = f32s(&[3], &[-1.5, 0.25, 2.0]);
    assert_eq!(
        eval("Ceil", vec![], &[x.clone()]).unwrap().floats(),
        [-1.0, 1.0, 2.0]
    );
    assert_eq!(
        eval("Floor", vec![], &[x.clone()]).unwrap().floats(),
        [-2.0, 0.0, 2.0]
    );
    assert_eq!(
        eval("Abs", vec![], &[x.clone()]).unwrap().floats(),
        [1.5, 0.25, 2.0]
    );
    assert_eq!(
        eval("Neg", vec![], &[x.clone()]).unwrap().floats(),
        [1.5, -0.25, -2.0]
    );
    let p = eval("Pow", vec![], &[x.clone(), f32s(&[], &[2.0])]).unwrap();
    assert_eq!(p.floats(), [2.25, 0.0625, 4.0]);
    let p = eval("Pow", vec![], &[i64s(&[2], &[3, 4]), f32s(&[], &[0.5])]).unwrap();
    assert!(matches!(p, Const::I64(_)));
    assert_eq!(p.ints(), [1, 2]);
    let e = eval("Exp", vec![], &[f32s(&[1], &[0.0])]).unwrap();
    assert_eq!(e.floats(), [1.0]);
}

#[test]
fn gather_elements_picks_along_the_axis() {
    // BERT's token_type_ids: a [1, 8] zero buffer gathered at position ids.
    let data = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let idx = i64s(&[2, 2], &[2, 0, -1, 1]);
    let r = eval(
        "GatherElements",
        vec![("axis", A::I(1))],
        &[data.clone(), idx],
    )
    .unwrap();
    assert_eq!(
        (r.shape().to_vec(), r.ints()),
        (vec![2, 2], vec![3, 1, 6, 5])
    );
    let idx0 = i64s(&[1, 3], &[1, 0, 1]);
    let r = eval("GatherElements", vec![], &[data.clone(), idx0]).unwrap();
    assert_eq!(r.ints(), [4, 2, 6]);
    let bad = i64s(&[1, 1], &[2]);
    let e = eval("GatherElements", vec![], &[data, bad]).unwrap_err();
    assert!(e.contains("index 2 out of range"), "{e}");
}

#[test]
fn gather_nd_and_scatter_nd_follow_the_spec() {
    // The spec's examples: GatherND data [[0,1],[2,3]] indices [[0,0],[1,1]] → [0, 3];
    // indices [[1],[0]] → [[2,3],[0,1]]; batch_dims 1 with data [2,2,2], indices [[1],[0]].
    let data = i64s(&[2, 2], &[0, 1, 2, 3]);
    let r = eval(
        "GatherND",
        vec![],
        &[data.clone(), i64s(&[2, 2], &[0, 0, 1, 1])],
    )
    .unwrap();
    assert_eq!(r.ints(), [0, 3]);
    let r = eval("GatherND", vec![], &[data.clone(), i64s(&[2, 1], &[1, 0])]).unwrap();
    assert_eq!(
        (r.shape().to_vec(), r.ints()),
        (vec![2, 2], vec![2, 3, 0, 1])
    );
    let d3 = i64s(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]);
    let r = eval(
        "GatherND",
        vec![("batch_dims", A::I(1))],
        &[d3, i64s(&[2, 1], &[1, 0])],
    );
    assert_eq!(r.unwrap().ints(), [2, 3, 4, 5]);
    // ScatterND: the spec's first example, and Swin's mask writes (`img_mask[:, h, w, :] = cnt`).
    let d = i64s(&[8], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let r = eval(
        "ScatterND",
        vec![],
        &[
            d.clone(),
            i64s(&[4, 1], &[4, 3, 1, 7]),
            i64s(&[4], &[9, 10, 11, 12]),
        ],
    );
    assert_eq!(r.unwrap().ints(), [1, 11, 3, 10, 9, 6, 7, 12]);
    let r = eval(
        "ScatterND",
        vec![("reduction", A::S("add"))],
        &[d.clone(), i64s(&[1, 1], &[0]), i64s(&[1], &[5])],
    );
    assert_eq!(r.unwrap().ints()[0], 6);
    let e = eval(
        "ScatterND",
        vec![],
        &[d, i64s(&[1, 1], &[8]), i64s(&[1], &[0])],
    )
    .unwrap_err();
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn where_expand_tile_and_reductions() {
    let c = i64s(&[3], &[1, 0, 1]);
    let r = eval(
        "Where",
        vec![],
        &[c, f32s(&[], &[1.0]), f32s(&[3], &[7.0, 8.0, 9.0])],
    )
    .unwrap();
    assert_eq!(r.floats(), [1.0, 8.0, 1.0]);
    let r = eval(
        "Expand",
        vec![],
        &[i64s(&[1, 2], &[0, 1]), i64s(&[2], &[3, 1])],
    )
    .unwrap();
    assert_eq!(
        (r.shape().to_vec(), r.ints()),
        (vec![3, 2], vec![0, 1, 0, 1, 0, 1])
    );
    let e = eval(
        "Expand",
        vec![],
        &[i64s(&[1], &[0]), i64s(&[2], &[1 << 20, 1 << 20])],
    )
    .unwrap_err();
    assert!(e.contains("16777216 elements"), "{e}");
    let r = eval("Tile", vec![], &[i64s(&[2], &[1, 2]), i64s(&[1], &[2])]).unwrap();
    assert_eq!(r.ints(), [1, 2, 1, 2]);
    let x = f32s(&[2, 2], &[3.0, 4.0, 6.0, 8.0]);
    let l2 = eval(
        "ReduceL2",
        vec![("axes", A::Is(vec![1])), ("keepdims", A::I(0))],
        &[x.clone()],
    );
    assert_eq!(vals(&l2.unwrap()), (vec![2], vec![5.0, 10.0]));
    let s = eval("ReduceSum", vec![], &[x, None]).unwrap();
    assert_eq!(vals(&s), (vec![1, 1], vec![21.0]));
}

#[test]
fn slices_take_every_index_onnx_names_for_each_step() {
    let x = i64s(&[10], &(0..10).collect::<Vec<_>>());
    let cases: [(i64, i64, i64, &[i64]); 7] = [
        (1, 8, 3, &[1, 4, 7]),
        (0, 10, 2, &[0, 2, 4, 6, 8]),
        (9, 0, -2, &[9, 7, 5, 3, 1]),
        (-1, i64::MIN, -3, &[9, 6, 3, 0]),
        (8, 2, -4, &[8, 4]),
        (5, 5, 1, &[]),
        (2, 7, 100, &[2]),
    ];
    for (start, end, step, want) in cases {
        let s = eval(
            "Slice",
            vec![],
            &[
                x.clone(),
                i64s(&[1], &[start]),
                i64s(&[1], &[end]),
                i64s(&[1], &[0]),
                i64s(&[1], &[step]),
            ],
        )
        .unwrap();
        assert_eq!(s.ints(), want, "{start}:{end}:{step}");
    }
}

#[test]
fn trilu_slice_concat_and_shape_ops() {
    let x = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let u = eval("Trilu", vec![], &[x.clone(), None]).unwrap();
    assert_eq!(u.ints(), [1, 2, 3, 0, 5, 6]);
    let l = eval(
        "Trilu",
        vec![("upper", A::I(0))],
        &[x.clone(), i64s(&[], &[-1])],
    )
    .unwrap();
    assert_eq!(l.ints(), [0, 0, 0, 4, 0, 0]);
    let s = eval(
        "Slice",
        vec![],
        &[
            x.clone(),
            i64s(&[1], &[-1]),
            i64s(&[1], &[i64::MIN]),
            i64s(&[1], &[1]),
            i64s(&[1], &[-1]),
        ],
    );
    assert_eq!(s.unwrap().ints(), [3, 2, 1, 6, 5, 4]);
    let c = eval(
        "Concat",
        vec![("axis", A::I(0))],
        &[
            i64s(&[1], &[7]),
            x.clone().map(|c| c.reshaped(&[6]).unwrap()),
        ],
    );
    assert_eq!(c.unwrap().ints(), [7, 1, 2, 3, 4, 5, 6]);
    let t = eval("Transpose", vec![], &[x.clone()]).unwrap();
    assert_eq!(t.ints(), [1, 4, 2, 5, 3, 6]);
    let sh = eval("Shape", vec![("start", A::I(-1))], &[x.clone()]).unwrap();
    assert_eq!(sh.ints(), [3]);
    let un = eval("Unsqueeze", vec![], &[x.clone(), i64s(&[1], &[0])]).unwrap();
    assert_eq!(un.shape(), &[1, 2, 3]);
    let g = eval("Gather", vec![("axis", A::I(1))], &[x, i64s(&[], &[-1])]).unwrap();
    assert_eq!((g.shape().to_vec(), g.ints()), (vec![2], vec![3, 6]));
}

/// GPT-2's position ids: `Range(0, Shape(x)[1], 1)` feeding the run-time graph.
fn position_ids() -> ModelBuilder {
    ModelBuilder::new(17, &[None, Some(5)])
        .init(ints("one", &[1]))
        .init(ints("zero", &[0]))
        .init(ints("step", &[1]))
        .node("Shape", "shape", &["x"], &["s"], vec![])
        .node(
            "Gather",
            "len",
            &["s", "one"],
            &["n"],
            vec![("axis", A::I(0))],
        )
        .node("Squeeze", "n0", &["n"], &["n1"], vec![])
        .node("Squeeze", "z0", &["zero"], &["z1"], vec![])
        .node("Squeeze", "d0", &["step"], &["d1"], vec![])
        .node("Range", "arange", &["z1", "n1", "d1"], &["pos"], vec![])
        .node("Cast", "cast", &["pos"], &["posf"], vec![("to", A::I(1))])
        .node("Add", "add", &["x", "posf"], &["y"], vec![])
        .output("y", &[None, Some(5)])
}

#[test]
fn a_range_over_the_input_shape_folds_into_the_graph() {
    let b = position_ids();
    let g = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 3).unwrap();
    assert_eq!(
        g.nodes.len(),
        1,
        "{:?}",
        g.nodes.iter().map(|n| &n.name).collect::<Vec<_>>()
    );
    match &g.nodes[0].op {
        crate::ir::Op::Binary(b) => {
            let c = b.constant.as_ref().unwrap();
            assert_eq!(
                c.value.iter().copied().collect::<Vec<_>>(),
                [0.0, 1.0, 2.0, 3.0, 4.0]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fold_only_ops_on_run_time_tensors_are_errors_naming_the_node() {
    let b = ModelBuilder::new(17, &[None, Some(5)])
        .init(ints("reps", &[1, 2]))
        .node("Tile", "cs", &["x", "reps"], &["y"], vec![])
        .output("y", &[None, Some(10)]);
    let e = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 2).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("node cs") && m.contains("input 0 ('x') is a run-time tensor"),
        "{m}"
    );
}

#[test]
fn an_oversized_fold_is_an_error_not_an_allocation() {
    let b = ModelBuilder::new(17, &[None, Some(5)])
        .init(ints("big", &[1 << 30, 1 << 30]))
        .node("ConstantOfShape", "huge", &["big"], &["c"], vec![])
        .node("Add", "add", &["x", "c"], &["y"], vec![])
        .output("y", &[None, Some(5)]);
    let e = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 2).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("node huge") && m.contains("16777216"), "{m}");
}

#[test]
fn every_op_with_an_evaluator_is_a_supported_op() {
    let ops = supported_ops();
    for &op in FOLD_ONLY {
        assert!(
            evaluator(op).is_some(),
            "{op} folds only but has no evaluator"
        );
    }
    for op in [
        "Add", "Gather", "Slice", "Concat", "Reshape", "Where", "Expand", "Cast", "Shape",
    ] {
        assert!(evaluator(op).is_some() && ops.contains(&op), "{op}");
    }
    let table = [
        "Constant",
        "Identity",
        "Dropout",
        "Cast",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "Pow",
        "Min",
        "Max",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "Not",
        "IsNaN",
        "IsInf",
        "Neg",
        "Abs",
        "Sign",
        "Ceil",
        "Floor",
        "Round",
        "Sqrt",
        "Exp",
        "Log",
        "Reciprocal",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Where",
        "ConstantOfShape",
        "Range",
        "Expand",
        "Tile",
        "Concat",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "ScatterND",
        "ScatterElements",
        "CumSum",
        "Trilu",
        "Shape",
        "Size",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL2",
        "Clip",
    ];
    for op in table {
        assert!(evaluator(op).is_some(), "{op}");
        assert!(
            ops.contains(&op),
            "{op} folds but is not in the supported list"
        );
    }
}

#[test]
fn matmul_and_gemm_of_constants() {
    let a = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f32s(&[3], &[1.0, 0.0, -1.0]);
    let r = eval("MatMul", vec![], &[a.clone(), b.clone()]).unwrap();
    assert_eq!(vals(&r), (vec![2], vec![-2.0, -2.0]));
    // A batch of two [1, 2] @ [2, 3] against one shared [2, 3].
    let bat = f32s(&[2, 1, 2], &[1.0, 0.0, 0.0, 1.0]);
    let r = eval(
        "MatMul",
        vec![],
        &[bat, a.clone().map(|c| c.reshaped(&[2, 3]).unwrap())],
    )
    .unwrap();
    assert_eq!(
        vals(&r),
        (vec![2, 1, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    );
    let c = f32s(&[2], &[10.0, 20.0]);
    let r = eval(
        "Gemm",
        vec![("transB", A::I(1)), ("alpha", A::F(2.0))],
        &[a.clone(), a.clone(), c],
    );
    assert_eq!(
        vals(&r.unwrap()),
        (vec![2, 2], vec![38.0, 84.0, 74.0, 174.0])
    );
    let e = eval("MatMul", vec![], &[a.clone(), a]).unwrap_err();
    assert!(e.contains("inner sizes differ"), "{e}");
}

#[test]
fn clip_of_a_constant_folds_with_input_or_attribute_bounds() {
    // swin_v2's `clamp(logit_scale, max=log(100))` on a parameter: bounds as inputs (opset 11+)
    let x = f32s(&[3], &[-2.0, 0.5, 9.0]);
    let r = eval("Clip", vec![], &[x.clone(), None, f32s(&[], &[4.6])]).unwrap();
    assert_eq!(vals(&r), (vec![3], vec![-2.0, 0.5, 4.6]));
    let r = eval(
        "Clip",
        vec![],
        &[x.clone(), f32s(&[], &[0.0]), f32s(&[], &[1.0])],
    )
    .unwrap();
    assert_eq!(vals(&r), (vec![3], vec![0.0, 0.5, 1.0]));
    // ... as attributes (before opset 11); integers stay integers
    let r = eval("Clip", vec![("min", A::F(-1.0))], &[i64s(&[2], &[-5, 3])]).unwrap();
    assert_eq!(r, i64s(&[2], &[-1, 3]).unwrap());
    let e = eval("Clip", vec![], &[x, f32s(&[], &[2.0]), f32s(&[], &[1.0])]).unwrap_err();
    assert!(
        e.contains("node n") && e.contains("min 2 exceeds max 1"),
        "{e}"
    );
}
