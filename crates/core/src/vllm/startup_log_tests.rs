//! vLLM start-up logs of two releases read for their settings and memory figures; odd lines passed
//! over, any prefix allowed.

use super::*;
use proptest::prelude::*;

/// A start-up log in vLLM 0.11's words, two tensor-parallel workers (figures of this test's own).
const V0_11: &str = "\
INFO 10-02 09:14:01 [api_server.py:1839] vLLM API server version 0.11.0
INFO 10-02 09:14:01 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-32B', 'model': 'Qwen/Qwen3-32B', 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.85, 'max_num_seqs': 128, 'enable_prefix_caching': False, 'compilation_config': {'level': 3, 'cudagraph_capture_sizes': [1, 2, 4]}, 'served_model_name': ['qwen'], 'seed': None}
(EngineCore_DP0 pid=301) INFO 10-02 09:14:09 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-32B', speculative_config=None, tokenizer='Qwen/Qwen3-32B', served_model_name=qwen, dtype=torch.bfloat16, max_seq_len=40960, download_dir=None, tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda
(EngineCore_DP0 pid=301) INFO 10-02 09:14:09 [scheduler.py:205] Chunked prefill is enabled with max_num_batched_tokens=8192.
(Worker_TP0 pid=410) INFO 10-02 09:15:40 [gpu_model_runner.py:2602] Model loading took 30.5821 GiB and 61.2 seconds
(Worker_TP1 pid=411) INFO 10-02 09:15:40 [gpu_model_runner.py:2602] Model loading took 30.5900 GiB and 61.3 seconds
(Worker_TP0 pid=410) INFO 10-02 09:16:02 [gpu_worker.py:298] Available KV cache memory: 32.47 GiB
(Worker_TP1 pid=411) INFO 10-02 09:16:02 [gpu_worker.py:298] Available KV cache memory: 32.40 GiB
(EngineCore_DP0 pid=301) INFO 10-02 09:16:03 [kv_cache_utils.py:1087] GPU KV cache size: 265,984 tokens
(EngineCore_DP0 pid=301) INFO 10-02 09:16:03 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 6.49x
";

