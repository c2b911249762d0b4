//! The Prometheus text exposition format (version 0.0.4), read as far as telemetry needs it:
//! one sample per line, `name{label="value",...} number [timestamp]`; `#` lines (HELP, TYPE)
//! and blank lines carry no sample. Label values may hold escaped quotes, backslashes and
//! newlines, and commas or braces inside quotes; numbers may be `NaN`, `+Inf` or `-Inf`.
//!
//! A line that is not a sample is returned as an error and the caller skips it: one odd line
//! of a server's output never hides the others.

/// One sample: the metric name, its raw label block (between the braces, unparsed) and value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: &'a str,
    pub value: f64,
}

/// Why a line is not a sample.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("no metric name")]
    NoName,
    #[error("a label block that is not closed")]
    OpenLabels,
    #[error("no value after the name")]
    NoValue,
    #[error("a value that is not a number: {0:?}")]
    BadValue(String),
}

/// The samples of an exposition, line by line; comments and blank lines are skipped.
pub fn samples(text: &str) -> impl Iterator<Item = Result<Sample<'_>, LineError>> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(sample)
}

/// One sample line.
pub fn sample(line: &str) -> Result<Sample<'_>, LineError> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return Err(LineError::NoName);
    }
    let mut rest = &line[name_end..];
    let mut labels = "";
    if rest.starts_with('{') {
        let close = label_block_end(rest).ok_or(LineError::OpenLabels)?;
        labels = &rest[1..close];
        rest = &rest[close + 1..];
    }
    let value = rest.split_whitespace().next().ok_or(LineError::NoValue)?;
    Ok(Sample { name, labels, value: number(value).ok_or_else(|| LineError::BadValue(value.to_string()))? })
}

/// The index of the `}` closing the label block that `s` starts with, skipping quoted values.
fn label_block_end(s: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// A sample value: a decimal or exponent number, or Prometheus' spellings of the specials.
fn number(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok().filter(|_| s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))),
    }
}

/// The value of label `key` in a raw label block, unescaped; `None` when absent.
pub fn label(block: &str, key: &str) -> Option<String> {
    let mut rest = block;
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut escaped = false;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                _ if escaped => {
                    value.push(if c == 'n' { '\n' } else { c });
                    escaped = false;
                }
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => value.push(c),
            }
        }
        let end = end?;
        if name == key {
            return Some(value);
        }
        rest = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_names_labels_values_and_skips_comments() {
        let text = "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n\n\
                    process_cpu_seconds_total 12.5 1700000000000\n";
        let got: Vec<_> = samples(text).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            Sample { name: "vllm:num_requests_running", labels: "engine=\"0\",model_name=\"m\"", value: 3.0 }
        );
        assert_eq!(got[1], Sample { name: "process_cpu_seconds_total", labels: "", value: 12.5 });
        assert_eq!(label(got[0].labels, "model_name").as_deref(), Some("m"));
        assert_eq!(label(got[0].labels, "engine").as_deref(), Some("0"));
        assert_eq!(label(got[0].labels, "gpu"), None);
    }

    #[test]
    fn quoted_braces_commas_and_escapes_stay_inside_their_value() {
        let s = sample(r#"m{a="x}, y",b="q\"uote\\",c="line\nbreak"} -Inf"#).unwrap();
        assert_eq!(s.name, "m");
        assert_eq!(s.value, f64::NEG_INFINITY);
        assert_eq!(label(s.labels, "a").as_deref(), Some("x}, y"));
        assert_eq!(label(s.labels, "b").as_deref(), Some("q\"uote\\"));
        assert_eq!(label(s.labels, "c").as_deref(), Some("line\nbreak"));
        assert!(sample("m NaN").unwrap().value.is_nan());
        assert_eq!(sample("m +Inf").unwrap().value, f64::INFINITY);
        assert_eq!(sample("m 1e3").unwrap().value, 1000.0);
    }

    #[test]
    fn lines_that_are_not_samples_are_errors() {
        assert_eq!(sample("{a=\"b\"} 1"), Err(LineError::NoName));
        assert_eq!(sample("m{a=\"b\" 1"), Err(LineError::OpenLabels));
        assert_eq!(sample("m"), Err(LineError::NoValue));
        assert_eq!(sample("m{a=\"b\"}"), Err(LineError::NoValue));
        assert_eq!(sample("m one"), Err(LineError::BadValue("one".into())));
        assert_eq!(sample("m 0x10"), Err(LineError::BadValue("0x10".into())));
        // A bad line does not hide the good ones around it.
        let got: Vec<_> = samples("a 1\nb{ 2\nc 3\n").collect();
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 2);
    }

    fn escape(v: &str) -> String {
        v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
    }

    proptest! {
        /// Whatever the label values hold, a rendered sample reads back as written.
        #[test]
        fn rendered_samples_read_back(
            name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,30}",
            values in proptest::collection::vec(any::<String>(), 0..4),
            value in -1e12f64..1e12,
        ) {
            let block: Vec<String> = values.iter().enumerate().map(|(i, v)| format!("l{i}=\"{}\"", escape(v))).collect();
            let line = if block.is_empty() { format!("{name} {value}") } else { format!("{name}{{{}}} {value}", block.join(",")) };
            let s = sample(&line).unwrap();
            prop_assert_eq!(s.name, name.as_str());
            prop_assert_eq!(s.value, value);
            for (i, v) in values.iter().enumerate() {
                prop_assert_eq!(label(s.labels, &format!("l{i}")), Some(v.clone()));
            }
        }

        /// Any line at all gives a sample or an error, never a panic.
        #[test]
        fn any_line_is_read_without_panicking(line in ".{0,80}") {
            let _ = sample(&line);
            let _ = label(&line, "a");
        }
    }
}
