//! Tests of resolving a deployment: its memory plan, notes, options and prediction band.

use super::*;
use crate::options::Convert;

/// A target resolved from the embedded presets, as `sim predict` resolves it.
pub(crate) fn setup(model: &str, hw: &str, pairs: &[(&str, &str)]) -> Result<SimSetup, SimError> {
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SimSetup::resolve_with(&Presets::embedded().unwrap(), model, hw, &pairs, None)
}

#[test]
fn the_notes_say_which_kernels_price_mxfp4_experts() {
    let says = |hw: &str, pairs: &[(&str, &str)]| {
        let s = setup("openai/gpt-oss-120b", hw, pairs).unwrap();
        s.notes.iter().find(|n| n.starts_with("MXFP4 experts")).cloned()
    };
    assert!(says("h100-sxm", &[]).unwrap().contains("Marlin's dequantizing kernels (mxfp4-backend=marlin"));
    assert!(says("h100-sxm", &[("mxfp4-backend", "triton")]).unwrap().contains("vLLM's Triton kernels"));
    let triton = setup("openai/gpt-oss-120b", "h100-sxm", &[("tp", "2"), ("mxfp4-backend", "triton")]).unwrap();
    assert!(
        triton
            .uncertainty()
            .source
            .ends_with("priced as Triton's kernels, not the device's own that these errors come with")
    );
    // On ROCm Triton's are the device's own: the band says nothing of them, and of Marlin's
    // when chosen there.
    assert!(says("mi300x", &[]).unwrap().contains("the ones it runs on ROCm"));
    let rocm = setup("openai/gpt-oss-120b", "mi300x", &[]).unwrap();
    assert!(!rocm.uncertainty().source.contains("priced as"));
    let marlin = setup("openai/gpt-oss-120b", "mi300x", &[("mxfp4-backend", "marlin")]).unwrap();
    assert!(
        marlin
            .uncertainty()
            .source
            .ends_with("priced as Marlin's kernels, not the device's own that these errors come with")
    );
    // On parts whose MXFP4 experts take FP8 activations there is no such choice to note.
    assert_eq!(says("b200", &[]), None);
    assert!(setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().notes.iter().all(|n| !n.contains("MXFP4")));
}

#[test]
fn the_notes_say_how_a_checkpoint_the_device_cannot_multiply_in_runs() {
    let note = |model: &str, hw: &str, pairs: &[(&str, &str)]| {
        let s = setup(model, hw, pairs).unwrap();
        s.notes.iter().find(|n| n.contains("Marlin's kernels dequantize")).cloned()
    };
    // FP8 on the A100: W8A16, its dense products bound by the tensor cores at dequant-mma.
    let a100 = note("Qwen/Qwen3-14B-FP8", "a100-80g", &[]).unwrap();
    assert!(a100.starts_with("fp8 weights run as W8A16 on a100-80g, which has no FP8 tensor cores"), "{a100}");
    assert!(
        a100.ends_with("the dense products are bound by the tensor cores, at 0.50 of their BF16 rate (dequant-mma)")
    );
    let lower = note("Qwen/Qwen3-14B-FP8", "a100-80g", &[("dequant-mma", "0.3")]).unwrap();
    assert!(lower.ends_with("at 0.30 of their BF16 rate (dequant-mma)"), "{lower}");
    // The experts of a mixture of experts there are bound by the unpacking, with its rate.
    let moe = note("Qwen/Qwen3-235B-A22B-FP8", "a100-80g", &[("tp", "8")]).unwrap();
    assert!(moe.contains("the expert products are bound by the SMs unpacking the weights, at 113 TFLOP/s"), "{moe}");
    // AWQ runs dequantized everywhere, with no units missing to name.
    let awq = note("Qwen/Qwen3-8B", "h100-sxm", &[("precision", "awq-int4")]).unwrap();
    assert!(awq.starts_with("awq-int4 weights run as W4A16: Marlin's kernels"), "{awq}");
    // NVFP4 on the GB10, which lacks FP4 units.
    assert!(note("Qwen/Qwen3-8B", "dgx-spark", &[("precision", "nvfp4")]).unwrap().contains("no FP4 tensor cores"));
    // Nothing to say where the device multiplies in the format, nor for BF16, nor for MXFP4
    // experts, whose note says which kernels price them.
    assert_eq!(note("Qwen/Qwen3-14B-FP8", "h100-sxm", &[]), None);
    assert_eq!(note("Qwen/Qwen3-14B", "a100-80g", &[]), None);
    assert_eq!(note("openai/gpt-oss-120b", "h100-sxm", &[]), None);
}

