//! A training plan from Python: a dict (as JSON text) or TOML text with the keys of
//! [`TrainPlan`] (those of a sweep cell, each a `cptsim train` flag with `_` for `-`), checked key
//! by key so that every error names the key at fault.

use cptsim_train::plan::INVOCATION_KEYS;
use cptsim_train::TrainPlan;
use serde_json::{Map, Value};

use crate::errors::Failure;

/// The plan in `text` (`format` `json` or `toml`; `source` names it in messages), validated.
pub fn parse(text: &str, format: &str, source: &str) -> Result<TrainPlan, Failure> {
    let plan = read(text, format, source)?;
    plan.validate()
        .map_err(|e| Failure::usage(format!("{source}: key '{}': {}", e.key, e.message)))?;
    Ok(plan)
}

/// The keys in `text` with a resumed run, which keeps its checkpoint's plan: only the invocation
/// keys (`out`, `stop_at`, `checkpoint_minutes`, `threads`), the others at their defaults.
pub fn parse_resumed(text: &str, format: &str, source: &str) -> Result<TrainPlan, Failure> {
    if let Some(key) = table(text, format, source)?
        .keys()
        .find(|k| !INVOCATION_KEYS.contains(&k.as_str()))
    {
        return Err(Failure::usage(format!(
            "{source}: key '{key}': a resumed run keeps its checkpoint's plan (only {} may be \
             given)",
            INVOCATION_KEYS.join(", ")
        )));
    }
    read(text, format, source)
}

/// The plan in `text`, every key checked to be a plan key with a value it takes (not validated).
fn read(text: &str, format: &str, source: &str) -> Result<TrainPlan, Failure> {
    let keys = table(text, format, source)?;
    let known = TrainPlan::keys();
    for key in keys.keys() {
        if !known.contains(key) {
            return Err(Failure::usage(unknown_key(source, key, &known)));
        }
    }
    // Each key alone first, so that a value of the wrong type is reported on its key.
    for (key, value) in &keys {
        let one = Map::from_iter([(key.clone(), value.clone())]);
        if let Err(e) = serde_json::from_value::<TrainPlan>(Value::Object(one)) {
            return Err(Failure::usage(format!("{source}: key '{key}': {e}")));
        }
    }
    serde_json::from_value(Value::Object(keys))
        .map_err(|e| Failure::usage(format!("{source}: {e}")))
}

/// The table of keys in `text`.
fn table(text: &str, format: &str, source: &str) -> Result<Map<String, Value>, Failure> {
    Ok(match format {
        "json" => serde_json::from_str::<Map<String, Value>>(text)
            .map_err(|e| Failure::usage(format!("{source}: not a table of plan keys: {e}")))?,
        "toml" => {
            let table: toml::Table = toml::from_str(text)
                .map_err(|e| Failure::usage(format!("{source}: not TOML: {}", e.message())))?;
            match serde_json::to_value(table) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return Err(Failure::usage(format!(
                        "{source}: not a table of plan keys"
                    )))
                }
            }
        }
        f => return Err(Failure::usage(format!("plan format {f}: json or toml"))),
    })
}

/// The message of an unknown key: the nearest known key when one is close.
fn unknown_key(source: &str, key: &str, known: &[String]) -> String {
    let nearest = known
        .iter()
        .map(|k| (distance(key, k), k))
        .min()
        .filter(|(d, _)| *d <= 2.max(key.len() / 3));
    match nearest {
        Some((_, k)) => format!("{source}: unknown key '{key}' (did you mean '{k}'?)"),
        None => format!("{source}: unknown key '{key}' (keys: {})", known.join(", ")),
    }
}

/// Levenshtein distance of two keys.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_read_from_json_and_toml_and_errors_name_the_key() {
        let json = r#"{"model": "zoo:lenet5", "data": "synthetic", "bits": "3:8", "iters": 5}"#;
        let plan = parse(json, "json", "plan").unwrap();
        assert_eq!(plan.iters, Some(5));
        let toml = "model = \"zoo:lenet5\"\ndata = \"synthetic\"\nbits = 8\nlr = 0.05\n";
        let plan = parse(toml, "toml", "p.toml").unwrap();
        assert_eq!(plan.lr, 0.05);
        let e = parse(r#"{"modle": "zoo:lenet5"}"#, "json", "plan").unwrap_err();
        assert!(
            e.message
                .contains("unknown key 'modle' (did you mean 'model'?)"),
            "{}",
            e.message
        );
        let e = parse(
            "model = \"zoo:lenet5\"\ndata = \"synthetic\"\niters = \"many\"\n",
            "toml",
            "p.toml",
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("p.toml: key 'iters': "),
            "{}",
            e.message
        );
        let e = parse(
            r#"{"model": "zoo:lenet5", "data": "synthetic", "batch": 0}"#,
            "json",
            "plan",
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("plan: key 'batch': "),
            "{}",
            e.message
        );
        assert_eq!(distance("kitten", "sitting"), 3);
        let plan = parse_resumed(r#"{"stop_at": 3}"#, "json", "plan").unwrap();
        assert_eq!(plan.stop_at, Some(3));
        let e = parse_resumed(r#"{"lr": 0.1}"#, "json", "plan").unwrap_err();
        assert!(
            e.message.starts_with("plan: key 'lr': a resumed run"),
            "{}",
            e.message
        );
    }
}
