//! `cptsim infer`: the inference (forward pass) of one or more models at per-layer bits on
//! accelerators — per-image latency and energy, per layer with `--report`, and the geometric-mean
//! speed-up and energy reduction over Eyeriss when an Eyeriss configuration is among the
//! accelerators (the first one is the baseline).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use cptsim_accel::cost::inference::{cost_inference, geomean, InferenceCost};
use cptsim_accel::cost::report::write_inference_report;
use cptsim_accel::workload::bench_bits;
use cptsim_accel::Accelerator;
use cptsim_models::ModelSummary;
use serde::Serialize;
use serde_json::json;

use super::accel_costs;
use super::shared::OutputFormat;

/// Arguments of `cptsim infer`.
#[derive(clap::Args, Debug)]
pub struct InferArgs {
    /// Models, comma-separated: `zoo:NAME` (the `bf-` models carry the Bit Fusion paper's
    /// per-layer bits) or ONNX files.
    #[arg(long, required = true, value_delimiter = ',')]
    model: Vec<String>,
    /// Images per batch.
    #[arg(long, default_value_t = 16)]
    batch: u64,
    /// Accelerators, comma-separated (built-in names or TOML paths; see `cptsim accel list`).
    #[arg(long, required = true, value_delimiter = ',')]
    accel: Vec<String>,
    /// Per-layer bits of a trained model: LDP's `summary.json` (`ldp.final_bits`, activations
    /// and weights at the layer's bits). Layers it does not list run at `--bits`.
    #[arg(long, value_name = "FILE")]
    bits_file: Option<PathBuf>,
    /// Bits (activations and weights) of layers without per-layer bits, 1 to 32; or
    /// `paper-sweep`: the `bf-` benchmarks at the bits the Bit Fusion authors' published sweep
    /// ran them (AlexNet and ResNet-18 at 8 bits, the others as stated).
    #[arg(long, default_value = "8", value_parser = parse_bits)]
    bits: BitsArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Write one per-layer CSV per model and accelerator into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// `--bits`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum BitsArg {
    /// Layers without per-layer bits run at these.
    Uniform(u8),
    /// The Bit Fusion benchmarks as the authors' sweep ran them.
    PaperSweep,
}

fn parse_bits(text: &str) -> Result<BitsArg, String> {
    if text == "paper-sweep" {
        return Ok(BitsArg::PaperSweep);
    }
    match text.parse::<u8>() {
        Ok(b) if (1..=32).contains(&b) => Ok(BitsArg::Uniform(b)),
        _ => Err(format!("must be 1 to 32 or `paper-sweep`, got {text:?}")),
    }
}

/// One accelerator's line for one model.
#[derive(Serialize, Debug)]
struct Line {
    accelerator: String,
    latency_s_per_image: f64,
    energy_j_per_image: f64,
    dram_bytes_per_image: f64,
    /// The baseline Eyeriss's latency over this one's (with an Eyeriss configuration among the accelerators).
    speedup_over_eyeriss: Option<f64>,
    /// Eyeriss's energy over this one's.
    energy_reduction_over_eyeriss: Option<f64>,
}

/// The baseline of the comparison: the first accelerator with the Eyeriss engine (`eyeriss`,
/// `eyeriss-256pe` or an edited copy).
fn baseline(accels: &[Accelerator]) -> Option<usize> {
    accels
        .iter()
        .position(|a| a.config.engine.kind() == cptsim_accel::config::Engine::Eyeriss)
}

/// Per-layer (activation, weight) bits of `model` (named `spec` on the command line).
fn layer_bits(
    spec: &str,
    model: &ModelSummary,
    file: Option<&(PathBuf, HashMap<String, u8>)>,
    bits: BitsArg,
) -> anyhow::Result<Vec<(u8, u8)>> {
    let zoo = spec.strip_prefix("zoo:");
    let default = match bits {
        BitsArg::Uniform(b) => b,
        BitsArg::PaperSweep => {
            return zoo.and_then(bench_bits::paper_sweep).with_context(|| {
                format!(
                    "--bits paper-sweep: {spec} is not a Bit Fusion benchmark (zoo:bf-alexnet, \
                     zoo:bf-svhn, zoo:bf-cifar10, zoo:bf-lenet5, zoo:bf-vgg7, zoo:bf-resnet18, \
                     zoo:bf-rnn, zoo:bf-lstm)"
                )
            })
        }
    };
    if let Some((path, named)) = file {
        for name in named.keys() {
            if model.layer_index(name).is_none() {
                bail!(
                    "--bits-file {}: layer `{name}` is not a conv/linear layer of {spec}",
                    path.display()
                );
            }
        }
        return Ok(model
            .layers
            .iter()
            .map(|l| {
                let b = named.get(&l.name).copied().unwrap_or(default);
                (b, b)
            })
            .collect());
    }
    if let Some(b) = zoo.and_then(bench_bits::stated) {
        return Ok(b);
    }
    Ok(vec![(default, default); model.layers.len()])
}

