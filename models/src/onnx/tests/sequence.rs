//! Importer tests of sequence models: recurrent layers, embeddings, attention blocks, the
//! sequence-length binding.

use super::testutil::{floats, ints, named_value_info, ModelBuilder, A};
use crate::ir::{CellKind, Op};
use crate::onnx::*;
use crate::summary::{GemmOperands, LayerKind, LayerRole};
use crate::{Graph, ModelError};

fn import(b: &ModelBuilder, batch: usize, seq: Option<usize>) -> Result<Graph, ModelError> {
    import_proto_with(&decode(&b.bytes(), "lm.onnx")?, "lm.onnx", batch, seq)
}

fn err(b: &ModelBuilder, seq: Option<usize>) -> String {
    match import(b, 2, seq) {
        Ok(_) => String::from("imported without error"),
        Err(e) => e.to_string(),
    }
}

fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

const V: i64 = 11;
const D: i64 = 6;
const H: i64 = 4;

/// PyTorch's word_language_model shape: ids `[seq, batch]` → embedding → LSTM with `h0`, `c0`
/// graph inputs → squeeze → decoder.
fn lstm_lm(input: &[&str], lstm_attrs: Vec<(&'static str, A)>) -> ModelBuilder {
    ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", input, 7))
        .extra_input(named_value_info("h0", &["1", "batch", "4"], 1))
        .extra_input(named_value_info("c0", &["1", "batch", "4"], 1))
        .init(floats("emb", &[V, D]))
        .init(floats("W", &[1, 4 * H, D]))
        .init(floats("R", &[1, 4 * H, H]))
        .init(floats("B", &[1, 8 * H]))
        .init(floats("dec", &[H, V]))
        .init(ints("ax1", &[1]))
        .node("Gather", "encoder", &["emb", "x"], &["e"], vec![])
        .node(
            "LSTM",
            "rnn",
            &["e", "W", "R", "B", "", "h0", "c0"],
            &["y", "yh", "yc"],
            lstm_attrs,
        )
        .node("Squeeze", "sq", &["y", "ax1"], &["ys"], vec![])
        .node("MatMul", "decoder", &["ys", "dec"], &["logits"], vec![])
        .output_info(named_value_info("logits", &["seq", "batch", "11"], 1))
}

#[test]
fn lstm_language_model_imports_with_its_sequence_length() {
    let b = lstm_lm(&["seq", "batch"], vec![("hidden_size", A::I(H))]);
    let g = import(&b, 3, Some(5)).unwrap();
    assert_eq!(g.shape(g.input), &[5, 3]);
    assert_eq!(g.seq_len, Some(5));
    assert_eq!(g.shape(g.output), &[5, 3, V as usize]);
    assert_eq!(
        ops(&g),
        ["Embedding", "LSTM", "Reshape", "Reshape", "Linear"]
    );
    let Op::Recurrent(r) = &g.nodes[1].op else {
        unreachable!()
    };
    assert_eq!(r.kind, CellKind::Lstm);
    // B's second half is Rb: floats() counts up by 0.01 from element 0.
    assert_eq!(r.bias_r[0], 0.01 * (4 * H) as f32);
    let s = g.summary();
    let kinds: Vec<_> = s.layers.iter().map(|l| (l.kind, l.role)).collect();
    assert_eq!(
        kinds,
        [
            (LayerKind::Recurrent, LayerRole::Body),
            (LayerKind::Linear, LayerRole::Last)
        ]
    );
    // Per sample (one column of the batch): 5 steps.
    assert_eq!(s.layers[0].macs, (5 * 4 * H * (D + H)) as u64);
    assert_eq!(s.layers[1].macs, (5 * H * V) as u64);
    assert_eq!(s.params, (V * D + 4 * H * (D + H) + 8 * H + H * V) as u64);
    assert_eq!(g.validate(), Ok(()));
}

#[test]
fn sequence_length_must_be_given_and_fit_a_fixed_export() {
    let b = lstm_lm(&["seq", "batch"], vec![]);
    let e = err(&b, None);
    assert!(e.contains("'seq'") && e.contains("--seq-len"), "{e}");
    // A fixed-length export: 5 tokens, dynamic batch.
    let fixed = lstm_lm(&["5", "batch"], vec![]);
    assert_eq!(import(&fixed, 2, None).unwrap().seq_len, Some(5));
    assert!(import(&fixed, 2, Some(5)).is_ok());
    let e = err(&fixed, Some(9));
    assert!(
        e.contains("longer") && e.contains("fixed sequence length 5"),
        "{e}"
    );
    // An image model has no sequence axis to bind.
    let img = ModelBuilder::new(13, &[None, Some(3)])
        .node("Relu", "r", &["x"], &["y"], vec![])
        .output("y", &[None, Some(3)]);
    let e = err(&img, Some(4));
    assert!(e.contains("no sequence axis"), "{e}");
}

#[test]
fn unsupported_recurrent_forms_name_node_and_attribute() {
    let b = lstm_lm(&["seq", "batch"], vec![("direction", A::S("sideways"))]);
    let e = err(&b, Some(3));
    assert!(
        e.contains("rnn") && e.contains("direction") && e.contains("sideways"),
        "{e}"
    );
    // Bidirectional weights need two directions.
    let b = lstm_lm(
        &["seq", "batch"],
        vec![("direction", A::S("bidirectional"))],
    );
    let e = err(&b, Some(3));
    assert!(e.contains("num_directions axis of 2"), "{e}");
    let b = lstm_lm(&["seq", "batch"], vec![("layout", A::I(1))]);
    assert!(err(&b, Some(3)).contains("layout"));
    let b = lstm_lm(
        &["seq", "batch"],
        vec![("activations", A::Ss(vec!["Relu", "Tanh", "Tanh"]))],
    );
    assert!(err(&b, Some(3)).contains("activations"));
    // A non-zero constant initial state cannot be represented.
    let b = ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", &["seq", "batch", "6"], 1))
        .init(floats("W", &[1, 3 * H, D]))
        .init(floats("R", &[1, 3 * H, H]))
        .init(floats("h0", &[1, 2, H]))
        .node("GRU", "gru", &["x", "W", "R", "", "", "h0"], &["y"], vec![])
        .output_info(named_value_info("y", &["T", "1", "N", "4"], 1));
    let e = err(&b, Some(3));
    assert!(e.contains("gru") && e.contains("initial_h"), "{e}");
}

/// A GRU on `[T, N, 6]` with outputs `outputs` (`""` skips one), read through `yh`.
fn gru(outputs: &[&str], attrs: Vec<(&'static str, A)>) -> ModelBuilder {
    ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", &["T", "N", "6"], 1))
        .init(floats("W", &[1, 3 * H, D]))
        .init(floats("R", &[1, 3 * H, H]))
        .node("GRU", "gru", &["x", "W", "R"], outputs, attrs)
        .output_info(named_value_info("yh", &["1", "N", "4"], 1))
}

#[test]
fn gru_last_hidden_state_is_the_last_step() {
    let b = gru(
        &["", "yh"],
        vec![("linear_before_reset", A::I(1)), ("hidden_size", A::I(H))],
    );
    assert_eq!(import(&b, 2, Some(3)).unwrap().nodes.len(), 2);
    let b = gru(&["y", "yh"], vec![("linear_before_reset", A::I(1))]);
    let g = import(&b, 2, Some(7)).unwrap();
    assert_eq!(g.shape(g.output), &[1, 2, H as usize]);
    assert!(matches!(
        &g.nodes[0].op,
        Op::Recurrent(r) if r.kind == CellKind::Gru { linear_before_reset: true }
    ));
    let Op::Slice { axes } = &g.nodes[1].op else {
        unreachable!()
    };
    assert_eq!((axes[0].axis, axes[0].start, axes[0].len), (0, 6, 1));
}

/// One pre-norm self-attention block on `[B, T, D]` as the dynamo exporter writes it:
/// LayerNormalization, one QKV projection split in three, scores, softmax, context, GELU MLP,
/// and the ViT-style `x[:, 0]` class-token read-out.
#[test]
fn attention_block_has_weight_and_activation_gemms() {
    let b = ModelBuilder::new(20, &[None])
        .input_info(named_value_info("x", &["batch", "seq", "6"], 1))
        .init(floats("g", &[D]))
        .init(floats("beta", &[D]))
        .init(floats("wqkv", &[D, 3 * D]))
        .init(floats("w1", &[D, 2 * D]))
        .init(floats("scale", &[]))
        .init(ints("zero", &[0]))
        .node(
            "LayerNormalization",
            "ln",
            &["x", "g", "beta"],
            &["n"],
            vec![("epsilon", A::F(1e-6))],
        )
        .node("MatMul", "qkv", &["n", "wqkv"], &["qkv_out"], vec![])
        .node(
            "Split",
            "split",
            &["qkv_out"],
            &["q", "k", "v"],
            vec![("axis", A::I(2))],
        )
        .node(
            "Transpose",
            "kt",
            &["k"],
            &["k_t"],
            vec![("perm", A::Is(vec![0, 2, 1]))],
        )
        .node("MatMul", "scores", &["q", "k_t"], &["s"], vec![])
        .node("Mul", "scaled", &["s", "scale"], &["s2"], vec![])
        .node("Softmax", "attn", &["s2"], &["p"], vec![("axis", A::I(-1))])
        .node("MatMul", "context", &["p", "v"], &["c"], vec![])
        .node("MatMul", "fc1", &["c", "w1"], &["h"], vec![])
        .node(
            "Gelu",
            "gelu",
            &["h"],
            &["a"],
            vec![("approximate", A::S("tanh"))],
        )
        .node(
            "Gather",
            "cls",
            &["a", "zero"],
            &["first"],
            vec![("axis", A::I(1))],
        )
        .output_info(named_value_info("first", &["batch", "1", "12"], 1));
    let g = import(&b, 2, Some(5)).unwrap();
    // `zero` is [1]: a slice that keeps the axis.
    assert_eq!(g.shape(g.output), &[2, 1, 2 * D as usize]);
    assert!(ops(&g).starts_with(&["LayerNorm", "Linear", "Slice", "Slice", "Slice"]));
    assert!(ops(&g).contains(&"Softmax") && ops(&g).contains(&"Gelu"));
    let s = g.summary();
    let kinds: Vec<_> = s
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.kind.operands(), l.macs))
        .collect();
    let (t, d) = (5u64, D as u64);
    assert_eq!(
        kinds,
        [
            ("qkv", GemmOperands::WeightActivation, t * d * 3 * d),
            ("scores", GemmOperands::ActivationActivation, t * t * d),
            ("context", GemmOperands::ActivationActivation, t * t * d),
            ("fc1", GemmOperands::WeightActivation, t * d * 2 * d),
        ]
    );
    assert_eq!(s.layers[1].gemm_dims(2), (2, t, t, d));
    // A scalar index drops the axis.
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3)])
        .init(ints("i", &[0]))
        .node(
            "Gather",
            "cls",
            &["x", "i"],
            &["y"],
            vec![("axis", A::I(1))],
        )
        .output("y", &[None, Some(3)]);
    let mut b = b;
    if let Some(g) = b.model.graph.as_mut() {
        g.initializer[0].dims.clear();
    }
    let g = import(&b, 2, None).unwrap();
    assert_eq!(g.shape(g.output), &[2, 3]);
    assert_eq!(ops(&g), ["Slice", "Reshape"]);
}

