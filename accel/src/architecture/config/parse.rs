//! Reading a configuration: the built-ins by name, files by path, and TOML text into an
//! [`AccelConfig`] with errors that name the file, the line and column, and the key.

use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::{AccelConfig, ENGINE_KEYS};

/// A configuration that cannot be read or used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not a built-in name, and no readable file.
    #[error("accelerator `{name}` is not a built-in ({builtins}) and cannot be read as a config file: {error}")]
    NotFound {
        name: String,
        builtins: String,
        /// In the message, not a separate `source()`, so `{:#}` prints it once.
        error: std::io::Error,
    },
    /// The TOML does not parse into a configuration (syntax, unknown key, wrong type, a section
    /// the engine lacks or does not take).
    #[error("accelerator config {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A key has a value the model cannot use.
    #[error("accelerator config {origin}: key `{key}`: {reason}")]
    Invalid {
        origin: String,
        key: String,
        reason: String,
    },
}

/// Built-in configurations: (name, TOML text). `bitfusion` is an alias, see [`builtin_text`].
pub const BUILTINS: &[(&str, &str)] = &[
    ("zc706", include_str!("../../../configs/zc706.toml")),
    (
        "bitfusion-eyeriss-iso",
        include_str!("../../../configs/bitfusion-eyeriss-iso.toml"),
    ),
    (
        "bitfusion-stripes-iso",
        include_str!("../../../configs/bitfusion-stripes-iso.toml"),
    ),
    ("stripes", include_str!("../../../configs/stripes.toml")),
    ("dadiannao", include_str!("../../../configs/dadiannao.toml")),
    ("eyeriss", include_str!("../../../configs/eyeriss.toml")),
    (
        "eyeriss-256pe",
        include_str!("../../../configs/eyeriss-256pe.toml"),
    ),
];

/// The TOML text of a built-in name (`bitfusion` = `bitfusion-eyeriss-iso`).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    let name = if name == "bitfusion" {
        "bitfusion-eyeriss-iso"
    } else {
        name
    };
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names accepted by [`load`] besides file paths.
pub fn builtin_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
    v.insert(1, "bitfusion");
    v
}

/// Loads a built-in by name, or else reads `name_or_path` as a TOML file.
pub fn load(name_or_path: &str) -> Result<AccelConfig, ConfigError> {
    if let Some(text) = builtin_text(name_or_path) {
        return parse(text, &format!("built-in `{name_or_path}`"));
    }
    let text = std::fs::read_to_string(Path::new(name_or_path)).map_err(|error| {
        ConfigError::NotFound {
            name: name_or_path.to_string(),
            builtins: builtin_names().join(", "),
            error,
        }
    })?;
    parse(&text, name_or_path)
}

/// The parser's message on one line, prefixed with the line and column it points at (the
/// `toml` crate's own rendering adds a multi-line source excerpt).
fn one_line_toml_error(text: &str, e: &toml::de::Error, engine: Option<&str>) -> String {
    let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    let message = with_engine(message, engine);
    match e.span() {
        Some(span) => format!("{}: {message}", position(text, span.start)),
        None => message,
    }
}

/// `line L, column C` of byte `at` of `text`.
fn position(text: &str, at: usize) -> String {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}")
}

/// Moves the engine's keys under `engine`: the flat file's `engine = "NAME"` and the sections of
/// [`ENGINE_KEYS`] become `engine = { NAME = { … } }`, the form the [`super::EngineConfig`] enum
/// reads, with every value keeping its place in the text for errors. A file without `engine` is
/// left for the deserializer to reject by name.
/// Returns the engine's name, or where a non-string `engine` value starts.
fn nest_engine(root: &mut DeTable<'_>) -> Result<Option<String>, usize> {
    let mut params = DeTable::new();
    for k in ENGINE_KEYS {
        if let Some((k, v)) = root.remove_entry(k) {
            params.insert(k, v);
        }
    }
    // no engine: its sections are set aside so that the error is the missing `engine`
    let Some((key, value)) = root.remove_entry("engine") else {
        return Ok(None);
    };
    let span = value.span();
    let DeValue::String(name) = value.into_inner() else {
        return Err(span.start);
    };
    let engine = name.to_string();
    let mut variant = DeTable::new();
    variant.insert(
        Spanned::new(span.clone(), name),
        Spanned::new(span.clone(), DeValue::Table(params)),
    );
    root.insert(key, Spanned::new(span, DeValue::Table(variant)));
    Ok(Some(engine))
}

/// `message` with the engine named when it is about one of the engine's own sections (missing
/// or not taken), as serde's message names only the key.
fn with_engine(message: String, engine: Option<&str>) -> String {
    let about_engine = ENGINE_KEYS.iter().any(|k| {
        message.starts_with(&format!("unknown field `{k}`"))
            || message.starts_with(&format!("missing field `{k}`"))
    });
    match engine {
        Some(name) if about_engine => format!("{message} (engine `{name}`)"),
        _ => message,
    }
}

/// Parses and validates a configuration; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<AccelConfig, ConfigError> {
    let bad = |e: toml::de::Error, engine: Option<&str>| ConfigError::Parse {
        origin: origin.to_string(),
        message: one_line_toml_error(text, &e, engine),
    };
    let mut root = DeTable::parse(text).map_err(|e| bad(e, None))?;
    let engine = nest_engine(root.get_mut()).map_err(|at| ConfigError::Parse {
        origin: origin.to_string(),
        message: format!(
            "{}: key `engine` must be a string naming the engine, such as \"bitfusion\"",
            position(text, at)
        ),
    })?;
    let cfg = AccelConfig::deserialize(toml::de::Deserializer::from(root))
        .map_err(|e| bad(e, engine.as_deref()))?;
    cfg.validate()
        .map_err(|(key, reason)| ConfigError::Invalid {
            origin: origin.to_string(),
            key: key.to_string(),
            reason,
        })?;
    Ok(cfg)
}
