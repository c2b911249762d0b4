//! The preset registry's lookups: by name, alias, shortened name and quantization tag.

use super::*;
use crate::hardware::Uncertainty;
use crate::precision::Precision;
use crate::profile::StackProfile;

#[test]
fn hardware_is_found_by_device_name_and_any_word_separator_but_never_guessed() {
    let p = Presets::embedded().unwrap();
    for (given, preset) in [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("H100_SXM", "h100-sxm"),
        ("h100 sxm", "h100-sxm"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("  MI355X ", "mi355x"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA DGX Spark", "dgx-spark"),
        ("DGX Spark", "dgx-spark"),
        ("NVIDIA A100-SXM4-40GB", "a100-40g"),
        ("NVIDIA H800", "h800"),
        ("AMD Instinct MI350X", "mi350x"),
    ] {
        assert_eq!(p.hardware(given).unwrap().name, preset, "{given:?}");
    }
    for unknown in ["h100-nvl-pcie", "h20", "b2000", "nvidia", ""] {
        assert!(p.hardware(unknown).is_err(), "{unknown:?} is no preset");
    }
}

#[test]
fn a_device_s_variants_differ_from_it_only_where_their_datasheets_do() {
    let p = Presets::embedded().unwrap();
    let same_but = |variant: &str, of: &str, differ: &dyn Fn(&mut HardwareSpec)| {
        let (v, mut base) = (p.hardware(variant).unwrap().clone(), p.hardware(of).unwrap().clone());
        differ(&mut base);
        let named = |h: HardwareSpec| HardwareSpec {
            name: String::new(),
            aliases: Vec::new(),
            description: String::new(),
            device_name: String::new(),
            uncertainty: Uncertainty::default(),
            stack: StackProfile { name: None, ..h.stack },
            ..h
        };
        assert_eq!(named(v), named(base), "{variant} against {of}");
    };
    // The H800: the H100 SXM with NVLink at 400 GB/s both ways.
    same_but("h800", "h100-sxm", &|h| h.intra_node.as_mut().unwrap().bandwidth_gbs = 200.0);
    // The A100 40 GB: HBM2 at 1,555 GB/s.
    same_but("a100-40g", "a100-80g", &|h| (h.memory_gib, h.bandwidth_gbs) = (39.6, 1555.0));
    // The MI350X: the MI355X at a 2,200 MHz peak clock (2.3 PFLOP/s of BF16 on its datasheet).
    let (mi350, mi355) = (p.hardware("mi350x").unwrap(), p.hardware("mi355x").unwrap());
    let ratio = 2200.0 / 2400.0;
    for (a, b) in [
        (mi350.peak_tflops.bf16, mi355.peak_tflops.bf16),
        (mi350.peak_tflops.fp8.unwrap(), mi355.peak_tflops.fp8.unwrap()),
        (mi350.peak_tflops.fp4.unwrap(), mi355.peak_tflops.fp4.unwrap()),
        (mi350.peak_tflops.int32.unwrap(), mi355.peak_tflops.int32.unwrap()),
    ] {
        assert!((a / (b * ratio) - 1.0).abs() < 0.002, "{a} against {b}");
    }
    assert_eq!((mi350.memory_gib, mi350.bandwidth_gbs), (mi355.memory_gib, mi355.bandwidth_gbs));
    // Uncalibrated, they say so (the H800 takes the H100 SXM's band for deployments outside its
    // calibration, unmeasured).
    for hw in ["h800", "a100-40g", "mi350x"] {
        let source = &p.hardware(hw).unwrap().uncertainty.source;
        assert!(source.contains("not calibrated") || source.ends_with("no measurement of this part"), "{hw}: {source}");
    }
    // vLLM's batch defaults: 256 sequences under 70 GiB, and on any A100.
    assert!(!p.hardware("a100-40g").unwrap().has_large_batch_defaults());
    assert!(p.hardware("h800").unwrap().has_large_batch_defaults());
}

#[test]
fn every_embedded_preset_parses_and_is_found_by_name() {
    let p = Presets::embedded().unwrap();
    assert_eq!(p.hardware_presets().len(), HARDWARE.len());
    assert_eq!(p.model_presets().len(), MODELS.len());
    for hw in p.hardware_presets() {
        assert_eq!(p.hardware(&hw.name.to_uppercase()).unwrap().name, hw.name);
    }
    for m in p.model_presets() {
        assert_eq!(p.model(&m.id.to_lowercase()).unwrap().id, m.id);
    }
    assert_eq!(p.model("qwen3-8b").unwrap().id, "Qwen/Qwen3-8B");
    assert_eq!(p.hardware("GB10").unwrap().name, "dgx-spark");
}

#[test]
fn model_presets_match_published_parameter_counts() {
    // (id, total B, active B) as published, embeddings counted once per matrix.
    let published = [
        ("Qwen/Qwen3-0.6B", 0.60, 0.60),
        ("Qwen/Qwen3-4B", 4.02, 4.02),
        ("meta-llama/Llama-3.2-1B", 1.24, 1.24),
        ("meta-llama/Llama-3.2-3B", 3.21, 3.21),
        ("meta-llama/Llama-3.1-8B-Instruct", 8.03, 8.03),
        ("google/gemma-3-1b-it", 1.00, 1.00),
        ("google/gemma-3-12b-it", 11.76, 11.76),
        ("microsoft/phi-4", 14.66, 14.66),
        ("microsoft/Phi-4-mini-instruct", 3.84, 3.84),
        ("nvidia/Llama-3.3-70B-Instruct-NVFP4", 70.55, 70.55),
        ("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", 235.1, 22.2),
        ("openai/gpt-oss-20b", 20.9, 4.19),
        ("openai/gpt-oss-120b", 116.8, 5.71),
        ("zai-org/GLM-4.6-FP8", 352.8, 33.6),
        ("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", 107.8, 17.2),
        ("meta-llama/Llama-3.1-70B-Instruct", 70.55, 70.55),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", 70.55, 70.55),
        ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
        ("Qwen/Qwen3-30B-A3B-FP8", 30.5, 3.3),
        ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
        ("Qwen/Qwen3-235B-A22B-FP8", 235.1, 22.2),
        ("Qwen/Qwen3-4B-Instruct-2507", 4.02, 4.02),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", 30.5, 3.3),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", 235.1, 22.2),
        // 671 B without the multi-token-prediction layer, 37 B active.
        ("deepseek-ai/DeepSeek-R1", 671.0, 37.0),
        // Without their multi-token-prediction modules.
        ("moonshotai/Kimi-K2-Instruct", 1026.0, 32.9),
        ("moonshotai/Kimi-K2-Instruct-0905", 1026.0, 32.9),
        ("moonshotai/Kimi-K2-Thinking", 1026.0, 32.9),
        // 355 B and 32 B published, the multi-token-prediction layer's 2.6 B among them.
        ("zai-org/GLM-4.5", 352.8, 33.6),
        // 230 B published; its "10 B activated" leaves out the 1.2 B of the embeddings.
        ("MiniMaxAI/MiniMax-M2", 228.7, 11.0),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", 30.5, 3.3),
        // The language models (their vision towers, about 0.5 B, take memory only).
        ("Qwen/Qwen3.5-397B-A17B", 397.0, 17.0),
        ("Qwen/Qwen3.5-122B-A10B", 122.0, 10.0),
        // The language models of 27.4 B, 31.1 B and 24.0 B published with their vision towers.
        ("google/gemma-3-27b-it", 27.0, 27.0),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", 30.5, 3.3),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", 23.6, 23.6),
        ("Qwen/Qwen2.5-72B-Instruct", 72.7, 72.7),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480.0, 35.0),
        // The language model: 400 B in all, 17 B active (its vision tower takes memory only).
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400.0, 17.0),
        ("mistralai/Mistral-Large-Instruct-2411", 123.0, 123.0),
        ("Qwen/Qwen2.5-7B-Instruct", 7.61, 7.61),
        ("Qwen/Qwen2.5-14B-Instruct", 14.7, 14.7),
        ("Qwen/Qwen2.5-32B-Instruct", 32.5, 32.5),
        ("Qwen/QwQ-32B", 32.5, 32.5),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.78, 1.78),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 7.62, 7.62),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 14.8, 14.8),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 32.8, 32.8),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 8.03, 8.03),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 70.6, 70.6),
        ("meta-llama/Llama-3.1-405B-Instruct", 405.9, 405.9),
        ("mistralai/Mistral-7B-Instruct-v0.3", 7.25, 7.25),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7, 12.9),
        ("microsoft/Phi-4-reasoning-plus", 14.7, 14.7),
        // The language models of 8.29 B and 8.77 B published with their vision towers.
        ("Qwen/Qwen2.5-VL-7B-Instruct", 7.61, 7.61),
        ("Qwen/Qwen3-VL-8B-Instruct", 8.19, 8.19),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8.03, 8.03),
        ("meta-llama/Meta-Llama-3-70B-Instruct", 70.6, 70.6),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.49, 0.49),
        ("Qwen/Qwen2.5-1.5B-Instruct", 1.54, 1.54),
        ("Qwen/Qwen2.5-3B-Instruct", 3.09, 3.09),
        ("google/gemma-2-2b-it", 2.61, 2.61),
        ("google/gemma-2-9b-it", 9.24, 9.24),
        ("google/gemma-2-27b-it", 27.2, 27.2),
    ];
    let p = Presets::embedded().unwrap();
    for (id, total, active) in published {
        let m = p.model(id).unwrap();
        let t = m.total_params() / 1e9;
        let a = m.active_params() / 1e9;
        assert!((t / total - 1.0).abs() < 0.02, "{id}: total {t:.2} B vs {total}");
        assert!((a / active - 1.0).abs() < 0.03, "{id}: active {a:.2} B vs {active}");
    }
    // Published as totals, their active counts only rounded in their names (A3B).
    for (id, total) in [("Qwen/Qwen3-Next-80B-A3B-Instruct", 80.0), ("Qwen/Qwen3.5-35B-A3B", 35.0)] {
        let t = p.model(id).unwrap().total_params() / 1e9;
        assert!((t / total - 1.0).abs() < 0.02, "{id}: total {t:.2} B vs {total}");
    }
    // The dense Qwen3.5 models, named for their language models (the vision tower apart).
    for (id, named) in [("Qwen/Qwen3.5-9B", 9.0), ("Qwen/Qwen3.5-27B", 27.0)] {
        let m = p.model(id).unwrap();
        let t = m.total_params() / 1e9;
        assert!((t / named - 1.0).abs() < 0.02, "{id}: language model {t:.2} B vs {named}");
        assert_eq!(m.active_params(), m.total_params(), "{id} is dense");
    }
}