#[test]
fn log_softmax_imports_as_a_log_softmax_on_its_axis() {
    let b = ModelBuilder::new(13, &[None, Some(4), Some(3)])
        .node(
            "LogSoftmax",
            "lsm",
            &["x"],
            &["y"],
            vec![("axis", A::I(-1))],
        )
        .output("y", &[None, Some(4), Some(3)]);
    let g = import(&b, 2, None).unwrap();
    assert_eq!(ops(&g), ["LogSoftmax"]);
    assert!(g
        .nodes
        .iter()
        .any(|n| n.op == Op::Softmax { axis: 2, log: true }));
    assert_eq!(g.shape(g.output), &[2, 4, 3]);
    // before opset 13, only the last axis (as for Softmax)
    let b = ModelBuilder::new(11, &[None, Some(4), Some(3)])
        .node("LogSoftmax", "lsm", &["x"], &["y"], vec![("axis", A::I(1))])
        .output("y", &[None, Some(4), Some(3)]);
    let e = err(&b, None);
    assert!(e.contains("lsm") && e.contains("axis"), "{e}");
}

#[test]
fn softmax_and_layer_norm_axes_other_than_the_last_are_errors() {
    let b = ModelBuilder::new(11, &[None, Some(4), Some(3)])
        .node("Softmax", "sm", &["x"], &["y"], vec![])
        .output("y", &[None, Some(4), Some(3)]);
    let e = err(&b, None);
    assert!(e.contains("sm") && e.contains("axis"), "{e}");
    let b = ModelBuilder::new(17, &[None, Some(4), Some(3)])
        .init(floats("g", &[4, 3]))
        .node(
            "LayerNormalization",
            "ln",
            &["x", "g"],
            &["y"],
            vec![("axis", A::I(1))],
        )
        .output("y", &[None, Some(4), Some(3)]);
    let e = err(&b, None);
    assert!(e.contains("ln") && e.contains("axis"), "{e}");
    // An embedding table lookup on another axis is not an embedding.
    let b = ModelBuilder::new(13, &[None, Some(4)])
        .init(floats("t", &[5, 3]))
        .node("Gather", "g", &["t", "x"], &["y"], vec![("axis", A::I(1))])
        .output("y", &[]);
    assert!(err(&b, None).contains("embedding"));
}

