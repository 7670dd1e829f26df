//! The accelerator table `cptsim run` and `cptsim compare` print and the HTML reports show: one
//! row per accelerator, times in one unit that fits the column's largest value.

use crate::cost::trace::RunSummary;

/// A unit of time for a table column: the one whose numbers read best for the column's largest
/// value (milliseconds below 1 s, seconds below 2 min, minutes below 2 h, else hours).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Milliseconds,
    Seconds,
    Minutes,
    Hours,
}

impl TimeUnit {
    /// The unit for a column whose largest value is `max_seconds`.
    pub fn fitting(max_seconds: f64) -> Self {
        match max_seconds {
            s if s < 1.0 => Self::Milliseconds,
            s if s < 120.0 => Self::Seconds,
            s if s < 7200.0 => Self::Minutes,
            _ => Self::Hours,
        }
    }

    /// The unit's symbol: `ms`, `s`, `min` or `h`.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Milliseconds => "ms",
            Self::Seconds => "s",
            Self::Minutes => "min",
            Self::Hours => "h",
        }
    }

    /// Seconds in one unit.
    pub fn seconds(self) -> f64 {
        match self {
            Self::Milliseconds => 1e-3,
            Self::Seconds => 1.0,
            Self::Minutes => 60.0,
            Self::Hours => 3600.0,
        }
    }

    /// `seconds` in this unit, to 3 decimals; in scientific notation to 4 significant digits
    /// when the column's largest value, `column_max_seconds`, reaches 10⁵ units (hours of a
    /// 10¹²-iteration run), so that one column reads one way.
    pub fn format(self, seconds: f64, column_max_seconds: f64) -> String {
        let v = seconds / self.seconds();
        match column_max_seconds / self.seconds() >= 1e5 {
            true => format!("{v:.4e}"),
            false => format!("{v:.3}"),
        }
    }
}

/// The accelerator table of some runs: its header and rows, cells as text.
#[derive(Clone, Debug, PartialEq)]
pub struct AccelTable {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl AccelTable {
    /// The table of `summaries`: name, time, energy (J), DRAM (GB), the static baseline's time
    /// and energy, and both reductions in percent. Both time columns share the unit that fits
    /// the largest of their values ([`TimeUnit::fitting`], [`TimeUnit::format`]); energies and
    /// traffic are given to 4 significant digits.
    pub fn of(summaries: &[RunSummary]) -> Self {
        let longest = summaries
            .iter()
            .flat_map(|s| [s.latency_s, s.static_latency_s])
            .fold(0.0, f64::max);
        let unit = TimeUnit::fitting(longest);
        let u = unit.symbol();
        let header = [
            "accelerator".to_string(),
            format!("time ({u})"),
            "energy (J)".into(),
            "DRAM (GB)".into(),
            format!("static ({u})"),
            "static (J)".into(),
            "time red.".into(),
            "energy red.".into(),
        ];
        let rows = summaries
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    unit.format(s.latency_s, longest),
                    format!("{:.4e}", s.energy_j),
                    format!("{:.4e}", s.dram_bytes / 1e9),
                    unit.format(s.static_latency_s, longest),
                    format!("{:.4e}", s.static_energy_j),
                    format!("{:.2} %", 100.0 * s.latency_reduction()),
                    format!("{:.2} %", 100.0 * s.energy_reduction()),
                ]
            })
            .collect();
        Self {
            header: header.to_vec(),
            rows,
        }
    }

    /// The table as aligned text: the name column left-aligned, numbers right-aligned, each
    /// column as wide as its widest cell.
    pub fn to_text(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, &w)) in row.iter().zip(&widths).enumerate() {
                match i {
                    0 => line.push_str(&format!("{cell:<w$}")),
                    _ => line.push_str(&format!("  {cell:>w$}")),
                }
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architecture::energy::EnergySplit;

    fn summary(name: &str, latency_s: f64, static_latency_s: f64) -> RunSummary {
        RunSummary {
            name: name.into(),
            latency_s,
            energy_j: 2.0,
            dram_bytes: 3e9,
            static_latency_s,
            static_energy_j: 4.0,
            static_dram_bytes: 3e9,
            breakdown: EnergySplit::default(),
            per_layer_gemm: Vec::new(),
            per_epoch: Vec::new(),
        }
    }

    #[test]
    fn the_time_unit_fits_the_largest_value() {
        assert_eq!(TimeUnit::fitting(0.02), TimeUnit::Milliseconds);
        assert_eq!(TimeUnit::fitting(1.0), TimeUnit::Seconds);
        assert_eq!(TimeUnit::fitting(119.9), TimeUnit::Seconds);
        assert_eq!(TimeUnit::fitting(120.0), TimeUnit::Minutes);
        assert_eq!(TimeUnit::fitting(7200.0), TimeUnit::Hours);
        assert_eq!(TimeUnit::Minutes.format(90.0, 600.0), "1.500");
        assert_eq!(TimeUnit::Hours.format(7200.0, 3.6e9), "2.0000e0");
    }

    #[test]
    fn both_time_columns_share_one_unit_and_the_text_aligns() {
        // the static baseline's 3 h decides hours for the 10-minute run too
        let t = AccelTable::of(&[summary("a", 600.0, 3.0 * 3600.0), summary("bb", 60.0, 90.0)]);
        assert_eq!(t.header[1], "time (h)");
        assert_eq!(t.header[4], "static (h)");
        assert_eq!(t.rows[0][1], "0.167");
        assert_eq!(t.rows[0][4], "3.000");
        assert_eq!(t.rows[1][6], "33.33 %");
        let short = AccelTable::of(&[summary("a", 0.0123, 0.02)]);
        assert_eq!(
            (short.header[1].as_str(), short.rows[0][1].as_str()),
            ("time (ms)", "12.300")
        );
        let text = t.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("accelerator  time (h)"), "{text}");
        // right-aligned numbers end in the same place
        let end = |line: &str, cell: &str| line.find(cell).map(|i| i + cell.len());
        assert_eq!(end(lines[1], "0.167"), end(lines[0], "time (h)"));
    }
}
