//! `--config FILE`: flags read from a YAML file, as vLLM's argument parser reads them.
//!
//! Each key of the file's mapping is a flag of the command (`num-prompts: 100`, or
//! `num_prompts`); its value is the flag's value. `true` gives a switch, `false` its `--no-`
//! form where the command has one (else nothing); a switch takes nothing else. A mapping gives
//! its JSON. A list gives:
//! - a flag that takes several values (`--header`), the items;
//! - a flag given once a value (`--option`, a sweep's lists), the flag once an item;
//! - any other flag, the items joined by commas.
//!
//! YAML's anchors, aliases and `<<` merge keys read as PyYAML reads them. Each value is
//! checked by its flag's own parser as it is read, so that a value the flag
//! refuses is named with the file and the key.
//!
//! The file's flags go right after the subcommand, so a flag also given on the command line
//! takes the command line's value (vLLM's order: command line, then file, then defaults).
//! servebench leaves the file's out where the command line gives the same flag, so that a flag
//! that collects values (`--header`) does not add the two.

use std::ffi::OsString;
use std::path::Path;

use clap::{Arg, CommandFactory};
use serde_norway::Value;

/// A config file that cannot be turned into flags; a usage error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("--config is given {0} times; give one YAML file (and the other flags on the command line)")]
    Repeated(usize),
    #[error("--config needs a file: --config FILE.yaml")]
    Missing,
    #[error("--config {0}: a config file is YAML, named .yaml or .yml (as vLLM reads it)")]
    NotYaml(String),
    #[error("--config {path}: cannot read it: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("--config {path}: not valid YAML: {source}")]
    Parse { path: String, source: serde_norway::Error },
    #[error("--config {path}: the file must map flag names to values (`num-prompts: 100`), not hold {found}")]
    NotMapping { path: String, found: &'static str },
    #[error("--config {path}: the key {key} is not a flag name; write one as `num-prompts: 100`")]
    BadKey { path: String, key: String },
    #[error("--config {path}: `{key}` is not a flag of `{command}`{hint}")]
    UnknownFlag { path: String, key: String, command: String, hint: String },
    #[error("--config {path}: `{key}` {why}")]
    BadValue { path: String, key: String, why: String },
}

/// Replaces `--config FILE` (or `--config=FILE`) with the file's flags, placed after the
/// subcommand's words; the arguments after a `--` are left as they are. Without `--config`
/// the arguments come back unchanged.
pub fn expand_config(args: Vec<OsString>) -> Result<Vec<OsString>, ConfigFileError> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let at: Vec<usize> = (0..end).filter(|&i| args[i] == "--config" || starts_with(&args[i], "--config=")).collect();
    let Some(&i) = at.first() else { return Ok(args) };
    if at.len() > 1 {
        return Err(ConfigFileError::Repeated(at.len()));
    }
    let (path, taken) = match args[i].to_str().and_then(|s| s.strip_prefix("--config=")) {
        Some(p) => (p.to_string(), 1),
        None => match args.get(i + 1).filter(|_| i + 1 < end).and_then(|a| a.to_str()) {
            Some(p) if !p.starts_with("--") => (p.to_string(), 2),
            _ => return Err(ConfigFileError::Missing),
        },
    };
    let mut root = crate::cli::Cli::command();
    root.build();
    let (command, words) = subcommand(&root, &args);
    let rest: Vec<OsString> = (1 + words..end).filter(|&j| j < i || j >= i + taken).map(|j| args[j].clone()).collect();
    let given = given_flags(command, &rest);
    let flags = file_flags(&path, command, &given)?;
    let mut out = args[..1 + words].to_vec();
    out.extend(flags.into_iter().map(OsString::from));
    out.extend(args[1 + words..i].iter().cloned());
    out.extend(args[i + taken..].iter().cloned());
    Ok(out)
}

fn starts_with(a: &OsString, prefix: &str) -> bool {
    a.to_str().is_some_and(|s| s.starts_with(prefix))
}

/// The deepest subcommand the leading words name, and how many words name it.
fn subcommand<'a>(root: &'a clap::Command, args: &[OsString]) -> (&'a clap::Command, usize) {
    let mut command = root;
    let mut words = 0;
    for word in args.iter().skip(1).map_while(|a| a.to_str()) {
        match command.find_subcommand(word) {
            Some(sub) => {
                command = sub;
                words += 1;
            }
            None => break,
        }
    }
    (command, words)
}

/// The flag a long name gives: its name or an alias, or a prefix of one flag's name only (as
/// clap's `infer_long_args` reads the command line).
fn find_flag<'a>(command: &'a clap::Command, name: &str) -> Option<&'a Arg> {
    named(command, name).or_else(|| {
        let mut prefixed = command.get_arguments().filter(|a| a.get_long().is_some_and(|l| l.starts_with(name)));
        match (prefixed.next(), prefixed.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    })
}

