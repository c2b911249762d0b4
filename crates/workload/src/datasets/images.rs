//! vLLM's `random-mm` dataset's images: how many each request carries and of which shape,
//! drawn by vLLM's rules from `--random-mm-*`, each filled with random RGB noise and sent as a
//! JPEG `data:` URL after the prompt's text, as vLLM's benchmark sends them.
//!
//! The rules are vLLM's (`RandomMultiModalDataset`): a request's item count is uniform over
//! `[floor(n (1 - r)), ceil(n (1 + r))]`, the top clamped to the image cap; each item's shape is
//! drawn from the buckets' normalized probabilities (numpy's `choice`: the first bucket whose
//! cumulative probability passes a uniform draw). The draws are servebench's own stream from
//! the run's seed, not vLLM's (whose images share one generator with its text): the same counts
//! and shapes in distribution, and the same bodies for the same seed run after run. Noise
//! compresses worst of all, as vLLM's does: the largest bodies and the most decoding work a
//! shape can give.

use base64::Engine;
use servebench_core::config::{ImageBucket, RandomMedia};
use servebench_core::rng::Generator;

use super::{Sample, par_map};
use crate::WorkloadError;

/// PIL's default JPEG quality, which vLLM's `process_image` leaves as it is.
const JPEG_QUALITY: u8 = 75;

/// The most image pixels one run builds (2^31, about 6 GiB of noise before encoding and a
/// little less JPEG): every body is built before the run.
pub const MAX_TOTAL_PIXELS: u64 = 1 << 31;

/// The inclusive range of images a request carries, with vLLM's checks.
pub fn count_range(media: &RandomMedia) -> Result<(u32, u32), WorkloadError> {
    let r = media.items_range_ratio;
    if !(0.0..=1.0).contains(&r) {
        return Err(WorkloadError::Invalid(format!("--random-mm-num-mm-items-range-ratio must be in [0, 1], got {r}")));
    }
    let base = f64::from(media.base_items);
    let max = ((base * (1.0 + r)).ceil() as u32).min(media.image_limit);
    let min = (base * (1.0 - r)).floor().max(0.0) as u32;
    if min > max {
        return Err(WorkloadError::Invalid(format!(
            "a request needs at least {min} images but may carry at most {max} (--random-mm-limit-mm-per-prompt's \
             image cap is {}); raise the cap, or lower --random-mm-base-items-per-request",
            media.image_limit
        )));
    }
    Ok((min, max))
}

/// The buckets with a positive probability, normalized to sum to 1, with vLLM's checks.
pub fn normalized(buckets: &[ImageBucket]) -> Result<Vec<ImageBucket>, WorkloadError> {
    if let Some(b) = buckets.iter().find(|b| !(b.probability >= 0.0 && b.probability.is_finite())) {
        return Err(WorkloadError::Invalid(format!(
            "--random-mm-bucket-config: the probability of ({}, {}, 1) must be a number of 0 or more, got {}",
            b.height, b.width, b.probability
        )));
    }
    let kept: Vec<ImageBucket> = buckets.iter().copied().filter(|b| b.probability > 0.0).collect();
    if kept.is_empty() {
        return Err(WorkloadError::Invalid(
            "--random-mm-bucket-config gives every shape probability 0; give at least one a positive one".into(),
        ));
    }
    if let Some(b) = kept.iter().find(|b| b.height == 0 || b.width == 0 || b.height > 65_535 || b.width > 65_535) {
        return Err(WorkloadError::Invalid(format!(
            "--random-mm-bucket-config: an image of {} x {} pixels cannot be made; heights and widths go from 1 \
             to 65535",
            b.height, b.width
        )));
    }
    let total: f64 = kept.iter().map(|b| b.probability).sum();
    Ok(kept.into_iter().map(|b| ImageBucket { probability: b.probability / total, ..b }).collect())
}

/// One image to make: its shape and the seed of its pixels.
struct Planned {
    request: usize,
    height: u32,
    width: u32,
    pixel_seed: u64,
}

