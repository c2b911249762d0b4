//! Number formats: how weights and the KV cache are stored, and which tensor-core format the
//! arithmetic runs in.
//!
//! A weight format decides bytes per parameter (what decode reads every step); the compute format
//! decides which peak of the hardware table applies (what prefill is bound by). Weight-only
//! formats (AWQ int4, or FP8/FP4 on a device without those units) compute in BF16.

use serde::{Deserialize, Serialize};

/// How model weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// bfloat16, 2 bytes.
    Bf16,
    /// float16, 2 bytes (costed like BF16).
    Fp16,
    /// FP8 (e4m3) with per-channel or block scales, about 1 byte.
    Fp8,
    /// NVFP4: 4-bit values with one FP8 scale per 16, 0.5625 bytes.
    Nvfp4,
    /// MXFP4: 4-bit values with one E8M0 scale per 32, 0.53125 bytes.
    Mxfp4,
    /// AWQ/GPTQ 4-bit integers, group size 128 with scales and zeros, about 0.53 bytes.
    #[serde(rename = "awq-int4")]
    AwqInt4,
}

/// Every spelling of a weight format: its name, and whether model names use it as a tag
/// (`-FP8`, `-AWQ`, `-NVFP4`). The others are option values only: a name part `auto` or `half`
/// says nothing of a checkpoint's format.
const SPELLINGS: [(&str, Precision, bool); 20] = [
    ("bf16", Precision::Bf16, true),
    ("bfloat16", Precision::Bf16, false),
    ("auto", Precision::Bf16, false),
    ("fp16", Precision::Fp16, true),
    ("float16", Precision::Fp16, false),
    ("half", Precision::Fp16, false),
    ("fp8", Precision::Fp8, true),
    ("fp8-e4m3", Precision::Fp8, false),
    ("float8", Precision::Fp8, false),
    ("nvfp4", Precision::Nvfp4, true),
    ("fp4", Precision::Nvfp4, true),
    ("modelopt-fp4", Precision::Nvfp4, false),
    ("mxfp4", Precision::Mxfp4, true),
    ("awq-int4", Precision::AwqInt4, false),
    ("awq", Precision::AwqInt4, true),
    ("gptq", Precision::AwqInt4, true),
    ("int4", Precision::AwqInt4, true),
    ("w4a16", Precision::AwqInt4, true),
    ("awq-marlin", Precision::AwqInt4, false),
    ("gptq-marlin", Precision::AwqInt4, false),
];

impl Precision {
    /// Every format with its canonical spelling.
    pub const ALL: [(Precision, &'static str); 6] = [
        (Precision::Bf16, "bf16"),
        (Precision::Fp16, "fp16"),
        (Precision::Fp8, "fp8"),
        (Precision::Nvfp4, "nvfp4"),
        (Precision::Mxfp4, "mxfp4"),
        (Precision::AwqInt4, "awq-int4"),
    ];

    /// Bytes per parameter, scales included.
    pub fn bytes_per_param(self) -> f64 {
        match self {
            Precision::Bf16 | Precision::Fp16 => 2.0,
            Precision::Fp8 => 1.0,
            Precision::Nvfp4 => 0.5625,
            Precision::Mxfp4 => 0.53125,
            Precision::AwqInt4 => 0.53,
        }
    }

    /// Whether a model stored in this format, with routed experts or not, runs them as MXFP4
    /// weights dequantized to BF16 on a device of these peaks: the experts
    /// [`Mxfp4Backend`] chooses the kernels of.
    pub fn dequantizes_mxfp4_experts(self, experts: bool, peaks: &crate::hardware::PeakTflops) -> bool {
        experts && self == Precision::Mxfp4 && self.compute_on(peaks) == ComputePrecision::WeightOnly
    }

    /// Whether a model stored in this format keeps its routed experts' weights in BF16 or FP8 and
    /// computes them so on a device of these peaks: the experts vLLM runs through its Triton
    /// fused-MoE kernels (not dequantized, not quantized to FP4).
    pub fn keeps_experts_native(self, peaks: &crate::hardware::PeakTflops) -> bool {
        matches!(self, Precision::Bf16 | Precision::Fp16 | Precision::Fp8)
            && matches!(self.compute_on(peaks), ComputePrecision::Bf16 | ComputePrecision::Fp8)
    }

    /// Whether a model stored in this format runs its routed experts through the FP4
    /// block-scaled kernels of a device of these peaks: NVFP4 or MXFP4 weights on parts with FP4
    /// units (W4A4 or W4A8), not dequantized to BF16.
    pub fn runs_fp4_block_experts(self, peaks: &crate::hardware::PeakTflops) -> bool {
        matches!(self, Precision::Nvfp4 | Precision::Mxfp4)
            && matches!(self.compute_on(peaks), ComputePrecision::Fp4 | ComputePrecision::Fp8)
    }

    /// The canonical spelling.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(p, _)| *p == self).map_or("bf16", |(_, n)| n)
    }