/// The flag of this whole name or alias (a prefix is the command line's shorthand, not a
/// file's key).
fn named<'a>(command: &'a clap::Command, name: &str) -> Option<&'a Arg> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|aliases| aliases.contains(&name)))
}

/// The flags the command line gives whole (their ids), which the file's do not override. (A
/// `--json-flag.key` the command line gives is merged with the file's keys of that flag.)
fn given_flags(command: &clap::Command, args: &[OsString]) -> Vec<String> {
    args.iter()
        .filter_map(|a| a.to_str()?.strip_prefix("--"))
        .map(|s| s.split('=').next().unwrap_or(s))
        .filter(|name| !name.contains('.'))
        .filter_map(|name| find_flag(command, name))
        .map(|a| a.get_id().to_string())
        .collect()
}

/// The file's flags as command-line words.
fn file_flags(path: &str, command: &clap::Command, given: &[String]) -> Result<Vec<String>, ConfigFileError> {
    if !matches!(Path::new(path).extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
        return Err(ConfigFileError::NotYaml(path.to_string()));
    }
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: path.into(), source })?;
    // `<<: *anchor` merge keys are applied, as YAML 1.1 loaders (PyYAML's among them) apply them.
    let value = serde_norway::from_str(&text).and_then(|mut value: Value| value.apply_merge().map(|()| value));
    let value = value.map_err(|source| ConfigFileError::Parse { path: path.into(), source })?;
    let map = match value {
        Value::Mapping(map) => map,
        Value::Null => return Ok(Vec::new()),
        other => return Err(ConfigFileError::NotMapping { path: path.into(), found: kind(&other) }),
    };
    let mut out = Vec::new();
    for (key, value) in map {
        let Value::String(key) = key else {
            let key = serde_norway::to_string(&key).unwrap_or_default().trim().to_string();
            return Err(ConfigFileError::BadKey { path: path.into(), key });
        };
        let name = key.trim_start_matches("--");
        let (flag, path_in_json) = name.split_once('.').map_or((name, None), |(f, p)| (f, Some(p)));
        let flag = flag.replace('_', "-");
        let Some(arg) = named(command, &flag) else {
            let no = format!("no-{flag}");
            if let (Value::Bool(on), Some(no_arg)) = (&value, named(command, &no)) {
                // vLLM's `--flag/--no-flag` pair, of which servebench has the `--no-` form.
                if !on && !given.iter().any(|id| id == no_arg.get_id().as_str()) {
                    out.push(format!("--{no}"));
                }
                continue;
            }
            if super::compat::is_refused(&format!("--{flag}")) {
                out.push(format!("--{flag}"));
                continue;
            }
            return Err(unknown(path, &key, &flag, command));
        };
        if given.iter().any(|id| id == arg.get_id().as_str()) {
            continue;
        }
        let spelled = match path_in_json {
            Some(p) => format!("--{flag}.{p}"),
            None => format!("--{flag}"),
        };
        let start = out.len();
        let joined = matches!(value, Value::Sequence(_)) && list_form(arg) == ListForm::Joined;
        let checked = match words(&mut out, spelled, arg, command, value) {
            Err(why) => Err(why.to_string()),
            // A dotted key's value is one key of a JSON flag's object, read when they are merged.
            Ok(()) if path_in_json.is_some() => Ok(()),
            Ok(()) if joined => {
                check_values(arg, &out[start..]).map_err(|why| format!("{why}; {}", one_value(command)))
            }
            Ok(()) => check_values(arg, &out[start..]),
        };
        checked.map_err(|why| ConfigFileError::BadValue { path: path.into(), key: key.clone(), why })?;
    }
    Ok(out)
}

fn unknown(path: &str, key: &str, flag: &str, command: &clap::Command) -> ConfigFileError {
    let closest = command
        .get_arguments()
        .filter_map(Arg::get_long)
        .map(|l| (strsim::normalized_levenshtein(l, flag), l))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score > 0.6);
    let hint = closest.map(|(_, l)| format!("; did you mean `{l}`?")).unwrap_or_default();
    let name = command.get_bin_name().unwrap_or(command.get_name());
    ConfigFileError::UnknownFlag { path: path.into(), key: key.into(), command: name.to_string(), hint }
}

const NO_VALUE: &str = "has no value; give it one or remove the line";
const SWITCH: &str = "is a switch; give it true or false";

