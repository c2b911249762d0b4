//! The tensor-parallel all-reduce of a layer as the serving stack runs it: over the group's
//! link, through ROCm's QuickReduce where that takes the message, and less what FlashInfer's
//! fusion of the all-reduce with the RMSNorm after it saves where that is on.

use super::quick_reduce::QuickReduce;
use super::terms::LinkCost;
use crate::hardware::NormFusion;

/// One tensor-parallel group's all-reduce: its link, its GPUs and the variants it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TpAllReduce {
    pub link: LinkCost,
    pub gpus: u32,
    pub quick: QuickReduce,
    /// The fused all-reduce and norm, where the deployment runs it.
    pub fusion: Option<NormFusion>,
}

impl TpAllReduce {
    /// Seconds of one all-reduce of `bytes`: the link's time ([`QuickReduce::allreduce_seconds`])
    /// less the fusion's saving ([`NormFusion::saving_seconds`]), never below the bytes' own
    /// time on the link.
    pub fn seconds(&self, bytes: f64) -> f64 {
        let plain = self.quick.allreduce_seconds(self.gpus, bytes, &self.link);
        let Some(fusion) = self.fusion else { return plain };
        // The link's own time for the bytes: the same all-reduce without its latencies.
        let wire = LinkCost { fixed_s: 0.0, step_s: 0.0, ..self.link }.allreduce_seconds(f64::from(self.gpus), bytes);
        (plain - fusion.saving_seconds(self.gpus, bytes)).max(wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NVLINK5: LinkCost = LinkCost { fixed_s: 9e-6, step_s: 0.0, bandwidth: 900e9 };

    fn group(gpus: u32, fusion: Option<NormFusion>) -> TpAllReduce {
        TpAllReduce { link: NVLINK5, gpus, quick: QuickReduce::None, fusion }
    }

    #[test]
    fn the_fused_kernel_saves_a_small_message_s_norm_and_nothing_past_vllm_s_sizes() {
        let fused = group(8, Some(NormFusion::BLACKWELL));
        let plain = group(8, None);
        // gpt-oss's 64 decodes (368,640 bytes) at TP 8: 4.8 µs x (1 - 0.35).
        let decode = 64.0 * 5760.0;
        let saved = plain.seconds(decode) - fused.seconds(decode);
        assert!((saved - 4.8e-6 * (1.0 - decode / 1048576.0)).abs() < 1e-12, "{saved}");
        // A token is all but the whole saving; an 8,192-token prefill (47 MB) is past 1 MiB.
        assert!((plain.seconds(5760.0) - fused.seconds(5760.0) - 4.8e-6).abs() < 0.05e-6);
        assert_eq!(fused.seconds(8192.0 * 5760.0), plain.seconds(8192.0 * 5760.0));
        // Over two GPUs vLLM fuses up to 64 MiB: that prefill still saves a little.
        assert!(
            group(2, Some(NormFusion::BLACKWELL)).seconds(8192.0 * 5760.0) < group(2, None).seconds(8192.0 * 5760.0)
        );
        // Not over 3 or 16 GPUs, and on Hopper nothing is saved.
        assert_eq!(group(16, Some(NormFusion::BLACKWELL)).seconds(decode), group(16, None).seconds(decode));
        assert_eq!(group(8, Some(NormFusion::HOPPER)).seconds(decode), plain.seconds(decode));
    }

    proptest! {
        /// Fused or not, more bytes never take less time, the fused kernel is never slower than
        /// the two kernels apart, and no all-reduce beats its bytes on the link.
        #[test]
        fn fused_all_reduces_are_monotone_and_no_faster_than_their_bytes(
            gpus in prop::sample::select(vec![2u32, 4, 8]),
            a in 0.0f64..1e8,
            b in 0.0f64..1e8,
            saving_us in 0.0f64..20.0,
        ) {
            let fusion = NormFusion { saving_us, ..NormFusion::BLACKWELL };
            let fused = group(gpus, Some(fusion));
            let plain = group(gpus, None);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(fused.seconds(lo) <= fused.seconds(hi) + 1e-15);
            prop_assert!(fused.seconds(hi) <= plain.seconds(hi));
            let ranks = f64::from(gpus);
            prop_assert!(fused.seconds(hi) >= 2.0 * (ranks - 1.0) / ranks * hi / NVLINK5.bandwidth - 1e-15);
        }
    }
}
