//! A vision tower's shape, as a model preset's `[vision]` table gives it: how an image of a
//! given size becomes patches and prompt tokens, and the work its encoder does on them.
//!
//! Two resize rules cover the presets. Qwen-VL's (and the towers that follow it: Kimi's MoonViT,
//! Mistral's Pixtral): each side rounded to a multiple of `patch * merge` pixels, the image
//! scaled into `[min_pixels, max_pixels]` keeping its aspect; every `merge x merge` block of
//! patches becomes one token. Gemma 3's SigLIP: every image resized to one square of
//! `fixed_side` pixels, its patches averaged `merge x merge` into tokens (256 a picture).

use serde::{Deserialize, Serialize};

/// A vision tower (ViT) in front of the language model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vision {
    /// Pixels on a side of one patch.
    pub patch: u32,
    /// Patches on a side of the block that becomes one token (the spatial merge or pooling).
    pub merge: u32,
    /// Transformer layers, width and MLP width of the tower.
    pub layers: u32,
    pub hidden: u32,
    pub intermediate: u32,
    /// A gated MLP (three matrices, SwiGLU) rather than two.
    #[serde(default)]
    pub gated: bool,
    /// Qwen-VL's resize bounds, pixels.
    #[serde(default)]
    pub min_pixels: u64,
    #[serde(default)]
    pub max_pixels: u64,
    /// The merge averages each block of patches, then one projection takes it to the language
    /// model's width (Gemma 3's pooling), instead of an MLP over the block's concatenation.
    #[serde(default)]
    pub pooled: bool,
    /// Every image resized to this square instead (SigLIP's), pixels a side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_side: Option<u32>,
    /// Windowed attention (Qwen2.5-VL): patches a window holds, and the layers that attend over
    /// the whole image instead; without it every layer does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_patches: Option<u32>,
    #[serde(default)]
    pub full_attention_layers: u32,
}

/// What the encoder does for one image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageWork {
    /// Prompt tokens the image stands for.
    pub tokens: u32,
    /// Patches the tower encodes.
    pub patches: u32,
    /// Query-key pairs of its attention, summed over the tower's layers.
    pub pairs: u64,
    /// Pixels the server decodes and resizes before anything else.
    pub pixels: u64,
}

impl Vision {
    pub fn validate(&self) -> Result<(), String> {
        if self.patch == 0 || self.merge == 0 || self.layers == 0 || self.hidden == 0 || self.intermediate == 0 {
            return Err("vision: patch, merge, layers, hidden and intermediate must be at least 1".into());
        }
        if self.fixed_side.is_none() && (self.max_pixels == 0 || self.min_pixels > self.max_pixels) {
            return Err("vision: give max_pixels (and min_pixels at most that), or a fixed_side".into());
        }
        if self.fixed_side.is_some_and(|s| s < self.patch * self.merge) {
            return Err("vision: fixed_side must hold at least one token's block of patches".into());
        }
        if self.full_attention_layers > self.layers {
            return Err("vision: full_attention_layers cannot exceed layers".into());
        }
        Ok(())
    }

    /// The size, in pixels (height, width), an image of `height x width` is resized to.
    pub fn resized(&self, height: u32, width: u32) -> (u64, u64) {
        if let Some(side) = self.fixed_side {
            return (u64::from(side), u64::from(side));
        }
        let factor = f64::from(self.patch * self.merge);
        let (h, w) = (f64::from(height.max(1)), f64::from(width.max(1)));
        let snap = |x: f64| (x / factor).round_ties_even().max(1.0) * factor;
        let (mut hb, mut wb) = (snap(h), snap(w));
        if hb * wb > self.max_pixels as f64 {
            let beta = (h * w / self.max_pixels as f64).sqrt();
            hb = ((h / beta / factor).floor().max(1.0)) * factor;
            wb = ((w / beta / factor).floor().max(1.0)) * factor;
        } else if hb * wb < self.min_pixels as f64 {
            let beta = (self.min_pixels as f64 / (h * w)).sqrt();
            hb = (h * beta / factor).ceil() * factor;
            wb = (w * beta / factor).ceil() * factor;
        }
        (hb as u64, wb as u64)
    }

    /// The encoder's work and the prompt tokens for one image of `height x width` pixels.
    pub fn image(&self, height: u32, width: u32) -> ImageWork {
        let (h, w) = self.resized(height, width);
        let p = u64::from(self.patch);
        let patches = (h / p) * (w / p);
        let m2 = u64::from(self.merge * self.merge);
        let tokens = (patches / m2).max(1);
        let full = match self.window_patches {
            Some(_) => u64::from(self.full_attention_layers),
            None => u64::from(self.layers),
        };
        let windowed = u64::from(self.layers) - full;
        let window = u64::from(self.window_patches.unwrap_or(0)).min(patches);
        ImageWork {
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
            patches: u32::try_from(patches).unwrap_or(u32::MAX),
            pairs: full * patches * patches + windowed * patches * window,
            pixels: u64::from(height) * u64::from(width),
        }
    }

    /// Parameters of one layer: the four attention projections and the MLP.
    fn layer_params(&self) -> f64 {
        let (d, i) = (f64::from(self.hidden), f64::from(self.intermediate));
        4.0 * d * d + if self.gated { 3.0 } else { 2.0 } * d * i
    }