    /// Parses a spelling, including the names vLLM and Hugging Face use
    /// (`bfloat16`, `float16`, `awq`, `gptq`, `int4`, `modelopt_fp4`).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        SPELLINGS.iter().find(|(name, _, _)| *name == s).map(|(_, p, _)| *p)
    }

    /// The format a `-`-separated part of a model's name says its weights are in (`fp8`,
    /// `nvfp4`, `awq`, ...; lowercase), where it is one of the spellings names use.
    pub fn from_name_tag(part: &str) -> Option<Self> {
        SPELLINGS.iter().find(|(name, _, in_names)| *in_names && *name == part).map(|(_, p, _)| *p)
    }

    /// The tensor-core format the matrix products run in on a device with the given peaks.
    pub fn compute_on(self, peaks: &crate::hardware::PeakTflops) -> ComputePrecision {
        use crate::hardware::Mxfp4Activations;
        match self {
            Precision::Bf16 | Precision::Fp16 => ComputePrecision::Bf16,
            Precision::Fp8 if peaks.fp8.is_some() => ComputePrecision::Fp8,
            Precision::Nvfp4 if peaks.fp4.is_some() => ComputePrecision::Fp4,
            // MXFP4 checkpoints (gpt-oss) keep activations at 8 bits where FP4 units exist: vLLM's
            // MXFP4 expert kernels on those parts take MXFP8 activations (W4A8), at the FP8 rate,
            // unless the device's stack runs them as W4A16. NVFP4 checkpoints quantize
            // activations to FP4 as well (W4A4).
            Precision::Mxfp4 if peaks.mxfp4_activations == Some(Mxfp4Activations::Bf16) => ComputePrecision::WeightOnly,
            Precision::Mxfp4 if peaks.fp4.is_some() && peaks.fp8.is_some() => ComputePrecision::Fp8,
            Precision::Mxfp4 if peaks.fp4.is_some() => ComputePrecision::Fp4,
            // Weight-only kernels (Marlin, AWQ) dequantize to BF16 on devices without these units.
            Precision::AwqInt4 | Precision::Fp8 | Precision::Nvfp4 | Precision::Mxfp4 => ComputePrecision::WeightOnly,
        }
    }
}

/// The kernels vLLM runs an MXFP4 checkpoint's experts with where they dequantize to BF16
/// (W4A16: Hopper and every part without FP4 units): `VLLM_MXFP4_USE_MARLIN=1` picks Marlin,
/// otherwise vLLM takes OpenAI's Triton kernels on Hopper when its `triton_kernels` package is
/// installed (its container images) and Marlin when it is not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mxfp4Backend {
    /// Marlin's dequantizing kernels: the path the NVIDIA stack constants were calibrated on.
    #[default]
    Marlin,
    /// triton_kernels' grouped product, priced by its measured constants
    /// ([`crate::profile::TritonMoeKernel`]).
    Triton,
}

impl Mxfp4Backend {
    /// How many times the checkpoint's bytes of one GPU's share of the routed experts these
    /// kernels hold in memory, for experts `hidden` wide with `shard` columns of their FFN on
    /// each GPU (vLLM 0.10 to 0.13, `quantization/mxfp4.py`). Marlin pads each product to its
    /// tile: the hidden width to a multiple of 256 and the shard to one of 128 (gpt-oss-120b on
    /// one GPU: 2,880 x 2,880 becomes 3,072 x 2,944, 9 % more; vLLM logs 65.97 GiB loaded
    /// against the checkpoint's 60.7). Triton's path swizzles the scales into a second tensor
    /// and keeps the loaded ones: one more byte per 32 weights, 4.5 bits a weight instead of
    /// 4.25 (6 %; 64.38 GiB logged with Triton's kernels).
    pub fn expert_memory_factor(self, hidden: u32, shard: u32) -> f64 {
        match self {
            Self::Marlin => {
                let pad = |x: u32, to: u32| f64::from(x.div_ceil(to) * to) / f64::from(x.max(1));
                pad(hidden, 256) * pad(shard, 128)
            }
            Self::Triton => (Precision::Mxfp4.bytes_per_param() + 1.0 / 32.0) / Precision::Mxfp4.bytes_per_param(),
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "marlin" => Some(Self::Marlin),
            "triton" => Some(Self::Triton),
            _ => None,
        }
    }

