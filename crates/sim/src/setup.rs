//! Resolving a simulated target: model + hardware + options (+ a fitted profile) into a
//! [`SimSetup`], with the memory plan ([`crate::memory`]) that sizes the KV block pool.
//!
//! Data parallelism (`dp > 1`) runs `dp` engines, each with its own scheduler and KV pool. The
//! simulator approximates them by one scheduler whose KV pool, `max-num-seqs` and
//! `max-num-batched-tokens` are `dp` times one rank's, while the longest sequence stays what one
//! rank holds.

use std::path::Path;

use serde::Serialize;

use crate::error::SimError;
use crate::hardware::HardwareSpec;
use crate::memory::plan_memory;
pub use crate::memory::{KvLayout, MemoryPlan};
use crate::model::ModelShape;
use crate::options::{ServingOptions, SyncBecause};
use crate::presets::Presets;
use crate::profile::StackProfile;

/// A fully resolved simulated target: everything the engine, the cost model and `predict` need.
///
/// With data parallelism (`options.dp > 1`) the `dp` engines are approximated by one scheduler:
/// `options.max_num_seqs`, `options.max_num_batched_tokens` and `memory.layout.total_units` are
/// the whole deployment's, `dp` times what one engine has (`--max-num-seqs` as given is per
/// engine, as in vLLM); `memory.kv_gib`, `memory.weights_gib` and `memory.kv_tokens` stay one
/// GPU's / one rank's.
#[derive(Clone, Debug, Serialize)]
pub struct SimSetup {
    /// The model, with any precision override applied.
    pub model: ModelShape,
    pub hardware: HardwareSpec,
    /// The options, with the per-engine batch limits scaled by `dp` (see above).
    pub options: ServingOptions,
    /// The longest prompt plus output accepted (explicit, or derived from the model and the KV cache).
    pub max_model_len: u32,
    pub stack: StackProfile,
    pub memory: MemoryPlan,
    /// What was derived or adjusted, worth showing the user.
    pub notes: Vec<String>,
    /// The model a speculative decoder's drafts come from, priced once a draft token (an MTP
    /// layer of the model, or the draft model named); none without speculative decoding, or
    /// with drafts made on the host (`ngram`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drafter: Option<ModelShape>,
}

/// How a checkpoint whose format the device cannot multiply in runs there, where it is one:
/// dequantized to BF16 in Marlin's kernels, and what bounds those products (the tensor cores at
/// `dequant_mma`, or the SMs unpacking the weights). MXFP4 experts have a note of their own.
fn dequantizing_note(model: &ModelShape, hardware: &HardwareSpec, stack: &StackProfile) -> Option<String> {
    use crate::precision::{ComputePrecision, Precision};
    let peaks = &hardware.peak_tflops.at_clock(hardware.sustained_clock);
    if model.precision.compute_on(peaks) != ComputePrecision::WeightOnly
        || model.precision.dequantizes_mxfp4_experts(model.moe.is_some(), peaks)
    {
        return None;
    }
    let (scheme, missing) = match model.precision {
        Precision::Fp8 => ("W8A16", Some("FP8")),
        Precision::Nvfp4 | Precision::Mxfp4 => ("W4A16", peaks.fp4.is_none().then_some("FP4")),
        _ => ("W4A16", None),
    };
    let experts = model.moe.is_some();
    let products = if experts { "expert" } else { "dense" };
    let bound = if stack.dequantizing_tensor_bound(peaks, experts) {
        format!("bound by the tensor cores, at {:.2} of their BF16 rate (dequant-mma)", stack.dequant_mma)
    } else {
        let rate = peaks.weight_only_rate(stack.weight_only_ceiling(experts), stack.dequant_mma);
        format!(
            "bound by the SMs unpacking the weights, at {rate:.0} TFLOP/s ({:.2} of the BF16 tensor rate)",
            rate / peaks.bf16
        )
    };
    let on = match missing {
        Some(units) => format!(" on {}, which has no {units} tensor cores", hardware.name),
        None => String::new(),
    };
    Some(format!(
        "{} weights run as {scheme}{on}: Marlin's kernels dequantize them to BF16; the {products} products are {bound}",
        model.precision.name()
    ))
}

