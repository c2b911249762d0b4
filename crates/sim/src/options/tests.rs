//! Tests of the serving options: vLLM's spellings, defaults and the checks against model and hardware.

use super::*;
use crate::presets::Presets;

pub(super) fn parse(model: &str, hw: &str, pairs: &[(&str, &str)]) -> Result<ServingOptions, SimError> {
    let p = Presets::embedded().unwrap();
    let hw = p.hardware(hw).unwrap();
    let mut stack = hw.stack.clone();
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    ServingOptions::parse(&pairs, &p.model(model).unwrap(), model, hw, &mut stack)
}

#[test]
fn the_mxfp4_backend_applies_only_to_w4a16_mxfp4_experts() {
    let o = parse("openai/gpt-oss-120b", "h100-sxm", &[("mxfp4-backend", "Triton")]).unwrap();
    assert_eq!(o.mxfp4_backend, Mxfp4Backend::Triton);
    assert_eq!(parse("openai/gpt-oss-120b", "h100-sxm", &[]).unwrap().mxfp4_backend, Mxfp4Backend::Marlin);
    // ROCm's stack has no Marlin: its default is Triton, where it applies, and choosing stays open.
    assert_eq!(parse("openai/gpt-oss-120b", "mi300x", &[]).unwrap().mxfp4_backend, Mxfp4Backend::Triton);
    let chosen = parse("openai/gpt-oss-120b", "mi300x", &[("mxfp4-backend", "marlin")]).unwrap();
    assert_eq!(chosen.mxfp4_backend, Mxfp4Backend::Marlin);
    assert_eq!(parse("Qwen/Qwen3-8B", "mi300x", &[]).unwrap().mxfp4_backend, Mxfp4Backend::Marlin);
    // The experts' memory layout is resolved once: the device's own kernels' (Triton's on Hopper,
    // whose pricing stays Marlin's), or those asked for; none where nothing dequantizes MXFP4.
    let layout = |model: &str, hw: &str, pairs: &[(&str, &str)]| parse(model, hw, pairs).unwrap().mxfp4_layout;
    assert_eq!(layout("openai/gpt-oss-120b", "h100-sxm", &[]), Some(Mxfp4Backend::Triton));
    assert_eq!(layout("openai/gpt-oss-120b", "h100-sxm", &[("mxfp4-backend", "marlin")]), Some(Mxfp4Backend::Marlin));
    assert_eq!(layout("openai/gpt-oss-120b", "a100-80g", &[]), Some(Mxfp4Backend::Marlin));
    assert_eq!(layout("openai/gpt-oss-120b", "a100-80g", &[("mxfp4-backend", "triton")]), Some(Mxfp4Backend::Triton));
    assert_eq!(layout("openai/gpt-oss-120b", "b200", &[]), None);
    assert_eq!(layout("Qwen/Qwen3-8B", "h100-sxm", &[]), None);
    for (model, hw, says) in
        [("Qwen/Qwen3-8B", "h100-sxm", "is bf16 and dense"), ("openai/gpt-oss-120b", "b200", "W4A8")]
    {
        let e = parse(model, hw, &[("mxfp4-backend", "triton")]).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("drop mxfp4-backend"), "{e}");
    }
    let e = parse("openai/gpt-oss-120b", "h100-sxm", &[("mxfp4-backend", "cutlass")]).unwrap_err();
    assert!(e.to_string().contains("expected marlin or triton"), "{e}");
}

#[test]
fn batch_defaults_follow_vllm_rules() {
    for (hw, tokens, seqs) in [
        ("h100-sxm", 8192, 1024),
        ("mi300x", 8192, 1024),
        ("dgx-spark", 8192, 1024),
        ("a100-80g", 2048, 256),
        ("l40s", 2048, 256),
        ("rtx-4090", 2048, 256),
    ] {
        let o = parse("Qwen/Qwen3-0.6B", hw, &[]).unwrap();
        assert_eq!((o.max_num_batched_tokens, o.max_num_seqs), (tokens, seqs), "{hw}");
        assert!(o.enable_prefix_caching);
    }
}

