//! Public measurements of the model families priced last (Gated DeltaNet and Mamba-2 hybrids,
//! DeepSeek sparse attention), of vLLM's CUDA graph modes and of single runs on devices with few
//! checks (a Jetson Thor, an MI300X), predicted with the shipped presets and nothing fitted: each
//! test keeps its file's medians from regressing past the bounds it names.

use super::fidelity_tests::{predicted_by_the_presets, testdata};
use super::validate::{Defaults, by_metric};

/// The median error of each of `bounds`' metrics over `file`'s points in `testdata/public/`
/// (`expected` of them), predicted on `hardware` (or the points' own), fails past its bound;
/// returns the validation for further checks.
fn medians_within(
    file: &str,
    hardware: Option<&str>,
    expected: usize,
    bounds: &[(&str, f64)],
) -> super::validate::Validation {
    let defaults = Defaults { hardware: hardware.map(str::to_string), ..Defaults::default() };
    medians_within_given(file, &defaults, expected, bounds)
}

/// [`medians_within`] with the points' defaults given (serving options applied to every point).
fn medians_within_given(
    file: &str,
    defaults: &Defaults,
    expected: usize,
    bounds: &[(&str, f64)],
) -> super::validate::Validation {
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    let v = predicted_by_the_presets(points, defaults, expected);
    let medians = by_metric(&v.held_out.iter().collect::<Vec<_>>());
    for (metric, bound) in bounds {
        let e = medians.iter().find(|(m, _)| m == metric).map(|(_, e)| e.median);
        assert!(e.is_some_and(|e| e <= *bound), "{file} {metric}: median error {e:?} above {bound}");
    }
    v
}

/// GPUStack's Qwen3.5-35B-A3B runs on one H200 (vLLM 0.17.1, `testdata/public/`), the check of
/// the Gated DeltaNet term, nothing fitted: read from the lab's runner blocks (TPOT rebuilt from
/// their mean latency), mean TPOT was 2.6 % and 8.3 % off on the fixed-length decodes and 38 %
/// on the long prompts' 100 tokens, output throughput 0.3, 10 and 24 % (the long prompts'
/// prefill slow: BF16 experts at vLLM 0.13's default-tile rate) when this test was written; it
/// fails past 15 % median on TPOT and 20 % on throughput. The file names vLLM 0.17.1, whose
/// default tiles run Qwen3.5's untuned BF16 experts: with 0.13's, the long prompts' first tokens
/// came out half as late again (52.6 % median). Since the experts' rate follows their shard's
/// width (`cost::terms::shard_efficiency`; 512 columns here, a little faster than the 192 of the
/// shard the BF16 ceiling was fitted on), the three figures' medians read TTFT 26.9 % (24.9 %
/// before), TPOT 6.5 % and throughput 8.3 % (over all nine figures 8.3 % against 16.6 %); TTFT
/// fails past 28 %.
#[test]
fn a_gated_deltanet_hybrid_s_public_runs_stay_predicted() {
    let bounds = [("mean TTFT (ms)", 0.28), ("mean TPOT (ms)", 0.15), ("output tok/s", 0.20)];
    let v = medians_within("gpustack-h200-qwen3.5-35b-a3b.txt", Some("h200"), 3, &bounds);
    assert!(v.held_out.iter().all(|r| r.labels.contains("vllm=v0.17.1")), "{:?}", v.held_out);
}

/// A Mamba-2 hybrid nothing was fitted on (`testdata/public/`: Vultr's sweep of Nemotron 3 Nano
/// FP8, TP2 on B200s, vLLM 0.16.0, 2,048 tokens in and 512 out at 1 to 1,024 streams): when its
/// blocks were first priced, mean TPOT 14.6 % and output throughput 6.9 % median off, TTFT
/// 60.7 % (below 128 streams the first tokens came 3 to 4 times later than predicted, their
/// decodes on time). Since prompts are tokenized beside the API server's loop rather than on it
/// (`engine::frontend`), the 400 prompts of 2,048 tokens sent at once no longer hold the
/// streamed tokens back: TPOT 8.6 % (14.6 % before), throughput 13.5 % (5.7 %), every run from
/// 128 streams on 13 to 16 % fast, their decodes 6 to 14 % short: the loop's work had hidden a
/// miss of the hybrid's decode at large batches. It fails past 20 % on TPOT and 15 % on
/// throughput.
#[test]
fn a_mamba_2_hybrid_s_public_sweep_stays_predicted() {
    let bounds = [("mean TPOT (ms)", 0.20), ("output tok/s", 0.15)];
    medians_within("vultr-b200-nemotron-3-nano-fp8.json", None, 9, &bounds);
}

