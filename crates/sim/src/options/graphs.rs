//! The batch sizes vLLM captures CUDA graphs at (`compilation_config.cudagraph_capture_sizes`
//! and `max_cudagraph_capture_size`, or `--cuda-graph-sizes` before them): given, or by vLLM's
//! own rule. A step of up to the largest size runs padded to the next size captured; a larger
//! one runs without graphs.
//!
//! vLLM's rule where nothing is given (`VllmConfig._set_cudagraph_sizes`, 0.11 on): 1, 2, 4,
//! then multiples of 8 to 256 and of 16 beyond, up to twice `max-num-seqs` and at most 512 (the
//! stack's `graph_max_tokens`, which a preset may lower), never past `max-num-batched-tokens`.
//! Sizes given replace the list (those beyond `max-num-batched-tokens`, or beyond a
//! `max-cudagraph-capture-size` given with them, are dropped); a largest size given alone cuts
//! vLLM's list there.
//!
//! With speculative decoding a decoding sequence runs `1 + k` tokens a step (its decode query
//! length), and vLLM sizes the graphs for it: the default largest size is `max-num-seqs` times
//! that, times two (at most 512, never past the token budget), and every size is rounded up to
//! a multiple of it, those past the largest dropped (`adjust_cudagraph_sizes_for_spec_decode`).

use serde::Serialize;

/// The sizes a deployment captures CUDA graphs at, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphSizes {
    /// vLLM's list (1, 2, 4, then multiples of 8 to 256, then of 16) up to `largest` tokens,
    /// itself a size of the list; 0: no size fits, every step runs without graphs.
    Default { largest: u32 },
    /// The sizes the deployment gave, ascending and distinct, none of them 0.
    Given { sizes: Vec<u32> },
    /// vLLM's list rounded up to multiples of a speculative decoder's decode query length
    /// (`1 + k`), ascending and distinct (sizes given are rounded alike, and stay `Given`).
    Drafts { sizes: Vec<u32> },
}

impl CudaGraphSizes {
    /// The sizes for `given` sizes and a `largest` size (as vLLM's flags give them: either, both
    /// or neither), `max_num_seqs` and `max_num_batched_tokens` as resolved, the stack's cap
    /// on the default (`graph_max_tokens`) and the tokens a decoding sequence runs a step
    /// (`query_len`: 1, or `1 + k` with `k` draft tokens); an error says why sizes given leave
    /// none.
    pub fn resolve(
        given: Option<&[u32]>,
        largest: Option<u32>,
        max_num_seqs: u32,
        max_num_batched_tokens: u32,
        stack_cap: u32,
        query_len: u32,
    ) -> Result<Self, String> {
        let sizes = Self::resolve_plain(
            given,
            largest,
            max_num_seqs.saturating_mul(query_len.max(1)),
            max_num_batched_tokens,
            stack_cap,
        )?;
        if query_len <= 1 {
            return Ok(sizes);
        }
        let listed = sizes.listed();
        let top = listed.last().copied().unwrap_or(0);
        let mut rounded: Vec<u32> =
            listed.iter().map(|s| s.div_ceil(query_len) * query_len).filter(|s| *s <= top).collect();
        rounded.dedup();
        Ok(match sizes {
            _ if rounded.is_empty() => Self::Default { largest: 0 },
            Self::Given { .. } => Self::Given { sizes: rounded },
            Self::Default { .. } | Self::Drafts { .. } => Self::Drafts { sizes: rounded },
        })
    }

    /// [`Self::resolve`] for one token a decoding sequence, the sequences' count taken as the
    /// tokens a decode step runs.
    fn resolve_plain(
        given: Option<&[u32]>,
        largest: Option<u32>,
        max_num_seqs: u32,
        max_num_batched_tokens: u32,
        stack_cap: u32,
    ) -> Result<Self, String> {
        let cap = largest.unwrap_or(u32::MAX).min(max_num_batched_tokens);
        match given {
            Some(sizes) => {
                let mut kept: Vec<u32> = sizes.iter().copied().filter(|s| *s >= 1 && *s <= cap).collect();
                kept.sort_unstable();
                kept.dedup();
                if kept.is_empty() {
                    return Err(format!(
                        "no size of {} is at most {cap} (max-cudagraph-capture-size and max-num-batched-tokens \
                         bound them); give sizes within it, or cudagraph-mode=none for no graphs",
                        list_text(sizes)
                    ));
                }
                Ok(Self::Given { sizes: kept })
            }
            None => {
                let wanted = largest.unwrap_or_else(|| max_num_seqs.saturating_mul(2).min(stack_cap));
                Ok(Self::Default { largest: default_size_at_most(wanted.min(max_num_batched_tokens)) })
            }
        }
    }

