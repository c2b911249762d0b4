//! What a run's requests contain: the dataset, its files and lengths, as [`WorkloadSpec`]
//! saves them with every result (the `servebench-workload` crate gives them meaning).

use serde::{Deserialize, Serialize};

/// Range ratios for the random dataset (`--random-range-ratio`, a float or `{"input":a,"output":b}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RangeRatio {
    pub input: f64,
    pub output: f64,
}

/// What the requests contain. Plain data: the `servebench-workload` crate gives it meaning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dataset", rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// vLLM's `random` dataset: random token ids with lengths drawn around the given ones.
    Random {
        input_len: u32,
        output_len: u32,
        range_ratio: RangeRatio,
        prefix_len: u32,
        /// vLLM's `random-mm` dataset: the same prompts, each with random images attached
        /// (`--random-mm-*`); `None` for `random`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media: Option<RandomMedia>,
        /// `--random-batch-size`: prompts a pooling request carries as its `input` list (1:
        /// one prompt, sent as text).
        #[serde(default = "one", skip_serializing_if = "is_one")]
        batch_size: u32,
    },
    /// vLLM's `random-rerank` dataset: one random query and `num_prompts` random documents,
    /// `batch_size` documents a request with the query (`--backend vllm-rerank`). A
    /// reranker's query takes half of `input_len` less a separator, each document the rest;
    /// without it (`--no-reranker`, an embedding model scoring) the query is one input of the
    /// first request's batch and every document is `input_len` long.
    RandomRerank { input_len: u32, range_ratio: f64, batch_size: u32, reranker: bool },
    /// vLLM's `sharegpt` dataset: the first turns of ShareGPT conversations.
    Sharegpt {
        path: String,
        /// `--sharegpt-output-len`: a fixed output length instead of the reply's.
        output_len: Option<u32>,
        oversample: bool,
        shuffle: bool,
        /// Send whole multi-turn conversations instead of first turns.
        multi_turn: Option<MultiTurn>,
    },
    /// vLLM's `custom` dataset: JSONL with `prompt` and optional `output_tokens`; with
    /// `images`, vLLM's `custom_image` (`custom_mm`): each row's `image_files` go with it.
    Custom {
        path: String,
        /// `--custom-output-len`; -1 takes each row's `output_tokens`.
        output_len: i64,
        skip_chat_template: bool,
        shuffle: bool,
        /// Top up with repeated rows when the file has fewer than `--num-prompts`
        /// (`--no-oversample` turns it off). Configs saved before it was recorded oversampled.
        #[serde(default = "oversample_by_default")]
        oversample: bool,
        /// `custom_image`: each row's `image_files` are sent as `image_url` parts after its
        /// prompt (chat only), and no chat template is applied. Older configs have none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        images: bool,
    },
    /// vLLM's `spec_bench` dataset: the first turn of each row of Spec-Bench's
    /// `question.jsonl` (`turns`, `category`), chat-templated, shuffled from seed 0 whatever
    /// `--seed` says (vLLM gives this dataset no seed).
    SpecBench {
        path: String,
        /// `--spec-bench-category`: only rows of this category; `None` takes every row.
        category: Option<String>,
        /// `--spec-bench-output-len`.
        output_len: u32,
        shuffle: bool,
        oversample: bool,
        /// `--skip-chat-template` was given: vLLM templates these prompts anyway, and so does
        /// servebench, saying so before the run.
        skip_chat_template_asked: bool,
    },
    /// vLLM's `speed_bench` dataset: SPEED-Bench as `spec_bench` reads Spec-Bench, the first
    /// message of each row of the subset's file in the directory `path`.
    SpeedBench {
        path: String,
        /// `--speed-bench-dataset-subset`: the file `{subset}.jsonl` of the directory.
        subset: String,
        /// `--speed-bench-category`.
        category: Option<String>,
        /// `--speed-bench-output-len`.
        output_len: u32,
        shuffle: bool,
        oversample: bool,
        skip_chat_template_asked: bool,
    },
    /// vLLM's `txt-slices` dataset: prompts of `input_len` tokens cut from a text file at
    /// random starting tokens (wrapping around its end).
    TxtSlices { path: String, input_len: u32, output_len: u32 },
    /// vLLM's `prefix_repetition` dataset.
    PrefixRepetition { prefix_len: u32, suffix_len: u32, num_prefixes: u32, output_len: u32 },
    /// Replay of a recorded trace (timestamps with input and output lengths).
    Trace {
        path: String,
        /// Multiplies recorded inter-arrival gaps (2.0 = half the rate).
        time_scale: f64,
        /// vLLM's `timed_trace` dataset: the JSONL's field names, its time unit and its hash
        /// block size as vLLM's `--timed-trace-*` flags give them; `None` for `trace` (BurstGPT,
        /// or Mooncake's names in milliseconds with 512-token blocks).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timed: Option<TimedTrace>,
    },
}