fn tensor(name: &str, dims: &[i64], values: Vec<f32>) -> onnx_protobuf::TensorProto {
    let mut t = floats(name, dims);
    t.float_data = values;
    t
}

fn causal(t: usize, masked: f32) -> Vec<f32> {
    (0..t * t)
        .map(|k| if k % t > k / t { masked } else { 0.0 })
        .collect()
}

#[test]
fn causal_masks_fold_into_one_op() {
    // PyTorch's generate_square_subsequent_mask: -inf above the diagonal, added to the scores.
    let add = |values: Vec<f32>| {
        ModelBuilder::new(14, &[None, Some(3), Some(3)])
            .init(tensor("mask", &[3, 3], values))
            .node("Add", "masked", &["x", "mask"], &["y"], vec![])
            .node("Softmax", "sm", &["y"], &["p"], vec![])
            .output("p", &[None, Some(3), Some(3)])
    };
    let g = import(&add(causal(3, f32::NEG_INFINITY)), 2, None).unwrap();
    assert_eq!(ops(&g), ["CausalMask", "Softmax"]);
    // Any other -inf tensor is still a corrupt weight.
    let mut anti = causal(3, f32::NEG_INFINITY);
    anti.reverse();
    let e = err(&add(anti), None);
    assert!(e.contains("mask") && e.contains("inf"), "{e}");
    // Where(cond, x, -inf) with a boolean lower-triangular condition.
    let mut cond = ints("cond", &[1, 0, 0, 1, 1, 0, 1, 1, 1]);
    cond.dims = vec![3, 3];
    cond.data_type = 9;
    cond.int32_data = cond.int64_data.iter().map(|&v| v as i32).collect();
    cond.int64_data.clear();
    let b = ModelBuilder::new(14, &[None, Some(3), Some(3)])
        .init(cond.clone())
        .init(tensor("ninf", &[], vec![f32::NEG_INFINITY]))
        .node("Where", "w", &["cond", "x", "ninf"], &["y"], vec![])
        .output("y", &[None, Some(3), Some(3)]);
    assert_eq!(ops(&import(&b, 2, None).unwrap()), ["CausalMask"]);
    let b = ModelBuilder::new(14, &[None, Some(3), Some(3)])
        .init(cond)
        .init(tensor("ninf", &[], vec![f32::NEG_INFINITY]))
        .node("Where", "w", &["cond", "ninf", "x"], &["y"], vec![])
        .output("y", &[None, Some(3), Some(3)]);
    // -inf on and below the diagonal is no causal mask: a general choice.
    assert_eq!(ops(&import(&b, 2, None).unwrap()), ["Where"]);
}