    /// Every size captured, ascending.
    fn listed(&self) -> Vec<u32> {
        match self {
            Self::Default { largest } => default_sizes_to(*largest),
            Self::Given { sizes } | Self::Drafts { sizes } => sizes.clone(),
        }
    }

    /// The largest size captured: steps of more tokens run without graphs.
    pub fn largest(&self) -> u64 {
        match self {
            Self::Default { largest } => u64::from(*largest),
            Self::Given { sizes } | Self::Drafts { sizes } => sizes.last().map_or(0, |s| u64::from(*s)),
        }
    }

    /// The rows a step of `tokens` tokens runs on in a graph: the next size captured (see
    /// [`default_rows`] for vLLM's list); `None` beyond the largest.
    pub fn rows(&self, tokens: u64) -> Option<u64> {
        if tokens > self.largest() {
            return None;
        }
        match self {
            Self::Default { .. } => Some(default_rows(tokens)),
            Self::Given { sizes } | Self::Drafts { sizes } => {
                let at = sizes.partition_point(|s| u64::from(*s) < tokens);
                Some(if tokens == 0 { 0 } else { u64::from(sizes[at]) })
            }
        }
    }

    /// The sizes in a line for the user, where they are not vLLM's default list.
    pub fn given_text(&self) -> Option<String> {
        match self {
            Self::Default { .. } | Self::Drafts { .. } => None,
            Self::Given { sizes } => Some(list_text(sizes)),
        }
    }
}

/// The rows a step of `tokens` tokens runs on under vLLM's default CUDA graph sizes: the next
/// size of 1, 2, 4, then multiples of 8 to 256, then of 16. The padded rows go through every
/// product, and vLLM's routers send them to experts like real tokens (vLLM had no mask for them
/// in the MoE kernels of the releases these presets model), so a decode of 5 or 10 sequences
/// reads the experts of 8 or 16 tokens.
pub fn default_rows(tokens: u64) -> u64 {
    match tokens {
        0..=2 => tokens,
        3..=4 => 4,
        5..=256 => tokens.div_ceil(8) * 8,
        _ => tokens.div_ceil(16) * 16,
    }
}

/// vLLM's default list up to `largest`, itself one of its sizes.
fn default_sizes_to(largest: u32) -> Vec<u32> {
    let mut sizes = Vec::new();
    let mut n = 0;
    while n < largest {
        n = default_rows(u64::from(n) + 1) as u32;
        sizes.push(n);
    }
    sizes
}

/// The largest size of vLLM's default list that is at most `n` (0 for none).
fn default_size_at_most(n: u32) -> u32 {
    match n {
        0..=2 => n,
        3..=7 => 4,
        8..=255 => n / 8 * 8,
        _ => 256 + (n - 256) / 16 * 16,
    }
}

/// Sizes as a value of the `cudagraph-capture-sizes` option: whole numbers separated by commas
/// or spaces, bracketed or not (`1,2,4,8`, `[1, 2, 4, 8]`, `1 2 4 8`); `None` for anything else.
pub fn parse_sizes(value: &str) -> Option<Vec<u32>> {
    let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
    let sizes: Option<Vec<u32>> = inner
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u32>().ok().filter(|n| *n >= 1))
        .collect();
    sizes.filter(|s| !s.is_empty())
}

