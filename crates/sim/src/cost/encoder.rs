//! The vision tower's part of a step: vLLM runs the encoder on the images whose tokens a
//! prefill chunk reaches, in the same step and before the language model, without CUDA graphs.
//! Its products are BF16 GEMMs over the patches (each tower weight read once a step, split over
//! the tensor-parallel GPUs as vLLM shards the tower), its attention is non-causal within each
//! image (or within windows), each layer ends in two all-reduces of the patches' activations,
//! and each layer's small kernels pass over the activations or wait on their launches from the
//! host, whichever is longer.

use super::terms::{GemmDevice, GemmShape, gemm_seconds};
use super::tp_allreduce::TpAllReduce;
use super::{BatchStats, ELEMENTWISE_PASSES};
use crate::model::Vision;

/// The tower's cost on one GPU, precomputed.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderCost {
    /// Every layer's products and the merger, per patch, on this GPU's shard.
    pub products: GemmShape,
    pub device: GemmDevice,
    /// Attention FLOPs of one query-key pair in one layer, on this GPU (QK and PV: 4 x width).
    pub flops_per_pair: f64,
    /// The attention kernels' rate, FLOP/s.
    pub attn_rate: f64,
    pub layers: f64,
    /// Bytes of one patch's activations (BF16).
    pub patch_bytes: f64,
    /// Host time to launch one layer's kernels without graphs.
    pub launch_layer_s: f64,
}

impl EncoderCost {
    /// The tower of `vision` before a language model `lm_hidden` wide, split over `tp` GPUs.
    pub fn new(
        vision: &Vision,
        lm_hidden: u32,
        tp: f64,
        device: GemmDevice,
        attn_rate: f64,
        launch_layer_s: f64,
    ) -> Self {
        let per_patch = vision.params_per_patch(lm_hidden) / tp;
        EncoderCost {
            products: GemmShape { flops_per_row: 2.0 * per_patch, weight_bytes: vision.params(lm_hidden) / tp * 2.0 },
            device,
            flops_per_pair: 4.0 * f64::from(vision.hidden) / tp,
            attn_rate,
            layers: f64::from(vision.layers),
            patch_bytes: f64::from(vision.hidden) * 2.0,
            launch_layer_s,
        }
    }

    /// Seconds the step spends encoding its images (0 without any).
    pub fn seconds(&self, b: &BatchStats, allreduce: &TpAllReduce) -> f64 {
        if b.encoder_patches == 0 {
            return 0.0;
        }
        let patches = b.encoder_patches as f64;
        let products = gemm_seconds(self.products, patches, self.device);
        let attention = self.flops_per_pair * b.encoder_pairs as f64 / self.attn_rate;
        let reduces =
            if allreduce.gpus > 1 { 2.0 * self.layers * allreduce.seconds(patches * self.patch_bytes) } else { 0.0 };
        // Without graphs each layer's small kernels (norms, activations, residual adds, rotary
        // embedding) each pass over the patches' activations, or wait on their launches.
        let passes = ELEMENTWISE_PASSES * self.layers * patches * self.patch_bytes / self.device.bandwidth;
        products + attention + reduces + passes.max(self.launch_layer_s * self.layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::terms::LinkCost;
    use crate::model::ImageWork;
    use proptest::prelude::*;

    fn tower() -> Vision {
        crate::model::vision::qwen3_vl_tower()
    }

    /// An H100's BF16 products at 0.7 of peak, half efficiency at 128 rows, 3 TB/s.
    fn cost(tp: f64) -> EncoderCost {
        let dev = GemmDevice { peak_flops: 989e12, ceiling: 0.7, m_half: 128.0, bandwidth: 3.0e12 };
        EncoderCost::new(&tower(), 4096, tp, dev, 989e12 * 0.5, 20e-6)
    }

    fn single() -> TpAllReduce {
        TpAllReduce {
            link: LinkCost { fixed_s: 0.0, step_s: 0.0, bandwidth: 1e12 },
            gpus: 1,
            quick: Default::default(),
            fusion: None,
        }
    }

    fn batch(images: &[ImageWork]) -> BatchStats {
        let mut b = BatchStats::default();
        images.iter().for_each(|w| b.add_image(*w));
        b
    }

    #[test]
    fn a_720p_image_takes_milliseconds_on_an_h100_and_none_costs_nothing() {
        let hd = tower().image(720, 1280);
        let s = cost(1.0).seconds(&batch(&[hd]), &single());
        // 3,520 patches through a 0.45 B tower: 3.2 TFLOP of products, 1.3 of attention.
        assert!((0.004..0.015).contains(&s), "{s}");
        assert_eq!(cost(1.0).seconds(&BatchStats::default(), &single()), 0.0);
        let small = cost(1.0).seconds(&batch(&[tower().image(256, 256)]), &single());
        assert!(small < s / 5.0, "{small} vs {s}");
    }

    proptest! {
        #[test]
        fn more_images_never_take_less_time_nor_less_than_the_weights_read(n in 1usize..6, h in 64u32..2000, w in 64u32..2000) {
            let img = tower().image(h, w);
            let c = cost(1.0);
            let one = c.seconds(&batch(&[img]), &single());
            let more = c.seconds(&batch(&vec![img; n + 1]), &single());
            prop_assert!(more >= one);
            prop_assert!(one >= c.products.weight_bytes / c.device.bandwidth);
        }
    }
}