/// torchvision's ViT: the class token expanded over the batch, concatenated before the patches,
/// then learned positions added.
#[test]
fn vit_class_token_concat_is_a_class_token() {
    let b = ModelBuilder::new(14, &[None, Some(4), Some(6)])
        .init(floats("cls", &[1, 1, 6]))
        .init(ints("shape", &[2, 1, 6]))
        .init(floats("pos", &[1, 5, 6]))
        .node("Expand", "expand", &["cls", "shape"], &["cls_b"], vec![])
        .node(
            "Concat",
            "cat",
            &["cls_b", "x"],
            &["t"],
            vec![("axis", A::I(1))],
        )
        .node("Add", "pos_add", &["t", "pos"], &["y"], vec![])
        .output("y", &[None, Some(5), Some(6)]);
    let g = import(&b, 2, None).unwrap();
    assert_eq!(ops(&g), ["ClassToken", "Add"]);
    assert_eq!(g.shape(g.output), &[2, 5, 6]);
    assert_eq!(g.params(), 6);
    // A constant that is not one row shared by the batch is refused.
    let b = ModelBuilder::new(14, &[None, Some(4), Some(6)])
        .init(floats("cls", &[2, 1, 6]))
        .node(
            "Concat",
            "cat",
            &["cls", "x"],
            &["t"],
            vec![("axis", A::I(1))],
        )
        .output("t", &[None, Some(5), Some(6)]);
    let e = err(&b, None);
    assert!(e.contains("cat") && e.contains("class token"), "{e}");
}

