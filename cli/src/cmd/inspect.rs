//! `cptsim inspect MODEL`: per-layer geometry, parameters and MACs of a model, with totals; per
//! GEMM its `groups × [M, K] × [K, N]` at the chosen batch and which operands are weights and
//! which activations.

use std::io::Write;

use std::fmt::Write as _;

use anyhow::Result;
use clap::Args;
use cptsim_models::{load_shapes, GemmOperands, LayerInfo, LayerKind, ModelSummary};
use serde_json::json;

use crate::cmd::shared::OutputFormat;

/// Arguments of `cptsim inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    pub model: String,
    /// Batch size bound to the model's batch dimension (shapes per sample do not depend on it;
    /// the GEMM dimensions M do) [default: the batch an ONNX file's input fixes, else 1].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Tokens per sample of a sequence model (default: a zoo model's own; required for an ONNX
    /// file with a symbolic sequence axis).
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Runs the command.
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> Result<()> {
    let batch = match args.batch {
        Some(0) => anyhow::bail!("--batch: must be at least 1"),
        Some(b) => b,
        None if args.model.starts_with("zoo:") => 1,
        None => cptsim_models::onnx::file_batch(std::path::Path::new(&args.model)).unwrap_or(1),
    };
    let graph = load_shapes(&args.model, batch, args.seq_len)?;
    let s = graph.summary();
    let batch = batch as u64;
    let states = match args.model.starts_with("zoo:") {
        true => Vec::new(),
        false => cptsim_models::onnx::zero_state_inputs(std::path::Path::new(&args.model)),
    };
    let text = match args.format {
        OutputFormat::Table => {
            let mut t = table(&s, graph.bn_folded, batch, graph.seq_len);
            if !states.is_empty() {
                let _ = writeln!(
                    t,
                    "note: graph inputs {} are recurrent initial states: bound to zeros (the \
                     state a fresh sequence starts from, as PyTorch's init_hidden gives)",
                    states.join(", ")
                );
            }
            t
        }
        OutputFormat::Json => {
            let mut j = to_json(&s, batch);
            j["batch"] = json!(batch);
            j["seq_len"] = json!(graph.seq_len);
            j["zero_state_inputs"] = json!(states);
            format!("{j:#}\n")
        }
        OutputFormat::Csv => csv(&s, batch),
    };
    write!(out, "{text}")?;
    Ok(())
}

fn op_name(kind: LayerKind) -> &'static str {
    kind.name()
}

/// `w×a` (weights × activations) or `a×a` (two activations).
fn operands(l: &LayerInfo) -> &'static str {
    match l.kind.operands() {
        GemmOperands::WeightActivation => "w×a",
        GemmOperands::ActivationActivation => "a×a",
    }
}

/// The JSON document `inspect --format json` prints: model, input, layers, totals; `gemm` per layer at `batch`.
pub fn to_json(s: &ModelSummary, batch: u64) -> serde_json::Value {
    let layers: Vec<_> = s
        .layers
        .iter()
        .map(|l| {
            let (g, m, n, k) = l.gemm_dims(batch);
            json!({
                "name": l.name, "op": op_name(l.kind), "in_shape": l.in_shape, "out_shape": l.out_shape,
                "kernel": l.kernel, "stride": l.stride, "groups": l.groups, "params": l.params, "macs": l.macs,
                "gemm": {"groups": g, "m": m, "n": n, "k": k, "operands": l.kind.operands(),
                         "macs": l.macs.saturating_mul(batch)},
            })
        })
        .collect();
    json!({
        "model": s.name,
        "input": s.input,
        "layers": layers,
        "totals": {
            "macs": s.total_macs(), "bn_elements": s.bn_elements,
            "ops_per_image": s.ops_per_image(), "params": s.params,
        },
    })
}

fn dims(d: &[usize]) -> String {
    d.iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

fn csv(s: &ModelSummary, batch: u64) -> String {
    let mut out = String::from(
        "name,op,role,in_shape,out_shape,kernel,stride,groups,params,macs,operands,gemm_groups,m,n,k\n",
    );
    for l in &s.layers {
        let role = format!("{:?}", l.role).to_lowercase();
        let (g, m, n, k) = l.gemm_dims(batch);
        let operands = match l.kind.operands() {
            GemmOperands::WeightActivation => "weight_activation",
            GemmOperands::ActivationActivation => "activation_activation",
        };
        let _ = writeln!(
            out,
            "{},{},{role},{},{},{},{},{},{},{},{operands},{g},{m},{n},{k}",
            l.name,
            op_name(l.kind),
            dims(&l.in_shape),
            dims(&l.out_shape),
            dims(&l.kernel),
            dims(&l.stride),
            l.groups,
            l.params,
            l.macs
        );
    }
    out
}

fn table(s: &ModelSummary, bn_folded: bool, batch: u64, seq_len: Option<usize>) -> String {
    let gemm_head = format!("GEMM g×(M×K·K×N) @ batch {batch}");
    let head = [
        "name",
        "op",
        "role",
        "in → out",
        "kernel/stride/groups",
        "operands",
        gemm_head.as_str(),
        "params",
        "MACs/sample",
    ];
    let rows: Vec<[String; 9]> = s
        .layers
        .iter()
        .map(|l| {
            let (g, m, n, k) = l.gemm_dims(batch);
            [
                l.name.clone(),
                op_name(l.kind).to_string(),
                format!("{:?}", l.role).to_lowercase(),
                format!("{} → {}", dims(&l.in_shape), dims(&l.out_shape)),
                format!("{}/{}/{}", dims(&l.kernel), dims(&l.stride), l.groups),
                operands(l).to_string(),
                format!("{g}×({m}×{k}·{k}×{n})"),
                l.params.to_string(),
                l.macs.to_string(),
            ]
        })
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = format!("model {}  input {:?}", s.name, s.input);
    if let Some(t) = seq_len {
        let _ = write!(out, "  sequence length {t}");
    }
    out.push('\n');
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                let pad = " ".repeat(w - c.chars().count());
                if i >= 7 {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    out += &line(&head.map(String::from));
    for r in &rows {
        out += &line(r);
    }
    let aa = s
        .layers
        .iter()
        .filter(|l| l.kind.operands() == GemmOperands::ActivationActivation);
    let (aa_n, aa_macs) = aa.fold((0, 0u64), |(n, m), l| (n + 1, m + l.macs));
    let _ = writeln!(
        out,
        "layers: {} GEMM layers ({aa_n} activation × activation)",
        s.layers.len()
    );
    let _ = writeln!(
        out,
        "MACs/sample (all GEMMs): {} (activation × activation: {aa_macs}); at batch {batch}: {}",
        s.total_macs(),
        s.total_macs().saturating_mul(batch)
    );
    let _ = writeln!(out, "BN output elements/sample: {}", s.bn_elements);
    if bn_folded {
        let _ = writeln!(out, "{}", cptsim_models::onnx::BN_FOLDED_NOTE);
    }
    let _ = writeln!(
        out,
        "ops/image (MACs + 2·BN elements): {}",
        s.ops_per_image()
    );
    let _ = writeln!(out, "parameters: {}", s.params);
    out
}