/// The lines a newer release adds (its graph estimate and its split of the memory).
const V0_2X: &str = "\
(APIServer pid=1) INFO 07-02 21:30:01 [utils.py:299]   █▄█▀ █     █     █     █  version 0.24.1
(EngineCore pid=134) INFO 07-02 21:33:29 [gpu_model_runner.py:6483] Profiling CUDA graph memory: PIECEWISE=35 (largest=256), FULL=19 (largest=128)
(EngineCore pid=134) INFO 07-02 21:33:32 [gpu_model_runner.py:6588] Estimated CUDA graph memory: 0.41 GiB total
(EngineCore pid=134) INFO 07-02 21:33:32 [gpu_worker.py:515] Available KV cache memory: 47.84 GiB
(EngineCore pid=134) INFO 07-02 21:33:32 [gpu_worker.py:530] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9000 is equivalent to --gpu-memory-utilization=0.8948 without CUDA graph memory profiling.
(EngineCore pid=134) INFO 07-02 21:33:32 [kv_cache_utils.py:2146] GPU KV cache size: 1,505,068 tokens
(EngineCore pid=134) INFO 07-02 21:33:40 [gpu_worker.py:804] Free memory on device (78.99/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 16.11 GiB for consumed memory (weights + non-torch), 2.53 GiB for peak activation, and 0.39 GiB for CUDAGraph memory. Current kv cache memory in use is 47.84 GiB.
";

#[test]
fn a_start_up_log_gives_its_settings_and_the_first_worker_s_memory_figures() {
    let log = StartupLog::parse(V0_11);
    assert_eq!(log.release.as_deref(), Some("0.11.0"));
    assert_eq!(log.model.as_deref(), Some("Qwen/Qwen3-32B"));
    // The engine's effective values first, then the command line's others, then the chunk size.
    let expected = [
        ("max-model-len", "40960"),
        ("tp", "2"),
        ("pp", "1"),
        ("dp", "1"),
        ("kv-cache-dtype", "auto"),
        ("enforce-eager", "false"),
        ("gpu-memory-utilization", "0.85"),
        ("max-num-seqs", "128"),
        ("enable-prefix-caching", "false"),
        ("max-num-batched-tokens", "8192"),
    ];
    let settings: Vec<(&str, &str)> = log.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(settings, expected);
    assert_eq!(log.weights_gib, Some(30.5821));
    assert_eq!(log.kv_cache_gib, Some(32.47));
    assert_eq!(log.kv_cache_tokens, Some(265_984));
    assert_eq!(log.max_concurrency, Some((40_960, 6.49)));
    assert_eq!((log.graph_estimate_gib, log.device_gib, log.usage), (None, None, None));
    assert!(log.has_memory_figures());
    assert_eq!(log.setting("tp"), Some("2"));
    // The command line's other options are named, the server's interface left out.
    assert_eq!(log.unread, vec!["compilation_config".to_string()]);
}

#[test]
fn a_newer_log_gives_its_graph_estimate_and_its_split_of_the_memory() {
    let log = StartupLog::parse(V0_2X);
    assert_eq!(log.release.as_deref(), Some("0.24.1"));
    assert_eq!(log.graph_estimate_gib, Some(0.41));
    assert!(log.graph_counted);
    assert!(!StartupLog::parse(V0_11).graph_counted);
    assert_eq!(log.kv_cache_tokens, Some(1_505_068));
    assert_eq!(log.device_gib, Some(79.19));
    assert_eq!(log.setting("gpu-memory-utilization"), Some("0.9"));
    assert_eq!(log.setting("cudagraph-memory-gib"), Some("0.41"));
    let usage = log.usage.expect("the usage line");
    assert_eq!((usage.consumed_gib, usage.peak_activation_gib, usage.graph_gib), (16.11, 2.53, 0.39));
    assert_eq!(log.model, None);
}

#[test]
fn a_log_without_memory_lines_says_so_and_odd_lines_are_passed_over() {
    let log = StartupLog::parse(
        "Traceback (most recent call last):\nnon-default args: {'tensor_parallel_size': \nAvailable KV cache memory: GiB\n\
         GPU KV cache size: -5 tokens\nnon-default args: {'max_model_len': 32768, 'a': '}', 'b': \"it's\"}",
    );
    assert!(!log.has_memory_figures());
    assert_eq!(log.kv_cache_tokens, None);
    // A dict that never closes is passed over; the next one is read, quotes and all.
    assert_eq!(log.settings, vec![("max-model-len".to_string(), "32768".to_string())]);
    // An older engine's weights line, in GB as it printed them.
    let v0 = StartupLog::parse("INFO 07-24 14:07:31 model_runner.py:692] Loading model weights took 57.7520 GB");
    assert_eq!(v0.weights_gib, Some(57.752));
    // A refused start names the device's total too.
    let refused = StartupLog::parse(
        "ValueError: Free memory on device cuda:0 (27.28/31.86 GiB) on startup is less than desired GPU memory utilization (0.97, 30.9 GiB).",
    );
    assert_eq!(refused.device_gib, Some(31.86));
    assert_eq!(refused.setting("gpu-memory-utilization"), Some("0.97"));
    // Sizes and counts below zero are not figures and are not read; the KV cache's available
    // memory is, as vLLM prints it negative before it stops for want of memory.
    let odd = StartupLog::parse(
        "Model loading took -7.65 GiB and 9.1 seconds\nAvailable KV cache memory: -2.50 GiB\n\
         Maximum concurrency for -5 tokens per request: -3.00x\nEstimated CUDA graph memory: -1.2 GiB total",
    );
    assert_eq!((odd.weights_gib, odd.max_concurrency, odd.graph_estimate_gib), (None, None, None));
    assert_eq!(odd.kv_cache_gib, Some(-2.5));
    let zero = StartupLog::parse("Maximum concurrency for 0 tokens per request: 3.00x");
    assert_eq!(zero.max_concurrency, None);
}

proptest! {
    /// Every figure reads back as printed, whatever prefix its line has and however vLLM
    /// groups the thousands.
    #[test]
    fn figures_read_back_behind_any_prefix(
        prefix in "[ -~]{0,40}",
        weights in 0.0f64..2000.0,
        kv in -10.0f64..2000.0,
        tokens in 0u64..100_000_000,
        len in 1u64..10_000_000,
        times in 0.0f64..1e5,
        grouped in any::<bool>(),
    ) {
        let prefix = prefix.replace(['(', '/'], " ");
        let group = |n: u64| if grouped { group_thousands(n) } else { n.to_string() };
        let text = format!(
            "{prefix}Model loading took {weights:.4} GiB and 3.0 seconds\n\
             {prefix}Available KV cache memory: {kv:.2} GiB\n\
             {prefix}GPU KV cache size: {} tokens\n\
             {prefix}Maximum concurrency for {} tokens per request: {times:.2}x\n",
            group(tokens),
            group(len),
        );
        let log = StartupLog::parse(&text);
        prop_assert_eq!(log.weights_gib, Some(format!("{weights:.4}").parse().unwrap()));
        prop_assert_eq!(log.kv_cache_gib, Some(format!("{kv:.2}").parse().unwrap()));
        prop_assert_eq!(log.kv_cache_tokens, Some(tokens));
        prop_assert_eq!(log.max_concurrency, Some((len, format!("{times:.2}").parse().unwrap())));
    }

    /// A dict's scalar entries come back whatever nests between them.
    #[test]
    fn a_python_dict_s_scalars_read_back(tp in 1u32..64, util in 0.01f64..1.0, nested in "[a-z ,:'{}\\[\\]0-9]{0,30}") {
        // Only balanced nesting is a dict vLLM prints: wrap the noise in a string.
        let text = format!("non-default args: {{'x': {{'y': [1, {{}}]}}, 'note': \"{nested}\", 'tensor_parallel_size': {tp}, 'gpu_memory_utilization': {util}}}");
        let log = StartupLog::parse(&text);
        let tp_text = tp.to_string();
        prop_assert_eq!(log.setting("tp"), Some(tp_text.as_str()));
        let util_text = util.to_string();
        prop_assert_eq!(log.setting("gpu-memory-utilization"), Some(util_text.as_str()));
    }
}
