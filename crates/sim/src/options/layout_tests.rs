//! Tests of how a deployment is laid out: nodes, data and expert parallel, the link each collective crosses.

use super::tests::parse;
use super::*;
use crate::presets::Presets;

#[test]
fn a_layout_over_machines_becomes_sizes_by_the_gpus_per_node() {
    // "4 nodes (tp)" on DGX Sparks (one GPU each) is tp=4; on H100 nodes of eight, tp=16.
    let spark = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp-nodes", "4")]).unwrap();
    assert_eq!((spark.tp, spark.pp, spark.nodes, spark.nodes_derived), (4, 1, 4, false));
    let h = parse("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp-nodes", "2")]).unwrap();
    assert_eq!((h.tp, h.nodes), (16, 2));
    let pp = parse("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("pp-nodes", "2")]).unwrap();
    assert_eq!((pp.tp, pp.pp, pp.nodes), (8, 2, 2));
    // Sizes given as well must agree.
    assert!(parse("openai/gpt-oss-120b", "dgx-spark", &[("tp-nodes", "4"), ("tp", "4"), ("nodes", "4")]).is_ok());
    let e = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp-nodes", "4"), ("tp", "8")]).unwrap_err().to_string();
    assert!(e.contains("tp-nodes=4") && e.contains("tp=4") && e.contains("tp=8 is given"), "{e}");
    let e = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp-nodes", "4"), ("pp-nodes", "2")]).unwrap_err();
    assert!(e.to_string().contains("both give the layout"), "{e}");
    assert!(parse("openai/gpt-oss-120b", "dgx-spark", &[("tp-nodes", "0")]).is_err());
}

#[test]
fn data_and_expert_parallel_options_use_vllm_spellings() {
    let o = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[]).unwrap();
    assert_eq!((o.dp, o.expert_parallel, o.cudagraph_mode), (1, false, CudaGraphMode::FullAndPiecewise));
    for pairs in [
        [("--data-parallel-size", "2"), ("--enable-expert-parallel", ""), ("--enforce-eager", "")],
        [("dp", "2"), ("ep", "true"), ("enforce_eager", "true")],
        [("-dp", "2"), ("enable_expert_parallel", "1"), ("enforce-eager", "yes")],
    ] {
        let mut pairs = pairs.to_vec();
        pairs.push(("tp", "4"));
        let o = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &pairs).unwrap();
        assert_eq!((o.tp, o.dp, o.expert_parallel, o.cudagraph_mode), (4, 2, true, CudaGraphMode::None), "{pairs:?}");
        assert_eq!((o.gpus(), o.expert_shards(), o.nodes), (8, 8, 1));
        assert_eq!(o.parallel_text(), "tp=4 dp=2 ep");
    }
    // Without expert parallelism vLLM still spreads a MoE layer over all tp x dp GPUs, slicing
    // every expert eight ways here.
    let no_ep = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("tp", "4"), ("dp", "2")]).unwrap();
    assert_eq!((no_ep.expert_shards(), no_ep.experts_per_gpu(128), no_ep.expert_width_per_gpu(768)), (8, 128, 96));
    let ep = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("tp", "4"), ("dp", "2"), ("ep", "true")]).unwrap();
    assert_eq!((ep.expert_shards(), ep.experts_per_gpu(128), ep.expert_width_per_gpu(768)), (8, 16, 768));
    let e = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("ep", "maybe")]).unwrap_err().to_string();
    assert!(e.contains("true or false"), "{e}");
    let e = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("dp", "0")]).unwrap_err().to_string();
    assert!(e.contains("from 1 to"), "{e}");
}

#[test]
fn expert_parallel_needs_experts_to_spread() {
    let e = parse("Qwen/Qwen3-8B", "h100-sxm", &[("enable-expert-parallel", "true")]).unwrap_err().to_string();
    assert!(e.contains("mixture-of-experts") && e.contains("Qwen/Qwen3-8B"), "{e}");
    // gpt-oss-20b has 32 experts: 8 x 8 GPUs would leave some without one.
    let e =
        parse("openai/gpt-oss-20b", "h100-sxm", &[("tp", "8"), ("dp", "8"), ("ep", "true")]).unwrap_err().to_string();
    assert!(e.contains("32 experts") && e.contains("64 GPUs"), "{e}");
}

