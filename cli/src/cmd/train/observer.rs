//! The command line as a run's [`Observer`]: notes, warnings and the progress line on stderr (at
//! most about once a second, and at every evaluation), the figures beside the outputs
//! (`ldp_bits.png` while LDP runs, `index.html` at the end), and Ctrl-C / SIGTERM as the request
//! to stop.

use std::time::Instant;

use anyhow::Context;
use cptsim_plot::trace::{heatmap, HeatmapOptions, Operand};
use cptsim_traces::TraceMeta;
use cptsim_train::policy::ldp::Ldp;
use cptsim_train::run::{Notice, Outputs, Progress};
use cptsim_train::{EvalRecord, Observer, StepReport};

/// File name of the LDP plot in `--out`.
const LDP_PLOT: &str = "ldp_bits.png";

/// Prints a run's progress on stderr.
#[derive(Debug, Default)]
pub(super) struct Cli {
    last: Option<Instant>,
}

impl Observer for Cli {
    fn notice(&mut self, notice: &Notice) {
        eprintln!("{notice}");
    }

    fn iteration(&mut self, step: &StepReport, progress: &Progress) {
        let now = Instant::now();
        let due = self
            .last
            .is_none_or(|l| now.duration_since(l).as_secs_f64() >= 1.0);
        if due || step.eval.is_some() {
            self.last = Some(now);
            let eta = clock(progress.eta_seconds);
            eprintln!(
                "{}",
                progress_line(step, progress.iterations, progress.images_per_s, &eta)
            );
        }
    }

    fn evaluated(&mut self, e: &EvalRecord) {
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

    fn write_extras(&mut self, o: &Outputs<'_>) -> anyhow::Result<()> {
        match o.summary {
            None => write_ldp_plot(o),
            Some(_) => {
                let prov =
                    cptsim_plot::report::Provenance::of_this_process(env!("CARGO_PKG_VERSION"));
                cptsim_plot::report::write_train_index(o.dir, o.model, &prov)
                    .with_context(|| format!("--out {}", o.dir.display()))?;
                Ok(())
            }
        }
    }

    fn should_stop(&self) -> bool {
        crate::interrupt::requested()
    }
}

/// Writes `ldp_bits.png` when LDP runs: the learned weight bits per quantized layer over the
/// iterations so far, on the colour range of `--bits`.
fn write_ldp_plot(o: &Outputs<'_>) -> anyhow::Result<()> {
    let Some(ldp) = o.trainer.policy_as::<Ldp>() else {
        return Ok(());
    };
    let map = ldp.config.map;
    let opts = HeatmapOptions {
        operand: Operand::Weights,
        layers: Some(ldp.layers().iter().map(|l| l.layer).collect()),
        bits: Some((map.b_min, map.b_max)),
        title: "LDP: learned weight bits".into(),
        ..HeatmapOptions::default()
    };
    let meta = TraceMeta::for_model(o.model, o.batch, o.trainer.state.iteration);
    let path = o.dir.join(LDP_PLOT);
    let figure = heatmap(o.rows, &meta, &opts).context(LDP_PLOT)?;
    cptsim_plot::write(&figure, &path, cptsim_plot::Size::default())
        .with_context(|| format!("writing {}", path.display()))
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

/// Iteration reached, total and time left (as printed) of a progress line that [`Cli`] wrote;
/// `None` for any other line (`sweep status` reads cells' logs with it).
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
