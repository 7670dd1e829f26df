//! Every published figure cptsim claims to match, recomputed: the papers' GBitOPs and reductions
//! ([`bitops`]), CPT's ZC706 calibration runs ([`zc706`]), rows of the Bit Fusion authors'
//! simulator ([`bitfusion`]), DNNsim's Stripes/DaDianNao cycles ([`stripes`]) and the Bit Fusion
//! authors' Eyeriss results and headline ([`eyeriss`]). Each [`Row`] holds the reference, what
//! cptsim computes now and the tolerance it is held to; `cptsim validate` prints them and the
//! tests assert them, so the reference data live here once.

pub mod bitfusion;
pub mod bitops;
pub mod eyeriss;
pub mod stripes;
pub mod zc706;

use serde::Serialize;

/// How close cptsim must come to a reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Tolerance {
    /// Equal.
    Exact,
    /// Within this fraction of the reference.
    Relative(f64),
    /// Within this much of the reference (in its unit; a printed figure's rounding).
    Absolute(f64),
    /// Shown for comparison, not held to the reference.
    Info,
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tolerance::Exact => write!(f, "exact"),
            Tolerance::Relative(r) => write!(f, "{} %", fmt_sig(100.0 * r)),
            Tolerance::Absolute(a) => write!(f, "±{}", fmt_sig(*a)),
            Tolerance::Info => write!(f, "—"),
        }
    }
}

/// One published figure and cptsim's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The source and kind of figure.
    pub group: &'static str,
    /// The model or layer.
    pub model: String,
    /// What is compared.
    pub quantity: String,
    pub reference: f64,
    pub cptsim: f64,
    pub tolerance: Tolerance,
}

impl Row {
    /// `cptsim / reference − 1`.
    pub fn error(&self) -> f64 {
        if self.reference == 0.0 {
            if self.cptsim == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            self.cptsim / self.reference - 1.0
        }
    }

    /// Whether the row holds its tolerance (`None` for an information row).
    pub fn passes(&self) -> Option<bool> {
        let d = (self.cptsim - self.reference).abs();
        match self.tolerance {
            Tolerance::Exact => Some(self.cptsim == self.reference),
            Tolerance::Relative(r) => Some(self.cptsim.is_finite() && self.error().abs() <= r),
            Tolerance::Absolute(a) => Some(d <= a * (1.0 + 1e-12)),
            Tolerance::Info => None,
        }
    }

    /// `pass`, `FAIL` or `info`.
    pub fn verdict(&self) -> &'static str {
        match self.passes() {
            Some(true) => "pass",
            Some(false) => "FAIL",
            None => "info",
        }
    }
}

/// A number to 4 significant digits: plain when moderate, else scientific.
pub fn fmt_sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if (1e-3..1e6).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
        let s = format!("{x:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        format!("{x:.3e}")
    }
}

/// Why the figures could not be recomputed.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    #[error("{what}: {error}")]
    Failed { what: String, error: String },
}

impl ValidationError {
    pub(crate) fn of(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        ValidationError::Failed {
            what: what.into(),
            error: error.to_string(),
        }
    }
}

/// Every row, group by group.
pub fn rows() -> Result<Vec<Row>, ValidationError> {
    let mut v = bitops::rows()?;
    v.extend(zc706::rows()?);
    v.extend(bitfusion::rows()?);
    v.extend(stripes::rows()?);
    v.extend(eyeriss::rows()?);
    Ok(v)
}

/// A zoo model's summary at batch 1 (`classes` outputs when given).
pub(crate) fn zoo_model(
    name: &str,
    classes: Option<usize>,
) -> Result<cptsim_models::ModelSummary, ValidationError> {
    let proto =
        cptsim_models::zoo::build(name, classes, 0).map_err(|e| ValidationError::of(name, e))?;
    Ok(cptsim_models::onnx::import_proto(&proto, name, 1)
        .map_err(|e| ValidationError::of(name, e))?
        .summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_and_numbers_print_as_the_page_shows_them() {
        let r = Row {
            group: "g",
            model: "m".into(),
            quantity: "q".into(),
            reference: 44.6,
            cptsim: 43.93,
            tolerance: Tolerance::Relative(0.02),
        };
        assert_eq!(r.verdict(), "pass");
        assert!((r.error() + 0.01502).abs() < 1e-4);
        assert_eq!(Tolerance::Relative(0.05).to_string(), "5 %");
        assert_eq!(fmt_sig(0.6479), "0.6479");
        assert_eq!(fmt_sig(1.69e9), "1.690e9");
        assert_eq!(fmt_sig(81675.0), "81675");
        let off = Row {
            cptsim: 40.0,
            ..r.clone()
        };
        assert_eq!(off.verdict(), "FAIL");
        let info = Row {
            tolerance: Tolerance::Info,
            ..off
        };
        assert_eq!(info.passes(), None);
    }
}