/// One key's command-line words, or why its value cannot be one.
fn words(
    out: &mut Vec<String>,
    flag: String,
    arg: &Arg,
    command: &clap::Command,
    value: Value,
) -> Result<(), &'static str> {
    let takes_values = arg.get_action().takes_values();
    match value {
        Value::Null => return Err(NO_VALUE),
        Value::Bool(true) if !takes_values => out.push(flag),
        Value::Bool(false) if !takes_values => {
            let no = format!("no-{}", flag.trim_start_matches("--"));
            if named(command, &no).is_some() {
                out.push(format!("--{no}"));
            }
        }
        _ if !takes_values => return Err(SWITCH),
        Value::Sequence(items) if items.is_empty() => {}
        Value::Sequence(items) => {
            let items: Vec<String> = items.into_iter().map(scalar).collect::<Result<_, _>>()?;
            match list_form(arg) {
                ListForm::Items => {
                    out.push(flag);
                    out.extend(items);
                }
                ListForm::Repeated => {
                    for item in items {
                        out.extend([flag.clone(), item]);
                    }
                }
                ListForm::Joined => out.extend([flag, items.join(",")]),
            }
        }
        other => {
            out.push(flag);
            out.push(scalar(other)?);
        }
    }
    Ok(())
}

/// How a list in the file becomes a flag's words.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ListForm {
    /// A flag that takes several values (`--header a=1 b=2`): the items.
    Items,
    /// A flag given once a value (`--option`, a sweep's lists): the flag once an item.
    Repeated,
    /// Any other flag: the items joined by commas, servebench's list form for one value.
    Joined,
}

fn list_form(arg: &Arg) -> ListForm {
    if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
        ListForm::Items
    } else if matches!(arg.get_action(), clap::ArgAction::Append) {
        ListForm::Repeated
    } else {
        ListForm::Joined
    }
}

/// What to say of a list its flag refused as one value.
fn one_value(command: &clap::Command) -> &'static str {
    if command.get_name() == "sweep" {
        "the flag takes one value, not a list"
    } else {
        "the flag takes one value, not a list (`servebench sweep` takes lists of its grid's flags)"
    }
}

/// Whether the flag's own parser takes the words the file gave it, so that a value it refuses
/// (`max-concurrency: [1, 4]` where one number is wanted) is named with the file, not as if it
/// had been typed. The flag is parsed alone: its value parser, count of values and delimiter,
/// none of its relations to other flags.
fn check_values(arg: &Arg, words: &[String]) -> Result<(), String> {
    if words.is_empty() || !arg.get_action().takes_values() {
        return Ok(());
    }
    let Some(long) = arg.get_long() else { return Ok(()) };
    let mut alone = Arg::new(arg.get_id().clone())
        .long(long.to_string())
        .action(arg.get_action().clone())
        .value_parser(arg.get_value_parser().clone())
        .allow_hyphen_values(arg.is_allow_hyphen_values_set())
        .allow_negative_numbers(arg.is_allow_negative_numbers_set())
        .ignore_case(arg.is_ignore_case_set());
    if let Some(n) = arg.get_num_args() {
        alone = alone.num_args(n);
    }
    if let Some(d) = arg.get_value_delimiter() {
        alone = alone.value_delimiter(d);
    }
    if let Some(names) = arg.get_value_names() {
        alone = alone.value_names(names.to_vec());
    }
    let command = clap::Command::new("config").no_binary_name(true).args_override_self(true).arg(alone);
    match command.try_get_matches_from(words) {
        Ok(_) => Ok(()),
        Err(e) => {
            // clap's message, its possible values and tip kept, its usage and help line left out.
            let rendered = e.render().to_string();
            let lines: Vec<&str> = rendered
                .lines()
                .map(|l| l.trim().trim_start_matches("error: "))
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            Err(format!("is refused by its flag: {}", lines.join("; ")))
        }
    }
}

/// A value as one command-line word: a string as it is, a number or a boolean as written, a
/// mapping or a list as its JSON.
fn scalar(value: Value) -> Result<String, &'static str> {
    Ok(match value {
        Value::Null => return Err(NO_VALUE),
        Value::String(s) => s,
        Value::Bool(b) => b.to_string(),
        // YAML's `.inf` is the command line's `inf` (`request-rate: .inf`), as Python writes it.
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_infinite() => if f > 0.0 { "inf" } else { "-inf" }.to_string(),
            _ => n.to_string(),
        },
        Value::Tagged(t) => scalar(t.value)?,
        other @ (Value::Mapping(_) | Value::Sequence(_)) => serde_json::to_string(&other)
            .map_err(|_| "holds a mapping whose keys are not all strings, which JSON cannot carry")?,
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Sequence(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        _ => "a tagged value",
    }
}

#[cfg(test)]
mod tests;