impl SimSetup {
    /// Resolves a target with the built-in and user presets. `model` is a preset id or the path
    /// of a Hugging Face config.json (or of the folder holding one); `profile` a fitted
    /// [`StackProfile`] file.
    pub fn resolve(
        model: &str,
        hardware: &str,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        Self::resolve_with(&Presets::load_default()?, model, hardware, options, profile)
    }

    /// As [`SimSetup::resolve`], with an explicit preset registry.
    pub fn resolve_with(
        presets: &Presets,
        model: &str,
        hardware: &str,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let hw = presets.hardware(hardware)?.clone();
        let shape = load_model(presets, model)?;
        Self::from_parts(shape, hw, options, profile)
    }

    /// Builds a setup from an explicit model shape and hardware description.
    pub fn from_parts(
        mut model: ModelShape,
        hardware: HardwareSpec,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let mut stack = hardware.stack.clone();
        if let Some(path) = profile {
            stack.apply_file(path)?;
        }
        let mut opts = ServingOptions::parse(options, &model, &hardware, &mut stack)?;
        if let Some(p) = opts.precision {
            model.precision = p;
            model.attention_precision = None;
        }
        let mut notes = Vec::new();
        let drafter = match &opts.speculative {
            Some(spec) => {
                let (drafter, note) = drafter(spec, &model, &opts)?;
                notes.push(note);
                drafter
            }
            None => None,
        };
        let method = opts.speculative.as_ref().map(|s| s.method);
        let mut memory = plan_memory(&model, &hardware, &opts, &stack, drafter.as_ref().zip(method))?;
        if let Some(preset) = &model.derived_from {
            notes.push(format!(
                "{}: the shapes of the preset {preset}, its weights in {} as the name says",
                model.id,
                model.precision.name()
            ));
        }
        if let Some(l) = &model.linear {
            let kind = match l.kind {
                crate::model::LinearKind::GatedDeltaNet => "linear attention (Gated DeltaNet)",
                crate::model::LinearKind::Mamba2 => "Mamba-2",
            };
            notes.push(format!(
                "{} of {} mixers are {kind}: each request keeps {:.1} MiB of state a GPU in place of their \
                 KV cache; attention blocks of {} tokens, as vLLM grows them to hold one layer's state{}",
                l.layers,
                model.layers,
                memory.state_bytes_per_request / (1024.0 * 1024.0),
                memory.layout.block_size,
                if opts.enable_prefix_caching {
                    ""
                } else {
                    "; no prefix caching, vLLM's default for such models (enable-prefix-caching=true to override)"
                }
            ));
        }
        if opts.nodes_derived && opts.nodes > 1 {
            notes.push(format!(
                "{} on {} ({} GPU{} per node): {} nodes",
                opts.parallel_text(),
                hardware.name,
                hardware.gpus_per_node,
                if hardware.gpus_per_node == 1 { "" } else { "s" },
                opts.nodes
            ));
        }
        match opts.sync_because {
            Some(SyncBecause::RayExecutor) => {
                // vLLM's multiprocessing executor keeps async scheduling, but not with stages.
                let keep = if opts.pp > 1 {
                    String::new()
                } else {
                    format!(
                        ", or nnodes={} for vLLM's multiprocessing executor over the machines, which keeps it",
                        opts.nodes
                    )
                };
                notes.push(format!(
                    "no async scheduling: one engine of {} spans {} machines, which vLLM runs on its Ray \
                     executor, and that has none (async-scheduling=true to override{keep})",
                    opts.parallel_text(),
                    opts.nodes
                ))
            }
            Some(SyncBecause::RayChosen) => notes.push(
                "no async scheduling: vLLM's Ray executor (distributed-executor-backend=ray) has none \
                 (async-scheduling=true to override)"
                    .to_string(),
            ),
            Some(SyncBecause::PipelineParallel) => notes.push(format!(
                "no async scheduling: vLLM has none with pipeline parallelism ({}; async-scheduling=true \
                 to override)",
                opts.parallel_text()
            )),
            Some(SyncBecause::HostDrafts) => notes.push(
                "no async scheduling: vLLM has none with drafts matched on the host (ngram); its drafters on \
                 the GPU (eagle, eagle3, mtp, draft_model) keep it"
                    .to_string(),
            ),
            Some(SyncBecause::Release) => notes.push(
                "no async scheduling: vLLM before 0.14 ran without it unless --async-scheduling was given \
                 (async-scheduling=true to override)"
                    .to_string(),
            ),
            None => {}
        }
        let largest = opts.cudagraph_sizes.largest();
        if opts.cudagraph_mode != crate::options::CudaGraphMode::None {
            if let Some(sizes) = opts.cudagraph_sizes.given_text() {
                notes.push(format!(
                    "CUDA graphs captured at {sizes} tokens: a step runs padded to the next, one of more than \
                     {largest} without graphs"
                ));
            } else if largest <= 2 * u64::from(opts.max_num_seqs)
                && opts.max_num_seqs.saturating_mul(2) < stack.graph_max_tokens.min(opts.max_num_batched_tokens)
            {
                notes.push(format!(
                    "CUDA graphs up to {largest} tokens (vLLM captures up to twice max-num-seqs unless told): steps \
                     of more run without graphs (max-cudagraph-capture-size to raise it)"
                ));
            }
        }
        if opts.pp > 1 {
            notes.push(format!(
                "pp={}: up to {} batches in flight, one a stage, as vLLM's batch queue keeps them: prompts \
                 the token budget splits over several batches go through the stages together, while a \
                 request's next token waits for its batch to leave the last stage (decode gains nothing)",
                opts.pp, opts.pp
            ));
        }
        let max_model_len = match opts.max_model_len {
            Some(len) => {
                let blocks = u64::from(len).div_ceil(u64::from(memory.layout.block_size));
                let needed = memory.layout.units_for_blocks(blocks);
                if needed > memory.layout.total_units {
                    let unit_gib = memory.kv_gib / memory.layout.total_units.max(1) as f64;
                    return Err(SimError::MaxModelLenTooLong {
                        max_model_len: len,
                        needed_gib: needed as f64 * unit_gib,
                        kv_gib: memory.kv_gib,
                        fit_tokens: memory.kv_tokens,
                    });
                }
                len
            }
            None => {
                let fit = u32::try_from(memory.kv_tokens).unwrap_or(u32::MAX);
                if fit < model.max_context {
                    notes.push(format!(
                        "max-model-len lowered from {} to {fit}, the most the KV cache holds",
                        model.max_context
                    ));
                }
                model.max_context.min(fit)
            }
        };
        notes.push(format!(
            "{} on {} x{} ({}): weights {:.1} GiB/GPU, KV cache {:.1} GiB/GPU = {} tokens, \
             max-num-seqs {}, max-num-batched-tokens {}",
            model.id,
            hardware.name,
            opts.gpus(),
            opts.parallel_text(),
            memory.weights_gib,
            memory.kv_gib,
            memory.kv_tokens,
            opts.max_num_seqs,
            opts.max_num_batched_tokens
        ));
        notes.extend(dequantizing_note(&model, &hardware, &stack));
        if model.precision.dequantizes_mxfp4_experts(model.moe.is_some(), &hardware.peak_tflops) {
            use crate::precision::Mxfp4Backend::{Marlin, Triton};
            notes.push(
                match (opts.mxfp4_backend, hardware.mxfp4_backend) {
                    (Marlin, Marlin) => {
                        "MXFP4 experts priced as Marlin's dequantizing kernels (mxfp4-backend=marlin; vLLM takes \
                     Triton's on Hopper where its triton_kernels package is installed: mxfp4-backend=triton)"
                    }
                    (Marlin, Triton) => "MXFP4 experts priced as Marlin's dequantizing kernels (mxfp4-backend=marlin)",
                    (Triton, Triton) => {
                        "MXFP4 experts priced as vLLM's Triton kernels, the ones it runs on ROCm \
                     (mxfp4-backend=marlin prices Marlin's)"
                    }
                    (Triton, Marlin) => "MXFP4 experts priced as vLLM's Triton kernels (mxfp4-backend=triton)",
                }
                .to_string(),
            );
        }
        if let Some((e, n)) = crate::cost::tiles::untuned_bf16_experts(&model, &opts, &hardware) {
            notes.push(format!(
                "vLLM ships no tuned fused-MoE tiles for these BF16 experts (E={e},N={n}) on {}: their products \
                 are priced at vLLM's default tile, {:.2} of the tuned ceiling{}",
                hardware.device_name,
                crate::cost::tiles::default_tile_rate(opts.vllm_release),
                match opts.vllm_release {
                    Some((major, minor)) => format!(" (vLLM {major}.{minor})"),
                    None =>
                        " (vLLM 0.11 to 0.13; --option vllm-release=0.17 or later for the newer default tiles)".into(),
                }
            ));
        }
        if opts.dp > 1 {
            let dp = opts.dp;
            opts.max_num_seqs = opts.max_num_seqs.saturating_mul(dp);
            opts.max_num_batched_tokens = opts.max_num_batched_tokens.saturating_mul(dp);
            memory.layout.total_units = memory.layout.total_units.saturating_mul(u64::from(dp));
            notes.push(format!(
                "dp={dp}: the {dp} engines are simulated as one scheduler with {dp}x the KV pool, \
                 max-num-seqs {} and max-num-batched-tokens {} (load balancing between engines is not modelled)",
                opts.max_num_seqs, opts.max_num_batched_tokens
            ));
        }
        Ok(SimSetup { model, hardware, options: opts, max_model_len, stack, memory, notes, drafter })
    }

