//! Index and mask arithmetic on run-time ids: RoBERTa's position ids from the padding mask and
//! BERT's token-type buffer gathered at them import as run-time ops, batch-independent.

use super::testutil::{floats, ints, named_value_info, ModelBuilder, A};
use crate::ir::{Op, Unary};
use crate::onnx::*;

/// `create_position_ids_from_input_ids` (padding id 1) and `gather(buffer.expand(B, -1), 1,
/// position_ids)` as the exporters write them, on ids `[batch, 6]`.
fn roberta_embeddings() -> ModelBuilder {
    let mut buffer = ints("tt", &[0; 8]);
    buffer.dims = vec![1, 8];
    ModelBuilder::new(17, &[None, Some(6)])
        .input_info(named_value_info("x", &["batch", "6"], 7))
        .init(ints("pad", &[1]))
        .init(ints("ax", &[1]))
        .init(ints("keep", &[1]))
        .init(buffer)
        .init(floats("pos_table", &[16, 4]))
        .init(floats("tt_table", &[2, 4]))
        .node("Equal", "eq", &["x", "pad"], &["e"], vec![])
        .node("Not", "ne", &["e"], &["m"], vec![])
        .node("Cast", "to_int", &["m"], &["mi"], vec![("to", A::I(6))])
        .node("CumSum", "cumsum", &["mi", "ax"], &["cs"], vec![])
        .node("Mul", "mul", &["cs", "mi"], &["pm"], vec![])
        .node("Cast", "to_long", &["pm"], &["pl"], vec![("to", A::I(7))])
        .node("Add", "add", &["pl", "pad"], &["pos"], vec![])
        .node("Shape", "shape", &["x"], &["s"], vec![("end", A::I(1))])
        .node(
            "Concat",
            "cat",
            &["s", "keep"],
            &["target"],
            vec![("axis", A::I(0))],
        )
        .node("Expand", "expand", &["tt", "target"], &["ttb"], vec![])
        .node(
            "GatherElements",
            "gather",
            &["ttb", "pos"],
            &["tti"],
            vec![("axis", A::I(1))],
        )
        .node("Gather", "pos_emb", &["pos_table", "pos"], &["pe"], vec![])
        .node("Gather", "tt_emb", &["tt_table", "tti"], &["te"], vec![])
        .node("Add", "sum", &["pe", "te"], &["y"], vec![])
        .output("y", &[None, Some(6), Some(4)])
}

#[test]
fn position_ids_from_a_padding_mask_import_as_run_time_ops() {
    let b = roberta_embeddings();
    let g = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 3).unwrap();
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops,
        [
            "Equal",
            "Not",
            "Cast",
            "CumSum",
            "Mul",
            "Cast",
            "Add",
            "GatherElements",
            "Embedding",
            "Embedding",
            "Add"
        ]
    );
    assert_eq!(g.nodes[0].op, Op::Unary(Unary::Equal { value: 1.0 }));
    assert_eq!(g.nodes[2].op, Op::Unary(Unary::Trunc));
    assert_eq!(
        g.nodes[3].op,
        Op::CumSum {
            axis: 1,
            exclusive: false,
            reverse: false
        }
    );
    // the buffer expanded over the batch of 3 is stored once: the op holds for any batch
    match &g.nodes[7].op {
        Op::GatherElements { data, axis } => {
            assert_eq!((data.shape(), *axis), (&[1, 8][..], 1));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(g.shape(g.output), [3, 6, 4]);
}

#[test]
fn run_time_comparisons_other_than_with_one_constant_are_errors_naming_the_node() {
    let b = ModelBuilder::new(17, &[None, Some(6)])
        .node("Equal", "eq2", &["x", "x"], &["e"], vec![])
        .output("e", &[None, Some(6)]);
    let e = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 2).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("node eq2") && m.contains("two run-time tensors"),
        "{m}"
    );
    let b = ModelBuilder::new(17, &[None, Some(6)])
        .init(ints("two", &[1, 2]))
        .node("Equal", "eqv", &["x", "two"], &["e"], vec![])
        .output("e", &[None, Some(6)]);
    let e = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 2).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("node eqv") && m.contains("expected a single value"),
        "{m}"
    );
    let b = ModelBuilder::new(17, &[None, Some(6)])
        .node("Cast", "to_bool", &["x"], &["c"], vec![("to", A::I(9))])
        .output("c", &[None, Some(6)]);
    let e = import_proto(&decode(&b.bytes(), "t.onnx").unwrap(), "t.onnx", 2).unwrap_err();
    assert!(e.to_string().contains("data type 9"), "{e}");
}