/// The legacy exporter's nn.LayerNorm (opset < 17) followed by its nn.GELU (opset < 20).
fn decomposed(extra_use_of_var: bool) -> ModelBuilder {
    let scalar = |name: &str, v: f32| tensor(name, &[], vec![v]);
    let mut b = ModelBuilder::new(13, &[None, Some(5), Some(4)])
        .init(floats("gamma", &[4]))
        .init(floats("beta", &[4]))
        .init(scalar("two", 2.0))
        .init(scalar("sqrt2", std::f32::consts::SQRT_2))
        .init(scalar("one", 1.0))
        .init(scalar("half", 0.5))
        .node(
            "Constant",
            "eps_c",
            &[],
            &["eps"],
            vec![("value", A::T(scalar("e", 1e-5)))],
        )
        .node(
            "ReduceMean",
            "mean",
            &["x"],
            &["m"],
            vec![("axes", A::Is(vec![-1]))],
        )
        .node("Sub", "center", &["x", "m"], &["d"], vec![])
        .node("Pow", "sq", &["d", "two"], &["p"], vec![])
        .node(
            "ReduceMean",
            "var",
            &["p"],
            &["v"],
            vec![("axes", A::Is(vec![-1]))],
        )
        .node("Add", "var_eps", &["v", "eps"], &["ve"], vec![])
        .node("Sqrt", "std", &["ve"], &["s"], vec![])
        .node("Div", "norm", &["d", "s"], &["n"], vec![])
        .node("Mul", "scale", &["n", "gamma"], &["ng"], vec![])
        .node("Add", "shift", &["ng", "beta"], &["y"], vec![])
        .node("Div", "g_div", &["y", "sqrt2"], &["gd"], vec![])
        .node("Erf", "g_erf", &["gd"], &["ge"], vec![])
        .node("Add", "g_add", &["ge", "one"], &["ga"], vec![])
        .node("Mul", "g_mul", &["y", "ga"], &["gm"], vec![])
        .node("Mul", "gelu", &["gm", "half"], &["z"], vec![]);
    if extra_use_of_var {
        b = b.node("Relu", "peek", &["v"], &["pv"], vec![]);
    }
    b.output("z", &[None, Some(5), Some(4)])
}