/// DeepSeek-V3.2 on 8 H200 (GPUStack's lab, vLLM 0.13.0, `testdata/public/`): six bursts of
/// 100 to 1,000 chat requests. Read as DeepSeek-V3 (dense MLA) they came out 48.5 / 45.2 /
/// 70.0 % off (mean TTFT / TPOT / output throughput, all early); with the indexer, the top-k
/// bound and FlashMLA's sparse kernels over padded heads priced, nothing fitted, 32.7 / 31.4 /
/// 41.1 %, still early as DeepSeek-R1's bursts on the same lab's H200s are. Fails past 38, 36
/// and 46 %.
#[test]
fn deepseek_sparse_attention_s_public_bursts_stay_predicted() {
    let bounds = [("mean TTFT (ms)", 0.38), ("mean TPOT (ms)", 0.36), ("output tok/s", 0.46)];
    medians_within("gpustack-h200-deepseek-v3.2.txt", Some("h200"), 6, &bounds);
}

/// Qwen3.5-35B-A3B on one H200 at a constant 1, 4, 8 and 16 requests a second (GPUStack's
/// latency page, vLLM 0.17.1, `testdata/public/`), nothing fitted: output throughput 3.1 %
/// median (+14 % at 16 a second, where the server fell behind and the model keeps up), mean TTFT
/// 35.3 % (-14, -57, +4, -61 %: the measured means carry tails the medians do not). Fails past
/// 45 % on TTFT and 8 % on throughput.
#[test]
fn a_gated_deltanet_hybrid_at_constant_rates_stays_predicted() {
    let bounds = [("mean TTFT (ms)", 0.45), ("output tok/s", 0.08)];
    medians_within("gpustack-h200-qwen3.5-35b-a3b-latency.txt", Some("h200"), 4, &bounds);
}

/// Qwen3.5-9B, a dense Gated DeltaNet hybrid, on one H100 SXM (GPUStack's two pages, vLLM
/// 0.17.1, `testdata/public/`), nothing fitted. Its latency page (guidellm at a constant 1, 4, 8
/// and 16 ShareGPT requests a second) read mean TTFT 4.5 % median and output throughput 2.2 %;
/// its throughput page's three profiles (1,000 x 1,024 / 128 at most 512 at once; 32,000 / 100
/// and 1,000 / 2,000 tokens at one a second) mean TTFT 7.0 %, mean TPOT 29.7 % (the burst's
/// decodes beside its prefills late, -30 %; the long prompts' 100 tokens -68 %, the
/// generation-heavy run's -8 %) and output throughput 0.8 % when this test was written. Fails
/// past 10 % TTFT and 5 % throughput on the first, 15 % TTFT, 35 % TPOT and 5 % throughput on
/// the second.
#[test]
fn a_dense_gated_deltanet_hybrid_on_the_h100_stays_predicted() {
    let bounds = [("mean TTFT (ms)", 0.10), ("output tok/s", 0.05)];
    medians_within("gpustack-h100-qwen3.5-9b-latency.txt", Some("h100-sxm"), 4, &bounds);
    let bounds = [("mean TTFT (ms)", 0.15), ("mean TPOT (ms)", 0.35), ("output tok/s", 0.05)];
    medians_within("gpustack-h100-qwen3.5-9b.txt", Some("h100-sxm"), 3, &bounds);
}

/// GLM-5.2-FP8 on 8 H200 (GPUStack's lab, vLLM 0.24.0, `testdata/public/`): five profiles of
/// its baseline server, from 1,000 requests of 8,192 tokens queued behind a KV cache that holds
/// about 35 of them to one 32,000-token prompt a second. Predicted with the GLM-5.2 preset
/// (GLM-5's shapes, 21 indexers) and nothing fitted: mean TTFT 25.4 %, mean TPOT 9.5 %, output
/// throughput 26.4 % median, all early as DeepSeek's runs on the same lab's H200s are. Fails
/// past 32 %, 15 % and 33 %.
#[test]
fn glm_5_2_s_public_runs_on_the_h200_stay_predicted() {
    let bounds = [("mean TTFT (ms)", 0.32), ("mean TPOT (ms)", 0.15), ("output tok/s", 0.33)];
    medians_within("gpustack-h200-glm-5.2-fp8.txt", Some("h200"), 5, &bounds);
}

