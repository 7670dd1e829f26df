//! A training run's `summary.json` as the rows of a labelled table: each known key under a
//! name a reader understands, its value in its unit (per cent, GBitOPs, seconds or hours, bits
//! as FW / BW), in an order that reads from the result to the bookkeeping. Keys this module does
//! not know are kept, under their own name, after the known ones.

use serde_json::Value;

/// How one key's value is written.
#[derive(Clone, Copy)]
enum Unit {
    /// As it is (text, counts).
    Plain,
    /// A fraction in [0, 1] as a percentage.
    Percent,
    /// GBitOPs.
    Gbitops,
    /// A duration in seconds, in the unit that fits.
    Duration,
    /// `[forward, backward]` bits (0 = fp32).
    Bits,
    /// A number per second.
    Rate(&'static str),
    /// `true`/`false` as yes/no.
    YesNo,
}

/// The keys the table names, in the order it lists them.
const KEYS: &[(&str, &str, Unit)] = &[
    ("policy", "precision policy", Unit::Plain),
    ("final_test_acc", "final test accuracy", Unit::Percent),
    (
        "final_eval_bits",
        "final evaluation bits (FW / BW)",
        Unit::Bits,
    ),
    ("best_test_acc", "best test accuracy", Unit::Percent),
    (
        "best_eval_bits",
        "best evaluation bits (FW / BW)",
        Unit::Bits,
    ),
    (
        "best_iteration",
        "best evaluation at iteration",
        Unit::Plain,
    ),
    ("eval_bits", "evaluated at (--eval-bits)", Unit::Plain),
    ("final_test_ppl", "final test perplexity", Unit::Plain),
    ("best_test_ppl", "best test perplexity", Unit::Plain),
    (
        "unigram_test_ppl",
        "unigram baseline test perplexity",
        Unit::Plain,
    ),
    ("collapsed", "collapsed to chance", Unit::YesNo),
    ("gbitops", "training cost", Unit::Gbitops),
    ("static_gbitops", "static baseline cost", Unit::Gbitops),
    ("target", "cost target", Unit::Plain),
    ("achieved", "cost achieved (last 10 %)", Unit::Plain),
    ("prt_bits", "Precision Range Test bound (bits)", Unit::Plain),
    (
        "prt_diverged_bits",
        "PRT steps that diverged (bits)",
        Unit::Plain,
    ),
    ("pfq_turns", "PFQ turning iterations", Unit::Plain),
    ("iterations", "iterations", Unit::Plain),
    ("vocab", "vocabulary (tokens)", Unit::Plain),
    ("seq_len", "sequence length (tokens)", Unit::Plain),
    ("seconds", "wall time", Unit::Duration),
    ("cpu_seconds", "CPU time (training)", Unit::Duration),
    ("images_per_s", "throughput (wall)", Unit::Rate("images/s")),
    (
        "images_per_cpu_s",
        "throughput (CPU)",
        Unit::Rate("images per CPU-s"),
    ),
    (
        "load_average",
        "load average at the end (1 min)",
        Unit::Plain,
    ),
];

/// The `[quantity, value]` rows of `summary` (a `summary.json` object), model first: every
/// scalar or list of scalars; objects (LDP's per-layer bits) are left to their own table.
pub(crate) fn rows(model: &str, summary: &Value) -> Vec<Vec<String>> {
    let mut out = vec![vec!["model".to_string(), model.to_string()]];
    let Some(obj) = summary.as_object() else {
        return out;
    };
    let shown = |v: &Value| !(v.is_null() || v.is_object() || holds_objects(v));
    for (key, label, unit) in KEYS {
        if let Some(v) = obj.get(*key).filter(|v| shown(v)) {
            out.push(vec![label.to_string(), value(v, *unit)]);
        }
        if *key == "static_gbitops" {
            if let Some(r) = reduction(obj.get("gbitops"), obj.get("static_gbitops")) {
                out.push(vec!["cost reduction against static".into(), r]);
            }
        }
    }
    for (key, v) in obj {
        if !KEYS.iter().any(|(k, _, _)| k == key) && shown(v) {
            out.push(vec![key.replace('_', " "), value(v, Unit::Plain)]);
        }
    }
    out
}

/// True for a list holding objects.
fn holds_objects(v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.iter().any(Value::is_object))
}