#[test]
fn drafts_widen_the_band_and_the_note_says_what_the_drafter_takes() {
    // On one H100 the two models' weights would leave no room for a KV cache: two GPUs.
    let plain = setup("openai/gpt-oss-120b", "h100-sxm", &[("tp", "2")]).unwrap();
    let drafts = [
        ("tp", "2"),
        ("speculative-config", r#"{"method": "eagle3", "model": "openai/gpt-oss-20b", "num_speculative_tokens": 2}"#),
        ("spec-acceptance", "0.7"),
    ];
    let drafting = setup("openai/gpt-oss-120b", "h100-sxm", &drafts).unwrap();
    let one_gpu = setup("openai/gpt-oss-120b", "h100-sxm", &drafts[1..]);
    assert!(matches!(one_gpu, Err(SimError::DoesNotFit { .. })), "{one_gpu:?}");
    let (narrow, wide) = (plain.uncertainty(), drafting.uncertainty());
    assert!(wide.source.contains("speculative decoding is priced from its design"), "{}", wide.source);
    assert!(!narrow.source.contains("speculative"), "{}", narrow.source);
    let assumed = crate::hardware::Uncertainty::default();
    for (n, w, a) in [(narrow.ttft, wide.ttft, assumed.ttft), (narrow.tpot, wide.tpot, assumed.tpot)] {
        assert!(w[0] <= n[0].min(a[0]) && w[1] >= n[1].max(a[1]), "{n:?} {w:?}");
    }
    let note = drafting.notes.iter().find(|n| n.starts_with("speculative decoding")).unwrap();
    assert!(note.contains("gpt-oss-20b") && note.contains("GiB a GPU") && note.contains("KiB a token"), "{note}");
}

/// Another model on an H100 takes the spread of the H100's checks of other models; so does a
/// fitted profile's band (which names no spread of its own) outside the fit's deployments.
#[test]
fn outside_its_calibration_a_band_widens_to_the_device_s_checks_of_other_deployments() {
    let elsewhere = Presets::embedded().unwrap().hardware("h100-sxm").unwrap().uncertainty.outside();
    assert!(elsewhere.ttft[0] < crate::hardware::Uncertainty::default().ttft[0], "{elsewhere:?}");
    let mut other = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap();
    assert_eq!(other.uncertainty().ttft, elsewhere.ttft);
    other.stack.uncertainty = Some(crate::hardware::Uncertainty {
        source: "a fit".into(),
        ttft: [-0.1, 0.1],
        tp: vec![8],
        ..Default::default()
    });
    let fitted = other.uncertainty();
    assert_eq!(fitted.ttft, elsewhere.ttft);
    assert!(fitted.source.starts_with("a fit; tp 1 is outside"), "{}", fitted.source);
}

#[test]
fn a_model_that_does_not_fit_says_so_with_the_numbers() {
    let err = setup("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", "rtx-4090", &[]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, SimError::DoesNotFit { .. }));
    assert!(msg.contains("does not fit on rtx-4090"), "{msg}");
    assert!(msg.contains("GiB per GPU") && msg.contains("23.6 GiB"), "{msg}");
    if let SimError::DoesNotFit { weights_gib, .. } = err {
        assert!(weights_gib > 200.0 && weights_gib < 240.0, "{weights_gib}");
    }
    // Spread over 8 B200s it fits.
    assert!(setup("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", "b200", &[("tp", "4")]).is_ok());
}

