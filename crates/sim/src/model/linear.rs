//! Linear-attention and state-space layers (Gated DeltaNet in Qwen3-Next and Qwen3.5, Mamba-2 in
//! Nemotron-H and Nemotron 3): the projections they hold, the fixed-size recurrent state each
//! sequence keeps in place of a KV cache, and the work of the chunked prefill and recurrent
//! decode kernels vLLM runs them with.
//!
//! A layer keeps, per sequence and value head, a `key_head_dim x value_head_dim` matrix that
//! every token decays and writes with its key and value and reads with its query, plus the last
//! `conv_kernel - 1` inputs of a short causal convolution over queries, keys and values. The two
//! kinds share that shape (Mamba-2's `B` and `C` are the keys and queries of `n_groups` heads,
//! its `x` the values of `mamba_num_heads` heads, its state width the key width); Gated DeltaNet
//! also corrects the state by what it already holds for the key (the delta rule), which its
//! chunked form pays for with a triangular solve. Nothing grows with the context: a decode reads
//! and writes the state, a prefill runs the chunked form of the same recurrence.

use serde::{Deserialize, Serialize};

/// Tokens one chunk of the chunked gated-delta-rule prefill works on at once (the chunk size of
/// the flash-linear-attention kernels vLLM runs).
pub const CHUNK: f64 = 64.0;

/// Which recurrence the layers run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearKind {
    /// Gated DeltaNet (Qwen3-Next, Qwen3.5): per value head a decay and a write-strength gate,
    /// the delta rule's correction, chunks of 64 tokens (`CHUNK`).
    #[default]
    GatedDeltaNet,
    /// Mamba-2's state-space duality (Nemotron-H, Nemotron 3): per head one decay (`dt`), no
    /// correction, chunks of the config's `chunk_size`.
    Mamba2,
}

/// The linear-attention layers of a hybrid model; its other layers attend over a KV cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearAttention {
    /// The recurrence (Gated DeltaNet unless said).
    #[serde(default, skip_serializing_if = "is_default_kind")]
    pub kind: LinearKind,
    /// Tokens a chunk of the chunked prefill (Mamba-2's `chunk_size`; Gated DeltaNet's kernels
    /// use 64, `CHUNK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u32>,
    /// Layers of linear attention (`layer_types` entries `linear_attention`, Mamba layers).
    pub layers: u32,
    /// Query and key heads (`linear_num_key_heads`), shared by groups of value heads.
    pub key_heads: u32,
    /// Value heads (`linear_num_value_heads`): one state matrix each.
    pub value_heads: u32,
    pub key_head_dim: u32,
    pub value_head_dim: u32,
    /// Width of the causal convolution over queries, keys and values (`linear_conv_kernel_dim`).
    pub conv_kernel: u32,
    /// The recurrent state is kept in FP32 (`mamba_ssm_dtype: float32`, as Qwen3.5 asks), not in
    /// the model's 16-bit format.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub state_fp32: bool,
}

fn is_default_kind(kind: &LinearKind) -> bool {
    *kind == LinearKind::default()
}

impl LinearAttention {
    /// Tokens a chunk of the chunked prefill.
    pub fn chunk_tokens(&self) -> f64 {
        match (self.kind, self.chunk) {
            (_, Some(c)) if c > 0 => f64::from(c),
            (LinearKind::GatedDeltaNet, _) => CHUNK,
            // Mamba-2's default `chunk_size`.
            (LinearKind::Mamba2, _) => 256.0,
        }
    }

    fn key_width(&self) -> f64 {
        f64::from(self.key_heads) * f64::from(self.key_head_dim)
    }

    fn value_width(&self) -> f64 {
        f64::from(self.value_heads) * f64::from(self.value_head_dim)
    }

    /// One value head's state matrix, values.
    fn state_values(&self) -> f64 {
        f64::from(self.key_head_dim) * f64::from(self.value_head_dim)
    }

    /// Channels of the causal convolution: queries, keys and values.
    pub fn conv_channels(&self) -> f64 {
        2.0 * self.key_width() + self.value_width()
    }

    /// Parameters of one layer: the input projection to queries, keys, values and the output
    /// gate (`in_proj_qkvz`; Mamba-2's `in_proj` to `z`, `x`, `B` and `C`), the per-head gates
    /// (Gated DeltaNet's decay and write strength, `in_proj_ba`; Mamba-2's one `dt`), the
    /// depthwise convolution and the output projection (the norms and per-head scalars left
    /// out).
    pub fn params(&self, hidden: u32) -> f64 {
        let h = f64::from(hidden);
        let qkvz = h * (2.0 * self.key_width() + 2.0 * self.value_width());
        let gates = match self.kind {
            LinearKind::GatedDeltaNet => 2.0,
            LinearKind::Mamba2 => 1.0,
        };
        let ba = h * gates * f64::from(self.value_heads);
        let conv = self.conv_channels() * f64::from(self.conv_kernel);
        qkvz + ba + conv + self.value_width() * h
    }

