//! Requests as the engine sees them: what a caller submits ([`NewRequest`]), the handle it gets
//! back ([`RequestId`]), why a request ends, and the engine's per-request state, including the
//! chained hashes of its full token blocks that the prefix cache is keyed by.

use std::fmt;

use crate::rng::mix64;

/// The prompt of a request: its token ids, or a length with an optional shared prefix when no
/// ids are known (prompts of one prefix group share their first `len` tokens).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptTokens {
    Ids(Vec<u32>),
    Synthetic { len: u32, shared_prefix: Option<SharedPrefix> },
}

/// A prefix shared by every synthetic prompt of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedPrefix {
    pub group: u64,
    pub len: u32,
}

impl PromptTokens {
    pub fn len(&self) -> u32 {
        match self {
            PromptTokens::Ids(ids) => u32::try_from(ids.len()).unwrap_or(u32::MAX),
            PromptTokens::Synthetic { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of token `j`; synthetic tokens outside a shared prefix are unique per `salt`.
    fn token(&self, j: u32, salt: u64) -> u32 {
        match self {
            PromptTokens::Ids(ids) => ids[j as usize],
            PromptTokens::Synthetic { shared_prefix, .. } => {
                let seed = match shared_prefix {
                    Some(p) if j < p.len => mix64(p.group ^ 0x7072_6566_6978),
                    _ => salt,
                };
                (mix64(seed ^ u64::from(j)) >> 33) as u32
            }
        }
    }
}

/// A request submitted to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRequest {
    /// The caller's handle, returned with every token (a plan index, a channel key).
    pub tag: u64,
    pub prompt: PromptTokens,
    /// As the body asked it (64 bits): one past the context is refused for its length, naming it.
    pub max_tokens: u64,
    /// Run to `max_tokens` even when the EOS model would stop earlier.
    pub ignore_eos: bool,
    /// When the server received it, engine time (ns); the scheduler sees it `alpha_api` later.
    pub arrived_ns: u64,
    /// It came through the chat endpoint: with a model whose chat template is Jinja, the
    /// frontend renders a burst of such requests before it tokenizes any (`Frontend::render`).
    pub chat: bool,
    /// A pooling request's input, or a generation request.
    pub pooling: Pooling,
    /// Its images: the frontend decodes each, and the tower encodes each in the step whose
    /// prefill chunk reaches its first token.
    pub images: Vec<EncoderInput>,
}

/// Whether a request is a pooling request's input: its one step ends it with a vector, not a
/// generated token (vLLM's `generation_tokens` counts none), and a further input of the same
/// request costs the frontend an input's work (`api_ms_per_input`), not a request's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooling {
    /// A generation request.
    #[default]
    No,
    /// A pooling request, or its first input.
    Input,
    /// A further input of a pooling request whose first went before it.
    FurtherInput,
}

impl Pooling {
    /// A pooling API's `k`-th input of a request (from 0), or a generation request.
    pub fn of(pooling_api: bool, k: usize) -> Pooling {
        match (pooling_api, k) {
            (false, _) => Pooling::No,
            (true, 0) => Pooling::Input,
            (true, _) => Pooling::FurtherInput,
        }
    }
}

/// An image of a request, where its tokens start in the prompt and the work it brings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderInput {
    pub at: u32,
    pub work: crate::model::ImageWork,
}

/// The engine's handle on an admitted request; stale once the request has ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

impl RequestId {
    /// A number unique among live requests (slot and generation).
    pub fn as_u64(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.slot)
    }
}

/// Why a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// It produced `max_tokens`.
    Length,
    /// The EOS model stopped it earlier.
    Stop,
}

/// Why a request was refused at submission (the server answers 400).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error(
        "This model's maximum context length is {max_model_len} tokens. However, you requested \
         {} tokens ({prompt} in the prompt, {max_tokens} in the completion). Please reduce the \
         length of the prompt or completion.",
        u64::from(*prompt).saturating_add(*max_tokens)
    )]
    TooLong { prompt: u32, max_tokens: u64, max_model_len: u32 },
    /// vLLM's wording (`_validate_model_input`).
    #[error("The decoder prompt cannot be empty")]
    EmptyPrompt,
    #[error("max_tokens must be at least 1")]
    NoOutput,
}

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Received, not yet visible to the scheduler.
    Pending,
    Waiting,
    Running,
}