    /// Parameters of the merger that makes a token of a block of patches: an MLP from the
    /// block's concatenated patches to the language model's width, or (pooled) one projection
    /// of their average.
    fn merger_params(&self, lm_hidden: u32) -> f64 {
        let (d, lm) = (f64::from(self.hidden), f64::from(lm_hidden));
        if self.pooled {
            return d * lm;
        }
        let merged = d * f64::from(self.merge * self.merge);
        merged * merged + merged * lm
    }

    /// Parameters of the tower's products a patch goes through: every layer's, and its share of
    /// the merger's.
    pub fn params_per_patch(&self, lm_hidden: u32) -> f64 {
        f64::from(self.layers) * self.layer_params()
            + self.merger_params(lm_hidden) / f64::from(self.merge * self.merge)
    }

    /// All the tower's weights, parameters.
    pub fn params(&self, lm_hidden: u32) -> f64 {
        f64::from(self.layers) * self.layer_params() + self.merger_params(lm_hidden)
    }
}

/// Qwen3-VL's tower, for the tests of the modules that use one.
#[cfg(test)]
pub(crate) fn qwen3_vl_tower() -> Vision {
    Vision {
        patch: 16,
        merge: 2,
        layers: 27,
        hidden: 1152,
        intermediate: 4304,
        gated: false,
        min_pixels: 65_536,
        max_pixels: 16_777_216,
        pooled: false,
        fixed_side: None,
        window_patches: None,
        full_attention_layers: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn qwen25() -> Vision {
        Vision {
            patch: 14,
            merge: 2,
            layers: 32,
            hidden: 1280,
            intermediate: 3420,
            gated: true,
            min_pixels: 3136,
            max_pixels: 12_845_056,
            pooled: false,
            fixed_side: None,
            window_patches: Some(64),
            full_attention_layers: 4,
        }
    }

    fn qwen3() -> Vision {
        qwen3_vl_tower()
    }

    #[test]
    fn qwen_images_become_the_tokens_their_processors_give() {
        // 720 x 1280 snaps to 728 x 1288 at 28 pixels a token (26 x 46), and to 704 x 1280 at
        // 32 (22 x 40: 22.5 rounds to even); 256 x 256 to 9 x 9 and 8 x 8.
        assert_eq!(qwen25().image(720, 1280).tokens, 26 * 46);
        assert_eq!(qwen3().image(720, 1280).tokens, 22 * 40);
        assert_eq!(qwen25().image(256, 256).tokens, 81);
        assert_eq!(qwen3().image(256, 256).tokens, 64);
        // Tiny images grow to the minimum; huge ones shrink under the maximum.
        assert_eq!(qwen3().resized(16, 16), (256, 256));
        let (h, w) = qwen3().resized(8000, 8000);
        assert!(h * w <= 16_777_216 && h == w && h % 32 == 0, "{h} x {w}");
        let work = qwen25().image(720, 1280);
        assert_eq!(work.patches, work.tokens * 4);
        assert_eq!(work.pixels, 720 * 1280);
    }

    #[test]
    fn a_fixed_square_gives_every_image_the_same_tokens() {
        let siglip = Vision { patch: 14, merge: 4, pooled: true, fixed_side: Some(896), ..qwen3() };
        for (h, w) in [(10, 10), (720, 1280), (4000, 300)] {
            let i = siglip.image(h, w);
            assert_eq!((i.tokens, i.patches), (256, 4096));
        }
    }

    #[test]
    fn tower_parameters_are_the_presets_memory_figures() {
        // Qwen2.5-VL-7B's tower, 0.67 B; Qwen3-VL-8B's without its deep-stack mergers, 0.45 B.
        assert!((qwen25().params(3584) / 1e9 - 0.67).abs() < 0.01, "{}", qwen25().params(3584));
        assert!((qwen3().params(4096) / 1e9 - 0.45).abs() < 0.02, "{}", qwen3().params(4096));
    }

    #[test]
    fn bad_towers_are_refused() {
        assert!(Vision { patch: 0, ..qwen3() }.validate().is_err());
        assert!(Vision { max_pixels: 0, ..qwen3() }.validate().is_err());
        assert!(Vision { fixed_side: Some(8), ..qwen3() }.validate().is_err());
        assert!(Vision { full_attention_layers: 99, ..qwen3() }.validate().is_err());
        assert!(qwen25().validate().is_ok() && qwen3().validate().is_ok());
    }

    proptest! {
        #[test]
        fn more_pixels_never_mean_fewer_tokens_nor_less_work(h in 256u32..2000, w in 256u32..2000, grow in 1u32..2000) {
            // Between the bounds (here 65,536 pixels to 8 MP): past them the processor scales the
            // image to them, where rounding can lose a row of tokens, as the real one does.
            for v in [qwen25(), qwen3()] {
                let (a, b) = (v.image(h, w), v.image(h + grow, w));
                prop_assert!(a.tokens >= 1 && a.patches >= a.tokens);
                prop_assert!(b.tokens >= a.tokens, "{h}x{w} -> {} tokens, taller {} tokens", a.tokens, b.tokens);
                prop_assert!(b.pairs >= a.pairs);
            }
        }

        #[test]
        fn no_image_is_resized_past_the_cap(h in 1u32..60_000, w in 1u32..60_000) {
            for v in [qwen25(), qwen3()] {
                let (rh, rw) = v.resized(h, w);
                prop_assert!(rh * rw <= v.max_pixels, "{h}x{w} -> {rh}x{rw}");
                prop_assert!(rh % u64::from(v.patch * v.merge) == 0 && rw % u64::from(v.patch * v.merge) == 0);
            }
        }
    }
}