/// Reads LDP's `summary.json`: `ldp.final_bits`, a list of `{layer, bits}`.
fn read_bits_file(path: &Path) -> anyhow::Result<HashMap<String, u8>> {
    let at = || format!("--bits-file {}", path.display());
    let text = std::fs::read_to_string(path).with_context(at)?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(at)?;
    let list = v
        .pointer("/ldp/final_bits")
        .and_then(|b| b.as_array())
        .with_context(|| {
            format!(
                "{}: no `ldp.final_bits` list (an LDP run's summary.json)",
                at()
            )
        })?;
    let mut out = HashMap::new();
    for (i, e) in list.iter().enumerate() {
        let name = e["layer"].as_str();
        let bits = e["bits"].as_u64().and_then(|b| u8::try_from(b).ok());
        match (name, bits) {
            (Some(n), Some(b)) if (1..=32).contains(&b) => {
                out.insert(n.to_string(), b);
            }
            _ => bail!(
                "{}: ldp.final_bits[{i}] needs a `layer` name and `bits` from 1 to 32, got {e}",
                at()
            ),
        }
    }
    Ok(out)
}

/// Runs the subcommand.
pub fn run(args: InferArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let json = args.format.json_or_table("infer")?;
    if args.batch == 0 {
        bail!("--batch: a batch needs at least 1 image");
    }
    let batch = usize::try_from(args.batch).context("--batch: too large")?;
    let accels: Vec<Accelerator> = accel_costs::load_all(&args.accel)?;
    if let (BitsArg::PaperSweep, Some(_)) = (args.bits, &args.bits_file) {
        bail!("--bits paper-sweep: the sweep's bits are per benchmark; drop --bits-file");
    }
    let file = match &args.bits_file {
        Some(p) => Some((p.clone(), read_bits_file(p)?)),
        None => None,
    };
    // Cost everything before writing anything.
    let mut results: Vec<(String, Vec<InferenceCost>)> = Vec::new();
    for spec in &args.model {
        let model =
            cptsim_models::load_summary(spec, batch).with_context(|| format!("--model {spec}"))?;
        let bits = layer_bits(spec, &model, file.as_ref(), args.bits)?;
        let costs = accels
            .iter()
            .map(|a| {
                cost_inference(&model, &bits, args.batch, a)
                    .with_context(|| format!("--model {spec}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        results.push((model.name.clone(), costs));
    }
    if let Some(dir) = &args.report {
        for (model, costs) in &results {
            for c in costs {
                write_inference_report(dir, model, c)
                    .with_context(|| format!("--report {}", dir.display()))?;
            }
        }
    }
    let base = baseline(&accels);
    let lines: Vec<(String, Vec<Line>)> = results
        .iter()
        .map(|(m, costs)| {
            let b = base.map(|i| &costs[i]);
            let lines = costs
                .iter()
                .map(|c| Line {
                    accelerator: c.accelerator.clone(),
                    latency_s_per_image: c.latency_per_image_s(),
                    energy_j_per_image: c.energy_per_image_j(),
                    dram_bytes_per_image: c.totals.dram_bytes / c.batch as f64,
                    speedup_over_eyeriss: b.map(|b| b.totals.latency_s / c.totals.latency_s),
                    energy_reduction_over_eyeriss: b
                        .map(|b| b.energy_per_image_j() / c.energy_per_image_j()),
                })
                .collect();
            (m.clone(), lines)
        })
        .collect();
    // Geometric means over the models, per accelerator.
    let means: Vec<Mean> = accels
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let pick = |f: fn(&Line) -> Option<f64>| -> Option<f64> {
                let v: Option<Vec<f64>> = lines.iter().map(|(_, l)| f(&l[i])).collect();
                v.and_then(|v| geomean(&v))
            };
            (
                a.name().to_string(),
                pick(|l| l.speedup_over_eyeriss),
                pick(|l| l.energy_reduction_over_eyeriss),
            )
        })
        .collect();
    if json {
        let models: Vec<_> = lines
            .iter()
            .map(|(m, l)| json!({"model": m, "batch": args.batch, "accelerators": l}))
            .collect();
        let geo: Vec<_> = means
            .iter()
            .map(|(a, s, e)| json!({"accelerator": a, "speedup_over_eyeriss": s, "energy_reduction_over_eyeriss": e}))
            .collect();
        let v = json!({"models": models, "geomean": geo});
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let baseline = base.map(|b| accels[b].name());
    print_table(&lines, &means, baseline, out)
}

/// Geometric means over the models of one accelerator: (accelerator, speed-up, energy
/// reduction) over the baseline.
type Mean = (String, Option<f64>, Option<f64>);

/// The terminal table: one line per model and accelerator, then the geometric means against
/// `baseline` when there is one.
fn print_table(
    lines: &[(String, Vec<Line>)],
    means: &[Mean],
    baseline: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<16} {:<24} {:>14} {:>14} {:>12} {:>10} {:>10}",
        "model",
        "accelerator",
        "latency/img s",
        "energy/img J",
        "DRAM/img MB",
        "speed-up",
        "energy red."
    )?;
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}x"));
    for (m, ls) in lines {
        for l in ls {
            writeln!(
                out,
                "{:<16} {:<24} {:>14.4e} {:>14.4e} {:>12.3} {:>10} {:>10}",
                m,
                l.accelerator,
                l.latency_s_per_image,
                l.energy_j_per_image,
                l.dram_bytes_per_image / 1e6,
                opt(l.speedup_over_eyeriss),
                opt(l.energy_reduction_over_eyeriss)
            )?;
        }
    }
    if let Some(b) = baseline {
        writeln!(
            out,
            "geometric mean over {} model(s), against {b}:",
            lines.len(),
        )?;
        for (a, s, e) in means {
            writeln!(
                out,
                "  {a:<24} speed-up {}  energy reduction {}",
                opt(*s),
                opt(*e)
            )?;
        }
    }
    Ok(())
}