#[test]
fn decomposed_layer_norm_and_erf_gelu_fuse() {
    let g = import(&decomposed(false), 2, None).unwrap();
    assert_eq!(ops(&g), ["LayerNorm", "Gelu"]);
    let Op::LayerNorm(ln) = &g.nodes[0].op else {
        unreachable!()
    };
    assert_eq!(ln.epsilon, 1e-5);
    assert_eq!(ln.bias[1], 0.01);
    assert_eq!(g.nodes[1].op, Op::Gelu { tanh_approx: false });
    assert_eq!(g.params(), 8);
    // An intermediate read elsewhere keeps the chain as it is, op by op.
    let g = import(&decomposed(true), 2, None).unwrap();
    let names = ops(&g);
    assert!(
        names.contains(&"Pow") && names.contains(&"Sqrt") && names.contains(&"Gelu"),
        "{names:?}"
    );
}

/// `binding_for_shape` reads the batch and the sequence length off the data's shape by the
/// axes the file declares: `[seq, batch]` for the word-language-model LSTM, `[batch, seq]` for
/// the Transformer, `[batch, …]` with no sequence for the ViT; a rank mismatch names the input.
#[test]
fn the_binding_follows_the_declared_axes_of_the_data() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/seq");
    let proto = |f: &str| {
        let bytes = std::fs::read(dir.join(f)).unwrap();
        decode(&bytes, f).unwrap()
    };
    let lstm = proto("lstm_lm_legacy_opset14.onnx");
    assert_eq!(
        binding_for_shape(&lstm, "l", &[7, 3]).unwrap(),
        (3, Some(7))
    );
    let tr = proto("transformer_lm_dynamo_opset18.onnx");
    assert_eq!(binding_for_shape(&tr, "t", &[3, 9]).unwrap(), (3, Some(9)));
    let vit = proto("vit_dynamo_opset18.onnx");
    assert_eq!(
        binding_for_shape(&vit, "v", &[5, 3, 16, 16]).unwrap(),
        (5, None)
    );
    let e = binding_for_shape(&lstm, "l", &[7, 3, 1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 2") && e.contains("[7, 3, 1]"), "{e}");
    let g = import_file_for_shape(&dir.join("lstm_lm_legacy_opset14.onnx"), &[5, 2]).unwrap();
    assert_eq!((g.batch, g.seq_len), (2, Some(5)));
}

/// A bidirectional LSTM `[T, B, D] → Y [T, 2, B, H]`, `Y_h [2, B, H]`, both read: `Y` through
/// `Transpose(0, 2, 1, 3) → Reshape [T, B, 2H]`, `Y_h` through a `Reshape [2B, H]`.
fn bilstm(direction: &'static str) -> ModelBuilder {
    let dirs = if direction == "bidirectional" { 2 } else { 1 };
    ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", &["7", "batch", "6"], 1))
        .init(floats("W", &[dirs, 4 * H, D]))
        .init(floats("R", &[dirs, 4 * H, H]))
        .init(floats("B", &[dirs, 8 * H]))
        .init(ints("shape", &[7, -1, 2 * H]))
        .init(ints("flat", &[-1, H]))
        .node(
            "LSTM",
            "rnn",
            &["x", "W", "R", "B"],
            &["y", "yh"],
            vec![("direction", A::S(direction)), ("hidden_size", A::I(H))],
        )
        .node(
            "Transpose",
            "t",
            &["y"],
            &["yt"],
            vec![("perm", A::Is(vec![0, 2, 1, 3]))],
        )
        .node("Reshape", "r", &["yt", "shape"], &["ys"], vec![])
        .node("Reshape", "rh", &["yh", "flat"], &["hs"], vec![])
        .node(
            "Concat",
            "cat",
            &["ys", "ys"],
            &["z"],
            vec![("axis", A::I(0))],
        )
        .output_info(named_value_info("z", &["14", "batch", "8"], 1))
}

#[test]
fn bidirectional_recurrent_layers_run_both_directions_and_count_both() {
    let g = import(&bilstm("bidirectional"), 3, None).unwrap();
    assert_eq!(g.shape(g.output), &[14, 3, 2 * H as usize]);
    let layers = g.summary().layers;
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["rnn", "rnn/reverse"]);
    // Each direction: 7 steps of 4 gates · H · (D + H) MACs per sample.
    let per_dir = 7 * 4 * H as u64 * (D + H) as u64;
    assert!(layers.iter().all(|l| l.macs == per_dir), "{layers:?}");
    // The reverse direction reads the input backwards and is put back in time order.
    let slices: Vec<_> = g
        .nodes
        .iter()
        .filter_map(|n| match &n.op {
            Op::Slice { axes } if axes[0].step == -1 => Some((axes[0].start, axes[0].len)),
            _ => None,
        })
        .collect();
    assert_eq!(slices, [(6, 7), (6, 7)]);
    // A reverse-only layer is one layer, named after the node.
    let g = import(&bilstm("reverse"), 3, None);
    let e = g.map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("node r"), "{e}");
    let rev = ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", &["7", "batch", "6"], 1))
        .init(floats("W", &[1, 3 * H, D]))
        .init(floats("R", &[1, 3 * H, H]))
        .node(
            "GRU",
            "gru",
            &["x", "W", "R"],
            &["y"],
            vec![("direction", A::S("reverse"))],
        )
        .output_info(named_value_info("y", &["7", "1", "batch", "4"], 1));
    let g = import(&rev, 2, None).unwrap();
    let names: Vec<String> = g.summary().layers.iter().map(|l| l.name.clone()).collect();
    assert_eq!(names, ["gru"]);
    assert_eq!(g.shape(g.output), &[7, 1, 2, H as usize]);
}

