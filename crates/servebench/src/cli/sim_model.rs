//! Flags that pick a simulated deployment: a model on some hardware with vLLM's serving
//! options. Shared by `sim serve`, `sim predict` and `sim fit`.

use clap::Args;

/// A model on some hardware, served with vLLM's options (same names as `vllm serve`).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Simulated deployment")]
pub struct SimModelArgs {
    /// Model preset (a Hugging Face id such as Qwen/Qwen3-8B, or a unique shortening of one such
    /// as Llama-3.3-70B-NVFP4) or a config.json path.
    #[arg(long)]
    pub model: Option<String>,
    /// A Hugging Face config.json describing the model (instead of a preset).
    #[arg(long, value_name = "PATH")]
    pub model_config: Option<String>,
    /// Hardware preset: h100-sxm, h100-pcie, h100-nvl, h800, h200, h200-nvl, b200, gb200, b300,
    /// gb300, a100-80g, a100-40g, l40s, l4, rtx-4090, rtx-5090, rtx-pro-6000, dgx-spark,
    /// jetson-agx-thor, mi300x, mi325x, mi350x, mi355x, or one of your own (`servebench sim
    /// presets` lists them).
    #[arg(long)]
    pub hardware: String,
    /// Tensor-parallel size.
    #[arg(long, alias = "tensor-parallel-size")]
    pub tp: Option<u32>,
    /// Pipeline-parallel size.
    #[arg(long, alias = "pipeline-parallel-size")]
    pub pp: Option<u32>,
    /// Nodes the deployment spans (tensor/pipeline parallel across nodes).
    #[arg(long)]
    pub nodes: Option<u32>,
    /// The link the tensor-parallel all-reduce crosses (and the pipeline, across nodes): nvlink3,
    /// nvlink4, nvlink5, infinity-fabric, pcie4, pcie5, 10gbe, 25gbe, 100gbe, 200gbe, 400gbe or ib-ndr
    /// [default: the hardware's own].
    #[arg(long)]
    pub interconnect: Option<String>,
    /// Fraction of each GPU's memory for weights, activations and KV cache [default: 0.9].
    #[arg(long)]
    pub gpu_memory_utilization: Option<f64>,
    /// KV cache format: auto (the model's) or fp8.
    #[arg(long)]
    pub kv_cache_dtype: Option<String>,
    /// Most sequences in one step [default, as in vLLM: 1024 on GPUs of 70 GiB or more other
    /// than the A100, else 256].
    #[arg(long)]
    pub max_num_seqs: Option<u32>,
    /// Most tokens in one step, prefill chunks included [default, as in vLLM: 8192 on GPUs of
    /// 70 GiB or more other than the A100, else 2048].
    #[arg(long)]
    pub max_num_batched_tokens: Option<u32>,
    /// Longest prompt plus output, as vLLM reads it: tokens (32768, or 32k = 32,000 and
    /// 32K = 32,768), or auto (-1), the most the KV cache holds [default: the model's context;
    /// where the KV cache holds less, that, as auto would give; vLLM itself refuses to start].
    #[arg(long, allow_hyphen_values = true, value_name = "TOKENS|auto")]
    pub max_model_len: Option<String>,
    /// Turn prefix caching off (on by default, as in vLLM V1).
    #[arg(long)]
    pub no_enable_prefix_caching: bool,
    /// Weight precision override: bf16, fp16, fp8, nvfp4, mxfp4, awq-int4.
    #[arg(long, alias = "quantization")]
    pub precision: Option<String>,
    /// Any other serving option as KEY=VALUE: block-size, eos, warmup, seed, or a stack constant
    /// such as t0-ms (an unknown key lists them all).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Stack constants fitted by `servebench sim fit`.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
}

impl SimModelArgs {
    /// The model to load: `--model-config` wins over `--model`.
    pub fn model_spec(&self) -> Result<String, super::resolve::ResolveError> {
        self.model_config.clone().or_else(|| self.model.clone()).ok_or_else(|| {
            super::resolve::ResolveError(
                "give the model to simulate: --model HF_ID (see `servebench sim presets`) or --model-config config.json"
                    .into(),
            )
        })
    }

    /// Serving options as `key=value` pairs in vLLM's names, for `SimSetup::resolve`.
    pub fn option_pairs(&self) -> Result<Vec<(String, String)>, super::resolve::ResolveError> {
        let mut out = Vec::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push((k.to_string(), v));
            }
        };
        put("tp", self.tp.map(|v| v.to_string()));
        put("pp", self.pp.map(|v| v.to_string()));
        put("nodes", self.nodes.map(|v| v.to_string()));
        put("interconnect", self.interconnect.clone());
        put("gpu-memory-utilization", self.gpu_memory_utilization.map(|v| v.to_string()));
        put("kv-cache-dtype", self.kv_cache_dtype.clone());
        put("max-num-seqs", self.max_num_seqs.map(|v| v.to_string()));
        put("max-num-batched-tokens", self.max_num_batched_tokens.map(|v| v.to_string()));
        put("max-model-len", self.max_model_len.clone());
        put("precision", self.precision.clone());
        if self.no_enable_prefix_caching {
            out.push(("enable-prefix-caching".into(), "false".into()));
        }
        out.extend(super::resolve::parse_kv_list(&self.options, "--option")?);
        Ok(out)
    }
}