#[test]
fn max_model_len_is_checked_or_derived() {
    let err = setup("Qwen/Qwen3-8B", "rtx-4090", &[("max-model-len", "40960")]);
    // 8B BF16 on a 24 GB card barely fits; a 40k context does not.
    let msg = err.unwrap_err().to_string();
    assert!(msg.contains("max-model-len=40960") && msg.contains("GiB"), "{msg}");
    let s = setup("Qwen/Qwen3-4B", "rtx-4090", &[]).unwrap();
    assert!(u64::from(s.max_model_len) <= s.memory.kv_tokens);
    let scout = setup("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "h100-sxm", &[("tp", "4")]).unwrap();
    assert!(scout.max_model_len < 10_485_760);
    let note = scout.notes.iter().find(|n| n.contains("the most the KV cache holds")).expect("a note on the length");
    assert!(
        note.starts_with(&format!("max-model-len {}, ", scout.max_model_len))
            && note.contains("not the model's 10485760")
            && note.contains("--max-model-len auto")
            && note.contains("refuses to start"),
        "{note}"
    );
    // `auto` (or -1) asks for that length; a length given in vLLM's suffixes is that length.
    let auto =
        setup("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "h100-sxm", &[("tp", "4"), ("max-model-len", "auto")]);
    assert_eq!(auto.unwrap().max_model_len, scout.max_model_len);
    assert_eq!(setup("Qwen/Qwen3-8B", "h100-sxm", &[("max-model-len", "32K")]).unwrap().max_model_len, 32_768);
}

#[test]
fn hybrid_models_say_their_state_and_cache_no_prefix_unless_asked() {
    let s = setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2")]).unwrap();
    assert!(!s.options.enable_prefix_caching);
    let note = s.notes.iter().find(|n| n.contains("linear attention")).expect("a note on the state");
    // 30 layers of 16 heads x 128 x 128 FP32 values and 3 x 4096 BF16 inputs: 30.7 MiB a GPU.
    assert!(note.contains("30 of 40 mixers") && note.contains("30.7 MiB") && note.contains("no prefix caching"));
    // A Mamba-2 hybrid says so: Nemotron 3 Nano's 23 layers of 64 heads x 64 x 128 FP32 values
    // and 3 x 6144 BF16 inputs, 46.8 MiB a GPU.
    let nano = setup("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h100-sxm", &[]).unwrap();
    assert!(!nano.options.enable_prefix_caching);
    let note = nano.notes.iter().find(|n| n.contains("Mamba-2")).expect("a note on the state");
    assert!(note.contains("23 of 29 mixers") && note.contains("46.8 MiB"), "{note}");
    let asked = setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2"), ("enable-prefix-caching", "true")]).unwrap();
    assert!(asked.options.enable_prefix_caching);
    assert!(setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().options.enable_prefix_caching);
    // max-model-len is checked against the pool of the grown blocks and the state.
    let long = setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2"), ("max-model-len", "262144")]).unwrap();
    assert_eq!(long.max_model_len, 262_144);
    let needed = long.memory.layout.units_for_blocks(262_144_u64.div_ceil(u64::from(long.memory.layout.block_size)));
    assert!(needed <= long.memory.layout.total_units);
}

#[test]
fn a_config_json_path_resolves_like_a_preset() {
    let path = format!("{}/testdata/hf-configs/qwen3-8b.json", env!("CARGO_MANIFEST_DIR"));
    let from_file = setup(&path, "h100-sxm", &[]).unwrap();
    let from_preset = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap();
    assert_eq!(from_file.memory, from_preset.memory);
    let err = setup("/nonexistent/config.json", "h100-sxm", &[]).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/config.json"), "{err}");
}

#[test]
fn pipeline_stages_run_synchronously_with_a_batch_in_flight_a_stage() {
    let pp = setup("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp", "4"), ("pp", "2")]).unwrap();
    assert!(!pp.options.async_scheduling);
    let says = |s: &SimSetup, what: &str| s.notes.iter().any(|n| n.contains(what));
    assert!(says(&pp, "vLLM has none with pipeline parallelism"), "{:?}", pp.notes);
    assert!(says(&pp, "up to 2 batches in flight"), "{:?}", pp.notes);
    let tp = setup("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp", "8")]).unwrap();
    assert!(!says(&tp, "in flight") && !says(&tp, "async"), "{:?}", tp.notes);
}