#[test]
fn vllm_spellings_and_aliases_are_accepted() {
    let o = parse(
        "Qwen/Qwen3-8B",
        "h100-sxm",
        &[
            ("--tensor_parallel_size", "2"),
            ("gpu_memory_utilization", "0.8"),
            ("kv-cache-dtype", "fp8"),
            ("enable-prefix-caching", "false"),
            ("quantization", "fp8"),
            ("interconnect", "PCIe4"),
            ("vllm-release", "v0.17.1"),
        ],
    )
    .unwrap();
    assert_eq!(o.tp, 2);
    assert_eq!(o.gpu_memory_utilization, 0.8);
    assert_eq!(o.kv_cache_dtype, KvDtype::Fp8);
    assert!(!o.enable_prefix_caching);
    assert_eq!(o.precision, Some(Precision::Fp8));
    assert_eq!(o.interconnect.unwrap().name, "pcie4");
    assert_eq!(o.vllm_release, Some((0, 17)));
    assert_eq!(parse("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().vllm_release, None);
}

#[test]
fn unknown_keys_and_bad_values_say_what_is_accepted() {
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("max-seqs", "4")]).unwrap_err().to_string();
    assert!(err.contains("max-seqs") && err.contains("max-num-seqs"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("gpu-memory-utilization", "1.5")]).unwrap_err().to_string();
    assert!(err.contains("(0, 1]"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("block-size", "12")]).unwrap_err().to_string();
    assert!(err.contains("16"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("interconnect", "usb")]).unwrap_err().to_string();
    assert!(err.contains("nvlink4"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("t0-ms", "-2")]).unwrap_err().to_string();
    assert!(err.contains("t0_ms"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("vllm-release", "nightly")]).unwrap_err().to_string();
    assert!(err.contains("0.17"), "{err}");
    let err = parse("Qwen/Qwen3-8B", "h100-sxm", &[("bench-client", "aiohttp")]).unwrap_err().to_string();
    assert!(err.contains("servebench or vllm"), "{err}");
    let o = parse("Qwen/Qwen3-8B", "h100-sxm", &[("bench-client", "vLLM")]).unwrap();
    assert_eq!(o.bench_client, BenchClient::Vllm);
}

#[test]
fn contradictions_name_both_sides() {
    let err = |pairs: &[(&str, &str)]| parse("Qwen/Qwen3-8B", "h100-sxm", pairs).unwrap_err().to_string();
    let e = err(&[("tp", "3")]);
    assert!(e.contains("tp=3") && e.contains("32 attention heads"), "{e}");
    // The sizes offered split the KV heads too: Qwen2.5-7B's 28 query heads divide by 7 and 14,
    // but its 4 KV heads do not split over them.
    let e = parse("Qwen/Qwen2.5-7B-Instruct", "h100-sxm", &[("tp", "8")]).unwrap_err().to_string();
    assert!(e.contains("28 attention heads") && e.ends_with("use one of 1, 2, 4, 28"), "{e}");
    let e = parse("Qwen/Qwen2.5-7B-Instruct", "h100-sxm", &[("tp", "7")]).unwrap_err().to_string();
    assert!(e.contains("tp=7 and the 4 KV heads") && e.ends_with("use one of 1, 2, 4, 28"), "{e}");
    let e = err(&[("tp", "8"), ("pp", "2"), ("nodes", "1")]);
    assert!(e.contains("16 GPUs") && e.contains("nodes=1"), "{e}");
    assert!(parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "8"), ("pp", "2"), ("nodes", "2")]).is_ok());
    let e = err(&[("nodes", "2")]);
    assert!(e.contains("nodes=2"), "{e}");
    let e = err(&[("max-num-seqs", "512"), ("max-num-batched-tokens", "256")]);
    assert!(e.contains("max-num-batched-tokens=256") && e.contains("max-num-seqs=512"), "{e}");
    let e = err(&[("max-model-len", "100000")]);
    assert!(e.contains("40960"), "{e}");
    let e = err(&[("tp", "2"), ("tensor-parallel-size", "4")]);
    assert!(e.contains("twice"), "{e}");
}

#[test]
fn a_huge_node_count_is_refused_not_overflowed() {
    let e = parse("Qwen/Qwen3-8B", "h100-sxm", &[("nodes", "4000000000")]).unwrap_err().to_string();
    assert!(e.contains("nodes=4000000000") && e.contains("lower nodes"), "{e}");
    let e = parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "8"), ("dp", "4000000000")]).unwrap_err().to_string();
    assert!(e.contains("dp") && e.contains("at most 16384"), "{e}");
}

