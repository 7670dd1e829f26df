//! Per-layer stacked bars of an accelerator's latency and energy from `run --report`'s
//! `<accelerator>-layers.csv` (read by [`crate::layers`]): split by component (latency: compute / DRAM stall, from `compute_cycles` and
//! `cycles`; energy: `compute_j` / `sram_j` / `dram_j`) or by GEMM (`fw` forward, `eb` error
//! backprop, `wg` weight gradient).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{PlotError, Result};
use crate::figure::{chart, legend, Axes, Drawn, Figure, Look};
use crate::layers::LayerRows;
use crate::palette;

/// How each bar is split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Compute / SRAM / DRAM.
    Components,
    /// fw / eb / wg.
    Gemm,
}

impl Split {
    /// Parses `components` or `gemm`.
    pub fn parse(s: &str) -> Result<Split> {
        match s {
            "components" => Ok(Split::Components),
            "gemm" => Ok(Split::Gemm),
            _ => Err(PlotError::Invalid(format!(
                "--split {s}: expected components or gemm"
            ))),
        }
    }
}

/// What one bar stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    /// One bar per conv / linear layer.
    Layer,
    /// One bar per stage: consecutive layers whose names share the part before the first `.`
    /// (`layer1.0.conv1` → `layer1`; a stem `conv1` or a classifier `fc` is its own stage).
    Stage,
}

impl Per {
    /// Parses `layer` or `stage`.
    pub fn parse(s: &str) -> Result<Per> {
        match s {
            "layer" => Ok(Per::Layer),
            "stage" => Ok(Per::Stage),
            _ => Err(PlotError::Invalid(format!(
                "--per {s}: expected layer or stage"
            ))),
        }
    }
}

/// Stacked values of one panel: `parts` names and per-layer values (one per part).
#[derive(Clone, Debug, PartialEq)]
pub struct Stack {
    pub parts: Vec<&'static str>,
    pub values: Vec<Vec<f64>>,
}

/// The breakdown figure's data.
#[derive(Clone, Debug)]
pub struct Breakdown {
    /// Accelerator (from the file name).
    pub accelerator: String,
    /// Layers: index and name, in file order of first appearance.
    pub layers: Vec<(u64, String)>,
    /// Latency in seconds.
    pub latency: Stack,
    /// Energy in joules.
    pub energy: Stack,
    per: Per,
}

