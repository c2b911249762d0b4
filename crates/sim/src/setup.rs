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
    /// One line of what the deployment resolved to: the model on its GPUs, the weights and KV
    /// cache a GPU, the batch limits.
    pub summary: String,
    /// What was derived or adjusted beyond the summary, worth showing the user.
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

    /// Everything worth showing the user, the summary first: what a prediction's result notes
    /// start with.
    pub fn all_notes(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.summary).chain(&self.notes)
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
        Self::assemble(shape, model, hw, options, profile)
    }

    /// Builds a setup from an explicit model shape and hardware description.
    pub fn from_parts(
        model: ModelShape,
        hardware: HardwareSpec,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let name = model.id.clone();
        Self::assemble(model, &name, hardware, options, profile)
    }

    /// [`SimSetup::from_parts`] for a model asked for as `name` (see [`ServingOptions::parse`]).
    fn assemble(
        mut model: ModelShape,
        name: &str,
        hardware: HardwareSpec,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let mut stack = hardware.stack.clone();
        if let Some(path) = profile {
            stack.apply_file(path)?;
        }
        let mut opts = ServingOptions::parse(options, &model, name, &hardware, &mut stack)?;
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
                 the GPU (eagle, eagle3, mtp, draft_model) and ngram_gpu keep it"
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
            } else {
                let query = opts.decode_query_len();
                let decode = opts.max_num_seqs.saturating_mul(query).saturating_mul(2);
                if largest <= u64::from(decode) && decode < stack.graph_max_tokens.min(opts.max_num_batched_tokens) {
                    let rule = match query {
                        1 => "twice max-num-seqs".to_string(),
                        q => {
                            format!("twice max-num-seqs times the {q} tokens a sequence verifies, in multiples of {q}")
                        }
                    };
                    notes.push(format!(
                        "CUDA graphs up to {largest} tokens (vLLM captures up to {rule} unless told): steps of more \
                         run without graphs (max-cudagraph-capture-size to raise it)"
                    ));
                }
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
                        "max-model-len {fit}, the most the KV cache holds, not the model's {}: vLLM starts so \
                         with --max-model-len auto or {fit} (or less); without either it refuses to start",
                        model.max_context
                    ));
                }
                model.max_context.min(fit)
            }
        };
        let summary = format!(
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
        );
        if opts.language_model_only && model.extra_params_b > 0.0 {
            notes.push(format!(
                "the language model alone: no {} input, the tower's {:.1} GiB/GPU left to the KV cache",
                model.modalities.join(" or "),
                crate::memory::tower_bytes_per_gpu(&model, &opts) / crate::memory::GIB
            ));
        }
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
        Ok(SimSetup { model, hardware, options: opts, max_model_len, stack, memory, summary, notes, drafter })
    }

    /// The prediction band of this deployment: its fitted profile's when that carries one, else
    /// the device's; widened, saying so, for a tensor-parallel size or a model other than those
    /// its errors were measured at, and for speculative decoding.
    pub fn uncertainty(&self) -> crate::hardware::Uncertainty {
        // A fitted profile's own band describes its constants; the device's, the preset's. Outside
        // a fit's own deployments the device's checks of other deployments still hold.
        let mut own = self.stack.uncertainty.clone().unwrap_or_else(|| self.hardware.uncertainty.clone());
        own.elsewhere = own.elsewhere.or_else(|| self.hardware.uncertainty.elsewhere.clone());
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
        SpecMethod::NgramGpu => (None, "n-grams matched on the GPU (ngram_gpu), priced as free".to_string()),
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
pub(crate) mod tests;