#[test]
fn nodes_are_derived_from_the_gpus_when_not_given() {
    // One GPU per DGX Spark: tp=4 takes four of them.
    let spark = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4")]).unwrap();
    assert_eq!((spark.nodes, spark.nodes_derived), (4, true));
    let e = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("nodes", "2")]).unwrap_err().to_string();
    assert!(e.contains("4 GPUs") && e.contains("nodes=2") && e.contains("1 GPUs per dgx-spark"), "{e}");
    // Eight per H100 node: tp=8 x dp=3 needs three nodes; tp=2 one.
    let h = parse("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("tp", "8"), ("dp", "3")]).unwrap();
    assert_eq!((h.nodes, h.gpus()), (3, 24));
    let one = parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]).unwrap();
    assert_eq!((one.nodes, one.nodes_derived), (1, true));
    let given = parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "8"), ("pp", "2"), ("nodes", "2")]).unwrap();
    assert!(!given.nodes_derived);
}

#[test]
fn an_engine_over_several_machines_or_of_an_old_release_runs_without_async_scheduling_unless_chosen() {
    // vLLM runs it on its Ray executor, which has no async scheduling.
    for (model, hw, pairs) in [
        ("openai/gpt-oss-120b", "dgx-spark", vec![("tp", "4")]),
        ("openai/gpt-oss-120b", "dgx-spark", vec![("pp", "2")]),
        ("Qwen/Qwen3-235B-A22B", "h100-sxm", vec![("tp-nodes", "2")]),
        ("Qwen/Qwen3-235B-A22B", "h100-sxm", vec![("tp", "8"), ("pp", "2")]),
    ] {
        let o = parse(model, hw, &pairs).unwrap();
        assert!(!o.async_scheduling && o.sync_because == Some(SyncBecause::RayExecutor), "{hw} {pairs:?}");
    }
    // Pipeline stages within one machine: vLLM has no async scheduling with them either.
    let pp = parse("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp", "4"), ("pp", "2")]).unwrap();
    assert!(!pp.async_scheduling && pp.sync_because == Some(SyncBecause::PipelineParallel));
    let chosen = parse("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp", "4"), ("pp", "2"), ("async-scheduling", "true")]);
    assert!(chosen.unwrap().async_scheduling);
    // One machine an engine, data parallel over several included: vLLM's default stands.
    for (model, hw, pairs) in [
        ("openai/gpt-oss-120b", "dgx-spark", vec![]),
        ("Qwen/Qwen3-235B-A22B", "h100-sxm", vec![("tp", "8")]),
        ("Qwen/Qwen3-30B-A3B", "h100-sxm", vec![("tp", "8"), ("dp", "3")]),
    ] {
        let o = parse(model, hw, &pairs).unwrap();
        assert!(o.async_scheduling && o.sync_because.is_none(), "{hw} {pairs:?}");
    }
    // A release before 0.14 had it off unless asked (vLLM's default since 0.14).
    let old = parse("Qwen/Qwen3-8B", "h100-sxm", &[("vllm-release", "v0.11.0")]).unwrap();
    assert!(!old.async_scheduling && old.sync_because == Some(SyncBecause::Release));
    let asked = parse("Qwen/Qwen3-8B", "h100-sxm", &[("vllm-release", "0.13"), ("async-scheduling", "true")]).unwrap();
    assert!(asked.async_scheduling && asked.sync_because.is_none());
    let new = parse("Qwen/Qwen3-8B", "h100-sxm", &[("vllm-release", "0.14.1")]).unwrap();
    assert!(new.async_scheduling && new.sync_because.is_none());
    // A choice, either way, is kept.
    let on = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("async-scheduling", "true")]).unwrap();
    assert!(on.async_scheduling && on.sync_because.is_none());
    let off = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("no-async-scheduling", "true")]).unwrap();
    assert!(!off.async_scheduling && off.sync_because.is_none());
}

