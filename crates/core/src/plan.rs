//! The request plan: every request body and its intended send time, fixed before the clock starts.
//!
//! The workload crate builds a [`Plan`] from a [`crate::config::RunConfig`]; the load engine and
//! the simulator's virtual-time `predict` both execute it. Nothing in a plan depends on the run,
//! so the same plan (saved with `--dry-run`, sent with `--replay-plan`) gives byte-identical
//! traffic against any server.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::config::Api;
use crate::protocol::pooling::input_items;

/// One request, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRequest {
    /// Position in the dataset; results are reported in this order.
    pub index: u32,
    /// Intended arrival, ns after the run's start (vLLM's cumulative delay `D_i`).
    pub at_ns: u64,
    /// The exact JSON body POSTed to the endpoint.
    pub body: Bytes,
    /// The `max_tokens` (or `max_completion_tokens`) in the body.
    pub max_tokens: u32,
    /// Prompt tokens: exact when counted with a tokenizer, local or the server's
    /// (`Plan::tokens_exact`), else an estimate.
    pub prompt_tokens: u32,
    /// Each input's own prompt tokens where the request sends several (a batch of inputs; a
    /// rerank's query, then its documents), counted as `prompt_tokens` is; empty for a request
    /// of one prompt. A rerank's `prompt_tokens` counts its pairs as the dataset does (the
    /// query with each document for a reranker), so it need not be their sum.
    pub input_tokens: Vec<u32>,
}

/// How a plan's token counts were obtained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum TokenCounting {
    /// With this tokenizer (a path or model id), chat template applied where one is used.
    Tokenizer(String),
    /// Without a tokenizer: prompts are made of words that are one token each in common
    /// vocabularies, and counts are estimates; the server's usage is authoritative.
    Estimate,
    /// Without a local tokenizer, by the server's `/tokenize` at `base_url`: the prompts were
    /// aligned to the server's tokenizer before the run, and each count includes what the
    /// server adds to the prompt (special tokens, chat template), as its usage will.
    Server { base_url: String },
}

/// A multi-turn conversation: turns are sent one after another, each after the previous
/// answer ended plus a think time, with the whole history in `messages`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationPlan {
    pub id: u32,
    /// Intended start of the first turn, ns after the run's start.
    pub at_ns: u64,
    /// An optional system prompt, sent first in every turn's messages.
    pub system: Option<String>,
    pub turns: Vec<TurnPlan>,
}

/// One user turn of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnPlan {
    pub user: String,
    pub max_tokens: u32,
}

/// Everything a run will send.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub api: Api,
    /// Independent requests, in dataset order, with non-decreasing `at_ns`.
    pub requests: Vec<PlannedRequest>,
    /// Multi-turn conversations (empty unless the workload is multi-turn).
    pub conversations: Vec<ConversationPlan>,
    pub token_counting: TokenCounting,
    /// Log lines produced while building (vLLM prints similar ones before the run).
    pub notes: Vec<String>,
}