    /// Bytes of one sequence's state in one layer on one of `tp` ranks (heads and channels are
    /// split over the ranks): the value heads' state matrices, and the convolution's last
    /// `conv_kernel - 1` inputs in 16 bits.
    pub fn state_bytes(&self, tp: u32) -> f64 {
        let tp = f64::from(tp.max(1));
        let state = if self.state_fp32 { 4.0 } else { 2.0 };
        let conv = self.conv_channels() * f64::from(self.conv_kernel.saturating_sub(1)) * 2.0;
        (f64::from(self.value_heads) * self.state_values() * state + conv) / tp
    }

    /// FLOPs of one prefill token in one layer, all heads (before the tensor-parallel split),
    /// under the chunked algorithm of chunks of C tokens.
    ///
    /// Gated DeltaNet, per value head and chunk: the keys' Gram matrix and the queries' scores
    /// (2·C²·dk each), the triangular solve (about 2·C³/3), the corrected keys and values
    /// (2·C²·dk and 2·C²·dv), the scores applied to the new values (2·C²·dv), and three products
    /// of C rows with the dk x dv state (the correction, the update and the queries' read,
    /// 2·C·dk·dv each); per token, C·(6·dk + 4·dv) + 2·C²/3 + 6·dk·dv.
    ///
    /// Mamba-2: per key head (group) and chunk the scores of `C` against `B` (2·C²·dk), shared
    /// by its value heads; per value head the masked scores applied to `x` (2·C²·dv), the
    /// chunk's state (2·C·dk·dv) and the read of the state carried in (2·C·dk·dv); per token,
    /// key heads x 2·C·dk + value heads x (2·C·dv + 4·dk·dv).
    pub fn prefill_flops_per_token(&self) -> f64 {
        let (dk, dv) = (f64::from(self.key_head_dim), f64::from(self.value_head_dim));
        let c = self.chunk_tokens();
        match self.kind {
            LinearKind::GatedDeltaNet => {
                let per_head = c * (6.0 * dk + 4.0 * dv) + 2.0 * c * c / 3.0 + 6.0 * dk * dv;
                f64::from(self.value_heads) * per_head
            }
            LinearKind::Mamba2 => {
                f64::from(self.key_heads) * 2.0 * c * dk + f64::from(self.value_heads) * (2.0 * c * dv + 4.0 * dk * dv)
            }
        }
    }

    /// Bytes one prefill token moves in one layer on one of `tp` ranks: the state after each
    /// chunk, which the kernels write once and read back (one dk x dv matrix per value head and
    /// chunk: 16-bit in Gated DeltaNet's kernels, FP32 in Mamba-2's). A prefilling sequence also
    /// reads and writes its state once a step ([`LinearAttention::state_bytes`]).
    pub fn prefill_bytes_per_token(&self, tp: u32) -> f64 {
        let value = match self.kind {
            LinearKind::GatedDeltaNet => 2.0,
            LinearKind::Mamba2 => 4.0,
        };
        2.0 * f64::from(self.value_heads) * self.state_values() * value / self.chunk_tokens() / f64::from(tp.max(1))
    }

