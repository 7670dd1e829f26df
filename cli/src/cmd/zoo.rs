//! `cptsim zoo`: list the built-in models and export them as ONNX files.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use cptsim_models::{export, zoo};

/// Arguments of `cptsim zoo`.
#[derive(Args)]
pub struct ZooArgs {
    #[command(subcommand)]
    command: ZooCommand,
}

#[derive(Subcommand)]
enum ZooCommand {
    /// List the built-in models: name, input shape, default classes and a description.
    List,
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
}

/// Runs `cptsim zoo …`.
pub fn run(args: ZooArgs, out: &mut dyn Write) -> Result<()> {
    match args.command {
        ZooCommand::List => list(out),
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

fn export_model(args: &ExportArgs, out: &mut dyn Write) -> Result<()> {
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
    writeln!(
        out,
        "wrote {}: zoo:{name}, {classes} classes, seed {}, {params} parameters, {} bytes",
        args.output.display(),
        args.seed,
        bytes.len()
    )?;
    Ok(())
}