    /// Why this choice cannot apply to `model` (stored as `precision`, with routed experts or
    /// not) on `hw`: Triton prices only MXFP4 experts that run W4A16.
    pub fn refusal(
        self,
        model: &str,
        precision: Precision,
        experts: bool,
        hw: &crate::hardware::HardwareSpec,
    ) -> Option<String> {
        if self == Self::Marlin || precision.dequantizes_mxfp4_experts(experts, &hw.peak_tflops) {
            return None;
        }
        if !experts || precision != Precision::Mxfp4 {
            let shape = if experts { "with experts" } else { "and dense" };
            return Some(format!(
                "mxfp4-backend=triton prices the experts of an MXFP4 mixture-of-experts model; {model} is {} {shape}; \
                 drop mxfp4-backend",
                precision.name()
            ));
        }
        Some(format!(
            "on {} vLLM runs MXFP4 experts with 8-bit activations (W4A8), not through the W4A16 kernels \
             mxfp4-backend chooses between; drop mxfp4-backend",
            hw.name
        ))
    }
}

/// The format the arithmetic runs in; selects a hardware peak and an efficiency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComputePrecision {
    Bf16,
    Fp8,
    Fp4,
    /// Quantized weights dequantized to BF16 inside the kernel (W4A16, W8A16): the BF16 peak,
    /// with the dequantizing kernels' own efficiency.
    WeightOnly,
}

impl ComputePrecision {
    pub const ALL: [ComputePrecision; 4] =
        [ComputePrecision::Bf16, ComputePrecision::Fp8, ComputePrecision::Fp4, ComputePrecision::WeightOnly];

    /// The key of this format in a profile's per-format tables.
    pub fn name(self) -> &'static str {
        match self {
            ComputePrecision::Bf16 => "bf16",
            ComputePrecision::Fp8 => "fp8",
            ComputePrecision::Fp4 => "fp4",
            ComputePrecision::WeightOnly => "weight_only",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().replace('-', "_");
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(&s))
    }
}

/// How the KV cache is stored (`kv-cache-dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvDtype {
    /// The model's activation type: 2 bytes.
    Auto,
    /// FP8: 1 byte.
    Fp8,
}

impl KvDtype {
    pub fn bytes(self) -> f64 {
        match self {
            KvDtype::Auto => 2.0,
            KvDtype::Fp8 => 1.0,
        }
    }

    /// Parses vLLM's `--kv-cache-dtype` values.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "bfloat16" | "bf16" | "float16" | "fp16" => Some(KvDtype::Auto),
            "fp8" | "fp8_e4m3" | "fp8_e5m2" | "fp8-e4m3" | "fp8-e5m2" => Some(KvDtype::Fp8),
            _ => None,
        }
    }
}

/// One number per compute format (an efficiency).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrecisionTable {
    pub bf16: f64,
    pub fp8: f64,
    pub fp4: f64,
    pub weight_only: f64,
}

impl PrecisionTable {
    pub fn get(&self, p: ComputePrecision) -> f64 {
        match p {
            ComputePrecision::Bf16 => self.bf16,
            ComputePrecision::Fp8 => self.fp8,
            ComputePrecision::Fp4 => self.fp4,
            ComputePrecision::WeightOnly => self.weight_only,
        }
    }

    pub fn get_mut(&mut self, p: ComputePrecision) -> &mut f64 {
        match p {
            ComputePrecision::Bf16 => &mut self.bf16,
            ComputePrecision::Fp8 => &mut self.fp8,
            ComputePrecision::Fp4 => &mut self.fp4,
            ComputePrecision::WeightOnly => &mut self.weight_only,
        }
    }

