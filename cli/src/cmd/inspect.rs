//! `cptsim inspect MODEL`: per-layer geometry, parameters and MACs of a model, with totals.

use std::io::Write;

use std::fmt::Write as _;

use anyhow::Result;
use clap::Args;
use cptsim_models::{load_graph, LayerKind, ModelSummary};
use serde_json::json;

use crate::cmd::shared::OutputFormat;

/// Arguments of `cptsim inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// ONNX file path, or `zoo:NAME` for a built-in model.
    pub model: String,
    /// Batch size bound to the model's batch dimension (shapes per sample do not depend on it).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Runs the command.
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> Result<()> {
    let graph = load_graph(&args.model, args.batch)?;
    let s = graph.summary();
    let text = match args.format {
        OutputFormat::Table => table(&s, graph.bn_folded),
        OutputFormat::Json => format!("{:#}\n", to_json(&s)),
        OutputFormat::Csv => csv(&s),
    };
    write!(out, "{text}")?;
    Ok(())
}

fn op_name(kind: LayerKind) -> &'static str {
    kind.name()
}

/// The JSON document of the issue: model, input, layers, totals.
pub fn to_json(s: &ModelSummary) -> serde_json::Value {
    let layers: Vec<_> = s
        .layers
        .iter()
        .map(|l| {
            json!({
                "name": l.name, "op": op_name(l.kind), "in_shape": l.in_shape, "out_shape": l.out_shape,
                "kernel": l.kernel, "stride": l.stride, "groups": l.groups, "params": l.params, "macs": l.macs,
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

fn csv(s: &ModelSummary) -> String {
    let mut out =
        String::from("name,op,role,in_shape,out_shape,kernel,stride,groups,params,macs\n");
    for l in &s.layers {
        let role = format!("{:?}", l.role).to_lowercase();
        let _ = writeln!(
            out,
            "{},{},{role},{},{},{},{},{},{},{}",
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

fn table(s: &ModelSummary, bn_folded: bool) -> String {
    let head = [
        "name",
        "op",
        "role",
        "in → out",
        "kernel/stride/groups",
        "params",
        "MACs/sample",
    ];
    let rows: Vec<[String; 7]> = s
        .layers
        .iter()
        .map(|l| {
            [
                l.name.clone(),
                op_name(l.kind).to_string(),
                format!("{:?}", l.role).to_lowercase(),
                format!("{} → {}", dims(&l.in_shape), dims(&l.out_shape)),
                format!("{}/{}/{}", dims(&l.kernel), dims(&l.stride), l.groups),
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
    let mut out = format!("model {}  input {:?}\n", s.name, s.input);
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                let pad = " ".repeat(w - c.chars().count());
                if i >= 5 {
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
    let _ = writeln!(out, "layers: {} conv/linear", s.layers.len());
    let _ = writeln!(out, "MACs/sample (conv+linear): {}", s.total_macs());
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