#[test]
fn fp8_variants_keep_the_shape_of_their_base_model() {
    let p = Presets::embedded().unwrap();
    for (base, fp8) in [
        ("meta-llama/Llama-3.1-70B-Instruct", "nvidia/Llama-3.1-70B-Instruct-FP8"),
        ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-FP8"),
        ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8"),
    ] {
        let (b, f) = (p.model(base).unwrap(), p.model(fp8).unwrap());
        assert_eq!((b.precision, f.precision), (Precision::Bf16, Precision::Fp8), "{fp8}");
        assert!(same_shapes(&b, &f), "{fp8}");
    }
    let r1 = p.model("DeepSeek-R1").unwrap();
    assert!(r1.mla.is_some() && r1.precision == Precision::Fp8);
}

#[test]
fn a_model_is_found_by_its_aliases_which_name_no_other_preset() {
    let p = Presets::embedded().unwrap();
    for alias in ["nvidia/Llama-3.3-70B-Instruct-FP4", "redhatai/llama-3.3-70b-instruct-nvfp4"] {
        assert_eq!(p.model(alias).unwrap().id, "nvidia/Llama-3.3-70B-Instruct-NVFP4", "{alias}");
    }
    // A release or fine-tune of the same shapes is its preset under another name.
    for (alias, id) in [
        ("zai-org/GLM-4.7", "zai-org/GLM-4.6"),
        ("zai-org/GLM-4.7-FP8", "zai-org/GLM-4.6-FP8"),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct"),
        ("microsoft/Phi-4-reasoning", "microsoft/Phi-4-reasoning-plus"),
        ("Qwen/Qwen3-VL-8B-Thinking", "Qwen/Qwen3-VL-8B-Instruct"),
    ] {
        assert_eq!(p.model(alias).unwrap().id, id, "{alias}");
    }
    // The distilled reasoning models are their students' shapes with the longer context.
    for (distilled, student) in [
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "nvidia/Llama-3.3-70B-Instruct-NVFP4"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "meta-llama/Llama-3.1-8B-Instruct"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "Qwen/Qwen2.5-32B-Instruct"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "Qwen/Qwen2.5-14B-Instruct"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "Qwen/Qwen2.5-7B-Instruct"),
    ] {
        let (d, s) = (p.model(distilled).unwrap(), p.model(student).unwrap());
        assert!(same_shapes(&d, &ModelShape { max_context: d.max_context, ..s }), "{distilled}");
        assert_eq!(d.max_context, 131_072, "{distilled}");
    }
    // Llama 3 is Llama 3.1's shapes with its first 8,192 tokens of context.
    for (first, later) in [
        ("Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-70B-Instruct"),
    ] {
        let (f, l) = (p.model(first).unwrap(), p.model(later).unwrap());
        assert!(same_shapes(&f, &ModelShape { max_context: 8192, ..l }), "{first}");
    }
    let names: Vec<String> =
        p.models.iter().flat_map(|m| std::iter::once(&m.id).chain(&m.aliases)).map(|n| n.to_lowercase()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name is given to two presets");
}