impl Plan {
    /// The number of requests the plan will send (turns count one each).
    pub fn len(&self) -> usize {
        self.requests.len() + self.conversations.iter().map(|c| c.turns.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether prompt token counts were made with a tokenizer, local or the server's (exact),
    /// not estimated.
    pub fn tokens_exact(&self) -> bool {
        matches!(self.token_counting, TokenCounting::Tokenizer(_) | TokenCounting::Server { .. })
    }

    /// When the last request (or conversation) is planned to start, ns after the run's start.
    pub fn last_start_ns(&self) -> u64 {
        let requests = self.requests.iter().map(|r| r.at_ns);
        requests.chain(self.conversations.iter().map(|c| c.at_ns)).max().unwrap_or(0)
    }

    /// Refuses a schedule whose last request starts more than [`MAX_SCHEDULE_NS`] after the
    /// run's start: a rate, trace or time scale that far off is a mistake, and a run that
    /// waits years for its next request would look like a hang. The message names the
    /// request's start and what to change.
    pub fn check_schedule(&self) -> Result<(), String> {
        check_start(self.last_start_ns(), "the arrival schedule's last request")
    }

    /// How a pooling plan groups its inputs into requests, read from its bodies: the inputs in
    /// all and how many each request carries, where every request but the last carries as
    /// many as the first and the last no more (the grouping of
    /// [`crate::config::WorkloadSpec::input_batches`]). `None` for a generation plan, an
    /// empty one, one whose first request carries no input (a rerank of no documents), or one
    /// whose requests carry their inputs unevenly.
    pub fn input_batches(&self) -> Option<(usize, usize)> {
        if !self.api.pooling() {
            return None;
        }
        let count = |r: &PlannedRequest| {
            let body: Option<serde_json::Value> = serde_json::from_slice(&r.body).ok();
            body.as_ref().and_then(|b| input_items(self.api, b)).map_or(1, <[serde_json::Value]>::len)
        };
        let counts: Vec<usize> = self.requests.iter().map(count).collect();
        let (&last, rest) = counts.split_last()?;
        let per = counts[0];
        (per > 0 && rest.iter().all(|&c| c == per) && last <= per).then(|| (counts.iter().sum(), per))
    }
}

/// Refuses one start past [`MAX_SCHEDULE_NS`]; `what` names the request in the message (a plan
/// file's reader checks each line as it reads it, so the error names that line).
pub fn check_start(at_ns: u64, what: &str) -> Result<(), String> {
    if at_ns <= MAX_SCHEDULE_NS {
        return Ok(());
    }
    Err(format!(
        "{what} starts {:.4e} s after the run begins, more than the {} days a run may span; raise \
         --request-rate, lower --trace-time-scale or fix the trace's timestamps",
        at_ns as f64 / 1e9,
        MAX_SCHEDULE_NS / (86_400 * 1_000_000_000)
    ))
}

/// The longest arrival schedule a run accepts: 7 days.
pub const MAX_SCHEDULE_NS: u64 = 7 * 86_400 * 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: &[u64]) -> Plan {
        Plan {
            api: Api::Completions,
            requests: ns
                .iter()
                .enumerate()
                .map(|(i, &at_ns)| PlannedRequest {
                    index: i as u32,
                    at_ns,
                    body: bytes::Bytes::new(),
                    max_tokens: 1,
                    prompt_tokens: 1,
                    input_tokens: Vec::new(),
                })
                .collect(),
            conversations: Vec::new(),
            token_counting: TokenCounting::Estimate,
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_pooling_plan_s_grouping_is_read_from_its_bodies() {
        let plan = |api, bodies: &[&'static str]| {
            let mut p = at(&vec![0; bodies.len()]);
            p.api = api;
            for (r, b) in p.requests.iter_mut().zip(bodies) {
                r.body = bytes::Bytes::from_static(b.as_bytes());
            }
            p
        };
        let embeddings = Api::Pooling(crate::config::PoolingForm::Embeddings);
        let three = r#"{"input": ["a", "b", "c"]}"#;
        assert_eq!(plan(embeddings, &[three, three, r#"{"input": ["d"]}"#]).input_batches(), Some((7, 3)));
        assert_eq!(plan(embeddings, &[r#"{"input": "a"}"#, r#"{"input": "b"}"#]).input_batches(), Some((2, 1)));
        // Uneven groups (a longer last, a shorter middle) follow no batch size.
        assert_eq!(plan(embeddings, &[three, r#"{"input": ["a"]}"#, three]).input_batches(), None);
        assert_eq!(plan(embeddings, &[r#"{"input": ["a"]}"#, three]).input_batches(), None);
        let rerank = Api::Pooling(crate::config::PoolingForm::Rerank);
        let docs = r#"{"query": "q", "documents": ["a", "b"]}"#;
        assert_eq!(plan(rerank, &[docs, docs]).input_batches(), Some((4, 2)));
        assert_eq!(plan(rerank, &[r#"{"query": "q", "documents": []}"#]).input_batches(), None);
        assert_eq!(plan(embeddings, &[]).input_batches(), None);
        assert_eq!(plan(Api::Completions, &[three]).input_batches(), None);
    }

    #[test]
    fn a_schedule_longer_than_a_week_is_refused_with_what_to_change() {
        assert_eq!(at(&[]).last_start_ns(), 0);
        assert!(at(&[0, 5, MAX_SCHEDULE_NS]).check_schedule().is_ok());
        let e = at(&[0, MAX_SCHEDULE_NS + 1]).check_schedule().unwrap_err();
        assert!(e.contains("7 days") && e.contains("--request-rate"), "{e}");
        assert!(at(&[u64::MAX]).check_schedule().unwrap_err().contains("1.8447e10 s"));
    }

    #[test]
    fn token_counting_keeps_its_serialized_forms_and_adds_the_server() {
        let forms = [
            (TokenCounting::Tokenizer("qwen3".into()), r#"{"kind":"tokenizer","detail":"qwen3"}"#),
            (TokenCounting::Estimate, r#"{"kind":"estimate"}"#),
            (
                TokenCounting::Server { base_url: "http://h:8000".into() },
                r#"{"kind":"server","detail":{"base_url":"http://h:8000"}}"#,
            ),
        ];
        for (value, text) in forms {
            assert_eq!(serde_json::to_string(&value).unwrap(), text);
            assert_eq!(serde_json::from_str::<TokenCounting>(text).unwrap(), value);
        }
    }

    #[test]
    fn counts_from_the_servers_tokenizer_are_exact() {
        let mut plan = Plan {
            api: Api::Completions,
            requests: Vec::new(),
            conversations: Vec::new(),
            token_counting: TokenCounting::Estimate,
            notes: Vec::new(),
        };
        assert!(!plan.tokens_exact());
        plan.token_counting = TokenCounting::Server { base_url: "http://h:8000".into() };
        assert!(plan.tokens_exact());
        plan.token_counting = TokenCounting::Tokenizer("qwen3".into());
        assert!(plan.tokens_exact());
    }
}