/// The images a `random-mm` request carries (vLLM's `--random-mm-*` flags).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RandomMedia {
    /// `--random-mm-base-items-per-request`: the middle of the range item counts are drawn from.
    pub base_items: u32,
    /// `--random-mm-num-mm-items-range-ratio`: counts are drawn from
    /// `[floor(base * (1 - r)), ceil(base * (1 + r))]`, in [0, 1].
    pub items_range_ratio: f64,
    /// `--random-mm-limit-mm-per-prompt`'s `image` cap: at most this many images a request.
    pub image_limit: u32,
    /// `--random-mm-bucket-config`: image shapes with their probabilities (video buckets of
    /// probability 0 dropped; others are refused).
    pub buckets: Vec<ImageBucket>,
}

/// One image shape of `--random-mm-bucket-config`, and how likely it is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageBucket {
    pub height: u32,
    pub width: u32,
    pub probability: f64,
}

/// How a `timed_trace` file is read (vLLM's `--timed-trace-*` flags).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedTrace {
    /// `--timed-trace-chunk-hash-size`: prompt tokens each of a row's hash ids stands for.
    pub chunk_tokens: u32,
    /// `--timed-trace-sec-multiplier`: a timestamp times this is its send time in seconds.
    pub sec_multiplier: f64,
    /// `--timed-trace-label-timestamp`, `-input-length`, `-output-length`, `-hash-ids`.
    pub label_timestamp: String,
    pub label_input_length: String,
    pub label_output_length: String,
    pub label_hash_ids: String,
}