#[test]
fn unknown_names_list_the_known_presets() {
    let p = Presets::embedded().unwrap();
    let err = p.hardware("tpu-v5").unwrap_err().to_string();
    assert!(err.contains("tpu-v5") && err.contains("h100-sxm") && err.contains("mi300x"));
    let err = p.model("Qwen/Qwen9-1T").unwrap_err().to_string();
    assert!(err.contains("Qwen/Qwen3-8B") && err.contains("config.json"), "{err}");
    assert!(!err.contains("did you mean"), "{err}");
    // A name a keystroke or two from a preset's (after the organisation) offers it.
    let err = p.model("meta-llama/Llama-3.1-8B-Instuct").unwrap_err().to_string();
    assert!(err.contains("(did you mean meta-llama/Llama-3.1-8B-Instruct?)"), "{err}");
    let err = p.model("mistralai/Mistral-7B-Instruct-v0.2").unwrap_err().to_string();
    assert!(err.contains("(did you mean mistralai/Mistral-7B-Instruct-v0.3?)"), "{err}");
    // A size is no typo: Qwen3-2B is not offered Qwen3-32B.
    let err = p.model("Qwen/Qwen3-2B").unwrap_err().to_string();
    assert!(!err.contains("did you mean"), "{err}");
    assert_eq!(sizes("qwen3-vl-235b-a22b-instruct"), ["235b", "a22b"]);
    assert_eq!(sizes("mixtral-8x7b-v0.1"), ["8x7b"]);
    assert!(sizes("phi-4-mini-instruct").is_empty());
}