/// Attaches `media`'s images to `samples`, drawn from `seed`; returns the note to show before
/// the run.
pub fn attach(samples: &mut [Sample], media: &RandomMedia, seed: u64) -> Result<String, WorkloadError> {
    let (min, max) = count_range(media)?;
    let buckets = normalized(&media.buckets)?;
    let mut cdf: Vec<f64> = buckets
        .iter()
        .scan(0.0, |acc, b| {
            *acc += b.probability;
            Some(*acc)
        })
        .collect();
    let last = cdf.last().copied().unwrap_or(1.0);
    cdf.iter_mut().for_each(|c| *c /= last);

    let mut rng = Generator::default_rng(seed);
    let mut planned = Vec::new();
    let mut pixels: u64 = 0;
    for request in 0..samples.len() {
        let n = rng.integers(i64::from(min), i64::from(max) + 1, 1).first().copied().unwrap_or(i64::from(min));
        for _ in 0..n {
            let u = rng.random();
            let b = buckets[cdf.partition_point(|&c| c <= u).min(buckets.len() - 1)];
            pixels += u64::from(b.height) * u64::from(b.width);
            planned.push(Planned { request, height: b.height, width: b.width, pixel_seed: rng.random_raw() });
        }
    }
    if pixels > MAX_TOTAL_PIXELS {
        return Err(WorkloadError::Invalid(format!(
            "the {} images would hold {pixels} pixels in all, more than the {MAX_TOTAL_PIXELS} a run builds in \
             memory; lower --num-prompts, --random-mm-base-items-per-request or the shapes of \
             --random-mm-bucket-config",
            planned.len()
        )));
    }
    let urls = par_map(&planned, |p| data_url(p.width, p.height, p.pixel_seed));
    let mut bytes = 0usize;
    for (p, url) in planned.iter().zip(urls) {
        let url = url?;
        bytes += url.len();
        samples[p.request].images.push(url);
    }
    Ok(format!(
        "random-mm: {} images over {} requests ({min} to {max} each), {:.1} MB of base64 JPEG in all.",
        planned.len(),
        samples.len(),
        bytes as f64 / 1e6
    ))
}