fn list_text(sizes: &[u32]) -> String {
    sizes.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_rows_are_vllm_s_captured_sizes() {
        let padded: Vec<u64> = [0, 1, 2, 3, 5, 8, 10, 100, 256, 257, 500].map(default_rows).into();
        assert_eq!(padded, [0, 1, 2, 4, 8, 8, 16, 104, 256, 272, 512]);
    }

    #[test]
    fn the_default_list_ends_at_twice_the_sequences_the_stack_cap_and_the_token_budget() {
        let largest = |seqs, tokens, cap| CudaGraphSizes::resolve(None, None, seqs, tokens, cap, 1).unwrap().largest();
        // vLLM's defaults: 1,024 sequences (256 on small parts) and 8,192 tokens, capped at 512.
        assert_eq!(largest(1024, 8192, 512), 512);
        assert_eq!(largest(256, 2048, 512), 512);
        // Four sequences capture 1, 2, 4 and 8; 50 sequences up to 96 (100 is not a size).
        assert_eq!(largest(4, 8192, 512), 8);
        assert_eq!(largest(50, 8192, 512), 96);
        // A stack that captures less (the reference Spark stack's 256), a small token budget.
        assert_eq!(largest(256, 512, 256), 256);
        assert_eq!(largest(1024, 300, 512), 288);
        // A largest size given replaces the rule, still within the token budget.
        let given = |max| CudaGraphSizes::resolve(None, Some(max), 4, 8192, 512, 1).unwrap().largest();
        assert_eq!((given(2048), given(100), given(20_000)), (2048, 96, 8192));
    }

    #[test]
    fn given_sizes_pad_to_the_next_and_end_the_graphs_at_the_largest() {
        let g = CudaGraphSizes::resolve(Some(&[16, 1, 2, 4, 5, 8, 10, 10]), None, 1024, 8192, 512, 1).unwrap();
        assert_eq!(g, CudaGraphSizes::Given { sizes: vec![1, 2, 4, 5, 8, 10, 16] });
        let rows: Vec<Option<u64>> = [0, 3, 5, 6, 9, 10, 11, 16, 17].map(|t| g.rows(t)).into();
        assert_eq!(rows, [Some(0), Some(4), Some(5), Some(8), Some(10), Some(10), Some(16), Some(16), None]);
        assert_eq!(g.given_text().as_deref(), Some("1,2,4,5,8,10,16"));
        // Sizes beyond a largest size or the token budget are dropped; none left is an error.
        let cut = CudaGraphSizes::resolve(Some(&[8, 64, 4096]), Some(64), 1024, 8192, 512, 1).unwrap();
        assert_eq!(cut.largest(), 64);
        let err = CudaGraphSizes::resolve(Some(&[4096]), None, 1024, 2048, 512, 1).unwrap_err();
        assert!(err.contains("4096") && err.contains("2048"), "{err}");
    }

    #[test]
    fn drafts_capture_multiples_of_the_decode_query_up_to_twice_the_sequences_decode() {
        // Four sequences with two drafts each run 12 tokens a decode: vLLM captures up to
        // 4 x 3 x 2 = 24 tokens (its list 1, 2, 4, 8, 16, 24), each rounded up to a multiple of
        // 3: 3, 6, 9, 18, 24.
        let g = CudaGraphSizes::resolve(None, None, 4, 8192, 512, 3).unwrap();
        assert_eq!(g, CudaGraphSizes::Drafts { sizes: vec![3, 6, 9, 18, 24] });
        assert_eq!((g.largest(), g.rows(12), g.rows(5), g.rows(25)), (24, Some(18), Some(6), None));
        assert_eq!(g.given_text(), None, "vLLM's own list");
        // Without drafts, the same four sequences capture up to 8: a verifying decode of 12
        // tokens would run without graphs.
        assert_eq!(CudaGraphSizes::resolve(None, None, 4, 8192, 512, 1).unwrap().largest(), 8);
        // The cap of 512 and the token budget still bound it; sizes given are rounded too, and
        // those rounded past the largest dropped.
        assert_eq!(CudaGraphSizes::resolve(None, None, 1024, 8192, 512, 2).unwrap().largest(), 512);
        let given = CudaGraphSizes::resolve(Some(&[1, 2, 4, 8, 10]), None, 1024, 8192, 512, 4).unwrap();
        assert_eq!(given, CudaGraphSizes::Given { sizes: vec![4, 8] });
        assert_eq!(given.given_text().as_deref(), Some("4,8"));
    }

    #[test]
    fn sizes_parse_in_vllm_s_spellings_and_nothing_else() {
        for text in ["1,2,4,8", "[1, 2, 4, 8]", " 1 2 4 8 ", "[1,2,4,8]"] {
            assert_eq!(parse_sizes(text), Some(vec![1, 2, 4, 8]), "{text}");
        }
        for text in ["", "[]", "1,x", "0,8", "-1", "1.5"] {
            assert_eq!(parse_sizes(text), None, "{text}");
        }
    }

    proptest! {
        #[test]
        fn default_rows_cover_the_tokens_and_a_captured_size_is_its_own(tokens in 0u64..100_000) {
            let rows = default_rows(tokens);
            prop_assert!(rows >= tokens && rows < tokens + 16);
            prop_assert_eq!(default_rows(rows), rows);
            prop_assert!(default_rows(tokens + 1) >= rows);
        }

        #[test]
        fn a_step_runs_on_a_captured_size_at_least_its_tokens(
            sizes in proptest::collection::vec(1u32..4096, 1..40),
            largest in proptest::option::of(1u32..5000),
            seqs in 1u32..2048,
            tokens in 0u64..6000,
            query_len in 1u32..6,
        ) {
            for given in [None, Some(sizes.as_slice())] {
                let Ok(g) = CudaGraphSizes::resolve(given, largest, seqs, 8192, 512, query_len) else { continue };
                if let CudaGraphSizes::Drafts { sizes } | CudaGraphSizes::Given { sizes } = &g {
                    prop_assert!(sizes.iter().all(|s| s % query_len == 0), "{:?}", sizes);
                }
                match g.rows(tokens) {
                    Some(rows) => {
                        prop_assert!(tokens <= g.largest() && rows >= tokens && rows <= g.largest());
                        // A captured size runs as itself.
                        prop_assert_eq!(g.rows(rows), Some(rows));
                    }
                    None => prop_assert!(tokens > g.largest()),
                }
            }
        }
    }
}
