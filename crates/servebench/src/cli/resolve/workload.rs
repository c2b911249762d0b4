//! The dataset flags, resolved into the run's [`WorkloadSpec`]: which of vLLM's datasets,
//! its file and its lengths, with vLLM's rules (no `--dataset-path` for generated prompts,
//! `--multi-turn` for ShareGPT only) and an error naming the datasets there are.

use servebench_core::config::{MultiTurn, RangeRatio, TimedTrace, WorkloadSpec};

use super::super::bench_args::{ContentArgs, DatasetArgs};
use super::media::parse_media;
use super::{ResolveError, err, is_positive};

/// The `--dataset-name` values servebench runs.
const SUPPORTED: &str = "random, random-mm, random-rerank, sharegpt, custom, custom_image, spec_bench, speed_bench, txt-slices, prefix_repetition, trace \
     or timed_trace";

pub fn parse_range_ratio(s: &str) -> Result<RangeRatio, ResolveError> {
    let check = |v: f64, what: &str| {
        if (0.0..1.0).contains(&v) {
            Ok(v)
        } else {
            err(format!("--random-range-ratio {what} must be in [0, 1), got {v}"))
        }
    };
    if let Ok(v) = s.trim().parse::<f64>() {
        let v = check(v, "value")?;
        return Ok(RangeRatio { input: v, output: v });
    }
    let j: serde_json::Value = serde_json::from_str(s).map_err(|_| {
        ResolveError(format!(
            "invalid --random-range-ratio {s:?}: use a number or JSON like {{\"input\":0.1,\"output\":0.2}}"
        ))
    })?;
    let get = |k: &str| j.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    Ok(RangeRatio { input: check(get("input"), "input")?, output: check(get("output"), "output")? })
}

fn need_path(d: &DatasetArgs) -> Result<String, ResolveError> {
    d.dataset_path.clone().ok_or_else(|| {
        let what = if d.dataset_name == "speed_bench" { "SPEED-Bench's directory" } else { "a local file" };
        ResolveError(format!("--dataset-name {} needs --dataset-path pointing to {what}", d.dataset_name))
    })
}