/// A `width` x `height` JPEG of RGB noise from `seed`, as a base64 `data:` URL.
pub fn data_url(width: u32, height: u32, seed: u64) -> Result<String, WorkloadError> {
    let mut rng = Generator::from_entropy(u128::from(seed));
    let len = width as usize * height as usize * 3;
    let mut rgb = Vec::with_capacity(len + 8);
    while rgb.len() < len {
        rgb.extend_from_slice(&rng.random_raw().to_le_bytes());
    }
    rgb.truncate(len);
    let mut jpeg = Vec::with_capacity(len / 2);
    let (w, h) = (u16::try_from(width), u16::try_from(height));
    let (Ok(w), Ok(h)) = (w, h) else {
        return Err(WorkloadError::Invalid(format!("an image of {width} x {height} pixels is too large for a JPEG")));
    };
    jpeg_encoder::Encoder::new(&mut jpeg, JPEG_QUALITY)
        .encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| WorkloadError::Invalid(format!("could not encode a {width} x {height} image: {e}")))?;
    let mut url = String::with_capacity(23 + jpeg.len().div_ceil(3) * 4);
    url.push_str("data:image/jpeg;base64,");
    base64::engine::general_purpose::STANDARD.encode_string(&jpeg, &mut url);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(base: u32, ratio: f64, limit: u32, buckets: &[(u32, u32, f64)]) -> RandomMedia {
        RandomMedia {
            base_items: base,
            items_range_ratio: ratio,
            image_limit: limit,
            buckets: buckets
                .iter()
                .map(|&(height, width, probability)| ImageBucket { height, width, probability })
                .collect(),
        }
    }

    fn samples(n: usize) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                prompt: format!("p{i}"),
                prompt_len: 1,
                raw_tokens: None,
                max_tokens: 1,
                timestamp_s: None,
                images: Vec::new(),
            })
            .collect()
    }

    /// Width and height from a baseline JPEG's start-of-frame marker.
    fn jpeg_size(url: &str) -> (u32, u32) {
        let b64 = url.strip_prefix("data:image/jpeg;base64,").unwrap();
        let jpeg = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        let at = jpeg.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        let h = u32::from(u16::from_be_bytes([jpeg[at + 5], jpeg[at + 6]]));
        let w = u32::from(u16::from_be_bytes([jpeg[at + 7], jpeg[at + 8]]));
        (w, h)
    }

    #[test]
    fn counts_follow_vllm_s_range_and_cap() {
        assert_eq!(count_range(&media(1, 0.0, 255, &[])).unwrap(), (1, 1));
        assert_eq!(count_range(&media(4, 0.5, 255, &[])).unwrap(), (2, 6));
        assert_eq!(count_range(&media(4, 0.5, 3, &[])).unwrap(), (2, 3));
        assert_eq!(count_range(&media(3, 1.0, 255, &[])).unwrap(), (0, 6));
        let e = count_range(&media(4, 0.0, 2, &[])).unwrap_err().to_string();
        assert!(e.contains("at least 4") && e.contains("cap is 2"), "{e}");
        assert!(count_range(&media(1, 1.5, 9, &[])).unwrap_err().to_string().contains("[0, 1]"));
    }

    #[test]
    fn zero_buckets_drop_out_and_the_rest_are_normalized() {
        let m = media(1, 0.0, 9, &[(256, 256, 1.0), (720, 1280, 3.0), (64, 64, 0.0)]);
        let n = normalized(&m.buckets).unwrap();
        assert_eq!(n.len(), 2);
        assert!((n[0].probability - 0.25).abs() < 1e-12 && (n[1].probability - 0.75).abs() < 1e-12);
        assert!(
            normalized(&media(1, 0.0, 9, &[(8, 8, 0.0)]).buckets).unwrap_err().to_string().contains("probability 0")
        );
        assert!(normalized(&media(1, 0.0, 9, &[(8, 8, -1.0)]).buckets).unwrap_err().to_string().contains("0 or more"));
        assert!(normalized(&media(1, 0.0, 9, &[(0, 8, 1.0)]).buckets).unwrap_err().to_string().contains("1 to 65535"));
    }

    #[test]
    fn each_request_gets_its_drawn_images_at_their_shapes_the_same_for_the_same_seed() {
        let m = media(2, 0.5, 255, &[(32, 48, 0.5), (16, 16, 0.5)]);
        let mut a = samples(40);
        let note = attach(&mut a, &m, 7).unwrap();
        assert!(note.starts_with("random-mm: ") && note.contains("over 40 requests (1 to 3 each)"), "{note}");
        let counts: Vec<usize> = a.iter().map(|s| s.images.len()).collect();
        assert!(counts.iter().all(|&c| (1..=3).contains(&c)), "{counts:?}");
        assert!((1..=3).all(|c| counts.contains(&c)), "every count in the range is drawn: {counts:?}");
        let shapes: Vec<(u32, u32)> = a.iter().flat_map(|s| s.images.iter().map(|u| jpeg_size(u))).collect();
        assert!(shapes.iter().all(|s| *s == (48, 32) || *s == (16, 16)), "{shapes:?}");
        assert!(shapes.contains(&(48, 32)) && shapes.contains(&(16, 16)));
        let mut b = samples(40);
        attach(&mut b, &m, 7).unwrap();
        assert_eq!(a, b);
        let mut c = samples(40);
        attach(&mut c, &m, 8).unwrap();
        assert_ne!(a, c);
        // Every image is its own noise: no two bodies share one (a server's cache would hit).
        let mut urls: Vec<&String> = a.iter().flat_map(|s| &s.images).collect();
        let n = urls.len();
        urls.sort();
        urls.dedup();
        assert_eq!(urls.len(), n);
    }

    #[test]
    fn too_many_pixels_are_refused_before_any_is_made() {
        let m = media(255, 0.0, 255, &[(65_535, 65_535, 1.0)]);
        let e = attach(&mut samples(2), &m, 0).unwrap_err().to_string();
        assert!(e.contains("pixels in all") && e.contains("--num-prompts"), "{e}");
    }
}
