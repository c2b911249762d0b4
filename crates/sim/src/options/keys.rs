//! The serving options' keys with what each means: the listing an unknown key is answered with.

/// Serving keys with what they mean (the listing shown for an unknown key).
pub const SERVING_OPTION_KEYS: [(&str, &str); 39] = [
    ("tp", "tensor-parallel size (alias tensor-parallel-size)"),
    ("pp", "pipeline-parallel size (alias pipeline-parallel-size)"),
    ("tp-nodes", "tensor parallel over every GPU of this many machines: tp = machines x GPUs per node"),
    ("pp-nodes", "pipeline parallel over this many machines, one stage each: pp = machines, tp = GPUs per node"),
    ("dp", "data-parallel size: engines serving side by side (alias data-parallel-size)"),
    ("enable-expert-parallel", "true or false: spread MoE experts over tp x dp GPUs (alias ep)"),
    ("enforce-eager", "true or false: run without CUDA graphs (cudagraph-mode none)"),
    (
        "cudagraph-mode",
        "full-and-piecewise (vLLM's default from 0.11), full, full-decode-only or none: how vLLM captures CUDA graphs (compilation_config.cudagraph_mode); piecewise is refused, not modelled",
    ),
    (
        "cudagraph-capture-sizes",
        "the batch sizes CUDA graphs are captured at, as 1,2,4,8 (compilation_config.cudagraph_capture_sizes; alias cuda-graph-sizes): a step pads to the next, one past the largest runs without graphs",
    ),
    (
        "max-cudagraph-capture-size",
        "the largest of vLLM's own capture sizes (default: twice max-num-seqs, at most 512)",
    ),
    (
        "async-scheduling",
        "true (default) or false: the host plans and prepares the next step while the GPU runs this one (a request that arrives meanwhile waits one step more)",
    ),
    ("nodes", "machines the GPUs are spread over (default: as many as tp x pp x dp GPUs need)"),
    (
        "distributed-executor-backend",
        "mp, ray, uni or external_launcher: the executor of an engine's workers (default: mp within one machine, ray when the engine spans machines, as vLLM picks); ray has no async scheduling",
    ),
    (
        "nnodes",
        "machines one engine spans on vLLM's multiprocessing executor (--nnodes): nodes, with distributed-executor-backend mp",
    ),
    ("interconnect", "the link the all-reduce crosses, by name"),
    (
        "quick-reduce",
        "none (default), fp, int8, int6 or int4: ROCm's QuickReduce all-reduce (VLLM_ROCM_QUICK_REDUCE_QUANTIZATION) on MI300X, MI325X, MI355X",
    ),
    (
        "fuse-allreduce-rms",
        "true or false (default): FlashInfer's all-reduce fused with the RMSNorm after it (vLLM's pass_config.fuse_allreduce_rms) on H100, H200, B200, GB200",
    ),
    (
        "api-server-count",
        "API server processes, each streaming its requests' tokens (default: dp, as vLLM since 0.15; one before)",
    ),
    (
        "limit-mm-per-prompt",
        "the items of each modality a prompt may carry, as image=0,video=0 or vLLM's JSON: 0 for every modality the model's tower takes serves the language model alone, without the tower's weights",
    ),
    (
        "language-model-only",
        "true or false (default): serve a multimodal model's language model alone, without its tower",
    ),
    ("gpu-memory-utilization", "fraction of device memory vLLM may use (0.9)"),
    (
        "cudagraph-memory-gib",
        "GiB a GPU sets aside for CUDA graphs before the KV cache (0): the estimate a vLLM from 0.21 on logs",
    ),
    ("kv-cache-dtype", "auto or fp8"),
    ("mxfp4-backend", "marlin (default) or triton: the kernels of an MXFP4 model's experts where they run W4A16"),
    ("max-num-seqs", "sequences per step"),
    ("max-num-batched-tokens", "tokens per step"),
    ("max-model-len", "longest prompt plus output"),
    ("enable-prefix-caching", "true or false"),
    ("block-size", "tokens per KV block (16)"),
    ("precision", "weight format override (alias quantization)"),
    ("eos", "none, or uniform: without ignore_eos, stop at a length drawn uniformly"),
    ("warmup", "on (default), off or auto: predict's warm-up copy of request 0"),
    (
        "bench-client",
        "servebench (default) or vllm: predict's client; vllm sends as `vllm bench serve`'s one Python loop does, a burst one request after another, and times each from its own start (a served twin refuses it: its caller is the client)",
    ),
    (
        "speculative-config",
        "speculative decoding as vLLM's JSON: {\"method\": \"mtp\", \"num_speculative_tokens\": 2} (mtp: the model's own layer once a draft; ngram: on the host; ngram_gpu: on the GPU; eagle, eagle3, draft_model: with \"model\", a preset or config.json)",
    ),
    ("num-speculative-tokens", "draft tokens a step proposes for each decoding sequence (1 to 16)"),
    (
        "spec-acceptance",
        "how often drafts are accepted, needed with speculative-config: the rate of each position as vLLM reports it (0.8,0.55), or one rate for all (0.7)",
    ),
    (
        "convert",
        "auto (default), classify or embed: how a rerank is scored, by a cross-encoder (one sequence a document, the query before it) or by embeddings (the query embedded once, each document alone); auto: classify for a model named a reranker or cross-encoder, embed otherwise. bench serve --sim sets it from random-rerank's --no-reranker",
    ),
    ("seed", "seed of the engine's random draws when no run seed is given"),
    (
        "vllm-release",
        "the vLLM release served (0.17, v0.17.1): before 0.14, no async scheduling unless asked; before 0.15, one API server whatever the dp; from 0.17, untuned BF16 expert shapes run vLLM's newer default tiles; unset: async scheduling on, the tiles of 0.11 to 0.13 (before 0.11 vLLM captured CUDA graphs piecewise, which is not modelled: such a release is priced with 0.11's graphs)",
    ),
];