/// vLLM pull request 25444 (September 2025, the change of the default CUDA graph mode to
/// `FULL_AND_PIECEWISE` for 0.11): Qwen3-Coder-30B-A3B-Instruct-FP8 on one H100, ten prompts of
/// 1,024 tokens and 128 out at once, with and without async scheduling, its graphs full and full
/// and piecewise (`testdata/public/`; output throughput is the request rate the pull request
/// gives times 128 tokens). Nothing fitted: 1.3 % median off when this test was written (-1.2,
/// -0.2, +1.3 and +2.6 %). Fails past 4 %. The same pull request's piecewise runs (the default
/// before it, 31 % slower) are left out: piecewise graphs are refused, not priced.
#[test]
fn full_cuda_graphs_of_an_fp8_moe_on_an_h100_stay_predicted() {
    let v = medians_within("vllm-pr-25444-h100-qwen3-coder-30b-fp8.json", None, 4, &[("output tok/s", 0.04)]);
    assert!(v.held_out.iter().any(|r| r.labels.contains("cudagraph-mode=FULL,")), "{:?}", v.held_out);
}

/// A known miss kept in view: vLLM issue 47089 (vLLM 0.23 on a B200, full CUDA graphs) decodes
/// Qwen3-0.6B at 1, 16 and 128 streams in 1.53, 1.61 and 2.49 ms a token; the presets, whose
/// floor a layer and cost a sequence were fitted on gpt-oss-120b's decode under vLLM 0.11 to
/// 0.13, give 1.82, 2.11 and 3.47 ms (30.9 % median, too slow, the more so the more streams). It
/// fails past 35 %, so that the miss does not grow unnoticed.
#[test]
fn a_tiny_model_s_decode_on_a_b200_stays_where_it_was() {
    medians_within("vllm-issue-47089-b200-qwen3-0.6b.json", None, 3, &[("mean TPOT (ms)", 0.35)]);
}

/// vLLM's recipe for Nemotron 3 Nano (December 2025, `testdata/public/`): its FP8 checkpoint on
/// one H200 with an FP8 KV cache and async scheduling, 2,048 prompts of 1,024 tokens and 1,024
/// out at most 1,024 at once: a Mamba-2 hybrid's decode beside a thousand prefills. Nothing
/// fitted: mean TTFT +4.0 %, median TTFT +8.6 %, mean TPOT +3.3 %, output throughput -3.0 % when
/// this test was written. Fails past 8 %, 6 % and 6 % (the median TTFT past 12 %).
#[test]
fn a_mamba_2_hybrid_at_a_thousand_streams_on_an_h200_stays_predicted() {
    let bounds =
        [("mean TTFT (ms)", 0.08), ("median TTFT (ms)", 0.12), ("mean TPOT (ms)", 0.06), ("output tok/s", 0.06)];
    medians_within("vllm-recipes-h200-nemotron-3-nano-fp8.json", None, 1, &bounds);
}

/// A known miss of the MLA family, on a B200 this time (`testdata/public/`): Kimi-K2.5 in NVFP4
/// on 8 B200 at TP8 (InferenceX's run as a vLLM recipe quotes it: vLLM 0.17.0, 1,024 / 1,024
/// tokens over InferenceX's spread, 4 streams, its launch script's flags) reaches its first token
/// in 148.6 ms (mean) where the presets give 52.5 (-65 %); its TPOT is 15 % short and its
/// throughput 22 % high, as DeepSeek-R1's and GLM-5.2's on the H200s are early. Fails past 70 %
/// on TTFT, 20 % on TPOT and 27 % on throughput, so that the miss does not grow unnoticed.
#[test]
fn an_mla_model_on_eight_b200_stays_where_it_was() {
    let bounds = [("mean TTFT (ms)", 0.70), ("mean TPOT (ms)", 0.20), ("output tok/s", 0.27)];
    medians_within("vllm-recipes-b200-kimi-k2.5-nvfp4.json", None, 1, &bounds);
}

