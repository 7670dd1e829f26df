//! `cptsim zoo`: list the built-in models and export them as ONNX files.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use cptsim_models::{export, zoo};
use serde_json::json;

use super::shared::OutputFormat;

/// Arguments of `cptsim zoo`.
#[derive(Args)]
pub struct ZooArgs {
    #[command(subcommand)]
    command: ZooCommand,
}

#[derive(Subcommand)]
enum ZooCommand {
    /// List the built-in models: name, input shape, default classes and a description.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Write a built-in model, with freshly initialised weights, as an ONNX file.
    Export(ExportArgs),
}

#[derive(Args)]
struct ExportArgs {
    /// Model name as printed by `cptsim zoo list` (a `zoo:` prefix is accepted).
    name: String,
    /// Output ONNX file (written atomically).
    #[arg(short, long, value_name = "FILE.onnx")]
    output: PathBuf,
    /// Number of output classes (default: 100 CIFAR, 1000 ImageNet, 10 MNIST).
    #[arg(long)]
    classes: Option<usize>,
    /// Seed of the weight initialisation.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

/// Runs `cptsim zoo …`.
pub fn run(args: ZooArgs, out: &mut dyn Write) -> Result<()> {
    match args.command {
        ZooCommand::List { format } => match format.json_or_table("zoo list")? {
            true => list_json(out),
            false => list(out),
        },
        ZooCommand::Export(args) => export_model(&args, out),
    }
}

fn list(out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{:<22} {:<10} {:>7}  DESCRIPTION",
        "NAME", "INPUT", "CLASSES"
    )?;
    for &name in zoo::names() {
        let input = zoo::input_shape(name)
            .map(|s| format!("{}x{}x{}", s[0], s[1], s[2]))
            .unwrap_or_default();
        let classes = zoo::default_classes(name).unwrap_or_default();
        let about = zoo::describe(name).unwrap_or_default();
        writeln!(out, "{name:<22} {input:<10} {classes:>7}  {about}")?;
    }
    for e in &zoo::seq::ENTRIES {
        let input = match e.seq_len {
            Some(t) => format!("{t} tokens"),
            None => "3x224x224".to_string(),
        };
        writeln!(out, "{:<22} {input:<10} {:>7}  {}", e.name, "", e.about)?;
    }
    Ok(())
}

/// `zoo list --format json`: one object per model, sizes as numbers (`null` where a model has
/// none: a sequence model's image input, an image model's sequence length, a language model's
/// classes).
fn list_json(out: &mut dyn Write) -> Result<()> {
    let mut models: Vec<serde_json::Value> = zoo::names()
        .iter()
        .map(|&name| {
            json!({
                "name": name,
                "input_shape": zoo::input_shape(name),
                "seq_len": null,
                "classes": zoo::default_classes(name),
                "description": zoo::describe(name),
            })
        })
        .collect();
    for e in &zoo::seq::ENTRIES {
        let shape = e.seq_len.is_none().then_some([3, 224, 224]);
        models.push(json!({
            "name": e.name,
            "input_shape": shape,
            "seq_len": e.seq_len,
            "classes": null,
            "description": e.about,
        }));
    }
    writeln!(out, "{}", serde_json::to_string_pretty(&models)?)?;
    Ok(())
}

fn export_model(args: &ExportArgs, out: &mut dyn Write) -> Result<()> {
    let json = args.format.json_or_table("zoo export")?;
    let name = args.name.strip_prefix("zoo:").unwrap_or(&args.name);
    let (model, records) = zoo::build_recorded(name, args.classes, args.seed)?;
    let bytes = export::model_bytes(&model)?;
    export::write_atomic(&args.output, &bytes)?;
    let classes = records
        .last()
        .and_then(|r| r.out_shape.first())
        .copied()
        .unwrap_or(0);
    let params: u64 = records.iter().map(|r| r.params).sum();
    if json {
        let v = json!({
            "path": args.output,
            "model": format!("zoo:{name}"),
            "classes": classes,
            "seed": args.seed,
            "parameters": params,
            "bytes": bytes.len(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "wrote {}: zoo:{name}, {classes} classes, seed {}, {params} parameters, {} bytes",
        args.output.display(),
        args.seed,
        bytes.len()
    )?;
    Ok(())
}
