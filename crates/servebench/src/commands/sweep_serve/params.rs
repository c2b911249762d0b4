//! vLLM's parameter sweeps (`--serve-params`, `--bench-params`): a JSON list of objects, or an
//! object of named ones; each object's keys become flags of a command, as vLLM's
//! `ParameterSweepItem.apply_to_cmd` writes them, and its name (the `_benchmark_name` of a
//! named one, else `key=value-...`) names its results' folder.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};
use servebench_core::pyjson;

/// The key a named combination's name is kept under.
const NAME_KEY: &str = "_benchmark_name";

/// One combination of parameters, in the file's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Item(pub Map<String, Value>);

/// Reads a parameter file; `None` is the one empty combination (the command as it is).
pub fn read(path: Option<&Path>) -> anyhow::Result<Vec<Item>> {
    let Some(path) = path else { return Ok(vec![Item::default()]) };
    let text = std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))?;
    let value: Value = serde_json::from_str(&text).with_context(|| {
        format!("{} is not JSON: give a list of objects, or an object of named ones", path.display())
    })?;
    from_value(value).with_context(|| format!("in {}", path.display()))
}

/// The combinations a parameter file's JSON holds.
pub fn from_value(value: Value) -> anyhow::Result<Vec<Item>> {
    let records = match value {
        Value::Object(named) => named
            .into_iter()
            .map(|(name, params)| match params {
                Value::Object(p) => {
                    let mut m = Map::new();
                    m.insert(NAME_KEY.into(), Value::String(name));
                    m.extend(p);
                    Ok(m)
                }
                other => bail!("the parameters of {name:?} must be an object, not {other}"),
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        Value::Array(list) => list
            .into_iter()
            .map(|r| match r {
                Value::Object(m) => Ok(m),
                other => bail!("each item of the parameter sweep must be an object, not {other}"),
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        other => bail!("the parameter sweep must be a list of objects or an object of named ones, not {other}"),
    };
    let names: Vec<&str> = records.iter().filter_map(|r| r.get(NAME_KEY).and_then(Value::as_str)).collect();
    if let Some(dup) = names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)).map(|(_, n)| n) {
        bail!("the name {dup:?} is given twice; every {NAME_KEY} must be unique");
    }
    Ok(records.into_iter().map(Item).collect())
}

/// How Python's `str` writes a JSON value (`True`, `None`, a string bare, a float as its
/// repr, the rest as `json.dumps` writes it).
pub fn py_str(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => pyjson::py_float_repr(n.as_f64().unwrap_or(f64::NAN)),
        other => pyjson::dumps(other),
    }
}

/// The value a command gives flag `keys` (any of them), as the next word or after `=`.
pub fn flag_value<'a>(cmd: &'a [String], keys: &[&str]) -> Option<&'a str> {
    cmd.iter().enumerate().find_map(|(i, t)| {
        keys.iter().find_map(|k| match t.strip_prefix(k) {
            Some("") => cmd.get(i + 1).map(String::as_str),
            Some(v) => v.strip_prefix('='),
            None => None,
        })
    })
}

impl Item {
    /// Whether the item holds no parameter (the command as it is).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Its name: `_benchmark_name`, else its parameters as `key=value` joined by `-`.
    pub fn name(&self) -> String {
        match self.0.get(NAME_KEY) {
            Some(v) => py_str(v),
            None => self.as_text("-"),
        }
    }

    /// Its parameters as `key=value` joined by `sep` (the name left out).
    pub fn as_text(&self, sep: &str) -> String {
        self.params().map(|(k, v)| format!("{k}={}", py_str(v))).collect::<Vec<_>>().join(sep)
    }

    /// Its parameters, the name left out.
    pub fn params(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().filter(|(k, _)| k.as_str() != NAME_KEY)
    }

    /// `cmd` with the item's parameters as flags: a flag the command has is given the new value
    /// in place (spelled with `-` or `_`), others are appended; true is `--key`, false
    /// `--no-key` (`--key=true|false` for a dotted key), an object its JSON.
    pub fn apply_to_cmd(&self, cmd: &[String]) -> Vec<String> {
        let mut cmd = cmd.to_vec();
        for (k, v) in self.params() {
            let value = match v {
                Value::Object(_) => Value::String(pyjson::dumps(v)),
                other => other.clone(),
            };
            let normalized = flag_tokens(k, &value);
            match cmd_keys(k).iter().find_map(|c| cmd.iter().position(|t| t == c)) {
                Some(i) => {
                    cmd[i].clone_from(&normalized[0]);
                    if let (Some(new), Some(old)) = (normalized.get(1), cmd.get_mut(i + 1)) {
                        old.clone_from(new);
                    }
                }
                None => cmd.extend(normalized),
            }
        }
        cmd
    }
}

/// The spellings of a parameter key: as given, `-` as `_`, `_` as `-` (before a dot only).
fn key_spellings(key: &str) -> Vec<String> {
    if let Some((prefix, rest)) = key.split_once('.') {
        return key_spellings(prefix).into_iter().map(|p| format!("{p}.{rest}")).collect();
    }
    vec![key.to_string(), key.replace('-', "_"), key.replace('_', "-")]
}

/// The flags a key may stand as in a command, the preferred (`-`) spelling first.
fn cmd_keys(key: &str) -> Vec<String> {
    key_spellings(key).into_iter().rev().map(|k| format!("--{k}")).collect()
}

/// The tokens a parameter becomes.
fn flag_tokens(key: &str, v: &Value) -> Vec<String> {
    let flag = |k: &str| cmd_keys(k).swap_remove(0);
    match v {
        Value::Bool(b) if key.contains('.') => vec![format!("{}={b}", flag(key))],
        Value::Bool(true) => vec![flag(key)],
        Value::Bool(false) => vec![flag(&format!("no-{key}"))],
        other => vec![flag(key), py_str(other)],
    }
}

/// `--link-vars`: `SERVE_KEY=BENCH_KEY` pairs, comma-separated.
pub fn parse_link_vars(s: &str) -> anyhow::Result<Vec<(String, String)>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.split_once('=') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => Ok((a.trim().into(), b.trim().into())),
            _ => bail!("--link-vars takes SERVE_KEY=BENCH_KEY pairs separated by commas, got {p:?}"),
        })
        .collect()
}

/// Whether a server and a benchmark combination agree on every linked pair.
pub fn linked(serve: &Item, bench: &Item, links: &[(String, String)]) -> bool {
    links.iter().all(|(s, b)| matches!((serve.0.get(s), bench.0.get(b)), (Some(x), Some(y)) if x == y))
}

/// vLLM's `sanitize_filename`: `/` and `..` made harmless.
pub fn sanitize(name: &str) -> String {
    name.replace('/', "_").replace("..", "__")
}

#[cfg(test)]
mod tests;