/// PyTorch's word-language-model export: ids `[35, 4]` fixed (35 steps of 4 sequences), the
/// two-layer state `[2, 4, H]` passed in and sliced per layer.
fn wlm_fixed() -> ModelBuilder {
    ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", &["35", "4"], 7))
        .extra_input(named_value_info("state0", &["2", "4", "4"], 1))
        .extra_input(named_value_info("state1", &["2", "4", "4"], 1))
        .init(floats("emb", &[V, D]))
        .init(floats("W", &[1, 4 * H, D]))
        .init(floats("R", &[1, 4 * H, H]))
        .init(floats("dec", &[H, V]))
        .init(ints("s0", &[0]))
        .init(ints("s1", &[1]))
        .init(ints("ax0", &[0]))
        .init(ints("ax1", &[1]))
        .node("Gather", "encoder", &["emb", "x"], &["e"], vec![])
        .node(
            "Slice",
            "h0",
            &["state0", "s0", "s1", "ax0"],
            &["h"],
            vec![],
        )
        .node(
            "Slice",
            "c0",
            &["state1", "s0", "s1", "ax0"],
            &["c"],
            vec![],
        )
        .node(
            "LSTM",
            "rnn",
            &["e", "W", "R", "", "", "h", "c"],
            &["y", "yh", "yc"],
            vec![],
        )
        .node("Squeeze", "sq", &["y", "ax1"], &["ys"], vec![])
        .node("MatMul", "decoder", &["ys", "dec"], &["logits"], vec![])
        .output_info(named_value_info("logits", &["35", "4", "11"], 1))
}

#[test]
fn a_fixed_sequence_first_export_binds_time_and_batch_from_the_graph() {
    // The ids feed an embedding whose output is the LSTM's sequence-first input: axis 0 is
    // time, axis 1 the batch, whatever their sizes.
    let b = wlm_fixed();
    let proto = decode(&b.bytes(), "wlm.onnx").unwrap();
    assert_eq!(
        binding_for_shape(&proto, "wlm.onnx", &[35, 4]).unwrap(),
        (4, Some(35))
    );
    let g = import(&b, 4, None).unwrap();
    assert_eq!((g.shape(g.input), g.seq_len), (&[35, 4][..], Some(35)));
    let s = g.summary();
    // Per sequence: 35 steps of the LSTM (4 gates · H · (D + H)) and of the decoder (H · V).
    let lstm = 35 * 4 * H as u64 * (D + H) as u64;
    assert_eq!(s.layers[0].macs, lstm);
    assert_eq!(s.layers[1].macs, 35 * (H * V) as u64);
    // The state inputs bind to zeros at the graph's batch.
    if let Err(e) = import(&b, 2, None) {
        panic!("{e}");
    }
}