pub fn parse_workload(d: &DatasetArgs, c: &ContentArgs) -> Result<WorkloadSpec, ResolveError> {
    let name = d.dataset_name.as_str();
    if matches!(name, "random" | "random-mm" | "random-rerank" | "prefix_repetition") && d.dataset_path.is_some() {
        return err(format!(
            "cannot use the {name:?} dataset with --dataset-path; pick the --dataset-name that matches the file \
             (sharegpt, custom, spec_bench, speed_bench, txt-slices, trace, timed_trace)"
        ));
    }
    if d.multi_turn && name != "sharegpt" {
        return err(format!(
            "--multi-turn replays ShareGPT conversations; it does not apply to --dataset-name {name}: pass \
             --dataset-name sharegpt, or leave --multi-turn out"
        ));
    }
    let output = c.output_len;
    let spec = match name {
        "random" | "random-mm" => WorkloadSpec::Random {
            input_len: c.input_len.unwrap_or(d.random_input_len),
            output_len: output.unwrap_or(d.random_output_len),
            range_ratio: parse_range_ratio(&d.random_range_ratio)?,
            prefix_len: d.random_prefix_len,
            media: (name == "random-mm").then(|| parse_media(d)).transpose()?,
            batch_size: d.random_batch_size,
        },
        "random-rerank" => {
            let ratio = parse_range_ratio(&d.random_range_ratio)?;
            if ratio.input != ratio.output {
                return err("random-rerank draws every length with one ratio: pass --random-range-ratio as a number");
            }
            // vLLM's scoring without a reranker puts the query in each batch.
            if d.no_reranker && d.random_batch_size < 2 {
                return err(
                    "--no-reranker sends the query as one prompt of each batch: pass --random-batch-size of at \
                            least 2",
                );
            }
            WorkloadSpec::RandomRerank {
                input_len: c.input_len.unwrap_or(d.random_input_len),
                range_ratio: ratio.input,
                batch_size: d.random_batch_size,
                reranker: !d.no_reranker,
            }
        }
        "sharegpt" => WorkloadSpec::Sharegpt {
            path: need_path(d)?,
            output_len: output.or(d.sharegpt_output_len),
            oversample: !d.no_oversample,
            shuffle: !d.disable_shuffle,
            multi_turn: if d.multi_turn {
                if !(d.think_time.is_finite() && d.think_time >= 0.0) {
                    return err(format!("--think-time must be 0 or more seconds, got {}", d.think_time));
                }
                if d.max_active_conversations == 0 || d.max_turns == 0 {
                    return err("--max-active-conversations and --max-turns must be at least 1");
                }
                Some(MultiTurn {
                    max_active_conversations: d.max_active_conversations,
                    think_time_s: d.think_time,
                    max_turns: d.max_turns,
                })
            } else {
                None
            },
        },
        // vLLM's `custom_image` (`custom_mm` in some releases) never templates its prompts.
        "custom" | "custom_image" | "custom_mm" => WorkloadSpec::Custom {
            path: need_path(d)?,
            output_len: output.map_or(d.custom_output_len, i64::from),
            skip_chat_template: d.skip_chat_template || name != "custom",
            shuffle: !d.disable_shuffle,
            oversample: !d.no_oversample,
            images: name != "custom",
        },
        "spec_bench" => WorkloadSpec::SpecBench {
            path: need_path(d)?,
            category: d.spec_bench_category.clone(),
            output_len: output.unwrap_or(d.spec_bench_output_len),
            shuffle: !d.disable_shuffle,
            oversample: !d.no_oversample,
            skip_chat_template_asked: d.skip_chat_template,
        },
        "speed_bench" => WorkloadSpec::SpeedBench {
            path: need_path(d)?,
            subset: d.speed_bench_dataset_subset.clone(),
            category: d.speed_bench_category.clone(),
            output_len: output.unwrap_or(d.speed_bench_output_len),
            shuffle: !d.disable_shuffle,
            oversample: !d.no_oversample,
            skip_chat_template_asked: d.skip_chat_template,
        },
        "txt-slices" => WorkloadSpec::TxtSlices {
            path: need_path(d)?,
            input_len: c.input_len.unwrap_or(d.random_input_len),
            output_len: output.unwrap_or(d.random_output_len),
        },
        "prefix_repetition" => {
            if d.prefix_repetition_num_prefixes == 0 {
                return err("--prefix-repetition-num-prefixes must be at least 1");
            }
            WorkloadSpec::PrefixRepetition {
                prefix_len: d.prefix_repetition_prefix_len,
                suffix_len: d.prefix_repetition_suffix_len,
                num_prefixes: d.prefix_repetition_num_prefixes,
                output_len: output.unwrap_or(d.prefix_repetition_output_len),
            }
        }
        "trace" | "burstgpt" | "mooncake" | "timed_trace" => {
            if !is_positive(d.trace_time_scale) {
                return err("--trace-time-scale must be greater than 0");
            }
            let timed = (name == "timed_trace").then(|| timed_trace(d)).transpose()?;
            WorkloadSpec::Trace { path: need_path(d)?, time_scale: d.trace_time_scale, timed }
        }
        "hf" | "sonnet" | "custom_audio" => {
            return err(format!(
                "the vLLM dataset {name:?} is not supported by servebench yet; supported: {SUPPORTED}"
            ));
        }
        _ => return err(format!("unknown --dataset-name {name:?}; expected {SUPPORTED}")),
    };
    if d.random_batch_size == 0 {
        return err("--random-batch-size must be at least 1");
    }
    if d.random_batch_size > 1
        && !matches!(spec, WorkloadSpec::Random { media: None, .. } | WorkloadSpec::RandomRerank { .. })
    {
        return err(format!(
            "--random-batch-size groups the prompts of the random and random-rerank datasets, not of {name}; leave it out"
        ));
    }
    if d.no_reranker && !matches!(spec, WorkloadSpec::RandomRerank { .. }) {
        return err(format!("--no-reranker applies to --dataset-name random-rerank, not {name}; leave it out"));
    }
    if d.self_timed && !matches!(spec, WorkloadSpec::Trace { .. }) {
        return err(format!(
            "--self-timed sends a trace's requests at their recorded times; it does not apply to --dataset-name \
             {name}: pass --dataset-name timed_trace or trace with the trace, or leave --self-timed out"
        ));
    }
    Ok(spec)
}

/// How vLLM's `timed_trace` reads its file: its `--timed-trace-*` flags.
fn timed_trace(d: &DatasetArgs) -> Result<TimedTrace, ResolveError> {
    if d.timed_trace_chunk_hash_size == 0 {
        return err("--timed-trace-chunk-hash-size must be at least 1 token");
    }
    if !is_positive(d.timed_trace_sec_multiplier) {
        return err("--timed-trace-sec-multiplier must be greater than 0");
    }
    Ok(TimedTrace {
        chunk_tokens: d.timed_trace_chunk_hash_size,
        sec_multiplier: d.timed_trace_sec_multiplier,
        label_timestamp: d.timed_trace_label_timestamp.clone(),
        label_input_length: d.timed_trace_label_input_length.clone(),
        label_output_length: d.timed_trace_label_output_length.clone(),
        label_hash_ids: d.timed_trace_label_hash_ids.clone(),
    })
}