#[test]
fn a_shortened_name_finds_the_one_preset_it_fits() {
    let p = Presets::embedded().unwrap();
    for (name, id) in [
        ("gpt-oss-120b", "openai/gpt-oss-120b"),
        ("GLM-4.6", "zai-org/GLM-4.6"),
        ("Llama-3.3-70B-Instruct-FP4", "nvidia/Llama-3.3-70B-Instruct-NVFP4"),
        ("Llama-3.3-70B-NVFP4", "nvidia/Llama-3.3-70B-Instruct-NVFP4"),
        ("Llama-4-Scout-NVFP4", "nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4"),
        ("Qwen3-VL-235B-AWQ", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
        ("qwen3-vl-32b-fp8", "Qwen/Qwen3-VL-32B-Instruct-FP8"),
    ] {
        assert_eq!(p.model(name).unwrap().id, id, "{name}");
    }
    // A release's tags that keep the shapes are passed over when the whole name fits none.
    for (name, id) in [
        ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"),
        ("meta-llama/Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-3B"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
        ("Qwen/Qwen3-14B-Base", "Qwen/Qwen3-14B"),
        ("google/gemma-3-27b-pt", "google/gemma-3-27b-it"),
        ("Qwen/Qwen3-Embedding-8B", "Qwen/Qwen3-8B"),
        ("Qwen/Qwen3-Reranker-0.6B", "Qwen/Qwen3-0.6B"),
    ] {
        assert_eq!(p.model(name).unwrap().id, id, "{name}");
    }
    assert!(p.model("Qwen/Qwen3-8B-Instruct-2507-Abliterated").is_err(), "a part no preset has still fits none");
    // Presets of different shapes fit (two sizes): refused, with them.
    let err = p.model("gpt-oss").unwrap_err().to_string();
    assert!(
        err.contains("fits several") && err.contains("openai/gpt-oss-20b") && err.contains("openai/gpt-oss-120b"),
        "{err}"
    );
    // A shortening leaves out a release's tags, sizes, expert counts and the organisation's
    // name, never a word that tells a model from its siblings: `Qwen3-235B` is the text model,
    // not the VL one; `GLM-4.5` is not `GLM-4.5-Air`.
    for (name, id) in [
        ("Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8"),
        ("Qwen3-235B-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507"),
        ("Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507"),
        ("Qwen3-30B-A3B-Thinking-2507", "Qwen/Qwen3-30B-A3B-Instruct-2507"),
        ("zai-org/GLM-4.5", "zai-org/GLM-4.5"),
        ("GLM-4.5-Air", "zai-org/GLM-4.5-Air"),
        ("Nemotron-3-Nano", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
        ("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
        ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2-Thinking"),
        ("Kimi-K2-Instruct-0905", "moonshotai/Kimi-K2-Instruct-0905"),
        ("moonshotai/Kimi-K2-Base", "moonshotai/Kimi-K2-Instruct"),
    ] {
        assert_eq!(p.model(name).unwrap().id, id, "{name}");
    }
    for name in ["Llama-4-NVFP4", "Qwen3-Coder", "Qwen3-30B-A3B-Coder", "Mistral-7B"] {
        assert!(p.model(name).is_err(), "{name} names no preset alone");
    }
    // Two releases of one model whose contexts differ: refused with both, not guessed.
    let err = p.model("Qwen3-235B").unwrap_err().to_string();
    assert!(
        err.contains("Qwen/Qwen3-235B-A22B,")
            && err.contains("Qwen/Qwen3-235B-A22B-Instruct-2507")
            && !err.contains("VL"),
        "{err}"
    );
    // A format the simulator does not price: said so, with the shapes, never priced as another.
    for (name, shapes, formats) in [
        ("Qwen/Qwen3-8B-Int8", "Qwen/Qwen3-8B", "int8"),
        ("unsloth/Qwen3-8B-bnb-4bit", "Qwen/Qwen3-8B", "bnb-4bit"),
        ("RedHatAI/Qwen3-8B-quantized.w8a8", "Qwen/Qwen3-8B", "quantized.w8a8"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-GGUF", "Qwen/Qwen3-30B-A3B-Instruct-2507", "gguf"),
    ] {
        let err = p.model(name).unwrap_err().to_string();
        assert!(
            err.contains(&format!("is {shapes}'s shapes with {formats} weights")) && err.contains("--precision"),
            "{err}"
        );
    }
    // A part no preset has, one part alone, or tags of two formats: nothing.
    for name in ["Qwen3-8B-Int8", "Qwen3", "Qwen3-FP8", "Qwen3-8B-FP8-AWQ"] {
        assert!(p.model(name).is_err(), "{name}");
    }
}

#[test]
fn a_name_s_quantization_tag_sets_the_weight_format_of_the_shapes_it_names() {
    let p = Presets::embedded().unwrap();
    let llama = p.model("nvidia/Llama-3.3-70B-Instruct-NVFP4").unwrap();
    // With no tag a checkpoint is its untagged preset's format, else BF16; a tag says it.
    for (name, from, precision) in [
        ("meta-llama/Llama-3.3-70B-Instruct", "nvidia/Llama-3.3-70B-Instruct-NVFP4", Precision::Bf16),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "nvidia/Llama-3.3-70B-Instruct-NVFP4", Precision::Fp8),
        ("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16", "nvidia/Llama-3.3-70B-Instruct-NVFP4", Precision::AwqInt4),
        ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", Precision::Fp8),
        ("Qwen/Qwen3-8B-AWQ", "Qwen/Qwen3-8B", Precision::AwqInt4),
        ("Qwen/Qwen3-14B-GPTQ-Int4", "Qwen/Qwen3-14B", Precision::AwqInt4),
        ("zai-org/GLM-4.5-Air-FP8", "zai-org/GLM-4.5-Air", Precision::Fp8),
        ("Qwen/Qwen3-VL-235B-A22B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", Precision::Bf16),
        ("Qwen/Qwen3-VL-235B-A22B-Thinking", "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", Precision::Bf16),
        ("nvidia/Qwen3-235B-A22B-FP4", "Qwen/Qwen3-235B-A22B", Precision::Nvfp4),
        ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-ai/DeepSeek-R1", Precision::Nvfp4),
        ("unsloth/gpt-oss-20b-BF16", "openai/gpt-oss-20b", Precision::Bf16),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B-Instruct", Precision::Fp8),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct-FP8", "Qwen/Qwen3-VL-30B-A3B-Instruct", Precision::Fp8),
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", "Qwen/Qwen2.5-72B-Instruct", Precision::AwqInt4),
        ("Intel/Qwen3.5-397B-A17B-int4-AutoRound", "Qwen/Qwen3.5-397B-A17B", Precision::AwqInt4),
        ("Intel/Qwen3.5-122B-A10B-int4-mixed-AutoRound", "Qwen/Qwen3.5-122B-A10B", Precision::AwqInt4),
        ("QuantTrio/GLM-4.6-GPTQ-Int4-Int8Mix", "zai-org/GLM-4.6", Precision::AwqInt4),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct", Precision::Fp8),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B-Instruct-2507", Precision::Fp8),
        ("Qwen3-235B-A22B-Instruct-2507-FP8-dynamic", "Qwen/Qwen3-235B-A22B-Instruct-2507", Precision::Fp8),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "Qwen/Qwen3-30B-A3B-Instruct-2507", Precision::Fp8),
        ("Qwen/Qwen3-4B-Instruct-2507-FP8", "Qwen/Qwen3-4B-Instruct-2507", Precision::Fp8),
        ("zai-org/GLM-4.5-FP8", "zai-org/GLM-4.5", Precision::Fp8),
        (
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
            Precision::Fp8,
        ),
        (
            "nvidia/Llama-4-Maverick-17B-128E-Instruct-FP4",
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
            Precision::Nvfp4,
        ),
    ] {
        let m = p.model(name).unwrap();
        let base = p.model(from).unwrap();
        assert_eq!((m.id.as_str(), m.derived_from.as_deref(), m.precision), (name, Some(from), precision));
        assert!(same_shapes(&m, &base) && m.aliases.is_empty(), "{name}");
    }
    assert_eq!(p.model("meta-llama/Llama-3.3-70B-Instruct").unwrap().layers, llama.layers);
    // A preset in the format asked for is that preset, whatever the tag's spelling.
    for (name, id) in [
        ("QuantTrio/GLM-4.6-FP8", "zai-org/GLM-4.6-FP8"),
        ("Qwen/Qwen3-VL-235B-A22B-Instruct-AWQ", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "Qwen/Qwen3-30B-A3B-Instruct-2507"),
        ("cpatonn/Qwen3-VL-235B-A22B-Instruct-AWQ-4bit", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
    ] {
        let m = p.model(name).unwrap();
        assert_eq!((m.id.as_str(), m.derived_from), (id, None), "{name}");
    }
}

#[test]
fn the_parts_of_a_model_s_name_are_read_apart_from_its_quantization_tags() {
    let read = |name: &str| NameParts::read(name).map(|n| (n.base.join("-"), n.precision));
    assert_eq!(
        read("llama-3.3-70b-instruct-fp8-dynamic"),
        Some(("llama-3.3-70b-instruct".into(), Some(Precision::Fp8)))
    );
    assert_eq!(read("qwen3-14b-gptq-int4"), Some(("qwen3-14b".into(), Some(Precision::AwqInt4))));
    assert_eq!(
        read("llama-3.3-70b-instruct-quantized.w4a16"),
        Some(("llama-3.3-70b-instruct".into(), Some(Precision::AwqInt4)))
    );
    assert_eq!(
        read("qwen3-vl-235b-a22b-instruct-awq-4bit"),
        Some(("qwen3-vl-235b-a22b-instruct".into(), Some(Precision::AwqInt4)))
    );
    // `dynamic` and a bit width are only a tag's qualifiers beside a tag.
    assert_eq!(read("some-dynamic-model"), Some(("some-dynamic-model".into(), None)));
    assert_eq!(read("some-model-4bit"), Some(("some-model-4bit".into(), None)));
    assert_eq!(read("qwen3-8b-fp8-awq"), None);
}

proptest::proptest! {
    #[test]
    fn a_tag_added_to_any_name_is_read_back_and_leaves_its_parts(
        parts in proptest::collection::vec("[a-z][a-z0-9.]{0,7}", 1..6),
        tag in proptest::sample::select(vec!["bf16", "fp16", "fp8", "nvfp4", "fp4", "mxfp4", "awq", "gptq", "int4", "w4a16"]),
        at in 0usize..6,
    ) {
        let parts: Vec<String> = parts.into_iter().filter(|p| Precision::from_name_tag(p).is_none()).collect();
        proptest::prop_assume!(!parts.is_empty() && !parts.iter().any(|p| p.starts_with("quantized.")));
        let plain = NameParts::read(&parts.join("-")).unwrap();
        proptest::prop_assert_eq!(&plain.base, &parts);
        proptest::prop_assert_eq!(plain.precision, None);
        let mut tagged = parts.clone();
        tagged.insert(at.min(parts.len()), tag.to_string());
        let read = NameParts::read(&tagged.join("-")).unwrap();
        proptest::prop_assert_eq!(read.precision, Precision::from_name_tag(tag));
        let kept: Vec<String> = parts.iter().filter(|p| !matches!(p.as_str(), "dynamic" | "static" | "block")).cloned().collect();
        proptest::prop_assert_eq!(read.base, kept);
    }
}

#[test]
fn user_presets_are_added_and_replace_built_in_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("hardware")).unwrap();
    std::fs::create_dir_all(dir.join("models")).unwrap();
    let h100 = HARDWARE[0].1.replace("memory_gib = 79.2", "memory_gib = 70.0");
    std::fs::write(dir.join("hardware/mine.toml"), h100).unwrap();
    let tiny = MODELS[0].1.replace("Qwen/Qwen3-0.6B", "me/tiny");
    std::fs::write(dir.join("models/tiny.toml"), tiny).unwrap();
    let p = Presets::embedded().unwrap().with_user_dir(dir).unwrap();
    assert_eq!(p.hardware("h100-sxm").unwrap().memory_gib, 70.0);
    assert_eq!(p.hardware_presets().len(), HARDWARE.len());
    assert_eq!(p.model("ME/TINY").unwrap().layers, 28);
    std::fs::write(dir.join("models/broken.toml"), "id = 3").unwrap();
    let err = Presets::embedded().unwrap().with_user_dir(dir).unwrap_err().to_string();
    assert!(err.contains("broken.toml"), "{err}");
}
