//! What `cptsim train` writes into `--out` (all atomically): the trace (`trace.pb`, `trace.csv`),
//! `metrics.csv` (one line per evaluation), `checkpoint.bin` and `summary.json` (plus `dfq.csv`
//! and `ldp_bits.png` from their policies); and the progress line on stderr.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use cptsim_accel::{Accounting, BitOpsCounter};
use cptsim_kernels::cputime::process_cpu_seconds;
use cptsim_models::atomic::write_atomically;
use cptsim_models::ModelSummary;
use cptsim_traces::{write_trace, Bits, TraceMeta, TraceRow};
use cptsim_train::{EvalRecord, StepReport};
use serde::Serialize;

/// The JSON summary of a finished run (`summary.json`, and stdout with `--format json`).
#[derive(Serialize, Debug)]
pub(crate) struct Summary {
    /// `--policy`: schedule, ldp, dfq or fractrain.
    pub(crate) policy: &'static str,
    /// LDP: target forward-cost ratio T/T_static; DFQ/FracTrain: the cp target at the end
    /// (percent of an fp32 iteration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<f64>,
    /// LDP: mean C/T_static over the last 10 % of the iterations; DFQ/FracTrain: mean cp (%)
    /// over the last 10 % of iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) achieved: Option<f64>,
    /// LDP: final per-layer bits and inference cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ldp: Option<cptsim_train::LayerBitsReport>,
    pub(crate) final_test_acc: f64,
    /// The highest test accuracy of any evaluation (what the papers report).
    pub(crate) best_test_acc: f64,
    /// A language model: test perplexity of the last evaluation and the lowest of any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) final_test_ppl: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) best_test_ppl: Option<f64>,
    /// A language model: its vocabulary (the corpus's tokens) and window length; a trace file
    /// carries neither, so `run --trace` costs it with `--vocab` and `--seq-len` of these.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vocab: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seq_len: Option<usize>,
    /// A language model: the perplexity of the add-one unigram model on the test split, the
    /// baseline it has to beat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unigram_test_ppl: Option<f64>,
    /// The arithmetic of the quantized GEMMs when integer: `int (accumulator fw=…)` (absent:
    /// fp32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) arithmetic: Option<String>,
    /// `--eval-bits`: current, max or fp32.
    pub(crate) eval_bits: &'static str,
    /// Forward and backward bits of the last evaluation and of the best one (0 = fp32).
    pub(crate) final_eval_bits: Option<[u8; 2]>,
    pub(crate) best_eval_bits: Option<[u8; 2]>,
    /// The iteration of the best evaluation.
    pub(crate) best_iteration: Option<u64>,
    /// The test loss sat at ln(classes) with chance accuracy for 3 evaluations in a row.
    pub(crate) collapsed: bool,
    pub(crate) gbitops: f64,
    pub(crate) static_gbitops: f64,
    pub(crate) iterations: u64,
    pub(crate) seconds: f64,
    pub(crate) images_per_s: f64,
    /// Training CPU seconds of this invocation (all threads, evaluations excluded) and training
    /// images per CPU-second; `images_per_s` likewise excludes evaluation time.
    pub(crate) cpu_seconds: f64,
    pub(crate) images_per_cpu_s: f64,
    /// 1-minute load average at the end of the run.
    pub(crate) load_average: Option<f64>,
    /// The PRT's bound, when `--prt` ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prt_bits: Option<u8>,
    /// The PRT steps whose training diverged (forward bits), counted as too low.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) prt_diverged_bits: Vec<u8>,
    /// PFQ turning iterations, when the PFQ indicator ran (PFQ schedule or FracTrain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pfq_turns: Option<Vec<u64>>,
}

/// The files a run may write into `--out`: an earlier run's that this one does not rewrite are
/// removed when its outputs are renamed into place.
pub(crate) const FILES: [&str; 8] = [
    "checkpoint.bin",
    "trace.pb",
    "trace.csv",
    "metrics.csv",
    "summary.json",
    "index.html",
    "dfq.csv",
    "ldp_bits.png",
];

