//! Accelerator configurations as TOML text: a built-in's or a file's, checked by the accel
//! crate's parser (which names the origin, line, column and key of a bad value).

use std::collections::HashSet;

use cptsim_accel::config::{self, ConfigError};
use cptsim_accel::Accelerator;
use pyo3::prelude::*;

use crate::errors::Failure;

/// `(text, origin)` of a built-in name or a TOML file path, checked.
#[pyfunction]
pub fn accel_text(name_or_path: &str) -> PyResult<(String, String)> {
    let (text, origin) = match config::builtin_text(name_or_path) {
        Some(t) => (t.to_string(), format!("built-in `{name_or_path}`")),
        None => match std::fs::read_to_string(name_or_path) {
            Ok(t) => (t, name_or_path.to_string()),
            // the accel crate's own message: not a built-in (listed) and not a readable file
            Err(_) => return Err(load_failure(name_or_path, config::load(name_or_path)).into()),
        },
    };
    parse(&text, &origin)?;
    Ok((text, origin))
}

fn load_failure(name: &str, r: Result<config::AccelConfig, ConfigError>) -> Failure {
    match r {
        Err(e) => Failure::of(&format!("accel {name}"), &e),
        Ok(_) => Failure::usage(format!("accel {name}: cannot be read")),
    }
}

/// The name of the configuration `text` (from `origin`), after checking it.
#[pyfunction]
pub fn accel_check(text: &str, origin: &str) -> PyResult<String> {
    Ok(parse(text, origin)?.name)
}

/// The built-in names.
#[pyfunction]
pub fn accel_builtins() -> Vec<&'static str> {
    config::builtin_names()
}

fn parse(text: &str, origin: &str) -> Result<config::AccelConfig, Failure> {
    config::parse(text, origin).map_err(|e| Failure::of("accel", &e))
}

/// The accelerators of `cost(accel=…)`, each `(text, origin)`; a name that repeats an earlier
/// one is labelled with its origin, as the program labels a repeated `--accel`, so report
/// entries stay apart.
pub fn load_all(configs: &[(String, String)]) -> Result<Vec<Accelerator>, Failure> {
    let mut seen = HashSet::new();
    configs
        .iter()
        .map(|(text, origin)| {
            let mut acc = Accelerator::new(parse(text, origin)?);
            // a built-in named by an alias (`bitfusion`) is reported under that name, as the
            // program reports it
            if let Some(typed) = origin
                .strip_prefix("built-in `")
                .and_then(|o| o.strip_suffix('`'))
            {
                acc.config.name = typed.to_string();
            }
            let base = acc.config.name.clone();
            let mut k = 1;
            while !seen.insert(acc.config.name.clone()) {
                k += 1;
                acc.config.name = match k {
                    2 => format!("{base} ({origin})"),
                    _ => format!("{base} ({origin} #{k})"),
                };
            }
            Ok(acc)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_names_are_labelled_and_bad_text_is_named() {
        let text = config::builtin_text("zc706").unwrap().to_string();
        let configs = [
            (text.clone(), "built-in `zc706`".to_string()),
            (text.replace("rows = 64", "rows = 32"), "edited".to_string()),
        ];
        let accels = load_all(&configs).unwrap();
        assert_eq!(accels[1].config.name, "zc706 (edited)");
        assert_eq!(accels[1].config.array.rows, 32);
        let bad = load_all(&[(text.replace("rows = 64", "rows = -1"), "mine".into())]);
        let e = bad.err().unwrap();
        assert!(e.message.contains("mine"), "{}", e.message);
    }
}