/// `1 − cost / static` as a percentage, when both are positive numbers.
fn reduction(cost: Option<&Value>, base: Option<&Value>) -> Option<String> {
    let (c, s) = (cost?.as_f64()?, base?.as_f64()?);
    (c >= 0.0 && s > 0.0).then(|| format!("{:.2} %", 100.0 * (1.0 - c / s)))
}

/// `v` written in `unit`.
fn value(v: &Value, unit: Unit) -> String {
    let x = v.as_f64();
    match (unit, x) {
        (Unit::Percent, Some(x)) => format!("{:.2} %", 100.0 * x),
        (Unit::Gbitops, Some(x)) => format!("{} GBitOPs", number(x)),
        (Unit::Duration, Some(x)) => duration(x),
        (Unit::Rate(per), Some(x)) => format!("{x:.0} {per}"),
        (Unit::YesNo, _) => match v.as_bool() {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => plain(v),
        },
        (Unit::Bits, _) => match v.as_array().map(Vec::as_slice) {
            Some([fw, bw]) => format!("{} / {}", bits(fw), bits(bw)),
            _ => plain(v),
        },
        _ => plain(v),
    }
}

/// A bit-width, `fp32` for 0.
fn bits(v: &Value) -> String {
    match v.as_u64() {
        Some(0) => "fp32".into(),
        _ => plain(v),
    }
}

/// A duration in seconds, minutes or hours, whichever reads best.
fn duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.2} h", s / 3600.0)
    }
}

/// A number with four significant decimals, scientific when very large or small.
fn number(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e6).contains(&x.abs()) {
        format!("{x:.4e}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Any value as plain text: numbers as they are (floats to four decimals), lists joined by `, `.
fn plain(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let s = format!("{:.4}", n.as_f64().unwrap_or(f64::NAN));
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(plain).collect::<Vec<_>>().join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_get_names_and_units() {
        let summary: Value = serde_json::from_str(
            r#"{"policy": "schedule", "final_test_acc": 0.7898, "best_test_acc": 0.8,
                "eval_bits": "current", "final_eval_bits": [8, 0], "best_eval_bits": [7, 8],
                "best_iteration": 375, "collapsed": false, "gbitops": 1290.85212672,
                "static_gbitops": 2047.279104, "iterations": 400, "seconds": 11.077,
                "images_per_s": 6812.06, "cpu_seconds": 7300.0, "images_per_cpu_s": 8400.9,
                "load_average": 4.82, "ldp": {"final_bits": []}, "new_key": 3}"#,
        )
        .unwrap();
        let rows = rows("lenet5", &summary);
        let get = |q: &str| {
            rows.iter()
                .find(|r| r[0] == q)
                .map(|r| r[1].clone())
                .unwrap_or_else(|| panic!("{q}: {rows:?}"))
        };
        assert_eq!(rows[0], ["model", "lenet5"]);
        assert_eq!(get("final test accuracy"), "78.98 %");
        assert_eq!(get("final evaluation bits (FW / BW)"), "8 / fp32");
        assert_eq!(get("collapsed to chance"), "no");
        assert_eq!(get("training cost"), "1290.85 GBitOPs");
        assert_eq!(get("cost reduction against static"), "36.95 %");
        assert_eq!(get("wall time"), "11.1 s");
        assert_eq!(get("CPU time (training)"), "2.03 h");
        assert_eq!(get("throughput (wall)"), "6812 images/s");
        assert_eq!(get("new key"), "3");
        // no raw summary.json key is shown as a quantity
        assert!(!rows.iter().any(|r| r[0].contains('_')), "{rows:?}");
        assert!(!rows.iter().any(|r| r[0] == "ldp"));
    }
}
