//! The measured constants of the expert kernels a preset can name on its own: FlashInfer's FP4
//! block-scaled MoE kernels (`fp4_moe`) and vLLM's Triton backend for MXFP4 experts
//! (`triton_moe`), each a small table a profile file may override.

use serde::{Deserialize, Serialize};

/// The expert products of FlashInfer's FP4 block-scaled MoE kernels (`trtllm_fp4_block_scale_moe`),
/// which vLLM runs for NVFP4 and MXFP4 experts on parts with FP4 units. Fitted on FlashInfer's
/// own timings of DeepSeek-V3's MoE on a B300 at 1 to 512 tokens (`presets/hardware/CALIBRATION.md`,
/// "FP4 experts on Blackwell"): the kernels read the experts' packed weights and their scales
/// slower than a BF16 or FP8 stream, and quantize the activations first.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fp4MoeKernel {
    /// Fraction of the calibrated stream (`eta_bw`) at which they read the experts' weights.
    pub stream: f64,
    /// Fixed cost per MoE layer beyond the two products' floor in `t_layer_us` and the routing
    /// in `t_moe_us`, µs.
    pub fixed_us: f64,
}

impl Default for Fp4MoeKernel {
    fn default() -> Self {
        Self { stream: FP4_MOE_STREAM, fixed_us: FP4_MOE_FIXED_US }
    }
}

/// See [`Fp4MoeKernel::stream`].
pub const FP4_MOE_STREAM: f64 = 0.85;
/// See [`Fp4MoeKernel::fixed_us`].
pub const FP4_MOE_FIXED_US: f64 = 6.0;

/// The expert products of vLLM's Triton backend for MXFP4 checkpoints (triton_kernels' grouped
/// product with BF16 activations, W4A16), each number measured kernel by kernel on an H100 and
/// an H200 (`presets/hardware/CALIBRATION.md`, "Expert kernels measured").
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TritonMoeKernel {
    /// The SMs' integer operations spent per weight dequantized: the kernel streams weights no
    /// faster than `int32 rate / ops_per_weight`, whatever the memory could deliver.
    pub ops_per_weight: f64,
    /// Fixed cost of the two expert products per MoE layer beyond the floor `t_layer_us`
    /// already counts for them, µs.
    pub fixed_us: f64,
    /// Fraction of the BF16 peak its products reach with many rows per expert, on a shard far
    /// wider than a tile (a TP shard reaches `cost::terms::shard_efficiency` of it).
    pub ceiling: f64,
    /// Rows per expert at which it reaches half that ceiling.
    pub m_half: f64,
}

impl Default for TritonMoeKernel {
    /// Measured on an H100 SXM and an H200 (Triton 3.6, CUDA graphs): expert weights stream at
    /// 2.66 and 2.86 TB/s (33.5 TOPS of integer rate over 6.45 operations a weight gives 2.75
    /// on both), after 24 µs a layer for the two products, of which the floor of two kernels
    /// (about 3.5 µs each, the probe's small cuBLAS products) is in `t_layer_us` already.
    fn default() -> Self {
        Self { ops_per_weight: 6.45, fixed_us: 17.0, ceiling: 0.36, m_half: 30.0 }
    }
}