#[test]
fn mla_models_take_any_tp_that_divides_the_heads() {
    let r1 = parse("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
    assert_eq!(r1.tp, 8);
    let e = parse("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "6")]).unwrap_err().to_string();
    assert!(e.contains("128 attention heads"), "{e}");
}

#[test]
fn the_allreduce_crosses_nodes_only_when_tp_spans_them() {
    let spark = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("nodes", "4")]).unwrap();
    let p = Presets::embedded().unwrap();
    assert_eq!(spark.allreduce_link(p.hardware("dgx-spark").unwrap()).name, "200gbe-one-x4-link");
    let h = parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "8"), ("pp", "2"), ("nodes", "2")]).unwrap();
    let h100 = p.hardware("h100-sxm").unwrap();
    assert_eq!(h.allreduce_link(h100).name, "nvlink4");
    assert_eq!(h.pipeline_link(h100).name, "ib-ndr");
}

#[test]
fn a_device_s_own_mxfp4_kernels_are_never_refused() {
    let p = Presets::embedded().unwrap();
    for hw in p.hardware_presets() {
        for model in ["openai/gpt-oss-120b", "openai/gpt-oss-20b", "Qwen/Qwen3-8B", "zai-org/GLM-4.6-FP8"] {
            match parse(model, &hw.name, &[]) {
                Err(e) => assert!(!e.to_string().contains("mxfp4-backend"), "{model} on {}: {e}", hw.name),
                Ok(o) => {
                    // The device's kernels where its experts dequantize MXFP4, else the neutral
                    // default that prices nothing differently.
                    let shape = p.model(model).unwrap();
                    let dequantizes = shape.precision.dequantizes_mxfp4_experts(shape.moe.is_some(), &hw.peak_tflops);
                    let expected = if dequantizes { hw.mxfp4_backend } else { Mxfp4Backend::Marlin };
                    assert_eq!(o.mxfp4_backend, expected, "{model} on {}", hw.name);
                }
            }
        }
    }
}

#[test]
fn an_amd_node_is_a_mesh_and_runs_quick_reduce_where_asked() {
    let p = Presets::embedded().unwrap();
    let gbs = |hw: &str, tp: &str| {
        let o = parse("openai/gpt-oss-120b", hw, &[("tp", tp)]).unwrap();
        o.allreduce_link(p.hardware(hw).unwrap()).bandwidth_gbs
    };
    // Two MI300X reach each other over one of seven 64 GB/s links; eight over all seven.
    assert_eq!((gbs("mi300x", "2"), gbs("mi300x", "4"), gbs("mi300x", "8")), (64.0, 192.0, 448.0));
    // NVSwitch gives any group the whole bandwidth.
    assert_eq!((gbs("h100-sxm", "2"), gbs("h100-sxm", "8")), (450.0, 450.0));
    let mi300x = p.hardware("mi300x").unwrap();
    let o = parse("openai/gpt-oss-120b", "mi300x", &[("tp", "8"), ("quick-reduce", "INT4")]).unwrap();
    assert_eq!(o.allreduce_quick_reduce(mi300x), QuickReduce::Int4);
    assert_eq!(parse("openai/gpt-oss-120b", "mi300x", &[("tp", "8")]).unwrap().quick_reduce, QuickReduce::None);
    // Not on CUDA parts, and not a level vLLM lacks.
    let e = parse("openai/gpt-oss-120b", "h100-sxm", &[("tp", "8"), ("quick-reduce", "int4")]).unwrap_err();
    assert!(e.to_string().contains("drop quick-reduce"), "{e}");
    assert!(parse("openai/gpt-oss-120b", "mi300x", &[("quick-reduce", "int2")]).is_err());
    // Across nodes vLLM leaves it off by itself: asked for, it prices nothing, and is no error.
    let across = parse("openai/gpt-oss-120b", "mi300x", &[("tp", "16"), ("quick-reduce", "int4")]).unwrap();
    assert_eq!(across.allreduce_quick_reduce(mi300x), QuickReduce::None);
}