/// PyTorch's word-language-model Transformer export: ids fixed at `ids` → embedding scaled by a
/// constant → a positional table `pos` added → decoder.
fn positional_lm(ids: &[&str], pos: &[i64]) -> ModelBuilder {
    ModelBuilder::new(14, &[None])
        .input_info(named_value_info("x", ids, 7))
        .init(floats("emb", &[V, D]))
        .init(floats("pe", pos))
        .init(floats("scale", &[]))
        .init(floats("dec", &[D, V]))
        .node("Gather", "embed", &["emb", "x"], &["e"], vec![])
        .node("Mul", "mul", &["e", "scale"], &["es"], vec![])
        .node("Add", "pos", &["es", "pe"], &["p"], vec![])
        .node("MatMul", "decoder", &["p", "dec"], &["logits"], vec![])
        .output_info(named_value_info("logits", &[ids[0], ids[1], "11"], 1))
}

#[test]
fn a_positional_table_tells_the_batch_axis_of_fixed_token_ids() {
    // `[35, 1, D]` added to the embedding of `[35, 4]` ids: axis 1 is the batch (35 steps of
    // 4 sequences), though neither axis is symbolic.
    let b = positional_lm(&["35", "4"], &[35, 1, D]);
    let proto = decode(&b.bytes(), "lm.onnx").unwrap();
    assert_eq!(
        binding_for_shape(&proto, "lm.onnx", &[35, 4]).unwrap(),
        (4, Some(35))
    );
    let g = import(&b, 4, Some(35)).unwrap();
    assert_eq!((g.shape(g.input), g.seq_len), (&[35, 4][..], Some(35)));
    assert_eq!(g.summary().layers[0].macs, 35 * (D * V) as u64);
    // Another batch rebinds axis 1; the table broadcasts over it.
    let g = import(&b, 3, None).unwrap();
    assert_eq!(g.shape(g.input), &[35, 3]);
    // `[1, 35, D]` on `[4, 35]` ids: batch first.
    let b = positional_lm(&["4", "35"], &[1, 35, D]);
    let proto = decode(&b.bytes(), "lm.onnx").unwrap();
    assert_eq!(
        binding_for_shape(&proto, "lm.onnx", &[4, 35]).unwrap(),
        (4, Some(35))
    );
    let g = import(&b, 2, None).unwrap();
    assert_eq!(g.shape(g.input), &[2, 35]);
}

#[test]
fn a_file_tells_its_own_batch_and_its_zero_state_inputs() {
    let dir = std::env::temp_dir().join(format!("cptsim-own-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at = |name: &str, b: &ModelBuilder| {
        let p = dir.join(name);
        std::fs::write(&p, b.bytes()).unwrap();
        p
    };
    // `[35, 4]` ids with a `[2, 4, H]` state pair: batch 4 (axis 1), states bound to zeros.
    let wlm = at("wlm.onnx", &wlm_fixed());
    assert_eq!(file_batch(&wlm), Some(4));
    assert_eq!(zero_state_inputs(&wlm), ["state0", "state1"]);
    let pos = at("pos.onnx", &positional_lm(&["35", "4"], &[35, 1, D]));
    assert_eq!(file_batch(&pos), Some(4));
    assert!(zero_state_inputs(&pos).is_empty());
    // A symbolic batch, or no file: no batch of its own.
    let lm = at("lm.onnx", &lstm_lm(&["seq", "batch"], vec![]));
    assert_eq!(file_batch(&lm), None);
    assert_eq!(zero_state_inputs(&lm), ["h0", "c0"]);
    assert_eq!(file_batch(&dir.join("missing.onnx")), None);
    std::fs::remove_dir_all(&dir).unwrap();
}