/// The engine's state of one request.
pub(crate) struct Req {
    pub tag: u64,
    pub generation: u32,
    pub phase: Phase,
    /// When the API server received it, when it was first scheduled and when its first token
    /// came, ns (vLLM's phase metrics: `super::phases`).
    pub arrived_ns: u64,
    pub scheduled_ns: Option<u64>,
    pub first_token_ns: Option<u64>,
    pub ready_ns: u64,
    pub prompt_len: u32,
    pub max_tokens: u32,
    /// Outputs after which it stops (`max_tokens`, or an EOS draw below it).
    pub stop_at: u32,
    pub num_output: u32,
    /// Tokens whose KV is in the cache.
    pub num_computed: u32,
    /// Tokens of batches still in flight through the pipeline's stages (scheduled, not done).
    pub in_flight: u32,
    /// Chained hashes of every full block of known tokens (prompt and outputs); none where
    /// the engine keeps no prefix cache, which is the only reader.
    pub hashes: Vec<u64>,
    /// Prompt tokens after the last full prompt block (kept only with the hashes).
    pub tail: Vec<u32>,
    /// Makes this request's synthetic and output tokens unique.
    pub salt: u64,
    /// Pool slots of its full-attention blocks.
    pub blocks: Vec<u32>,
    /// Blocks charged for its sliding-window layers.
    pub sliding_blocks: u32,
    /// Whether it holds its linear-attention state's units.
    pub holds_state: bool,
    /// Blocks already offered to the prefix cache.
    pub registered: u32,
    /// Prompt tokens found in the prefix cache at first admission.
    pub cached_tokens: u32,
    pub preemptions: u32,
    /// Its images, each encoded in the step whose chunk reaches its first token.
    pub images: Vec<EncoderInput>,
    /// A pooling input: its last step's token is no generated token.
    pub pooled: bool,
}

impl Req {
    /// Builds the state, hashing the prompt's full blocks of `hash_blocks` tokens where the
    /// engine keeps a prefix cache.
    pub fn new(
        req: &NewRequest,
        max_tokens: u32,
        generation: u32,
        ready_ns: u64,
        stop_at: u32,
        salt: u64,
        hash_blocks: Option<u32>,
    ) -> Req {
        let len = req.prompt.len();
        let (mut hashes, mut tail) = (Vec::new(), Vec::new());
        if let Some(block_size) = hash_blocks {
            let full = len / block_size;
            hashes.reserve((len + max_tokens) as usize / block_size as usize + 1);
            let mut parent = 0u64;
            for b in 0..full {
                let mut h = parent;
                for j in b * block_size..(b + 1) * block_size {
                    h = mix64(h ^ u64::from(req.prompt.token(j, salt)));
                }
                hashes.push(h);
                parent = h;
            }
            tail = (full * block_size..len).map(|j| req.prompt.token(j, salt)).collect();
        }
        Req {
            tag: req.tag,
            generation,
            phase: Phase::Pending,
            arrived_ns: req.arrived_ns,
            scheduled_ns: None,
            first_token_ns: None,
            ready_ns,
            prompt_len: len,
            max_tokens,
            stop_at,
            num_output: 0,
            num_computed: 0,
            in_flight: 0,
            hashes,
            tail,
            salt,
            blocks: Vec::new(),
            sliding_blocks: 0,
            holds_state: false,
            registered: 0,
            cached_tokens: 0,
            preemptions: 0,
            images: req.images.clone(),
            pooled: req.pooling != Pooling::No,
        }
    }

    /// Prompt plus generated tokens.
    pub fn num_tokens(&self) -> u32 {
        self.prompt_len + self.num_output
    }

    /// Tokens computed or in flight: where the next scheduled chunk starts.
    pub fn scheduled_upto(&self) -> u32 {
        self.num_computed + self.in_flight
    }

    /// Whether the prompt still has tokens to compute (a recomputed request counts as prefill).
    pub fn in_prefill(&self) -> bool {
        self.scheduled_upto() + 1 < self.num_tokens() || self.num_output == 0
    }

    /// The id of the output token at position `j` of the sequence (prompt included).
    pub fn output_token(&self, j: u32) -> u32 {
        (mix64(self.salt ^ 0x6f75_7470_7574 ^ u64::from(j)) >> 33) as u32
    }

    /// Hashes the block that the newest output token just filled.
    pub fn hash_completed_block(&mut self, block_size: u32) {
        let b = self.hashes.len() as u32;
        let parent = self.hashes.last().copied().unwrap_or(0);
        let full_prompt = (self.prompt_len / block_size) * block_size;
        let mut h = parent;
        for j in b * block_size..(b + 1) * block_size {
            let id = if j < self.prompt_len { self.tail[(j - full_prompt) as usize] } else { self.output_token(j) };
            h = mix64(h ^ u64::from(id));
        }
        self.hashes.push(h);
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "req-{}.{}", self.slot, self.generation)
    }
}
