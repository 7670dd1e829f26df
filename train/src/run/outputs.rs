//! What a run writes into its output directory (all atomically): the trace (`trace.pb`,
//! `trace.csv`), `metrics.csv` (one line per evaluation), `checkpoint.bin` and `summary.json`,
//! plus its policy's own files (`dfq.csv`); and the [`Summary`] of a finished run.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use cptsim_accel::{Accounting, BitOpsCounter};
use cptsim_models::atomic::write_atomically;
use cptsim_models::ModelSummary;
use cptsim_traces::{write_trace, Bits, TraceMeta, TraceRow};
use serde::Serialize;

use crate::plan::{EvalBitsKind, PolicyKind};
use crate::EvalRecord;

/// The checkpoint a run writes into its output directory.
pub const CHECKPOINT: &str = "checkpoint.bin";

/// The summary of a finished run (`summary.json`).
/// The accumulator of an integer run's forward GEMMs as `summary.json` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AccumulatorRecord {
    /// Register width in bits (64 when exact).
    pub bits: u32,
    /// `exact`, `wrap` or `saturate`.
    pub mode: &'static str,
}

impl From<cptsim_kernels::int::Accumulator> for AccumulatorRecord {
    fn from(a: cptsim_kernels::int::Accumulator) -> Self {
        AccumulatorRecord {
            bits: a.bits(),
            mode: a.mode(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// schedule, ldp, dfq or fractrain.
    pub policy: PolicyKind,
    /// LDP: target forward-cost ratio T/T_static; DFQ/FracTrain: the cp target at the end
    /// (percent of an fp32 iteration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// LDP: mean C/T_static over the last 10 % of the iterations; DFQ/FracTrain: mean cp (%)
    /// over the last 10 % of iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved: Option<f64>,
    /// LDP: final per-layer bits and inference cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ldp: Option<crate::LayerBitsReport>,
    pub final_test_acc: f64,
    /// The highest test accuracy of any evaluation (what the papers report).
    pub best_test_acc: f64,
    /// A language model: test perplexity of the last evaluation and the lowest of any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_test_ppl: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_test_ppl: Option<f64>,
    /// A language model: its vocabulary (the corpus's tokens) and window length; a trace file
    /// carries neither, so `run --trace` costs it with `--vocab` and `--seq-len` of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vocab: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<usize>,
    /// A language model: the perplexity of the add-one unigram model on the test split, the
    /// baseline it has to beat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unigram_test_ppl: Option<f64>,
    /// The arithmetic of the quantized GEMMs when integer: `int (accumulator fw=…)` (absent:
    /// fp32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arithmetic: Option<String>,
    /// An integer run's forward accumulator (absent: fp32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accumulator: Option<AccumulatorRecord>,
    /// current, max or fp32.
    pub eval_bits: EvalBitsKind,
    /// Forward and backward bits of the last evaluation and of the best one (0 = fp32).
    pub final_eval_bits: Option<[u8; 2]>,
    pub best_eval_bits: Option<[u8; 2]>,
    /// The iteration of the best evaluation.
    pub best_iteration: Option<u64>,
    /// The test loss sat at ln(classes) with chance accuracy for 3 evaluations in a row.
    pub collapsed: bool,
    pub gbitops: f64,
    pub static_gbitops: f64,
    pub iterations: u64,
    pub seconds: f64,
    pub images_per_s: f64,
    /// Training CPU seconds of this invocation (all threads, evaluations excluded) and training
    /// images per CPU-second; `images_per_s` likewise excludes evaluation time.
    pub cpu_seconds: f64,
    pub images_per_cpu_s: f64,
    /// 1-minute load average at the end of the run.
    pub load_average: Option<f64>,
    /// The PRT's bound, when the PRT ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prt_bits: Option<u8>,
    /// The PRT steps whose training diverged (forward bits), counted as too low.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prt_diverged_bits: Vec<u8>,
    /// PFQ turning iterations, when the PFQ indicator ran (PFQ schedule or FracTrain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pfq_turns: Option<Vec<u64>>,
}

/// The files a run may write into its output directory: an earlier run's that this one does not
/// rewrite are removed when its outputs are renamed into place (`index.html` and `ldp_bits.png`
/// are the figures `cptsim` adds).
pub const FILES: [&str; 8] = [
    CHECKPOINT,
    "trace.pb",
    "trace.csv",
    "metrics.csv",
    "summary.json",
    "index.html",
    "dfq.csv",
    "ldp_bits.png",
];

/// Whether `dir` holds any output of a run.
pub fn has_outputs(dir: &Path) -> bool {
    FILES.iter().any(|f| dir.join(f).exists())
}

/// GBitOPs of the trace and of its static baseline at `baseline` bits (paper accounting).
pub(crate) fn cost(
    model: &ModelSummary,
    rows: &[TraceRow],
    baseline: Bits,
) -> anyhow::Result<(f64, f64)> {
    let mut counter = BitOpsCounter::new(model);
    counter.add_all(rows)?;
    Ok((
        counter.totals().gbitops(Accounting::Paper),
        counter.static_totals(baseline).gbitops(Accounting::Paper),
    ))
}

/// Writes `trace.pb` and `trace.csv` for the iterations done.
pub(crate) fn write_traces(
    dir: &Path,
    model: &ModelSummary,
    batch: u64,
    iterations: u64,
    rows: &[TraceRow],
) -> anyhow::Result<()> {
    let meta = TraceMeta::for_model(model, batch, iterations);
    for name in ["trace.pb", "trace.csv"] {
        write_trace(&dir.join(name), &meta, rows.iter().copied())
            .with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    Ok(())
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

/// Writes `metrics.csv`: one line per evaluation.
pub(crate) fn write_metrics(dir: &Path, evals: &[EvalRecord]) -> anyhow::Result<()> {
    let path = dir.join("metrics.csv");
    let write = |out: &mut BufWriter<File>| {
        // A language model's runs add the perplexities (loss and accuracy are per token).
        let lm = evals.iter().any(|e| e.test_ppl.is_some());
        let mut text = String::from(
            "iteration,train_loss,train_acc,test_loss,test_acc,val_acc,fw_bits,bw_bits,lr",
        );
        text.push_str(if lm { ",test_ppl,val_ppl\n" } else { "\n" });
        for e in evals {
            text.push_str(&format!(
                "{},{:.6},{:.6},{:.6},{:.6},{},{},{},{}",
                e.iteration,
                e.train_loss,
                e.train_acc,
                e.test_loss,
                e.test_acc,
                opt(e.val_acc),
                e.fw,
                e.bw,
                e.lr
            ));
            if lm {
                text.push_str(&format!(",{},{}", opt(e.test_ppl), opt(e.val_ppl)));
            }
            text.push('\n');
        }
        out.write_all(text.as_bytes())
    };
    write_atomically(&path, write, |_, e| e).with_context(|| format!("writing {}", path.display()))
}

/// Writes `summary.json`.
pub(crate) fn write_summary(dir: &Path, summary: &Summary) -> anyhow::Result<()> {
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(summary)?;
    let write = |out: &mut BufWriter<File>| {
        out.write_all(text.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
    };
    write_atomically(&path, write, |_, e| e).with_context(|| format!("writing {}", path.display()))
}