#[test]
fn bridged_cards_all_reduce_over_the_bridge_and_larger_groups_over_pcie() {
    let p = Presets::embedded().unwrap();
    let link = |hw: &str, tp: &str| {
        let o = parse("openai/gpt-oss-120b", hw, &[("tp", tp)]).unwrap();
        let l = o.allreduce_link(p.hardware(hw).unwrap());
        (l.name, l.bandwidth_gbs)
    };
    // H100 NVL cards are bridged in pairs, H200 NVL cards in fours; past the bridge, PCIe.
    assert_eq!(link("h100-nvl", "2"), ("nvlink4-bridge".to_string(), 300.0));
    assert_eq!(link("h100-nvl", "4"), ("pcie5".to_string(), 50.0));
    assert_eq!(link("h200-nvl", "4"), ("nvlink4-bridge".to_string(), 450.0));
    assert_eq!(link("h200-nvl", "8"), ("pcie5".to_string(), 50.0));
    // A stage hands off to its neighbour over the bridge; a chosen link replaces both.
    let pp = parse("Qwen/Qwen3-8B", "h100-nvl", &[("pp", "4")]).unwrap();
    assert_eq!(pp.pipeline_link(p.hardware("h100-nvl").unwrap()).name, "nvlink4-bridge");
    let chosen = parse("openai/gpt-oss-120b", "h200-nvl", &[("tp", "4"), ("interconnect", "pcie5")]).unwrap();
    assert_eq!(chosen.allreduce_link(p.hardware("h200-nvl").unwrap()).bandwidth_gbs, 50.0);
    // The bridge carries the Hopper fusion's sizes; PCIe past it has none.
    let fused = |tp: &str| {
        let o = parse("openai/gpt-oss-120b", "h200-nvl", &[("tp", tp), ("fuse-allreduce-rms", "true")]).unwrap();
        o.allreduce_norm_fusion(p.hardware("h200-nvl").unwrap())
    };
    assert!(fused("4").is_some() && fused("8").is_none());
}

#[test]
fn the_fused_all_reduce_and_norm_runs_within_a_hopper_or_blackwell_node_where_asked() {
    use crate::hardware::NormFusion;
    let p = Presets::embedded().unwrap();
    let fusion = |hw: &str, tp: &str, on: &str| {
        let o = parse("openai/gpt-oss-120b", hw, &[("tp", tp), ("fuse-allreduce-rms", on)]).unwrap();
        o.allreduce_norm_fusion(p.hardware(hw).unwrap())
    };
    // The presets carry vLLM's tables for their compute capability, the same as the named links.
    assert_eq!(fusion("b200", "8", "true"), Some(NormFusion::BLACKWELL));
    assert_eq!(fusion("gb200", "4", "true"), Some(NormFusion::BLACKWELL));
    assert_eq!(fusion("h100-sxm", "2", "true"), Some(NormFusion::HOPPER));
    assert_eq!(fusion("h200", "8", "true"), Some(NormFusion::HOPPER));
    assert_eq!(Link::named("nvlink5").unwrap().norm_fusion, Some(NormFusion::BLACKWELL));
    // Off by default, as in vLLM; across nodes the group's link has none.
    assert_eq!(fusion("b200", "8", "false"), None);
    assert!(!parse("openai/gpt-oss-120b", "b200", &[("tp", "8")]).unwrap().fuse_allreduce_rms);
    assert_eq!(fusion("b200", "16", "true"), None);
    // Refused where vLLM has no fusion: AMD parts, the B300 (vLLM 0.13 has no sizes for its
    // compute capability), a PCIe H100, a part with one GPU a machine.
    for hw in ["mi300x", "b300", "h100-pcie", "dgx-spark"] {
        let e = parse("openai/gpt-oss-120b", hw, &[("fuse-allreduce-rms", "true")]).unwrap_err();
        assert!(e.to_string().contains("drop fuse-allreduce-rms"), "{hw}: {e}");
    }
    assert!(parse("openai/gpt-oss-120b", "b200", &[("fuse-allreduce-rms", "maybe")]).is_err());
}
