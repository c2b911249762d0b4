//! The prediction bands of devices the presets were not calibrated on, held to their public
//! checks: the spread assumed for an uncalibrated device, widened on each side where a device's
//! public measurements in `testdata/public/` fall outside it (the 10th and 90th percentile of
//! their errors on mean TTFT, mean TPOT and output throughput), never narrowed by them. Those
//! checks then chose the band, so their share inside it is in sample.

use super::fidelity_tests::{predicted_by_the_presets, testdata};
use super::points::FitMetric;
use super::validate::Defaults;
use crate::hardware::Uncertainty;

/// How far a preset's band may lie beyond what its checks need before the test asks for it to
/// be narrowed (a miss fixed should narrow it).
const SLACK: f64 = 0.03;

/// The `[lo, hi]` errors of mean TTFT, mean TPOT and output throughput that `files` (each
/// with the serving options `scripts/sim/public_checks.sh` gives it), predicted on `hardware`,
/// need of a band: the assumed spread, widened to their 10th and 90th percentiles.
fn band_needed(hardware: &str, files: &[(&str, &[(&str, &str)])]) -> [[f64; 2]; 3] {
    let metrics = [FitMetric::MeanTtft, FitMetric::MeanTpot, FitMetric::OutputThroughput];
    let mut errors: [Vec<f64>; 3] = Default::default();
    for (file, options) in files {
        let mut points = super::read_points(&testdata().join("public").join(file)).unwrap();
        // A table of several devices (InferenceX's blog) holds other devices' rows too.
        points.retain(|p| p.labels.iter().all(|(k, v)| k != "hw" || v == hardware));
        let defaults = Defaults {
            model: Some("openai/gpt-oss-120b".into()),
            hardware: Some(hardware.into()),
            options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Defaults::default()
        };
        let n = points.len();
        for r in predicted_by_the_presets(points, &defaults, n).held_out {
            if let Some(i) = metrics.iter().position(|m| *m == r.metric) {
                errors[i].push(r.error());
            }
        }
    }
    let assumed = Uncertainty::default();
    let mut need = [[0.0; 2]; 3];
    for (i, name) in ["ttft", "tpot", "throughput"].iter().enumerate() {
        let e = &mut errors[i];
        e.sort_by(f64::total_cmp);
        assert!(e.len() >= 10, "{hardware} {name}: {} errors", e.len());
        let [lo, hi] = assumed.errors(name).unwrap();
        need[i] = [lo.min(super::fidelity::percentile(e, 10.0)), hi.max(super::fidelity::percentile(e, 90.0))];
    }
    need
}

/// Each of `presets` prints a band that holds `need` and lies beyond it by at most [`SLACK`].
fn bands_hold(presets: &[&str], need: [[f64; 2]; 3]) {
    let all = crate::presets::Presets::embedded().unwrap();
    for hw in presets {
        for (i, name) in ["ttft", "tpot", "throughput"].iter().enumerate() {
            let band = all.hardware(hw).unwrap().uncertainty.errors(name).unwrap();
            let want = need[i];
            assert!(band[0] <= want[0] && band[1] >= want[1], "{hw} {name}: band {band:?} misses {want:?}");
            assert!(
                band[0] >= want[0] - SLACK && band[1] <= want[1] + SLACK,
                "{hw} {name}: band {band:?} wider than the {want:?} its checks need"
            );
        }
    }
}

/// The B200's public checks (every file `public_checks.sh` predicts on a B200, and InferenceX's
/// blog point), for the datacenter Blackwell presets, which run the same kernels and releases.
/// When the band was set they read mean TTFT -0.736 / -0.441 (mixtures of experts' first tokens
/// from vLLM 0.16 on, early by half to three quarters), TPOT -0.207 / 0.237 and throughput
/// -0.019 / 0.411 (CALIBRATION.md, "Every mixture of experts on a B200 reaches its first token
/// late").
#[test]
fn the_datacenter_blackwell_band_holds_the_public_b200_checks() {
    let linear: &[(&str, &str)] = &[("linear-eff", "0.65")];
    let files: [(&str, &[(&str, &str)]); 9] = [
        ("vllm-pr-43232-b200-qwen3-235b-fp8.txt", &[]),
        ("vllm-pr-23696-b200-gpt-oss-120b-sharegpt.txt", &[]),
        ("vultr-b200-nemotron-3-nano-fp8.json", &[]),
        ("vllm-issue-47089-b200-qwen3-0.6b.json", &[]),
        ("vllm-recipes-b200-kimi-k2.5-nvfp4.json", &[]),
        ("flashinfer-issue-4249-b200-qwen3.6-35b-a3b.json", linear),
        ("vllm-pr-44214-b200-qwen3.5-122b-a10b.json", linear),
        ("vllm-issue-26825-b200-qwen3-30b-a3b-fp8.json", &[]),
        ("inferencex-blog-nvidia-gpt-oss-120b.json", &[]),
    ];
    bands_hold(&["b200", "gb200", "b300", "gb300"], band_needed("b200", &files));
}

/// The H200's public checks (GPUStack's lab and vLLM's Nemotron recipe), for the H200 and the
/// H200 NVL. When the band was set they read mean TTFT -0.438 / 0.163, TPOT -0.370 / 0.120
/// (DeepSeek-R1's and V3.2's bursts, MLA, decode early) and throughput -0.071 / 0.316.
#[test]
fn the_h200_band_holds_its_public_checks() {
    let files: [(&str, &[(&str, &str)]); 7] = [
        ("gpustack-h200-glm-4.6.txt", &[]),
        ("gpustack-h200-deepseek-r1.json", &[("max-model-len", "32768")]),
        ("gpustack-h200-deepseek-v3.2.txt", &[]),
        ("gpustack-h200-glm-5.2-fp8.txt", &[]),
        ("gpustack-h200-qwen3.5-35b-a3b.txt", &[]),
        ("gpustack-h200-qwen3.5-35b-a3b-latency.txt", &[]),
        ("vllm-recipes-h200-nemotron-3-nano-fp8.json", &[]),
    ];
    bands_hold(&["h200", "h200-nvl"], band_needed("h200", &files));
}

/// The A100's public checks (GPUStack's lab) fall inside the assumed spread, so its band stays
/// that spread: mean TTFT -0.296 / 0.045, TPOT -0.283 / 0.275, throughput -0.052 / 0.296 when
/// this test was written.
#[test]
fn the_a100_band_holds_its_public_checks() {
    let files: [(&str, &[(&str, &str)]); 7] = [
        ("gpustack-a100-gpt-oss-120b.txt", &[("max-model-len", "32768")]),
        ("gpustack-a100-gpt-oss-20b.txt", &[]),
        ("gpustack-a100-qwen3-235b.txt", &[]),
        ("gpustack-a100-glm-4.5-air.txt", &[]),
        ("gpustack-a100-qwen3-14b.txt", &[]),
        ("gpustack-a100-qwen3-32b.txt", &[("gpu-memory-utilization", "0.95")]),
        ("gpustack-a100-qwen3-dense-quantized.txt", &[]),
    ];
    bands_hold(&["a100-80g", "a100-40g"], band_needed("a100-80g", &files));
}