    pub fn splat(v: f64) -> Self {
        Self { bf16: v, fp8: v, fp4: v, weight_only: v }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::PeakTflops;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for (p, n) in Precision::ALL {
            assert_eq!(Precision::parse(n), Some(p));
            assert_eq!(p.name(), n);
        }
        assert_eq!(Precision::parse("BFloat16"), Some(Precision::Bf16));
        assert_eq!(Precision::parse("awq"), Some(Precision::AwqInt4));
        assert_eq!(Precision::parse("int3"), None);
        assert_eq!(KvDtype::parse("fp8_e5m2"), Some(KvDtype::Fp8));
        assert_eq!(KvDtype::parse("int8"), None);
        // A model name's tags are spellings of the same formats; option-only words are not tags.
        for (tag, p) in [("fp8", Precision::Fp8), ("fp4", Precision::Nvfp4), ("gptq", Precision::AwqInt4)] {
            assert_eq!((Precision::from_name_tag(tag), Precision::parse(tag)), (Some(p), Some(p)));
        }
        for word in ["auto", "half", "bfloat16", "awq-int4"] {
            assert!(Precision::parse(word).is_some() && Precision::from_name_tag(word).is_none(), "{word}");
        }
    }

    #[test]
    fn quantized_formats_fall_back_to_bf16_compute_without_units() {
        let ampere = PeakTflops {
            bf16: 312.0,
            fp8: None,
            fp4: None,
            int4: Some(1248.0),
            int32: None,
            exp2: None,
            mxfp4_activations: None,
        };
        let blackwell = PeakTflops {
            bf16: 2250.0,
            fp8: Some(4500.0),
            fp4: Some(9000.0),
            int4: None,
            int32: None,
            exp2: None,
            mxfp4_activations: None,
        };
        let w4a16 = PeakTflops { mxfp4_activations: Some(crate::hardware::Mxfp4Activations::Bf16), ..blackwell };
        assert_eq!(Precision::Mxfp4.compute_on(&w4a16), ComputePrecision::WeightOnly);
        assert_eq!(Precision::Nvfp4.compute_on(&w4a16), ComputePrecision::Fp4);
        assert_eq!(Precision::Fp8.compute_on(&ampere), ComputePrecision::WeightOnly);
        assert_eq!(Precision::Nvfp4.compute_on(&ampere), ComputePrecision::WeightOnly);
        assert_eq!(Precision::Fp8.compute_on(&blackwell), ComputePrecision::Fp8);
        assert_eq!(Precision::Mxfp4.compute_on(&blackwell), ComputePrecision::Fp8);
        assert_eq!(Precision::Nvfp4.compute_on(&blackwell), ComputePrecision::Fp4);
        assert_eq!(Precision::AwqInt4.compute_on(&blackwell), ComputePrecision::WeightOnly);
        assert_eq!(ComputePrecision::parse("weight-only"), Some(ComputePrecision::WeightOnly));
        assert!(Precision::Nvfp4.bytes_per_param() < Precision::Fp8.bytes_per_param());
    }

    #[test]
    fn mxfp4_kernels_hold_more_than_the_checkpoint_as_vllm_logs() {
        // gpt-oss-120b on one GPU: 56.7 GiB of experts in the checkpoint, 60.7 GiB in all.
        let (experts, rest) = (56.74, 60.70 - 56.74);
        let loaded = |b: Mxfp4Backend| rest + experts * b.expert_memory_factor(2880, 2880);
        // vLLM's logs: 65.97 GiB with Marlin (vLLM 0.10), 64.38 GiB with Triton's kernels (0.14).
        assert!((loaded(Mxfp4Backend::Marlin) - 65.97).abs() < 0.3, "{}", loaded(Mxfp4Backend::Marlin));
        assert!((loaded(Mxfp4Backend::Triton) - 64.38).abs() < 0.5, "{}", loaded(Mxfp4Backend::Triton));
        // Widths already on Marlin's tiles cost nothing more; a TP8 shard of 360 pads to 384.
        assert_eq!(Mxfp4Backend::Marlin.expert_memory_factor(4096, 1536), 1.0);
        assert!((Mxfp4Backend::Marlin.expert_memory_factor(2880, 360) - 3072.0 / 2880.0 * 384.0 / 360.0).abs() < 1e-12);
        assert_eq!(Mxfp4Backend::Triton.expert_memory_factor(1, 1), 0.5625 / 0.53125);
    }

    proptest::proptest! {
        #[test]
        fn padding_never_shrinks_and_stays_under_a_tile(hidden in 1u32..20_000, shard in 1u32..20_000) {
            let f = Mxfp4Backend::Marlin.expert_memory_factor(hidden, shard);
            let most = (1.0 + 255.0 / f64::from(hidden)) * (1.0 + 127.0 / f64::from(shard));
            proptest::prop_assert!(f >= 1.0 && f <= most + 1e-12, "{f} {most}");
        }
    }
}
