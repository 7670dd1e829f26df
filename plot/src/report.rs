//! `index.html` beside a run's files: the key table (the numbers the terminal prints), the
//! figures inline as SVG, links to every CSV, the exact command line and the cptsim version.
//! Self-contained (no network, no script), narrow-screen friendly, written atomically.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cptsim_accel::{AccelTable, RunReport};
use cptsim_models::ModelSummary;
use cptsim_traces::{read_trace, TraceRow};
use serde_json::Value;

use crate::breakdown::{layer_files, Breakdown, Split};
use crate::curves::Curves;
use crate::error::{PlotError, Result};
use crate::figure::{render_svg, write_bytes, Figure, Size};
use crate::layers::LayerRows;
use crate::pareto::{pareto, XAxis, YAxis};
use crate::trace::{heatmap, HeatmapOptions};

/// Models with more conv / linear layers than this also get a per-stage breakdown.
const STAGE_VIEW_LAYERS: usize = 30;

/// The page's file name.
pub const INDEX: &str = "index.html";

/// How the run was made: the command line and the program version.
#[derive(Clone, Debug)]
pub struct Provenance {
    /// The command line, as typed (arguments shell-quoted where needed).
    pub command: String,
    /// The cptsim version.
    pub version: String,
}

impl Provenance {
    /// This process's command line and `version`.
    pub fn of_this_process(version: &str) -> Provenance {
        let args: Vec<String> = std::env::args().map(|a| shell_quote(&a)).collect();
        Provenance {
            command: args.join(" "),
            version: version.to_string(),
        }
    }
}

/// `a` quoted for a POSIX shell when it needs it.
fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// HTML-escapes text.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A page being assembled.
struct Page {
    title: String,
    body: String,
}

impl Page {
    fn new(title: &str) -> Page {
        Page {
            title: title.to_string(),
            body: format!("<h1>{}</h1>\n", esc(title)),
        }
    }

    fn heading(&mut self, text: &str) {
        let _ = writeln!(self.body, "<h2>{}</h2>", esc(text));
    }