/// The `*-layers.csv` files of a report directory, sorted by name.
pub fn layer_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| PlotError::io(dir, e))? {
        let p = e.map_err(|e| PlotError::io(dir, e))?.path();
        let name = p.file_name().map(|n| n.to_string_lossy().to_string());
        if name.is_some_and(|n| n.ends_with("-layers.csv")) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Reads one `<accelerator>-layers.csv` and builds its breakdown.
pub fn breakdown(path: &Path, split: Split) -> Result<Breakdown> {
    Breakdown::of(&LayerRows::read(path)?, split)
}

impl Breakdown {
    /// The breakdown of a layers file's rows, split by `split`.
    pub fn of(file: &LayerRows, split: Split) -> Result<Breakdown> {
        let needed: &[&str] = match split {
            Split::Components => &[
                "latency_s",
                "cycles",
                "compute_cycles",
                "compute_j",
                "sram_j",
                "dram_j",
            ],
            Split::Gemm => &["latency_s", "energy_j"],
        };
        let cols = file.columns(needed)?;
        if file.rows.is_empty() {
            return Err(file.empty_error());
        }
        let (lat_parts, en_parts): (Vec<&str>, Vec<&str>) = match split {
            Split::Components => (
                vec!["compute", "DRAM stall"],
                vec!["compute", "SRAM", "DRAM"],
            ),
            Split::Gemm => (vec!["fw", "eb", "wg"], vec!["fw", "eb", "wg"]),
        };
        let mut layers: Vec<(u64, String)> = Vec::new();
        let mut lat: Vec<Vec<f64>> = Vec::new();
        let mut en: Vec<Vec<f64>> = Vec::new();
        for r in &file.rows {
            let row = match layers.iter().position(|(i, _)| *i == r.layer_index) {
                Some(p) => p,
                None => {
                    layers.push((r.layer_index, r.layer.clone()));
                    lat.push(vec![0.0; lat_parts.len()]);
                    en.push(vec![0.0; en_parts.len()]);
                    layers.len() - 1
                }
            };
            // present by `columns` above
            let v: Vec<f64> = cols.iter().map(|&k| r.costs[k].unwrap_or(0.0)).collect();
            match split {
                Split::Components => {
                    let (latency, cycles, compute) = (v[0], v[1], v[2]);
                    let share = if cycles > 0.0 {
                        (compute / cycles).clamp(0.0, 1.0)
                    } else {
                        1.0
                    };
                    lat[row][0] += latency * share;
                    lat[row][1] += latency * (1.0 - share);
                    for k in 0..3 {
                        en[row][k] += v[3 + k];
                    }
                }
                Split::Gemm => {
                    let k = ["fw", "eb", "wg"]
                        .iter()
                        .position(|x| *x == r.gemm)
                        .ok_or_else(|| PlotError::BadValue {
                            path: file.path.clone(),
                            line: r.line,
                            column: "gemm".into(),
                            problem: format!("'{}' is not fw, eb or wg", r.gemm),
                        })?;
                    lat[row][k] += v[0];
                    en[row][k] += v[1];
                }
            }
        }
        Ok(Breakdown {
            accelerator: file.accelerator.clone(),
            layers,
            latency: Stack {
                parts: lat_parts,
                values: lat,
            },
            energy: Stack {
                parts: en_parts,
                values: en,
            },
            per: Per::Layer,
        })
    }
}

impl Breakdown {
    /// The same costs with one bar per stage (see [`Per::Stage`]); bar names are the stages.
    pub fn by_stage(self) -> Breakdown {
        let mut layers: Vec<(u64, String)> = Vec::new();
        let mut lat: Vec<Vec<f64>> = Vec::new();
        let mut en: Vec<Vec<f64>> = Vec::new();
        for (i, (_, name)) in self.layers.iter().enumerate() {
            let stage = name.split('.').next().unwrap_or(name).to_string();
            if layers.last().map(|(_, s)| s) != Some(&stage) {
                layers.push((layers.len() as u64, stage));
                lat.push(vec![0.0; self.latency.parts.len()]);
                en.push(vec![0.0; self.energy.parts.len()]);
            }
            let (l, e) = (lat.len() - 1, en.len() - 1);
            for (k, v) in self.latency.values[i].iter().enumerate() {
                lat[l][k] += v;
            }
            for (k, v) in self.energy.values[i].iter().enumerate() {
                en[e][k] += v;
            }
        }
        Breakdown {
            accelerator: self.accelerator,
            layers,
            latency: Stack {
                parts: self.latency.parts,
                values: lat,
            },
            energy: Stack {
                parts: self.energy.parts,
                values: en,
            },
            per: Per::Stage,
        }
    }
}

impl Breakdown {
    fn panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        look: Look,
        stack: &Stack,
        title: &str,
        y_desc: &str,
    ) -> Result<()> {
        let n = self.layers.len();
        let top = stack
            .values
            .iter()
            .map(|v| v.iter().sum::<f64>())
            .fold(0.0, f64::max);
        let names: Vec<String> = match self.per {
            Per::Layer => Vec::new(),
            Per::Stage => self.layers.iter().map(|(_, n)| n.clone()).collect(),
        };
        let mut c = chart(
            area,
            look,
            Axes {
                title,
                x: -0.6..n as f64 - 0.4,
                y: 0.0..if top > 0.0 { top * 1.25 } else { 1.0 },
                x_desc: match self.per {
                    Per::Layer => "layer (index in the model)",
                    Per::Stage => "stage",
                },
                y_desc,
                y_negated: false,
                x_names: &names,
            },
        )?;
        for (k, part) in stack.parts.iter().enumerate() {
            let color = palette::series(k);
            c.draw_series(stack.values.iter().enumerate().map(|(i, v)| {
                let base: f64 = v[..k].iter().sum();
                let x = i as f64;
                Rectangle::new([(x - 0.4, base), (x + 0.4, base + v[k])], color.filled())
            }))
            .drawn()?
            .label(*part)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        legend(&mut c, look, SeriesLabelPosition::UpperRight)
    }
}

impl Figure for Breakdown {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, look: Look) -> Result<()> {
        let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 / 2);
        let per = match self.per {
            Per::Layer => "layer",
            Per::Stage => "stage",
        };
        let t1 = format!("{}: latency per {per}", self.accelerator);
        let t2 = format!("{}: energy per {per}", self.accelerator);
        self.panel(&top, look, &self.latency, &t1, "latency (s)")?;
        self.panel(&bottom, look, &self.energy, &t2, "energy (J)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{render_svg, svg_texts, Size};

    const LAYERS: &str = "\
layer_index,layer,gemm,latency_s,cycles,compute_cycles,stall_cycles,energy_j,compute_j,sram_j,dram_j,dram_bytes,new_column
0,conv1,fw,1.0,100,80,20,6,1,2,3,10,x
0,conv1,eb,2.0,100,50,50,3,1,1,1,10,x
0,conv1,wg,1.0,100,100,0,1,1,0,0,10,x
1,fc,fw,4.0,100,25,75,2,0.5,0.5,1,10,x
";

    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bitfusion-layers.csv");
        std::fs::write(&path, LAYERS).unwrap();
        std::fs::write(dir.path().join("bitfusion-epochs.csv"), "x\n").unwrap();
        (dir, path)
    }

    #[test]
    fn stacks_sum_the_report_rows() {
        let (dir, path) = fixture();
        assert_eq!(
            layer_files(dir.path()).unwrap(),
            std::slice::from_ref(&path)
        );
        let b = breakdown(&path, Split::Components).unwrap();
        assert_eq!(b.accelerator, "bitfusion");
        assert_eq!(b.layers, [(0, "conv1".into()), (1, "fc".into())]);
        assert_eq!(b.latency.values[0], [0.8 + 1.0 + 1.0, 0.2 + 1.0]);
        assert_eq!(b.latency.values[1], [1.0, 3.0]);
        assert_eq!(b.energy.values[0], [3.0, 3.0, 4.0]);
        let g = breakdown(&path, Split::Gemm).unwrap();
        assert_eq!(g.latency.values[0], [1.0, 2.0, 1.0]);
        assert_eq!(g.energy.values[1], [2.0, 0.0, 0.0]);
        // Totals agree between the two splits.
        for i in 0..2 {
            let s = |v: &Vec<f64>| v.iter().sum::<f64>();
            assert!((s(&b.latency.values[i]) - s(&g.latency.values[i])).abs() < 1e-12);
            assert!((s(&b.energy.values[i]) - s(&g.energy.values[i])).abs() < 1e-12);
        }
    }

    #[test]
    fn stages_sum_their_layers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a-layers.csv");
        let rows = "layer_index,layer,gemm,latency_s,energy_j\n\
                    0,conv1,fw,1,1\n1,layer1.0.conv1,fw,2,3\n2,layer1.0.conv2,fw,4,5\n\
                    3,layer2.0.conv1,fw,8,9\n4,fc,fw,16,17\n";
        std::fs::write(&path, rows).unwrap();
        let b = breakdown(&path, Split::Gemm).unwrap().by_stage();
        let names: Vec<&str> = b.layers.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["conv1", "layer1", "layer2", "fc"]);
        assert_eq!(b.latency.values[1], [6.0, 0.0, 0.0]);
        assert_eq!(b.energy.values[3], [17.0, 0.0, 0.0]);
        let texts = svg_texts(&render_svg(&b, Size::default()).unwrap());
        for want in ["layer1", "fc", "stage"] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        assert!(Per::parse("block").is_err());
    }

    #[test]
    fn missing_columns_are_named() {
        let (dir, _) = fixture();
        let path = dir.path().join("x-layers.csv");
        std::fs::write(&path, "layer_index,layer,gemm,latency_s\n0,a,fw,1\n").unwrap();
        let e = breakdown(&path, Split::Gemm).unwrap_err().to_string();
        assert!(e.contains("x-layers.csv: no column 'energy_j'"), "{e}");
        assert!(Split::parse("x").is_err());
    }

    #[test]
    fn svg_has_two_panels_legends_and_one_bar_per_layer_and_part() {
        let (_d, path) = fixture();
        let b = breakdown(&path, Split::Components).unwrap();
        let svg = render_svg(&b, Size::default()).unwrap();
        let texts = svg_texts(&svg);
        for want in [
            "latency (s)",
            "energy (J)",
            "compute",
            "DRAM stall",
            "SRAM",
            "DRAM",
        ] {
            assert!(texts.iter().any(|t| t == want), "{want}: {texts:?}");
        }
        let blue = "fill=\"#0072B2\"";
        // compute part: 2 layers in each panel plus a legend swatch in each.
        assert_eq!(svg.matches(blue).count(), 2 * 2 + 2);
    }
}