    /// The prediction band of this deployment: its fitted profile's when that carries one, else
    /// the device's; widened, saying so, for a tensor-parallel size or a model other than those
    /// its errors were measured at, and for speculative decoding.
    pub fn uncertainty(&self) -> crate::hardware::Uncertainty {
        // A fitted profile's own band describes its constants; the device's, the preset's.
        let own = self.stack.uncertainty.as_ref().unwrap_or(&self.hardware.uncertainty);
        let mut band = own.for_tp(self.options.tp).for_model(&self.model.id);
        if self.options.speculative.is_some() {
            band = band.for_drafts();
        }
        let dequantizes =
            self.model.precision.dequantizes_mxfp4_experts(self.model.moe.is_some(), &self.hardware.peak_tflops);
        if dequantizes && self.options.mxfp4_backend != self.hardware.mxfp4_backend {
            let kernels = match self.options.mxfp4_backend {
                crate::precision::Mxfp4Backend::Triton => "Triton's",
                crate::precision::Mxfp4Backend::Marlin => "Marlin's",
            };
            band.source.push_str(&format!(
                "; the experts are priced as {kernels} kernels, not the device's own that these errors come with"
            ));
        }
        band
    }
}

/// The model a speculative decoder drafts with, and the note that says how it is priced.
fn drafter(
    spec: &crate::options::SpecDecode,
    model: &ModelShape,
    opts: &ServingOptions,
) -> Result<(Option<ModelShape>, String), SimError> {
    use crate::options::SpecMethod;
    let rates: Vec<String> = spec.acceptance.iter().map(|p| format!("{p:.2}")).collect();
    let head = format!(
        "speculative decoding: {} draft token(s) a step for each decoding sequence, accepted at {} by position \
         ({:.2} tokens a verified step)",
        spec.num_speculative_tokens,
        rates.join(", "),
        spec.acceptance_length()
    );
    let (drafter, how) = match spec.method {
        SpecMethod::Ngram => (None, "drafted on the host (ngram), no GPU work".to_string()),
        SpecMethod::Mtp => (
            Some(model.mtp_layer()),
            "each draft priced as one more layer of the model (its MTP layer) and the LM head, the first over \
             all the step's tokens; vLLM drafts so only with a checkpoint that carries MTP layers"
                .to_string(),
        ),
        SpecMethod::Eagle | SpecMethod::Drafter => {
            let name = spec.model.as_deref().unwrap_or_default();
            let d = load_model(&Presets::load_default()?, name)?;
            if !d.heads.is_multiple_of(opts.tp) {
                return Err(SimError::Conflict(format!(
                    "the draft model {} has {} attention heads, which tp={} does not divide",
                    d.id, d.heads, opts.tp
                )));
            }
            let how = format!("each draft priced as a pass of the draft model {} ({} layer(s))", d.id, d.layers);
            (Some(d), how)
        }
    };
    let memory = match &drafter {
        Some(d) => format!(
            "; its weights ({:.2} GiB a GPU) and its keys and values ({:.1} KiB a token a GPU) come out of the \
             KV cache, as vLLM allocates them",
            crate::memory::drafter_weight_bytes_per_gpu(d, spec.method, model, opts) / (1024.0 * 1024.0 * 1024.0),
            crate::memory::drafter_kv_bytes_per_token(d, opts) / 1024.0
        ),
        None => String::new(),
    };
    Ok((drafter, format!("{head}; {how}{memory}")))
}