    fn note(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"note\">{}</p>", esc(text));
    }

    /// A table with a header row; the first column is left-aligned.
    fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        self.body.push_str("<div class=\"scroll\"><table>\n<tr>");
        for h in head {
            let _ = write!(self.body, "<th>{}</th>", esc(h));
        }
        self.body.push_str("</tr>\n");
        for r in rows {
            self.body.push_str("<tr>");
            for c in r {
                let _ = write!(self.body, "<td>{}</td>", esc(c));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table></div>\n");
    }

    /// A figure inline, or a note saying why it could not be drawn.
    fn figure(&mut self, caption: &str, fig: Result<impl Figure>, size: Size) {
        match fig.and_then(|f| render_svg(&f, size)) {
            Ok(svg) => {
                let svg = svg.trim_start_matches(|c| c != '<');
                let _ = writeln!(
                    self.body,
                    "<figure>{svg}<figcaption>{}</figcaption></figure>",
                    esc(caption)
                );
            }
            Err(e) => self.note(&format!("{caption}: not drawn: {e}")),
        }
    }

    /// Links to every CSV and JSON file of `dir`, and the provenance.
    fn files_and_provenance(&mut self, dir: &Path, prov: &Provenance) -> Result<()> {
        let mut files = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| PlotError::io(dir, e))? {
            let p = e.map_err(|e| PlotError::io(dir, e))?.path();
            let ext = p
                .extension()
                .map(|x| x.to_string_lossy().to_ascii_lowercase());
            if matches!(ext.as_deref(), Some("csv" | "json")) {
                if let Some(n) = p.file_name() {
                    files.push(n.to_string_lossy().to_string());
                }
            }
        }
        files.sort();
        self.heading("Files");
        self.body.push_str("<ul>\n");
        for f in &files {
            let _ = writeln!(
                self.body,
                "<li><a href=\"{}\">{}</a></li>",
                esc(&percent_encode(f)),
                esc(f)
            );
        }
        self.body.push_str("</ul>\n");
        self.heading("Command");
        let _ = writeln!(
            self.body,
            "<pre>{}</pre>\n<p>cptsim {}</p>",
            esc(&prov.command),
            esc(&prov.version)
        );
        Ok(())
    }

    fn html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<link rel=\"icon\" href=\"data:,\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n\
<body>\n{}</body>\n</html>\n",
            esc(&self.title),
            self.body
        )
    }

    fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(INDEX);
        write_bytes(&path, self.html().as_bytes())?;
        Ok(path)
    }
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Verdana,sans-serif;color:#1a1a1a;\
max-width:62rem;margin:0 auto;padding:0.75rem;line-height:1.4}\n\
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:1.6rem}\n\
.scroll{overflow-x:auto}table{border-collapse:collapse;font-variant-numeric:tabular-nums}\n\
th,td{padding:0.25rem 0.6rem;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\n\
th:first-child,td:first-child{text-align:left}\n\
figure{margin:1rem 0}figure svg{max-width:100%;height:auto;display:block}\n\
figcaption{font-size:0.9rem;color:#444}\n\
pre{white-space:pre-wrap;word-break:break-all;background:#f3f3f3;padding:0.5rem}\n\
.note{color:#8a4b00}\n";

/// Percent-encodes a file name for a relative link.
fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Formats a JSON number the way the terminal tables do: 4-digit scientific for large or small
/// magnitudes, else up to 4 decimals.
fn num(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => {
                if x != 0.0 && !(1e-3..1e5).contains(&x.abs()) {
                    format!("{x:.4e}")
                } else {
                    let s = format!("{x:.4}");
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                }
            }
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(num).collect::<Vec<_>>().join(":"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Writes `dir/index.html` for `run --report DIR`: `run` is the run's report (the numbers the
/// terminal prints, and its accelerator table); figures are the per-layer breakdowns of every
/// `*-layers.csv` in `dir` (each file read once), split by component and by GEMM.
pub fn write_run_index(dir: &Path, run: &RunReport, prov: &Provenance) -> Result<PathBuf> {
    let mut page = Page::new(&format!("cptsim run: {} under {}", run.model, run.schedule));
    let mut rows = vec![
        vec!["model".into(), run.model.clone()],
        vec!["schedule".into(), run.schedule.clone()],
        vec!["FW bits".into(), format!("{}:{}", run.bits[0], run.bits[1])],
        vec!["BW bits".into(), run.grad_bits.to_string()],
        vec!["iterations".into(), run.iterations.to_string()],
        vec!["batch".into(), run.batch.to_string()],
        vec!["accounting".into(), run.accounting.name().to_string()],
        vec!["GBitOPs".into(), format!("{:.4e}", run.gbitops)],
        vec![
            "static GBitOPs".into(),
            format!("{:.4e}", run.static_gbitops),
        ],
        vec![
            "reduction".into(),
            format!("{:.2} %", 100.0 * run.reduction),
        ],
    ];
    if let Some(bn) = run.bn_gops {
        rows.push(vec![
            "BN (fp32) GOPs, not included above".into(),
            format!("{bn:.4e}"),
        ]);
    }
    page.heading("Run");
    page.table(&["quantity", "value"], &rows);
    if !run.accelerators.is_empty() {
        let table = AccelTable::of(&run.accelerators);
        let header: Vec<&str> = table.header.iter().map(String::as_str).collect();
        page.heading("Accelerators");
        page.table(&header, &table.rows);
    }
    let size = Size {
        height: 640,
        ..Size::default()
    };
    for file in layer_files(dir)? {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let rows = LayerRows::read(&file);
        let of = |split| match &rows {
            Ok(r) => Breakdown::of(r, split),
            Err(e) => Err(PlotError::Invalid(e.to_string())),
        };
        page.heading(&format!("Per-layer breakdown: {name}"));
        let components = of(Split::Components);
        let deep = components
            .as_ref()
            .is_ok_and(|b| b.layers.len() > STAGE_VIEW_LAYERS);
        let stages = match &components {
            Ok(b) if deep => Some(b.clone().by_stage()),
            _ => None,
        };
        page.figure(
            &format!(
                "{name}: latency split compute / DRAM stall, energy split compute / SRAM / DRAM"
            ),
            components,
            size,
        );
        page.figure(
            &format!("{name}: by GEMM (fw forward, eb error backprop, wg weight gradient)"),
            of(Split::Gemm),
            size,
        );
        // Deep models: also one bar per stage, where per-layer bars get thin.
        if let Some(stages) = stages {
            page.figure(
                &format!("{name}: per stage (layers sharing the name before the first '.')"),
                Ok(stages),
                size,
            );
        }
    }
    page.files_and_provenance(dir, prov)?;
    page.write(dir)
}

/// Reads a run's report from `path`, a `cptsim run --format json` document.
pub fn read_run_report(path: &Path) -> Result<RunReport> {
    let text = std::fs::read_to_string(path).map_err(|e| PlotError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| PlotError::Malformed {
        path: path.to_path_buf(),
        line: e.line() as u64,
        problem: format!("not a `cptsim run --format json` report: {e}"),
    })
}

/// Writes `dir/index.html` for a `train --out DIR` directory: the key numbers of
/// `summary.json`, the curves of `metrics.csv` and the heat map of `trace.csv` (read against
/// `model`, the model the run trained).
pub fn write_train_index(dir: &Path, model: &ModelSummary, prov: &Provenance) -> Result<PathBuf> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| PlotError::io(&path, e))?;
    let summary: Value = serde_json::from_str(&text).map_err(|e| PlotError::Malformed {
        path: path.clone(),
        line: e.line() as u64,
        problem: e.to_string(),
    })?;
    let policy = summary.get("policy").map(num).unwrap_or_default();
    let mut page = Page::new(&format!("cptsim train: {} ({policy})", model.name));
    let rows = crate::summary::rows(&model.name, &summary);
    page.heading("Summary");
    page.table(&["quantity", "value"], &rows);
    if let Some(bits) = summary.pointer("/ldp/final_bits").and_then(Value::as_array) {
        let rows: Vec<Vec<String>> = bits
            .iter()
            .map(|b| {
                vec![
                    num(b.get("layer").unwrap_or(&Value::Null)),
                    num(b.get("bits").unwrap_or(&Value::Null)),
                ]
            })
            .collect();
        page.heading("LDP: final bits per layer");
        page.table(&["layer", "bits"], &rows);
    }
    page.heading("Training curves");
    page.figure(
        "metrics.csv: loss and accuracy (train solid, test dashed); trace.csv: the FW (solid) and BW (dashed) bits over the run",
        Curves::read(&[dir]),
        Size {
            width: 800,
            height: 900,
            dpi: 96,
        },
    );
    page.heading("Precision per layer");
    page.figure(
        "trace.csv: forward (activation) bits per layer over iterations; DFQ mixes as their mean",
        train_heatmap(dir, model),
        Size::default(),
    );
    page.files_and_provenance(dir, prov)?;
    page.write(dir)
}

/// The heat map of `dir/trace.csv`.
fn train_heatmap(dir: &Path, model: &ModelSummary) -> Result<crate::trace::Heatmap> {
    let mut rows: Vec<TraceRow> = Vec::new();
    let meta = read_trace(&dir.join("trace.csv"), model, |r| {
        rows.push(*r);
        Ok(())
    })?;
    heatmap(&rows, &meta, &HeatmapOptions::default())
}

/// Writes `dir/index.html` for a sweep whose tidy table is `dir/results.csv` (columns in
/// [`crate::pareto`]): one row per configuration (seed means), and the Pareto figures on every
/// cost the file has.
pub fn write_sweep_index(dir: &Path, by: &str, prov: &Provenance) -> Result<PathBuf> {
    let results = dir.join("results.csv");
    let table = crate::table::Table::read(&results)?;
    let trained = table.has("final_test_acc") && {
        let acc = table.column("final_test_acc")?;
        (0..table.len()).any(|r| !table.text(r, &acc).is_empty())
    };
    if !trained {
        return write_cost_sweep_index(dir, &table, prov);
    }
    let main = pareto(&results, XAxis::Gbitops, YAxis::Final, by)?;
    let mut page = Page::new("cptsim sweep");
    let rows: Vec<Vec<String>> = main
        .points
        .iter()
        .map(|p| {
            vec![
                p.config.clone(),
                p.seeds.to_string(),
                num(&Value::from(p.x)),
                format!(
                    "{} ± {}",
                    num(&Value::from(p.y)),
                    num(&Value::from(p.y_std))
                ),
            ]
        })
        .collect();
    page.heading("Configurations (mean over seeds)");
    page.table(
        &["configuration", "seeds", "GBitOPs", "final test accuracy"],
        &rows,
    );
    page.heading("Accuracy against cost");
    page.figure("results.csv: GBitOPs", Ok(main), Size::default());
    for x in [XAxis::Latency, XAxis::Energy] {
        page.figure(
            &format!("results.csv: {}", x.column()),
            pareto(&results, x, YAxis::Final, by),
            Size::default(),
        );
    }
    page.files_and_provenance(dir, prov)?;
    page.write(dir)
}

/// The columns of a cost-only sweep's table, in page order, as far as `results.csv` has them.
const COST_COLUMNS: [&str; 11] = [
    "model",
    "schedule",
    "bits",
    "grad_bits",
    "accel",
    "gbitops",
    "static_gbitops",
    "reduction",
    "latency_s",
    "static_latency_s",
    "energy_j",
];

/// `index.html` of a sweep without training cells: no accuracy to plot, so the page is the
/// results table (one row per cell and accelerator) with links and provenance.
fn write_cost_sweep_index(
    dir: &Path,
    table: &crate::table::Table,
    prov: &Provenance,
) -> Result<PathBuf> {
    let head: Vec<&str> = COST_COLUMNS.into_iter().filter(|c| table.has(c)).collect();
    let cols = head
        .iter()
        .map(|c| table.column(c))
        .collect::<Result<Vec<_>>>()?;
    let rows: Vec<Vec<String>> = (0..table.len())
        .map(|r| {
            cols.iter()
                .map(|c| {
                    let text = table.text(r, c);
                    match text.parse::<f64>() {
                        Ok(v) if v.is_finite() => num(&Value::from(v)),
                        _ => text.to_string(),
                    }
                })
                .collect()
        })
        .collect();
    let mut page = Page::new("cptsim sweep");
    page.heading("Results (cost only: the plan has no [train] table, so no accuracy)");
    page.table(&head, &rows);
    page.files_and_provenance(dir, prov)?;
    page.write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_only_sweep_index_is_its_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("results.csv"),
            "cell,model,schedule,bits,grad_bits,seed,accel,gbitops,static_gbitops,reduction,latency_s,energy_j,static_latency_s,static_energy_j,final_test_acc,best_test_acc\n\
             a,resnet74,cosine,3:8,8,,zc706,1.6898e8,2.6684e8,0.3667,1.2e5,3.4e5,1.6e5,4.5e5,,\n",
        )
        .unwrap();
        let prov = Provenance {
            command: "cptsim sweep".into(),
            version: "0.1.0".into(),
        };
        let path = write_sweep_index(dir.path(), "schedule", &prov).unwrap();
        let html = std::fs::read_to_string(path).unwrap();
        assert_eq!(html.matches("<svg").count(), 0);
        assert!(html.contains("resnet74") && html.contains("1.6898e8") && html.contains("0.3667"));
        assert!(html.contains("<a href=\"results.csv\">results.csv</a>"));
    }

    #[test]
    fn quoting_escaping_and_numbers() {
        assert_eq!(shell_quote("--bits"), "--bits");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(esc("<a & b>"), "&lt;a &amp; b&gt;");
        assert_eq!(
            percent_encode("my accel-layers.csv"),
            "my%20accel-layers.csv"
        );
        assert_eq!(num(&serde_json::json!(1.6898e8)), "1.6898e8");
        assert_eq!(num(&serde_json::json!(0.25)), "0.25");
        assert_eq!(num(&serde_json::json!(64000)), "64000");
        assert_eq!(num(&serde_json::json!([3, 8])), "3:8");
    }

    #[test]
    fn sweep_index_has_the_table_figures_and_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("results.csv"),
            "model,schedule,bits,grad_bits,seed,accel,gbitops,static_gbitops,reduction,latency_s,energy_j,static_latency_s,static_energy_j,final_test_acc,best_test_acc\n\
             m,static,8,8,0,zc706,10,10,0,1,1,1,1,0.9,0.9\n\
             m,cosine,3:8,8,0,zc706,6,10,0.4,0.7,0.6,1,1,0.88,0.89\n",
        )
        .unwrap();
        let prov = Provenance {
            command: "cptsim sweep".into(),
            version: "0.1.0".into(),
        };
        let path = write_sweep_index(dir.path(), "schedule", &prov).unwrap();
        let html = std::fs::read_to_string(path).unwrap();
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(html.contains("<a href=\"results.csv\">results.csv</a>"));
        // GBitOPs do not depend on the accelerator: a configuration's row names none
        assert!(html.contains("<td>model=m bits=3:8 grad_bits=8 schedule=cosine</td>"));
        assert!(html.contains("<pre>cptsim sweep</pre>"));
        assert!(!html.contains("<script"));
    }
}