impl WorkloadSpec {
    /// vLLM's `--dataset-name` value for this workload.
    pub fn dataset_name(&self) -> &'static str {
        match self {
            WorkloadSpec::Random { media: None, .. } => "random",
            WorkloadSpec::Random { media: Some(_), .. } => "random-mm",
            WorkloadSpec::RandomRerank { .. } => "random-rerank",
            WorkloadSpec::Sharegpt { .. } => "sharegpt",
            WorkloadSpec::Custom { images: false, .. } => "custom",
            WorkloadSpec::Custom { images: true, .. } => "custom_image",
            WorkloadSpec::SpecBench { .. } => "spec_bench",
            WorkloadSpec::SpeedBench { .. } => "speed_bench",
            WorkloadSpec::TxtSlices { .. } => "txt-slices",
            WorkloadSpec::PrefixRepetition { .. } => "prefix_repetition",
            WorkloadSpec::Trace { timed: None, .. } => "trace",
            WorkloadSpec::Trace { timed: Some(_), .. } => "timed_trace",
        }
    }

    /// How the dataset groups its inputs into requests, for `num_prompts`: the inputs in all
    /// and the most one request carries (its last request takes the rest); `None` where each
    /// request is one prompt.
    pub fn input_batches(&self, num_prompts: usize) -> Option<(usize, usize)> {
        match *self {
            WorkloadSpec::Random { batch_size, .. } if batch_size > 1 => Some((num_prompts, batch_size as usize)),
            WorkloadSpec::RandomRerank { batch_size, reranker: true, .. } => {
                Some((num_prompts, (batch_size as usize).max(1)))
            }
            // vLLM's scoring without a reranker counts the query as one of the prompts and
            // one of each batch's inputs.
            WorkloadSpec::RandomRerank { batch_size, reranker: false, .. } => {
                Some((num_prompts.saturating_sub(1), (batch_size as usize).saturating_sub(1).max(1)))
            }
            _ => None,
        }
    }

    /// Takes the grouping of a plan read back from a file (`--replay-plan`): `inputs` in all,
    /// `per` a request. Sets the batch size that groups them so and returns the `num_prompts`
    /// that goes with it; `None` where the dataset sends one prompt a request and the plan
    /// carries several.
    pub fn regroup(&mut self, inputs: usize, per: usize) -> Option<usize> {
        let per_u32 = u32::try_from(per).ok()?;
        match self {
            WorkloadSpec::Random { batch_size, .. } | WorkloadSpec::RandomRerank { batch_size, reranker: true, .. } => {
                *batch_size = per_u32;
                Some(inputs)
            }
            // The query is one of the prompts and one input of every batch.
            WorkloadSpec::RandomRerank { batch_size, reranker: false, .. } => {
                *batch_size = per_u32.checked_add(1)?;
                Some(inputs + 1)
            }
            _ => (per == 1).then_some(inputs),
        }
    }

    /// The input sequences request `index` carries (vLLM's `num_input_sequences`: a pooling
    /// request's inputs, a rerank request's documents); 1 for a request of one prompt.
    pub fn input_sequences(&self, num_prompts: usize, index: u32) -> u64 {
        match self.input_batches(num_prompts) {
            Some((inputs, per)) => inputs.saturating_sub(index as usize * per).min(per) as u64,
            None => 1,
        }
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn oversample_by_default() -> bool {
    true
}

/// Multi-turn conversation options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MultiTurn {
    /// At most this many conversations are active at once.
    pub max_active_conversations: usize,
    /// Seconds between an answer's end and the next turn's send.
    pub think_time_s: f64,
    /// At most this many turns per conversation.
    pub max_turns: usize,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec::Random {
            input_len: 1024,
            output_len: 128,
            range_ratio: RangeRatio::default(),
            prefix_len: 0,
            media: None,
            batch_size: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(batch_size: u32) -> WorkloadSpec {
        WorkloadSpec::Random {
            input_len: 8,
            output_len: 8,
            range_ratio: RangeRatio::default(),
            prefix_len: 0,
            media: None,
            batch_size,
        }
    }

    fn rerank(batch_size: u32, reranker: bool) -> WorkloadSpec {
        WorkloadSpec::RandomRerank { input_len: 8, range_ratio: 0.0, batch_size, reranker }
    }

    #[test]
    fn requests_carry_their_batch_of_inputs_and_the_last_the_rest() {
        let seqs =
            |w: &WorkloadSpec, n| (0..).map(|i| w.input_sequences(n, i)).take_while(|&k| k > 0).collect::<Vec<_>>();
        assert_eq!(random(1).input_batches(10), None);
        assert_eq!(random(1).input_sequences(10, 3), 1);
        assert_eq!(seqs(&random(4), 10), [4, 4, 2]);
        assert_eq!(seqs(&rerank(5, true), 10), [5, 5]);
        // Without a reranker the query is one of the prompts and one input of each batch.
        assert_eq!(rerank(5, false).input_batches(10), Some((9, 4)));
        assert_eq!(seqs(&rerank(5, false), 10), [4, 4, 1]);
        assert_eq!(rerank(5, true).dataset_name(), "random-rerank");
    }

    #[test]
    fn a_replayed_grouping_sets_the_batch_that_gives_it_back() {
        for (mut w, inputs, per) in
            [(random(1), 10, 4), (random(8), 3, 1), (rerank(2, true), 9, 5), (rerank(2, false), 9, 4)]
        {
            let n = w.regroup(inputs, per).unwrap();
            let expected =
                if per > 1 || matches!(w, WorkloadSpec::RandomRerank { .. }) { Some((inputs, per)) } else { None };
            assert_eq!(w.input_batches(n), expected, "{w:?}");
            let requests = inputs.div_ceil(per) as u32;
            let total: u64 = (0..requests).map(|i| w.input_sequences(n, i)).sum();
            assert_eq!(total, inputs as u64, "{w:?}");
        }
        let mut slices = WorkloadSpec::TxtSlices { path: "t.txt".into(), input_len: 8, output_len: 8 };
        assert_eq!(slices.regroup(6, 1), Some(6));
        assert_eq!(slices.regroup(6, 3), None, "a dataset of one prompt a request cannot carry three");
    }

    #[test]
    fn a_batch_of_one_is_not_written_and_reads_back_as_one() {
        let json = serde_json::to_value(random(1)).unwrap();
        assert!(json.get("batch_size").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<WorkloadSpec>(json).unwrap(), random(1));
        let json = serde_json::to_value(random(3)).unwrap();
        assert_eq!(json["batch_size"], 3);
    }
}