#[test]
fn drafts_matched_on_the_host_run_without_async_scheduling_and_gpu_drafters_keep_it() {
    let with = |method: &str, extra: &[(&str, &str)]| {
        let config = format!(r#"{{"method": "{method}", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 2}}"#);
        let mut pairs = vec![("speculative-config", config.as_str()), ("spec-acceptance", "0.6")];
        pairs.extend_from_slice(extra);
        parse("Qwen/Qwen3-8B", "h100-sxm", &pairs).map(|o| (o.async_scheduling, o.sync_because))
    };
    assert_eq!(with("ngram", &[]).unwrap(), (false, Some(SyncBecause::HostDrafts)));
    for gpu in ["mtp", "eagle3", "draft_model", "ngram_gpu"] {
        assert_eq!(with(gpu, &[]).unwrap(), (true, None), "{gpu}");
    }
    // vLLM refuses to start when asked for both; asked off, it is off.
    let e = with("ngram", &[("async-scheduling", "true")]).unwrap_err().to_string();
    assert!(e.contains("ngram") && e.contains("drop async-scheduling"), "{e}");
    assert_eq!(with("ngram", &[("no-async-scheduling", "true")]).unwrap(), (false, None));
    // An older release's own reason comes first.
    assert_eq!(with("ngram", &[("vllm-release", "0.13")]).unwrap(), (false, Some(SyncBecause::Release)));
}

#[test]
fn the_executor_is_vllm_s_pick_unless_given_and_only_ray_s_schedules_synchronously() {
    let executor = |o: &ServingOptions| (o.distributed_executor_backend, o.async_scheduling, o.sync_because);
    // vLLM's pick: multiprocessing within one machine, Ray over several.
    let one = parse("openai/gpt-oss-120b", "h100-sxm", &[("tp", "8")]).unwrap();
    assert_eq!(executor(&one), (Executor::Mp, true, None));
    let spread = parse("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4")]).unwrap();
    assert_eq!(executor(&spread), (Executor::Ray, false, Some(SyncBecause::RayExecutor)));
    // Ray chosen on one machine: synchronous too, and the reason says it was chosen.
    let chosen = parse("openai/gpt-oss-120b", "h100-sxm", &[("tp", "2"), ("distributed-executor-backend", "ray")]);
    assert_eq!(executor(&chosen.unwrap()), (Executor::Ray, false, Some(SyncBecause::RayChosen)));
    // Several machines on vLLM's multiprocessing executor keep async scheduling, whether it is
    // named or implied by `nnodes` (vLLM's `--nnodes`, which also gives the machines).
    let mp = parse("openai/gpt-oss-120b", "gb200", &[("tp", "8"), ("distributed-executor-backend", "MP")]).unwrap();
    assert_eq!((executor(&mp), mp.nodes), ((Executor::Mp, true, None), 2));
    let nnodes = parse("openai/gpt-oss-120b", "gb200", &[("tp", "8"), ("nnodes", "2")]).unwrap();
    assert_eq!((executor(&nnodes), nnodes.nodes, nnodes.nodes_derived), ((Executor::Mp, true, None), 2, false));
    // The other reasons still hold on it: pipeline stages, and a release before 0.14.
    let staged = parse("Qwen/Qwen3-235B-A22B", "h100-sxm", &[("tp", "8"), ("pp", "2"), ("nnodes", "2")]).unwrap();
    assert_eq!(executor(&staged), (Executor::Mp, false, Some(SyncBecause::PipelineParallel)));
    let old = parse("openai/gpt-oss-120b", "gb200", &[("tp", "8"), ("nnodes", "2"), ("vllm-release", "0.13")]);
    assert_eq!(executor(&old.unwrap()), (Executor::Mp, false, Some(SyncBecause::Release)));
    // A choice of async scheduling wins over the executor's, as in vLLM's own flag.
    let asked = parse(
        "openai/gpt-oss-120b",
        "dgx-spark",
        &[("tp", "4"), ("distributed-executor-backend", "ray"), ("async-scheduling", "true")],
    );
    assert_eq!(executor(&asked.unwrap()), (Executor::Ray, true, None));
    // Refused with what to do: a spelling vLLM does not have, `uni` for several GPUs an engine,
    // `nnodes` with Ray, and the machines given twice.
    let refused = [
        vec![("distributed-executor-backend", "slurm")],
        vec![("tp", "2"), ("distributed-executor-backend", "uni")],
        vec![("tp", "8"), ("nnodes", "2"), ("distributed-executor-backend", "ray")],
        vec![("tp", "8"), ("nnodes", "2"), ("nodes", "2")],
    ];
    for pairs in refused {
        let err = parse("openai/gpt-oss-120b", "gb200", &pairs).unwrap_err().to_string();
        assert!(err.contains("mp") || err.contains("keep one"), "{pairs:?}: {err}");
    }
    let uni = parse("Qwen/Qwen3-8B", "h100-sxm", &[("distributed-executor-backend", "uni")]).unwrap();
    let external =
        parse("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2"), ("distributed-executor-backend", "external-launcher")]);
    assert_eq!(
        (uni.distributed_executor_backend, external.unwrap().distributed_executor_backend),
        (Executor::Uni, Executor::ExternalLauncher)
    );
}