/// Two more known misses on a B200, kept in view (`testdata/public/`, nothing fitted, found
/// while checking the B200's expert ceilings): FlashInfer issue 4249's vLLM runs of
/// Qwen3.6-35B-A3B on one B200, one stream of 1,024 / 128 tokens (FP8 and NVFP4 checkpoints;
/// priced with FlashInfer's Gated DeltaNet prefill, `linear-eff=0.65`, as a July 2026 build
/// runs it), and vLLM pull request 44214's baseline, Qwen3.5-122B-A10B in BF16 on 8 B200 with
/// 500 prompts of 1,024 / 512 at once. Their decodes come within 15 % (TPOT +14 % and +4 %;
/// -12 %), their first tokens 2 to 4 times as late as the presets give (mean TTFT -70 % and -76 %
/// at one stream; -68 % for the burst, whose throughput reads +37 %). With Vultr's Nemotron 3
/// Nano sweep, vLLM pull request 43232 and the Kimi-K2.5 recipe, every mixture of experts
/// measured on a B200 with vLLM 0.16 or later reaches its first token late in the model, whatever
/// its experts' format (with vLLM 0.11 it does not: the next test). Fails past 78 % on TTFT, 16 %
/// on TPOT and 40 % on throughput, so that the misses do not grow unnoticed.
#[test]
fn mixtures_of_experts_first_tokens_on_a_b200_stay_where_they_were() {
    let defaults = Defaults { options: vec![("linear-eff".into(), "0.65".into())], ..Defaults::default() };
    let one_stream = [("mean TTFT (ms)", 0.78), ("mean TPOT (ms)", 0.16), ("mean E2EL (ms)", 0.05)];
    medians_within_given("flashinfer-issue-4249-b200-qwen3.6-35b-a3b.json", &defaults, 2, &one_stream);
    let burst = [("mean TTFT (ms)", 0.75), ("mean TPOT (ms)", 0.16), ("output tok/s", 0.40)];
    medians_within_given("vllm-pr-44214-b200-qwen3.5-122b-a10b.json", &defaults, 1, &burst);
}

/// The other side of the B200's first tokens (`testdata/public/`, nothing fitted, found after
/// the tests above): vLLM issue 26825's rate sweep of Qwen3-30B-A3B-FP8 on one B200 (vLLM main of
/// October 2025, about 0.11), prompts of 256 to 1,024 tokens whose first half is the same in
/// every prompt (the sonnet dataset's fixed lines, cached), 1 to 50 requests a second. Up to 10
/// a second the presets put the median first token late, not early (+8 to +38 %, the more so
/// the shorter the uncached part), so no cost that lengthens every prefill of a mixture of experts
/// on a B200 explains the later releases' early misses; from 25 a second the measured decode
/// slows three to five times past the model's (median TPOT 38 to 65 ms at about a hundred
/// streams, predicted 12 to 13). Medians when this test was written: TTFT 28.3 %, TPOT 11.5 %;
/// fails past 32 % and 15 %.
#[test]
fn a_mixture_of_experts_at_light_rates_on_a_b200_stays_where_it_was() {
    let bounds = [("median TTFT (ms)", 0.32), ("median TPOT (ms)", 0.15)];
    let v = medians_within("vllm-issue-26825-b200-qwen3-30b-a3b-fp8.json", None, 18, &bounds);
    // The light loads' first tokens come late: a prefill term that slowed them would show here.
    let light: Vec<f64> = v
        .held_out
        .iter()
        .filter(|r| r.metric == super::points::FitMetric::MedianTtft)
        .filter(|r| r.labels.split(", ").any(|l| ["request_rate=1", "request_rate=2.5", "request_rate=5"].contains(&l)))
        .map(|r| r.error())
        .collect();
    assert_eq!(light.len(), 9);
    assert!(light.iter().filter(|e| **e > 0.0).count() >= 8, "{light:?}");
    // Only medians measured: no headline figures, so no "all" row to print as 0 %.
    let rows = by_metric(&v.held_out.iter().collect::<Vec<_>>());
    assert!(rows.iter().all(|(m, _)| m != "all"), "{rows:?}");
}