    /// FLOPs of one decode token in one layer, all heads: per value head the state's decay, its
    /// rank-one update and its product with the query, and for Gated DeltaNet its product with
    /// the key first (about 7·dk·dv; Mamba-2's, without the correction, 5·dk·dv).
    pub fn decode_flops_per_token(&self) -> f64 {
        let per_value = match self.kind {
            LinearKind::GatedDeltaNet => 7.0,
            LinearKind::Mamba2 => 5.0,
        };
        per_value * f64::from(self.value_heads) * self.state_values()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Qwen3-Next-80B-A3B's linear-attention layers (its config.json).
    fn qwen3_next() -> LinearAttention {
        LinearAttention {
            kind: LinearKind::GatedDeltaNet,
            chunk: None,
            layers: 36,
            key_heads: 16,
            value_heads: 32,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
            state_fp32: false,
        }
    }

    #[test]
    fn one_layer_s_parameters_and_state_by_hand() {
        let l = qwen3_next();
        // in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096), in_proj_ba 2048 x 64, conv 8192 x 4, out_proj
        // 4096 x 2048.
        assert_eq!(l.params(2048), 2048.0 * 12_288.0 + 2048.0 * 64.0 + 8192.0 * 4.0 + 4096.0 * 2048.0);
        // 32 heads of 128 x 128 in BF16, and 3 x 8192 convolution inputs: 1 MiB + 48 KiB.
        assert_eq!(l.state_bytes(1), 1_048_576.0 + 49_152.0);
        assert_eq!(l.state_bytes(4), (1_048_576.0 + 49_152.0) / 4.0);
        // Qwen3.5 keeps the state in FP32: vLLM's hybrid page for Qwen3.5-4B (4 KV heads of 256)
        // is the state over 4 KiB a token, 524 tokens, which vLLM rounds to a 528-token block.
        let fp32 = LinearAttention { state_fp32: true, ..qwen3_next() };
        assert_eq!(fp32.state_bytes(1), 2_097_152.0 + 49_152.0);
        assert_eq!(fp32.state_bytes(1) / 4096.0, 524.0);
    }

    #[test]
    fn chunked_prefill_work_by_hand() {
        let l = qwen3_next();
        // Per head: 64 x (6 x 128 + 4 x 128) + 2 x 64² / 3 + 6 x 128²; 32 heads.
        let per_head = 64.0 * 1280.0 + 2.0 * 4096.0 / 3.0 + 6.0 * 16_384.0;
        assert!((l.prefill_flops_per_token() - 32.0 * per_head).abs() < 1e-6);
        // One BF16 state a head a chunk, written and read: 2 x 32 x 32 KiB / 64 = 32 KiB a token.
        assert_eq!(l.prefill_bytes_per_token(1), 32_768.0);
        assert_eq!(l.prefill_bytes_per_token(2), 16_384.0);
        assert_eq!(l.decode_flops_per_token(), 7.0 * 32.0 * 16_384.0);
    }

    /// Nemotron 3 Nano's Mamba-2 layers (its config.json: 64 heads of 64, 8 groups of state 128,
    /// chunks of 128, the SSM cache in FP32).
    fn nemotron3_nano() -> LinearAttention {
        LinearAttention {
            kind: LinearKind::Mamba2,
            chunk: Some(128),
            layers: 23,
            key_heads: 8,
            value_heads: 64,
            key_head_dim: 128,
            value_head_dim: 64,
            conv_kernel: 4,
            state_fp32: true,
        }
    }

    #[test]
    fn a_mamba_2_layer_by_hand() {
        let l = nemotron3_nano();
        // in_proj 2688 x (z and x: 2 x 4096, B and C: 2 x 1024, dt: 64), conv (4096 + 2048) x 4,
        // out_proj 4096 x 2688.
        let params = 2688.0 * (8192.0 + 2048.0 + 64.0) + 6144.0 * 4.0 + 4096.0 * 2688.0;
        assert_eq!(l.params(2688), params);
        // 64 heads of 64 x 128 in FP32 (2 MiB), and 3 x 6144 BF16 convolution inputs.
        assert_eq!(l.state_bytes(1), 2_097_152.0 + 36_864.0);
        // Per group 2 x 128 x 128; per head 2 x 128 x 64 + 4 x 128 x 64.
        assert_eq!(l.prefill_flops_per_token(), 8.0 * 32_768.0 + 64.0 * (16_384.0 + 32_768.0));
        // One FP32 state a head a chunk of 128, written and read: 2 x 64 x 32 KiB / 128.
        assert_eq!(l.prefill_bytes_per_token(1), 32_768.0);
        assert_eq!(l.decode_flops_per_token(), 5.0 * 64.0 * 8192.0);
        // Without the config's chunk, Mamba-2's default of 256.
        assert_eq!(LinearAttention { chunk: None, ..l }.chunk_tokens(), 256.0);
    }

    proptest! {
        #[test]
        fn work_and_state_split_evenly_over_the_ranks_and_grow_with_every_width(
            kh in 1u32..64, vh in 1u32..128, dk in 16u32..256, dv in 16u32..256, conv in 2u32..8,
            tp in prop::sample::select(vec![1u32, 2, 4, 8]), fp32 in any::<bool>(), mamba in any::<bool>(),
        ) {
            let l = LinearAttention {
                kind: if mamba { LinearKind::Mamba2 } else { LinearKind::GatedDeltaNet }, chunk: None, layers: 1, key_heads: kh, value_heads: vh, key_head_dim: dk, value_head_dim: dv,
                conv_kernel: conv, state_fp32: fp32,
            };
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            prop_assert!(close(l.state_bytes(tp) * f64::from(tp), l.state_bytes(1)));
            prop_assert!(close(l.prefill_bytes_per_token(tp) * f64::from(tp), l.prefill_bytes_per_token(1)));
            // The state is at least its matrices in 16 bits, twice that in FP32.
            let matrices = f64::from(vh) * f64::from(dk) * f64::from(dv);
            let bytes = if fp32 { 4.0 } else { 2.0 };
            prop_assert!(l.state_bytes(1) >= matrices * bytes);
            let wider = LinearAttention { value_heads: vh + 1, key_head_dim: dk + 1, ..l.clone() };
            prop_assert!(wider.state_bytes(1) > l.state_bytes(1));
            prop_assert!(wider.prefill_flops_per_token() > l.prefill_flops_per_token());
            prop_assert!(wider.decode_flops_per_token() > l.decode_flops_per_token());
            prop_assert!(wider.params(1024) > l.params(1024));
        }
    }
}