#[test]
fn a_release_is_read_from_a_version_or_an_image_tag() {
    assert_eq!(vllm_release("v0.13.0"), Some((0, 13)));
    assert_eq!(vllm_release("0.10.1"), Some((0, 10)));
    assert_eq!(vllm_release("vllm/vllm-openai:v0.11.2"), Some((0, 11)));
    assert_eq!(vllm_release("rocm/7.0:rocm7.0_ubuntu_22.04_vllm_0.10.1_instinct_20250927_rc1"), Some((0, 10)));
    assert_eq!(vllm_release("vllm0.17.0"), Some((0, 17)));
    for none in ["rocm", "rocm7.0", "nightly", "", "v", "v1"] {
        assert_eq!(vllm_release(none), None, "{none}");
    }
}

#[test]
fn cuda_graph_modes_use_vllm_s_names_and_piecewise_is_refused() {
    let mode = |pairs: &[(&str, &str)]| parse("Qwen/Qwen3-8B", "h100-sxm", pairs).map(|o| o.cudagraph_mode);
    assert_eq!(mode(&[]).unwrap(), CudaGraphMode::FullAndPiecewise);
    for (given, want) in [
        ("FULL_AND_PIECEWISE", CudaGraphMode::FullAndPiecewise),
        ("full", CudaGraphMode::Full),
        ("full-decode-only", CudaGraphMode::FullDecodeOnly),
        ("NONE", CudaGraphMode::None),
    ] {
        assert_eq!(mode(&[("cudagraph_mode", given)]).unwrap(), want, "{given}");
    }
    // `--enforce-eager` wins over any mode, as in vLLM.
    assert_eq!(mode(&[("cudagraph-mode", "full"), ("enforce-eager", "true")]).unwrap(), CudaGraphMode::None);
    assert_eq!(mode(&[("cuda-graph-mode", "full"), ("enforce-eager", "false")]).unwrap(), CudaGraphMode::Full);
    let e = mode(&[("cudagraph-mode", "PIECEWISE")]).unwrap_err().to_string();
    assert!(e.contains("not modelled") && e.contains("full-and-piecewise"), "{e}");
    let e = mode(&[("cudagraph-mode", "sometimes")]).unwrap_err().to_string();
    assert!(e.contains("expected full-and-piecewise, full, full-decode-only or none"), "{e}");
}

#[test]
fn cuda_graph_sizes_are_given_in_vllm_s_spellings_or_follow_its_rule() {
    let sizes = |pairs: &[(&str, &str)]| parse("openai/gpt-oss-120b", "h100-sxm", pairs).map(|o| o.cudagraph_sizes);
    assert_eq!(sizes(&[]).unwrap(), CudaGraphSizes::Default { largest: 512 });
    assert_eq!(sizes(&[("max-num-seqs", "4")]).unwrap(), CudaGraphSizes::Default { largest: 8 });
    let given = CudaGraphSizes::Given { sizes: vec![1, 2, 4, 10] };
    assert_eq!(sizes(&[("cudagraph-capture-sizes", "[1, 2, 4, 10]")]).unwrap(), given);
    assert_eq!(sizes(&[("cuda_graph_sizes", "1 2 4 10")]).unwrap(), given);
    // vLLM's `--cuda-graph-sizes N` with one number, like `--max-cudagraph-capture-size N`, ends
    // vLLM's own list there.
    for key in ["cuda-graph-sizes", "max-cudagraph-capture-size"] {
        assert_eq!(sizes(&[(key, "2048")]).unwrap(), CudaGraphSizes::Default { largest: 2048 }, "{key}");
    }
    let twice = sizes(&[("cuda-graph-sizes", "8"), ("cudagraph-capture-sizes", "1,2")]).unwrap_err();
    assert!(twice.to_string().contains("given twice"), "{twice}");
    let bad = sizes(&[("cudagraph-capture-sizes", "1,two")]).unwrap_err().to_string();
    assert!(bad.contains("cudagraph-capture-sizes") && bad.contains("1,2,4,8"), "{bad}");
    let none = sizes(&[("cudagraph-capture-sizes", "16384"), ("max-num-batched-tokens", "8192")]).unwrap_err();
    assert!(none.to_string().contains("no size of 16384 is at most 8192"), "{none}");
}