/// Whether `dir` holds any output of a run.
pub(crate) fn has_outputs(dir: &Path) -> bool {
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

/// The progress line on stderr (at most about once a second, and at every evaluation), and the
/// training-only wall and CPU time (evaluations excluded) of this invocation.
pub(crate) struct Progress {
    start: Instant,
    cpu_start: f64,
    last: Option<Instant>,
    first_iteration: u64,
    images: u64,
    total: u64,
    eval_wall: f64,
    eval_cpu: f64,
}

impl Progress {
    /// Progress of a run of `total` iterations starting (or resuming) at `first_iteration`.
    pub(crate) fn new(first_iteration: u64, total: u64) -> Self {
        Self {
            start: Instant::now(),
            cpu_start: process_cpu_seconds(),
            last: None,
            first_iteration,
            images: 0,
            total,
            eval_wall: 0.0,
            eval_cpu: 0.0,
        }
    }

    /// Wall seconds spent training (evaluations excluded).
    pub(crate) fn train_seconds(&self) -> f64 {
        self.seconds() - self.eval_wall
    }

    /// CPU seconds spent training (evaluations excluded).
    pub(crate) fn train_cpu_seconds(&self) -> f64 {
        process_cpu_seconds() - self.cpu_start - self.eval_cpu
    }

    /// Seconds since the start of this invocation.
    pub(crate) fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Images trained in this invocation.
    pub(crate) fn images(&self) -> u64 {
        self.images
    }

    /// Reports one iteration.
    pub(crate) fn step(&mut self, r: &StepReport) {
        self.images += r.samples as u64;
        self.eval_wall += r.eval_seconds.0;
        self.eval_cpu += r.eval_seconds.1;
        let now = Instant::now();
        let due = self
            .last
            .is_none_or(|l| now.duration_since(l).as_secs_f64() >= 1.0);
        if !(due || r.eval.is_some()) {
            return;
        }
        self.last = Some(now);
        let secs = self.seconds().max(1e-9);
        let done = r.iteration + 1 - self.first_iteration;
        let rate = self.images as f64 / self.train_seconds().max(1e-9);
        let eta = secs / done as f64 * self.total.saturating_sub(r.iteration + 1) as f64;
        eprintln!("{}", progress_line(r, self.total, rate, &clock(eta)));
        if let Some(e) = &r.eval {
            let val = e
                .val_acc
                .map(|v| format!("  val acc {:.2}%", 100.0 * v))
                .unwrap_or_default();
            eprintln!(
                "eval @ {}: test loss {:.4}  test acc {:.2}%{val}",
                e.iteration,
                e.test_loss,
                100.0 * e.test_acc
            );
        }
    }
}

/// How a progress line starts, and what comes before its estimate of the time left.
const PROGRESS: &str = "iter ";
const ETA: &str = "  ETA ";

/// The progress line of step `r` of `total`, at `rate` images/s with `eta` left.
fn progress_line(r: &StepReport, total: u64, rate: f64, eta: &str) -> String {
    format!(
        "{PROGRESS}{}/{total}  loss {:.4}  train acc {:.1}%  bits {}/{}  {rate:.0} img/s{ETA}{eta}",
        r.iteration + 1,
        r.loss,
        100.0 * r.train_acc,
        r.precision.fw,
        r.precision.bw,
    )
}

/// Iteration reached, total and time left (as printed) of a progress line that
/// [`Progress::step`] wrote; `None` for any other line (`sweep status` reads cells' logs with it).
pub(crate) fn parse_progress(line: &str) -> Option<(u64, u64, Option<&str>)> {
    let rest = line.strip_prefix(PROGRESS)?;
    let (i, t) = rest.split_whitespace().next()?.split_once('/')?;
    let eta = line.split_once(ETA).map(|(_, e)| e.trim());
    Some((i.parse().ok()?, t.parse().ok()?, eta))
}

/// `h:mm:ss` or `m:ss`.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cptsim_traces::schedule::Precision;

    #[test]
    fn progress_lines_parse_back() {
        let r = StepReport {
            iteration: 41,
            loss: 0.5,
            train_acc: 0.9,
            precision: Precision { fw: 3, bw: 8 },
            samples: 128,
            eval: None,
            eval_seconds: (0.0, 0.0),
            notes: Vec::new(),
        };
        let line = progress_line(&r, 9000, 150.0, &clock(3725.0));
        assert_eq!(parse_progress(&line), Some((42, 9000, Some("1:02:05"))));
        assert_eq!(parse_progress("eval @ 42: test loss 0.2"), None);
        assert_eq!(parse_progress("iter x/9000"), None);
    }
}