#[test]
fn data_parallel_ranks_are_simulated_as_one_larger_scheduler() {
    let one = setup("Qwen/Qwen3-8B", "h100-sxm", &[("max-num-seqs", "256")]).unwrap();
    let two = setup("Qwen/Qwen3-8B", "h100-sxm", &[("max-num-seqs", "256"), ("dp", "2")]).unwrap();
    assert_eq!(two.memory.weights_gib, one.memory.weights_gib);
    assert_eq!(two.memory.kv_gib, one.memory.kv_gib);
    assert_eq!(two.memory.layout.total_units, 2 * one.memory.layout.total_units);
    assert_eq!(two.memory.kv_tokens, one.memory.kv_tokens);
    assert_eq!(two.max_model_len, one.max_model_len);
    assert_eq!((two.options.max_num_seqs, two.options.max_num_batched_tokens), (512, 16384));
    assert_eq!(two.options.gpus(), 2);
    assert!(two.notes.iter().any(|n| n.contains("dp=2") && n.contains("one scheduler")), "{:?}", two.notes);
    assert!(!one.notes.iter().any(|n| n.contains("one scheduler")));
}

#[test]
fn one_gpu_per_node_hardware_takes_as_many_nodes_as_gpus() {
    let s = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4")]).unwrap();
    assert_eq!(s.options.nodes, 4);
    assert!(s.notes.iter().any(|n| n == "tp=4 on dgx-spark (1 GPU per node): 4 nodes"), "{:?}", s.notes);
    // Synchronous on Ray's executor, and the note names the way to keep async scheduling.
    let ray = s.notes.iter().find(|n| n.contains("Ray")).expect("a note on the executor");
    assert!(ray.contains("spans 4 machines") && ray.contains("nnodes=4"), "{ray}");
    let mp = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("nnodes", "4")]).unwrap();
    assert!(mp.options.async_scheduling && !mp.notes.iter().any(|n| n.contains("async")), "{:?}", mp.notes);
    // With pipeline stages the multiprocessing executor would not keep it either: no such hint.
    let staged = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "2"), ("pp", "2")]).unwrap();
    let ray = staged.notes.iter().find(|n| n.contains("Ray")).expect("a note on the executor");
    assert!(ray.contains("spans 4 machines") && !ray.contains("nnodes"), "{ray}");
    let err = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("nodes", "3")]).unwrap_err().to_string();
    assert!(err.contains("nodes=3") && err.contains("raise nodes"), "{err}");
    let one = setup("openai/gpt-oss-120b", "h100-sxm", &[("tp", "4")]).unwrap();
    assert!(!one.notes.iter().any(|n| n.contains("nodes")), "{:?}", one.notes);
}

#[test]
fn a_checkpoint_named_a_reranker_scores_as_one_on_its_preset_s_shapes() {
    let p = Presets::embedded().unwrap();
    let convert = |model: &str, pairs: &[(String, String)]| {
        let s = SimSetup::resolve_with(&p, model, "h100-sxm", pairs, None).unwrap();
        (s.model.id.clone(), s.options.convert)
    };
    assert_eq!(convert("Qwen/Qwen3-Reranker-0.6B", &[]), ("Qwen/Qwen3-0.6B".into(), Convert::Classify));
    assert_eq!(convert("Qwen/Qwen3-Embedding-0.6B", &[]), ("Qwen/Qwen3-0.6B".into(), Convert::Embed));
    assert_eq!(convert("Qwen/Qwen3-0.6B", &[]).1, Convert::Embed);
    let embed = [("convert".to_string(), "embed".to_string())];
    assert_eq!(convert("Qwen/Qwen3-Reranker-0.6B", &embed).1, Convert::Embed);
    // `auto` given is the name's rule too, whatever its key's spelling.
    let auto = [("--convert".to_string(), "auto".to_string())];
    assert_eq!(convert("Qwen/Qwen3-Reranker-0.6B", &auto).1, Convert::Classify);
}