/// A preset by id, or a config.json path (a folder means its config.json).
fn load_model(presets: &Presets, model: &str) -> Result<ModelShape, SimError> {
    let path = Path::new(model);
    let looks_like_path = model.ends_with(".json") || path.is_dir() || path.is_file();
    if !looks_like_path {
        return Ok(presets.model(model)?.clone());
    }
    let file = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
    let origin = file.display().to_string();
    let text = std::fs::read_to_string(&file)
        .map_err(|e| SimError::ModelConfig { path: origin.clone(), message: e.to_string() })?;
    ModelShape::from_hf_config_at(&text, &origin)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
            a100.ends_with(
                "the dense products are bound by the tensor cores, at 0.50 of their BF16 rate (dequant-mma)"
            )
        );
        let lower = note("Qwen/Qwen3-14B-FP8", "a100-80g", &[("dequant-mma", "0.3")]).unwrap();
        assert!(lower.ends_with("at 0.30 of their BF16 rate (dequant-mma)"), "{lower}");
        // The experts of a mixture of experts there are bound by the unpacking, with its rate.
        let moe = note("Qwen/Qwen3-235B-A22B-FP8", "a100-80g", &[("tp", "8")]).unwrap();
        assert!(
            moe.contains("the expert products are bound by the SMs unpacking the weights, at 113 TFLOP/s"),
            "{moe}"
        );
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
            (
                "speculative-config",
                r#"{"method": "eagle3", "model": "openai/gpt-oss-20b", "num_speculative_tokens": 2}"#,
            ),
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
        assert!(scout.notes.iter().any(|n| n.contains("lowered")));
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
        let asked =
            setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2"), ("enable-prefix-caching", "true")]).unwrap();
        assert!(asked.options.enable_prefix_caching);
        assert!(setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().options.enable_prefix_caching);
        // max-model-len is checked against the pool of the grown blocks and the state.
        let long = setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2"), ("max-model-len", "262144")]).unwrap();
        assert_eq!(long.max_model_len, 262_144);
        let needed =
            long.memory.layout.units_for_blocks(262_144_u64.div_ceil(u64::from(long.memory.layout.block_size)));
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
}
