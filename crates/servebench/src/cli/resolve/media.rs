//! The `random-mm` flags, resolved into [`RandomMedia`]: vLLM's `--random-mm-limit-mm-per-prompt`
//! (JSON) and `--random-mm-bucket-config` (a Python dict literal with `(height, width, frames)`
//! tuple keys, or the same keys quoted as strings, as vLLM's parser takes them).

use servebench_core::config::{ImageBucket, RandomMedia};

use super::super::bench_args::DatasetArgs;
use super::{ResolveError, err};

pub fn parse_media(d: &DatasetArgs) -> Result<RandomMedia, ResolveError> {
    let limits = parse_limits(&d.random_mm_limit_mm_per_prompt)?;
    let shapes = parse_buckets(&d.random_mm_bucket_config)?;
    let mut buckets = Vec::new();
    for (height, width, frames, probability) in shapes {
        let modality = match frames {
            0 => {
                return err(format!(
                    "--random-mm-bucket-config: ({height}, {width}, 0) has no frames; use 1 for an image"
                ));
            }
            1 => "image",
            _ => "video",
        };
        if !limits.iter().any(|(k, _)| k == modality) {
            return err(format!(
                "--random-mm-bucket-config has {modality} shapes but --random-mm-limit-mm-per-prompt gives no \
                 {modality:?} cap; add one"
            ));
        }
        match modality {
            "image" => buckets.push(ImageBucket { height, width, probability }),
            _ if probability > 0.0 => {
                return err(format!(
                    "--random-mm-bucket-config: video items ({height}, {width}, {frames}) are not sent yet; give them \
                     probability 0, or benchmark images"
                ));
            }
            _ => {}
        }
    }
    let image_limit = limits.iter().find(|(k, _)| k == "image").map_or(0, |(_, v)| *v);
    Ok(RandomMedia {
        base_items: d.random_mm_base_items_per_request,
        items_range_ratio: d.random_mm_num_mm_items_range_ratio,
        image_limit,
        buckets,
    })
}

/// `{"image": 3, "video": 0}`: each modality's cap.
fn parse_limits(s: &str) -> Result<Vec<(String, u32)>, ResolveError> {
    let bad = || {
        ResolveError(format!(
            "invalid --random-mm-limit-mm-per-prompt {s:?}: give JSON like {{\"image\": 3, \"video\": 0}}"
        ))
    };
    let v: serde_json::Value = serde_json::from_str(s).map_err(|_| bad())?;
    let map = v.as_object().ok_or_else(bad)?;
    map.iter().map(|(k, v)| Ok((k.clone(), v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(bad)?))).collect()
}

/// `{(256, 256, 1): 0.5, "(720, 1280, 1)": 0.5}`: shapes and their weights, in the order given.
fn parse_buckets(s: &str) -> Result<Vec<(u32, u32, u32, f64)>, ResolveError> {
    let bad = |why: &str| {
        ResolveError(format!(
            "invalid --random-mm-bucket-config {s:?} ({why}): give a dict of (height, width, frames) to a \
             probability, like \"{{(256, 256, 1): 0.5, (720, 1280, 1): 0.5}}\""
        ))
    };
    let body = s.trim().strip_prefix('{').and_then(|r| r.strip_suffix('}')).ok_or_else(|| bad("no braces"))?;
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        // A key: a tuple, or a tuple in quotes.
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'');
        let unquoted = quote.map_or(rest, |q| &rest[q.len_utf8()..]);
        let open = unquoted
            .trim_start()
            .strip_prefix('(')
            .ok_or_else(|| bad("a key is not a (height, width, frames) tuple"))?;
        let close = open.find(')').ok_or_else(|| bad("a tuple is not closed"))?;
        let dims: Vec<u32> = open[..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.parse::<u32>().map_err(|_| bad("tuple entries are whole numbers")))
            .collect::<Result<_, _>>()?;
        let [h, w, t] = dims[..] else { return Err(bad("a tuple has three entries")) };
        let mut after = open[close + 1..].trim_start();
        if let Some(q) = quote {
            after = after.strip_prefix(q).ok_or_else(|| bad("a quoted key is not closed"))?.trim_start();
        }
        let value = after.strip_prefix(':').ok_or_else(|| bad("a key has no ':'"))?.trim_start();
        let end = value.find(',').unwrap_or(value.len());
        let p: f64 = value[..end].trim().parse().map_err(|_| bad("a probability is not a number"))?;
        out.push((h, w, t, p));
        rest = value[end..].trim_start().strip_prefix(',').unwrap_or("").trim_start();
    }
    if out.is_empty() {
        return Err(bad("no shapes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vllm_s_default_and_quoted_keys_read_alike() {
        let default = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}";
        let want = vec![(256, 256, 1, 0.5), (720, 1280, 1, 0.5), (720, 1280, 16, 0.0)];
        assert_eq!(parse_buckets(default).unwrap(), want);
        let quoted = r#"{"(256, 256, 1)": 0.5, '(720,1280,1)': 0.5, "(720, 1280, 16)": 0}"#;
        assert_eq!(parse_buckets(quoted).unwrap(), want);
        assert_eq!(parse_buckets("{(8, 9, 1): 1,}").unwrap(), vec![(8, 9, 1, 1.0)]);
    }

    #[test]
    fn malformed_configs_say_what_to_give() {
        for (s, why) in [
            ("(256, 256, 1): 1", "no braces"),
            ("{}", "no shapes"),
            ("{(256, 256): 1}", "three entries"),
            ("{(256, x, 1): 1}", "whole numbers"),
            ("{(256, 256, 1) 1}", "no ':'"),
            ("{(256, 256, 1): high}", "not a number"),
            ("{[256, 256, 1]: 1}", "not a (height"),
        ] {
            let e = parse_buckets(s).unwrap_err().0;
            assert!(e.contains(why) && e.contains("like"), "{s}: {e}");
        }
        assert!(parse_limits("image=3").unwrap_err().0.contains("JSON like"));
        assert!(parse_limits(r#"{"image": -1}"#).is_err());
        assert_eq!(
            parse_limits(r#"{"image": 3, "video": 0}"#).unwrap(),
            vec![("image".into(), 3), ("video".into(), 0)]
        );
    }

    proptest! {
        #[test]
        fn any_written_config_reads_back(shapes in proptest::collection::vec((1u32..5000, 1u32..5000, 1u32..40, 0u32..1000), 1..6), quoted in any::<bool>()) {
            let entries: Vec<String> = shapes.iter().map(|(h, w, t, p)| {
                let key = format!("({h}, {w}, {t})");
                let key = if quoted { format!("\"{key}\"") } else { key };
                format!("{key}: {}", f64::from(*p) / 1000.0)
            }).collect();
            let s = format!("{{{}}}", entries.join(", "));
            let got = parse_buckets(&s).unwrap();
            let want: Vec<_> = shapes.iter().map(|&(h, w, t, p)| (h, w, t, f64::from(p) / 1000.0)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn no_text_makes_the_parser_panic(s in ".{0,40}") {
            let _ = parse_buckets(&s);
            let _ = parse_buckets(&format!("{{{s}}}"));
        }
    }
}
