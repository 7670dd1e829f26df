//! Checked attribute reads: booleans are 0 or 1, axes in range, required attributes present;
//! every error names the file, node, op and attribute.

use super::testutil::{floats, ModelBuilder, A};
use crate::onnx::*;

fn err(b: &ModelBuilder) -> String {
    match decode(&b.bytes(), "t.onnx").and_then(|p| import_proto(&p, "t.onnx", 2)) {
        Ok(_) => String::from("imported without error"),
        Err(e) => e.to_string(),
    }
}

fn pool(ceil_mode: i64) -> ModelBuilder {
    ModelBuilder::new(13, &[None, Some(3), Some(4), Some(4)])
        .node(
            "MaxPool",
            "pool",
            &["x"],
            &["y"],
            vec![
                ("kernel_shape", A::Is(vec![2, 2])),
                ("strides", A::Is(vec![2, 2])),
                ("ceil_mode", A::I(ceil_mode)),
            ],
        )
        .output("y", &[None, Some(3), Some(2), Some(2)])
}

#[test]
fn a_boolean_attribute_must_be_zero_or_one() {
    assert_eq!(err(&pool(0)), "imported without error");
    assert_eq!(err(&pool(1)), "imported without error");
    assert_eq!(
        err(&pool(2)),
        "t.onnx: node pool (MaxPool), attribute 'ceil_mode': expected a boolean (0 or 1), got 2"
    );
    let gemm = |trans_b: i64| {
        ModelBuilder::new(13, &[None, Some(3)])
            .init(floats("w", &[2, 3]))
            .node(
                "Gemm",
                "fc",
                &["x", "w"],
                &["y"],
                vec![("transB", A::I(trans_b))],
            )
            .output("y", &[None, Some(2)])
    };
    assert_eq!(err(&gemm(1)), "imported without error");
    assert_eq!(
        err(&gemm(-1)),
        "t.onnx: node fc (Gemm), attribute 'transB': expected a boolean (0 or 1), got -1"
    );
}

#[test]
fn axis_and_required_attributes_are_named() {
    let softmax = ModelBuilder::new(13, &[None, Some(5)])
        .node("Softmax", "sm", &["x"], &["y"], vec![("axis", A::I(2))])
        .output("y", &[None, Some(5)]);
    assert_eq!(
        err(&softmax),
        "t.onnx: node sm (Softmax), attribute 'axis': axis 2 out of range for rank 2"
    );
    let concat = ModelBuilder::new(13, &[None, Some(5)])
        .node("Concat", "cat", &["x", "x"], &["y"], vec![])
        .output("y", &[None, Some(10)]);
    assert_eq!(
        err(&concat),
        "t.onnx: node cat (Concat), attribute 'axis': is missing"
    );
    let cast = ModelBuilder::new(13, &[None, Some(5)])
        .node("Cast", "c", &["x"], &["y"], vec![("to", A::F(1.0))])
        .output("y", &[None, Some(5)]);
    assert_eq!(
        err(&cast),
        "t.onnx: node c (Cast), attribute 'to': expected int, got float"
    );
}

#[test]
fn an_invalid_keepdims_is_reported_by_the_reduce_mean_not_hidden_by_fusion() {
    // The decomposed layer norm over the last axis, with keepdims = 3 on the first mean:
    // fusion leaves the chain alone and the ReduceMean handler names the attribute.
    let b = ModelBuilder::new(13, &[None, Some(4)])
        .node(
            "ReduceMean",
            "mean",
            &["x"],
            &["m"],
            vec![("axes", A::Is(vec![-1])), ("keepdims", A::I(3))],
        )
        .node("Sub", "sub", &["x", "m"], &["d"], vec![])
        .output("d", &[None, Some(4)]);
    assert_eq!(
        err(&b),
        "t.onnx: node mean (ReduceMean), attribute 'keepdims': expected a boolean (0 or 1), got 3"
    );
}

#[test]
fn layout_other_than_zero_or_one_is_an_error() {
    let b = ModelBuilder::new(14, &[Some(5), None, Some(3)])
        .init(floats("W", &[1, 4, 3]))
        .init(floats("R", &[1, 4, 4]))
        .node(
            "RNN",
            "rnn",
            &["x", "W", "R"],
            &["y"],
            vec![("hidden_size", A::I(4)), ("layout", A::I(7))],
        )
        .output("y", &[Some(5), Some(1), None, Some(4)]);
    assert_eq!(
        err(&b),
        "t.onnx: node rnn (RNN), attribute 'layout': expected 0 or 1, got 7"
    );
}
