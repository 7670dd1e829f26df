//! `cptsim layer`: one inference layer on one accelerator — the quick what-if, and how each model
//! is checked against its reference simulator.

use std::io::Write;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use cptsim_accel::workload::gemm::{ConvProblem, OperandBits};
use serde_json::json;

use crate::cmd::shared::OutputFormat;

/// Arguments of `cptsim layer`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Accelerator: a built-in name (see `cptsim accel list`) or a TOML config path.
    #[arg(long)]
    accel: String,
    /// Kernel size (square).
    #[arg(long, default_value_t = 3)]
    k: u64,
    /// Stride.
    #[arg(long, default_value_t = 1)]
    stride: u64,
    /// Zero padding on each side.
    #[arg(long, default_value_t = 1)]
    pad: u64,
    /// Input channels (inputs of an FC layer).
    #[arg(long)]
    ic: u64,
    /// Output channels (outputs of an FC layer).
    #[arg(long)]
    oc: u64,
    /// Input height = width (conv layers).
    #[arg(long)]
    hw: Option<u64>,
    /// Batch size.
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// Activation bits.
    #[arg(long, default_value_t = 8)]
    act_bits: u32,
    /// Weight bits.
    #[arg(long, default_value_t = 8)]
    wgt_bits: u32,
    /// The network's first conv (Bit Fusion receives it im2col'ed from the host).
    #[arg(long)]
    first_layer: bool,
    /// A fully connected layer with `--ic` inputs and `--oc` outputs (`--k/--hw/--pad/--stride`
    /// are ignored).
    #[arg(long)]
    fc: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

fn positive(flag: &str, v: u64) -> Result<()> {
    if v == 0 {
        bail!("{flag} must be greater than zero");
    }
    Ok(())
}

/// The problem the flags describe.
fn problem(a: &Args) -> Result<ConvProblem> {
    positive("--ic", a.ic)?;
    positive("--oc", a.oc)?;
    positive("--batch", a.batch)?;
    for (flag, bits) in [("--act-bits", a.act_bits), ("--wgt-bits", a.wgt_bits)] {
        if !(1..=32).contains(&bits) {
            bail!("{flag} must be between 1 and 32, got {bits}");
        }
    }
    if a.fc {
        return Ok(ConvProblem::fc(a.batch, a.ic, a.oc));
    }
    let hw =
        a.hw.context("--hw is required for a conv layer (or pass --fc)")?;
    positive("--hw", hw)?;
    positive("--k", a.k)?;
    positive("--stride", a.stride)?;
    let padded = a
        .pad
        .checked_mul(2)
        .and_then(|p| p.checked_add(hw))
        .with_context(|| format!("--pad {} with --hw {hw}: padded input too large", a.pad))?;
    if a.k > padded {
        bail!(
            "--k {} is larger than the padded input ({} + 2·{})",
            a.k,
            hw,
            a.pad
        );
    }
    Ok(ConvProblem::conv(
        a.batch, a.ic, a.oc, hw, a.k, a.stride, a.pad,
    ))
}

/// Runs `cptsim layer`.
pub fn run(a: Args, out: &mut dyn Write) -> Result<()> {
    let p = problem(&a)?;
    // through `--accel`'s loader, so an alias is reported under the name typed
    let acc = super::accel_costs::load_all(std::slice::from_ref(&a.accel))?
        .into_iter()
        .next()
        .context("--accel: no accelerator")?;
    let bits = OperandBits {
        stream: a.act_bits,
        stationary: a.wgt_bits,
    };
    let c = acc
        .cost_problem(&p, bits, a.first_layer)
        .with_context(|| match acc.name() {
            name if name == a.accel => format!("--accel {name}"),
            name => format!("--accel {} ({name})", a.accel),
        })?;
    let t = &c.mapping.tile;
    let order: Vec<String> = c
        .mapping
        .order
        .iter()
        .map(|l| format!("{l:?}").to_lowercase())
        .collect();
    let latency = acc.seconds(c.timing.total_cycles);
    match a.format.json_or_table("layer")? {
        true => {
            let v = json!({
                "accelerator": acc.name(),
                "total_cycles": c.timing.total_cycles,
                "compute_cycles": c.timing.compute_cycles,
                "stall_cycles": c.timing.stall_cycles,
                "latency_s": latency,
                "dram_bits": c.dram_bits,
                "sram_bits": c.sram_bits,
                "energy_j": c.energy.total_j(),
                "breakdown": {
                    "compute_j": c.energy.compute_j,
                    "sram_j": c.energy.sram_j,
                    "dram_j": c.energy.dram_j,
                },
                "tiling": {
                    "b": t.b, "oc": t.oc, "oh": t.oh, "ow": t.ow, "ic": t.ic,
                    "order": order,
                    "groups": c.groups,
                },
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        }
        false => {
            let shape = if a.fc {
                format!("fc {} -> {}", p.in_ch, p.out_ch)
            } else {
                format!(
                    "conv {k}x{k} stride {} pad {}, {} -> {} channels, {}x{} -> {}x{}",
                    a.stride,
                    a.pad,
                    p.in_ch,
                    p.out_ch,
                    a.hw.unwrap_or(1),
                    a.hw.unwrap_or(1),
                    p.out_h,
                    p.out_w,
                    k = a.k
                )
            };
            writeln!(out, "accelerator     {}", acc.name())?;
            writeln!(
                out,
                "layer           {shape}, batch {}, {} b activations x {} b weights{}",
                a.batch,
                a.act_bits,
                a.wgt_bits,
                if a.first_layer { ", first layer" } else { "" }
            )?;
            writeln!(out, "total cycles    {}", c.timing.total_cycles)?;
            writeln!(out, "compute cycles  {}", c.timing.compute_cycles)?;
            writeln!(out, "stall cycles    {}", c.timing.stall_cycles)?;
            writeln!(out, "latency         {:.3} us", latency * 1e6)?;
            writeln!(out, "DRAM            {} bits", c.dram_bits)?;
            writeln!(out, "SRAM            {} bits", c.sram_bits)?;
            writeln!(
                out,
                "energy          {:.4e} J (compute {:.3e}, SRAM {:.3e}, DRAM {:.3e})",
                c.energy.total_j(),
                c.energy.compute_j,
                c.energy.sram_j,
                c.energy.dram_j
            )?;
            writeln!(
                out,
                "tiling          b={} oc={} oh={} ow={} ic={}, loops outer->inner: {}",
                t.b,
                t.oc,
                t.oh,
                t.ow,
                t.ic,
                if order.is_empty() {
                    "(single tile)".to_string()
                } else {
                    order.join(",")
                }
            )?;
        }
    }
    Ok(())
}