/// A run that vLLM started where the simulator's memory plan would not (`testdata/public/`,
/// nothing fitted): vLLM pull request 29217's Qwen3-VL-32B-FP8 on one L40S at
/// `--max-model-len 24000`, 1,000 ShareGPT prompts at once. The plan leaves 4.07 GiB of KV cache
/// where one 24,000-token request needs 5.86, so the run's own context would be refused; the
/// point is predicted with the 16,672 tokens the plan holds and says what it is short of.
/// Measured against predicted when this test was written: mean TTFT +38 %, output throughput
/// -14 % (a smaller KV pool than the run had: more queueing). Fails past 45 % and 20 %, or if
/// the point is skipped or loses its note; a `max-model-len` given by the user is still refused.
#[test]
fn a_run_beyond_the_memory_plan_is_predicted_and_says_what_the_plan_lacks() {
    let file = "vllm-pr-29217-l40s-qwen3-vl-32b-fp8.txt";
    // Its tower left out (both modalities at 0, vLLM's text-only mode): +14 % and +1 %.
    let bounds = [("mean TTFT (ms)", 0.25), ("output tok/s", 0.10)];
    let v = medians_within(file, Some("l40s"), 1, &bounds);
    assert!(v.held_out.iter().all(|r| r.labels.contains("memory-plan=short")), "{:?}", v.held_out);
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    let asked = Defaults {
        hardware: Some("l40s".into()),
        options: vec![("max-model-len".into(), "24000".into())],
        ..Defaults::default()
    };
    let (targets, skipped) =
        super::validate::targets_for(points, &asked, &crate::presets::Presets::embedded().unwrap());
    assert!(targets.is_empty(), "a max-model-len the user gives is the user's to lower");
    assert!(skipped[0].reason.contains("max-model-len=24000 needs 5.86 GiB"), "{skipped:?}");
}

/// A blog's two vLLM runs on a Jetson AGX Thor (`testdata/public/`, October 2025, release and
/// power mode unstated; nothing fitted): Qwen3-8B in BF16 and Qwen3-32B-AWQ, 100 prompts of
/// 2,048 / 128 tokens, 8 at a time, without async scheduling as that autumn's releases ran. The
/// first vLLM prefills timed on a Thor, and slow ones (CALIBRATION.md, "DGX Spark (GB10) and
/// Jetson AGX Thor"): when this test was written the medians of the two read TTFT 18.3 %, TPOT
/// 33.8 % and output throughput 52.8 %, the AWQ model's TPOT -54 % and throughput +88 %. The
/// presets follow NVIDIA's later software instead; this holds the miss from growing unnoticed
/// (past 25 %, 40 % and 60 %).
#[test]
fn the_thor_blog_runs_stay_where_they_were() {
    let defaults = Defaults {
        hardware: Some("jetson-agx-thor".into()),
        options: vec![("async-scheduling".into(), "false".into())],
        ..Defaults::default()
    };
    let bounds = [("mean TTFT (ms)", 0.25), ("mean TPOT (ms)", 0.40), ("output tok/s", 0.60)];
    medians_within_given("wangjunjian-thor-qwen3-8b-and-32b-awq.txt", &defaults, 2, &bounds);
}

/// vLLM pull request 27323's run of GLM-4.6 in BF16 on 8 MI300X (vLLM 0.11.0, tuned Triton
/// fused-MoE tiles; `testdata/public/`, nothing fitted): 1,000 chat requests of 1,024 / 128
/// tokens, 64 at a time. Its output throughput was predicted 17.3 % high when this test was
/// written, the lean of the MI300X's other loaded checks (CALIBRATION.md, "AMD Instinct"); the
/// test fails past 25 %, and if the row's chat endpoint or its serving flags stop reaching the
/// prediction.
#[test]
fn glm_4_6_on_eight_mi300x_stays_where_it_was() {
    let bounds = [("output tok/s", 0.25)];
    let v = medians_within("vllm-pr-27323-mi300x-glm-4.6.json", Some("mi300x"), 1, &bounds);
    let labels = &v.held_out[0].labels;
    for label in ["backend=openai-chat", "enable-prefix-caching=false", "gpu-memory-utilization=0.85", "tp=8"] {
        assert!(labels.contains(label), "{label} not in {labels}");
    }
}
