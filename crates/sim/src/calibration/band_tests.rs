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
    let presets = crate::presets::Presets::embedded().unwrap();
    for (file, options) in files {
        let mut points = super::read_points(&testdata().join("public").join(file)).unwrap();
        // A table of several devices (InferenceX's blog) holds other devices' rows too.
        points.retain(|p| {
            p.labels.iter().all(|(k, v)| k != "hw" || presets.hardware(v).is_ok_and(|h| h.name == hardware))
        });
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

/// A preset's band for the deployments its errors were measured on.
fn own(hw: &str) -> [[f64; 2]; 3] {
    let u = crate::presets::Presets::embedded().unwrap().hardware(hw).unwrap().uncertainty.clone();
    [u.ttft, u.tpot, u.throughput]
}

/// A preset's band for deployments outside those ([`Uncertainty::outside`]).
fn outside(hw: &str) -> [[f64; 2]; 3] {
    let u = crate::presets::Presets::embedded().unwrap().hardware(hw).unwrap().uncertainty.outside();
    [u.ttft, u.tpot, u.throughput]
}

/// Each of `presets` prints a band (its own, or the one it takes outside its measurements, as
/// `band_of` reads it) that holds `need` and lies beyond it by at most [`SLACK`].
fn bands_hold(presets: &[&str], need: [[f64; 2]; 3], band_of: fn(&str) -> [[f64; 2]; 3]) {
    for hw in presets {
        let bands = band_of(hw);
        for (i, name) in ["ttft", "tpot", "throughput"].iter().enumerate() {
            let (band, want) = (bands[i], need[i]);
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
    bands_hold(&["b200", "gb200", "b300", "gb300"], band_needed("b200", &files), own);
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
    bands_hold(&["h200", "h200-nvl"], band_needed("h200", &files), own);
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
    bands_hold(&["a100-80g", "a100-40g"], band_needed("a100-80g", &files), own);
}

/// The H100 SXM's public checks of models other than the one it was calibrated on (GPUStack's
/// lab, vLLM pull request 25444), for its band outside its calibration, the H100 PCIe's outside
/// its own, and the H100 NVL's and H800's (the same die and kernels, unmeasured). When the band
/// was set they read mean TTFT -0.588 / 0.120 (GPUStack's Qwen3-8B latency page, vLLM 0.11's
/// chat endpoint, reaches its first tokens 59 % later than predicted), TPOT -0.141 / 0.101 and
/// throughput -0.088 / 0.061.
#[test]
fn the_h100_band_outside_its_calibration_holds_its_public_checks_of_other_models() {
    let files: [(&str, &[(&str, &str)]); 6] = [
        ("gpustack-h100-qwen3-235b.txt", &[]),
        ("gpustack-h100-gpt-oss-32k.txt", &[("max-model-len", "32768")]),
        ("gpustack-h100-qwen3-8b-latency.txt", &[]),
        ("gpustack-h100-qwen3.5-9b.txt", &[]),
        ("gpustack-h100-qwen3.5-9b-latency.txt", &[]),
        ("vllm-pr-25444-h100-qwen3-coder-30b-fp8.json", &[]),
    ];
    let need = band_needed("h100-sxm", &files);
    bands_hold(&["h100-sxm", "h100-pcie"], need, outside);
    bands_hold(&["h100-nvl", "h800"], need, own);
    // Inside its calibration the H100 SXM keeps its own, narrower band.
    assert!(own("h100-sxm")[0][0] > need[0][0]);
}