#[test]
fn vllm_starts_one_api_server_a_data_parallel_engine_unless_told() {
    let count = |pairs: &[(&str, &str)]| parse("Qwen/Qwen3-8B", "h100-sxm", pairs).unwrap().api_server_count;
    assert_eq!(count(&[]), 1);
    assert_eq!(count(&[("dp", "4")]), 4);
    assert_eq!(count(&[("dp", "4"), ("api-server-count", "2")]), 2);
    assert_eq!(count(&[("api_server_count", "3")]), 3);
    // Releases before 0.15 started one unless told.
    assert_eq!(count(&[("dp", "4"), ("vllm-release", "v0.14.1")]), 1);
    assert_eq!(count(&[("vllm-release", "0.13"), ("dp", "2"), ("api-server-count", "2")]), 2);
    assert_eq!(count(&[("dp", "4"), ("vllm-release", "0.15.0")]), 4);
    let bad = parse("Qwen/Qwen3-8B", "h100-sxm", &[("api-server-count", "0")]).unwrap_err().to_string();
    assert!(bad.contains("api-server-count") && bad.contains("from 1 to"), "{bad}");
}

#[test]
fn speculative_decoding_is_read_as_vllm_spells_it_and_needs_its_acceptance() {
    let spec = |pairs: &[(&str, &str)]| parse("deepseek-ai/DeepSeek-R1", "h200", pairs).map(|o| o.speculative);
    let mtp = r#"{"method": "mtp", "num_speculative_tokens": 2}"#;
    let s = spec(&[("speculative-config", mtp), ("spec-acceptance", "0.8,0.5")]).unwrap().unwrap();
    assert_eq!((s.method, s.num_speculative_tokens, s.acceptance.clone()), (SpecMethod::Mtp, 2, vec![0.8, 0.5]));
    assert!((s.acceptance_length() - 2.3).abs() < 1e-12);
    // One rate: the chance of each draft after the one before it.
    let s = spec(&[("speculative_config", mtp), ("spec-acceptance", "0.5")]).unwrap().unwrap();
    assert_eq!(s.acceptance, vec![0.5, 0.25]);
    // A model's own MTP method name, and the tokens given apart.
    let s = spec(&[
        ("speculative-config", r#"{"method": "deepseek_mtp"}"#),
        ("num-speculative-tokens", "1"),
        ("spec-acceptance", "0.9"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!((s.method, s.num_speculative_tokens), (SpecMethod::Mtp, 1));
    // EAGLE heads read the target's embedding; a draft model keeps its own.
    for (name, method) in
        [("eagle", SpecMethod::Eagle), ("EAGLE3", SpecMethod::Eagle), ("draft_model", SpecMethod::Drafter)]
    {
        let config = format!(r#"{{"method": "{name}", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 2}}"#);
        let s = spec(&[("speculative-config", &config), ("spec-acceptance", "0.6")]).unwrap().unwrap();
        assert_eq!((s.method, s.model.as_deref()), (method, Some("Qwen/Qwen3-0.6B")));
    }
    assert_eq!(spec(&[]).unwrap(), None);
    let err = |pairs: &[(&str, &str)]| spec(pairs).unwrap_err().to_string();
    let e = err(&[("speculative-config", mtp)]);
    assert!(e.contains("needs spec-acceptance") && e.contains("0.8,0.55"), "{e}");
    let e = err(&[("speculative-config", mtp), ("spec-acceptance", "0.5,0.8")]);
    assert!(e.contains("rises with the position"), "{e}");
    let e = err(&[("speculative-config", mtp), ("spec-acceptance", "0.8,0.5,0.2")]);
    assert!(e.contains("3 rates for 2 draft tokens"), "{e}");
    let e = err(&[("speculative-config", mtp), ("spec-acceptance", "1.5")]);
    assert!(e.contains("rates in [0, 1]"), "{e}");
    let e = err(&[
        ("speculative-config", r#"{"method": "medusa", "num_speculative_tokens": 2}"#),
        ("spec-acceptance", "0.5"),
    ]);
    assert!(e.contains("\"medusa\" is not modelled"), "{e}");
    let e = err(&[
        ("speculative-config", r#"{"method": "eagle3", "num_speculative_tokens": 2}"#),
        ("spec-acceptance", "0.5"),
    ]);
    assert!(e.contains("need the draft model"), "{e}");
    let e = err(&[("speculative-config", "mtp"), ("spec-acceptance", "0.5")]);
    assert!(e.contains("vLLM's JSON"), "{e}");
    let e = err(&[
        ("speculative-config", r#"{"method": "mtp", "num_speculative_tokens": 2}"#),
        ("num-speculative-tokens", "3"),
        ("spec-acceptance", "0.5"),
    ]);
    assert!(e.contains("keep one"), "{e}");
    let e = err(&[("spec-acceptance", "0.5")]);
    assert!(e.contains("give its speculative-config too"), "{e}");
    let e = err(&[("speculative-config", mtp), ("spec-acceptance", "0.5"), ("pp", "2")]);
    assert!(e.contains("pp=2 is not modelled"), "{e}");
}

#[test]
fn max_model_len_reads_vllm_s_suffixes_and_auto() {
    let len = |v: &str| parse("Qwen/Qwen3-8B", "h100-sxm", &[("max-model-len", v)]).map(|o| o.max_model_len);
    for (v, tokens) in [
        ("32768", Some(32_768)),
        ("32k", Some(32_000)),
        ("32K", Some(32_768)),
        ("25.6k", Some(25_600)),
        ("0.04m", Some(40_000)),
        (" 4K ", Some(4_096)),
        ("auto", None),
        ("AUTO", None),
        ("-1", None),
    ] {
        assert_eq!(len(v).unwrap(), tokens, "{v}");
    }
    // Binary suffixes take whole numbers only (as vLLM's reader), and nothing reads as zero.
    for v in ["2.5K", "0", "0k", "0.0001k", "k", "1e3k", "inf", "-2", "32KiB", "5000000G", "9999999m", ""] {
        let e = len(v).expect_err(v).to_string();
        assert!(e.contains("max-model-len") && e.contains("or auto (-1)"), "{v}: {e}");
    }
    // A count past 32 bits names the bound, where it said a whole number was not one.
    let e = len("4294967296").unwrap_err().to_string();
    assert!(e.contains("from 1 to 4294967295"), "{e}");
    let e = parse("Qwen/Qwen3-8B", "h100-sxm", &[("max-num-seqs", "4294967296")]).unwrap_err().to_string();
    assert!(e.contains("max-num-seqs") && e.contains("from 1 to 4294967295"), "{e}");
}

proptest::proptest! {
    /// Any text given as max-model-len is read or refused, never a panic; what is read is what
    /// vLLM's spellings mean.
    #[test]
    fn any_max_model_len_is_read_or_refused(v in "[-+ .0-9a-zA-Z]{0,12}", n in 1u32..4_000_000) {
        let _ = context_length(&v);
        proptest::prop_assert_eq!(context_length(&n.to_string()), Some(Some(n)));
        proptest::prop_assert_eq!(context_length(&format!("{}K", n % 4096 + 1)), Some(Some((n % 4096 + 1) * 1024)));
    }
}

#[test]
fn a_rerank_is_scored_as_the_model_s_name_says_unless_convert_is_given() {
    assert_eq!(Convert::auto("BAAI/bge-reranker-v2-m3"), Convert::Classify);
    assert_eq!(Convert::auto("Qwen/Qwen3-Reranker-0.6B"), Convert::Classify);
    assert_eq!(Convert::auto("cross-encoder/ms-marco-MiniLM-L6-v2"), Convert::Classify);
    assert_eq!(Convert::auto("Qwen/Qwen3-Embedding-0.6B"), Convert::Embed);
    assert_eq!(parse("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().convert, Convert::Embed);
    assert_eq!(parse("Qwen/Qwen3-8B", "h100-sxm", &[("convert", "Classify")]).unwrap().convert, Convert::Classify);
    assert_eq!(parse("Qwen/Qwen3-8B", "h100-sxm", &[("convert", "auto")]).unwrap().convert, Convert::Embed);
    let e = parse("Qwen/Qwen3-8B", "h100-sxm", &[("convert", "reward")]).unwrap_err().to_string();
    assert!(e.contains("expected auto, classify or embed"), "{e}");
}
