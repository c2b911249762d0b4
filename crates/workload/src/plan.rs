//! Builds the [`Plan`] for a run: the dataset's samples (or conversations), vLLM's arrival
//! schedule (or the trace's), and every body serialized once, before the clock starts.

use std::ops::Range;
use std::path::Path;

use serde_json::{Map, Value};
use servebench_core::config::{Api, Backend, LoraAssignment, PoolingForm, RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, PlannedRequest, TokenCounting};
use servebench_core::rng::{PyRandom, RandomState};

use crate::accounting::prompt_tokens;
use crate::body::BodyBuilder;
use crate::datasets::custom::{self, CustomSpec};
use crate::datasets::multi_turn::{self, MultiTurnSpec};
use crate::datasets::prefix_repetition::{self, PrefixRepetitionSpec};
use crate::datasets::random::{self, RandomSpec};
use crate::datasets::rerank::{self, RerankSpec};
use crate::datasets::sharegpt::{self, ShareGptSpec};
use crate::datasets::spec_bench::{self, SpecBenchSpec, Suite};
use crate::datasets::txt_slices::{self, TxtSlicesSpec};
use crate::datasets::{Dataset, Sample, estimate_tokens, images, par_map, trace};
use crate::{Tokenizer, WorkloadError, arrival};

/// The note of a plan built without a tokenizer (replaced when its prompts are aligned to the
/// server's tokenizer).
pub const ESTIMATE_NOTE: &str = "No tokenizer: prompt token counts are estimates; the server's usage is authoritative.";

/// Builds the plan for `config`, counting tokens with `tokenizer` when given (estimates
/// otherwise). The same config, seed and files always give the same bodies, byte for byte.
pub fn build_plan(config: &RunConfig, tokenizer: Option<&Tokenizer>) -> Result<Plan, WorkloadError> {
    let seed = config.traffic.seed;
    let seed32 = u32::try_from(seed).map_err(|_| {
        WorkloadError::Invalid(format!(
            "--seed {seed} is too large: numpy's legacy seeding (used for vLLM's arrival times) \
             takes seeds below 2^32"
        ))
    })?;
    // vLLM seeds the global `np.random` once at start; prefix_repetition draws from it, then
    // the arrival gaps do.
    let mut np_random = RandomState::new(seed32);
    let n = config.traffic.num_prompts;
    if u32::try_from(n).is_err() {
        return Err(WorkloadError::Invalid(format!(
            "--num-prompts {n} is more than one run can send (at most {}); lower it",
            u32::MAX
        )));
    }
    let api = config.target.backend.api();
    if matches!(config.workload, WorkloadSpec::Sharegpt { multi_turn: Some(_), .. }) && api != Api::Chat {
        return Err(WorkloadError::Invalid(format!(
            "multi-turn conversations need a chat backend, not `{}`; pass --backend openai-chat",
            config.target.backend.name()
        )));
    }
    let kwargs = config.chat_template_kwargs.as_ref();
    let dataset = sample_dataset(&config.workload, n, seed, tokenizer, kwargs, &mut np_random)?;

    let groups = batches(config, api, &dataset)?;
    let models = lora_models(config, &dataset, groups.len())?;
    let mut notes = dataset.notes;
    notes.extend(route_note(config));
    notes.extend(template_kwargs_note(config, tokenizer));
    let times = if let WorkloadSpec::Trace { time_scale, .. } = &config.workload {
        let t = &config.traffic;
        if t.request_rate.is_finite() || t.burstiness != 1.0 || t.ramp_up.is_some() {
            return Err(WorkloadError::Invalid(
                "a trace sets every arrival time; leave out --request-rate, --burstiness and the ramp-up flags \
                 (--trace-time-scale speeds the trace up or slows it down)"
                    .into(),
            ));
        }
        let ts: Vec<f64> = dataset.samples.iter().map(|s| s.timestamp_s.unwrap_or(0.0)).collect();
        notes.push(format!(
            "Trace replay: arrival times come from the trace (time scale {time_scale}); the request rate and burstiness are not used."
        ));
        arrival::from_timestamps(&ts, *time_scale)?
    } else {
        arrival::delays(&config.traffic, groups.len().max(dataset.conversations.len()), &mut np_random)?
    };

    let chat_messages = matches!(api, Api::Chat | Api::Pooling(PoolingForm::EmbeddingsChat));
    let backend = config.target.backend;
    let one_image = backend.image_prompt().is_some() && !chat_messages;
    if !chat_messages && !one_image && dataset.samples.iter().any(|s| !s.images.is_empty()) {
        return Err(WorkloadError::Invalid(format!(
            "images go in chat messages, not in `{}` requests; pass --backend openai-chat (or an image embedding \
             backend: openai-embeddings-chat, openai-embeddings-clip, openai-embeddings-vlm2vec, \
             infinity-embeddings-clip)",
            backend.name()
        )));
    }
    if let Some(most) = dataset.samples.iter().map(|s| s.images.len()).max().filter(|&m| one_image && m > 1) {
        return Err(WorkloadError::Invalid(format!(
            "{} sends one image a request, in place of its text, and a request here has {most}; send one \
             (--random-mm-base-items-per-request 1 --random-mm-num-mm-items-range-ratio 0, random-mm's defaults), \
             or embed several with openai-embeddings-chat",
            backend.name()
        )));
    }
    let bodies = BodyBuilder::new(config);
    let model = config.target.model_name.as_str();
    // Each prompt as it is sent: an image embedding backend rewrites the text of one with images.
    let indexed: Vec<(usize, &Sample)> = dataset.samples.iter().enumerate().collect();
    let counts = par_map(&indexed, |&(i, s)| match bodies.image_text(i, &s.prompt, !s.images.is_empty()) {
        None => count_prompt(tokenizer, api, s),
        Some(text) => tokenizer.map_or_else(|| Ok(estimate_tokens(&text)), |t| prompt_tokens(t, api, &text)),
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    let query =
        dataset.query.as_ref().map(|q| Ok::<_, WorkloadError>((q, count_prompt(tokenizer, api, q)?))).transpose()?;
    let batched = config.workload.input_batches(n).is_some();
    let mut requests = Vec::with_capacity(groups.len());
    // `times` has one entry per request (or per conversation).
    for (i, (group, &t)) in groups.iter().zip(&times).enumerate() {
        let model = models.as_ref().map_or(model, |m| m[i]);
        let samples = &dataset.samples[group.clone()];
        let own = &counts[group.clone()];
        let tokens: u32 = own.iter().sum();
        let texts = || samples.iter().map(|s| s.prompt.as_str()).collect::<Vec<_>>();
        let (body, max_tokens, prompt_tokens, input_tokens) = match (query, batched) {
            (Some((q, q_tokens)), _) => {
                // vLLM's dataset counts a reranker's query in every pair, with a separator
                // token; an embedding model's scoring embeds it once.
                let query_tokens = match config.workload {
                    WorkloadSpec::RandomRerank { reranker: false, .. } => q_tokens,
                    _ => (q_tokens + 1) * samples.len() as u32,
                };
                let inputs = std::iter::once(q_tokens).chain(own.iter().copied()).collect();
                (bodies.rerank(model, &q.prompt, &texts()), 0, tokens + query_tokens, inputs)
            }
            // A batch, even the last one of a single prompt, is a list, as vLLM sends it.
            (None, true) => (bodies.inputs(model, &texts()), 0, tokens, own.to_vec()),
            (None, false) => {
                let s = &samples[0];
                (bodies.request(i, model, &s.prompt, &s.images, s.max_tokens), s.max_tokens, tokens, Vec::new())
            }
        };
        // Datasets give at most `n` samples (all of a file's rows for `n == 0`, which a file
        // cannot hold 2^32 of), and `n` fits in a `u32`.
        let at_ns = arrival::to_ns(t);
        requests.push(PlannedRequest { index: i as u32, at_ns, body, max_tokens, prompt_tokens, input_tokens });
    }
    let mut conversations = dataset.conversations;
    for (c, t) in conversations.iter_mut().zip(&times) {
        c.at_ns = arrival::to_ns(*t);
    }
    if requests.is_empty() && conversations.is_empty() {
        return Err(WorkloadError::Empty(
            "the workload produced no request; check --num-prompts and the dataset".into(),
        ));
    }
    debug_assert!(requests.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));

    let token_counting = match tokenizer {
        Some(t) => {
            notes.push(format!(
                "Prompt tokens counted with {}{}.",
                t.name(),
                match (api.templated(), t.chat_template()) {
                    (true, Some(_)) => " (chat template applied)",
                    (true, None) => match t.chat_template_error() {
                        Some(_) => " (its chat template does not compile: template tokens not counted)",
                        None => " (no chat template: template tokens not counted)",
                    },
                    _ => "",
                }
            ));
            TokenCounting::Tokenizer(t.name().to_string())
        }
        None => {
            notes.push(ESTIMATE_NOTE.into());
            TokenCounting::Estimate
        }
    };
    let plan = Plan { api, requests, conversations, token_counting, notes };
    plan.check_schedule().map_err(WorkloadError::Invalid)?;
    Ok(plan)
}

/// vLLM's LoRA assignment (`--lora-modules`): one adapter for each of the `n` requests, drawn
/// before the run. Round-robin gives request `i` adapter `i % n`; random is Python's
/// `random.choice` for each request in turn, from the global `random` as the dataset left it (as `random.seed(seed)`
/// left it when the dataset did not touch it).
fn lora_models<'c>(config: &'c RunConfig, dataset: &Dataset, n: usize) -> Result<Option<Vec<&'c str>>, WorkloadError> {
    let Some(lora) = &config.target.lora else { return Ok(None) };
    if lora.modules.is_empty() {
        return Err(WorkloadError::Invalid("--lora-modules needs at least one adapter name".into()));
    }
    if !dataset.conversations.is_empty() {
        return Err(WorkloadError::Invalid(
            "LoRA assignment applies to single requests, not to multi-turn conversations; leave out \
             --lora-modules or --multi-turn"
                .into(),
        ));
    }
    let names: Vec<&str> = lora.modules.iter().map(String::as_str).collect();
    Ok(Some(match lora.assignment {
        LoraAssignment::RoundRobin => (0..n).map(|i| names[i % names.len()]).collect(),
        LoraAssignment::Random => {
            let mut rng = dataset.python_random.clone().unwrap_or_else(|| PyRandom::new(config.traffic.seed));
            (0..n).map(|_| rng.choice(&names).copied().unwrap_or(names[0])).collect()
        }
    }))
}

/// The samples each request carries, in order: one each, or (`--random-batch-size`,
/// `random-rerank`) the batches [`WorkloadSpec::input_batches`] makes, which only a pooling
/// API sends (a rerank's only with the rerank API, which needs the rerank dataset's query).
fn batches(config: &RunConfig, api: Api, dataset: &Dataset) -> Result<Vec<Range<usize>>, WorkloadError> {
    let n = dataset.samples.len();
    let backend = config.target.backend.name();
    let rerank_api = api == Api::Pooling(PoolingForm::Rerank);
    if rerank_api != dataset.query.is_some() {
        return Err(WorkloadError::Invalid(if rerank_api {
            format!("--backend {backend} scores documents against a query: pass --dataset-name random-rerank")
        } else {
            format!(
                "--dataset-name random-rerank sends a query and its documents: pass --backend vllm-rerank, not {backend}"
            )
        }));
    }
    match config.workload.input_batches(config.traffic.num_prompts) {
        None => Ok((0..n).map(|i| i..i + 1).collect()),
        Some(_) if !matches!(api, Api::Pooling(form) if form != PoolingForm::EmbeddingsChat) => {
            Err(WorkloadError::Invalid(format!(
                "--random-batch-size sends several prompts in one request's input list, which only the pooling \
                 backends with an input take (openai-embeddings, infinity-embeddings, vllm-pooling), not \
                 {backend}; leave it out"
            )))
        }
        Some((inputs, per)) => {
            debug_assert_eq!(inputs, n, "the dataset gives the inputs its batches group");
            Ok((0..n).step_by(per).map(|s| s..(s + per).min(n)).collect())
        }
    }
}

/// `--chat-template-kwargs` changes only the prompts the client templates, as in vLLM: said
/// before the run where there are none, with how to reach the server's template instead.
fn template_kwargs_note(config: &RunConfig, tok: Option<&Tokenizer>) -> Option<String> {
    let kwargs = config.chat_template_kwargs.as_ref()?;
    let templated = tok.is_some()
        && matches!(
            config.workload,
            WorkloadSpec::Custom { skip_chat_template: false, images: false, .. }
                | WorkloadSpec::SpecBench { .. }
                | WorkloadSpec::SpeedBench { .. }
        );
    (!templated).then(|| {
        format!(
            "--chat-template-kwargs changes nothing in this run: only custom, spec_bench and speed_bench prompts \
             are templated by the client, with a tokenizer and without --skip-chat-template. For a chat backend, \
             the server renders the template: pass --extra-body '{{\"chat_template_kwargs\": {}}}'.",
            Value::Object(kwargs.clone())
        )
    })
}

/// Where the endpoint's route serves another API than the backend builds bodies for (vLLM's
/// client lets a completions backend post to any path ending in "completions", the chat route
/// too), the server refuses every request: said before the run, with the flags that fit.
fn route_note(config: &RunConfig) -> Option<String> {
    let backend = config.target.backend;
    // An embeddings route takes every embeddings body (an input, chat messages, Infinity's).
    let served =
        Api::served_at(&config.target.endpoint).filter(|&served| served.route_end() != backend.api().route_end())?;
    let fits = Backend::ALL.iter().find(|(b, _)| b.api() == served).map_or("", |(_, name)| name);
    let kind = |api: Api| match api {
        Api::Pooling(_) => api.route_end().to_string(),
        _ => format!("{api:?}").to_lowercase(),
    };
    Some(format!(
        "--endpoint {} serves {} requests, but --backend {} builds {} ones: a server refuses each of them; \
         pass --backend {fits}, or --endpoint {}",
        config.target.endpoint,
        kind(served),
        backend.name(),
        kind(backend.api()),
        backend.default_endpoint()
    ))
}

/// Prompt tokens as the server will count them (exact with a tokenizer).
fn count_prompt(tok: Option<&Tokenizer>, api: Api, s: &Sample) -> Result<u32, WorkloadError> {
    match (tok, api, s.raw_tokens) {
        (None, _, _) => Ok(s.prompt_len),
        (Some(t), Api::Completions, Some(raw)) => Ok(raw + t.num_special_tokens_to_add()),
        (Some(t), _, _) => prompt_tokens(t, api, &s.prompt),
    }
}

/// Runs the dataset `spec` names; `template_kwargs` are the extra variables of the chat
/// template where the client renders it.
pub fn sample_dataset(
    spec: &WorkloadSpec,
    num_prompts: usize,
    seed: u64,
    tok: Option<&Tokenizer>,
    template_kwargs: Option<&Map<String, Value>>,
    np_random: &mut RandomState,
) -> Result<Dataset, WorkloadError> {
    match spec {
        WorkloadSpec::RandomRerank { input_len, range_ratio, reranker, .. } => rerank::sample(
            tok,
            &RerankSpec { num_prompts, input_len: *input_len, range_ratio: *range_ratio, reranker: *reranker, seed },
        ),
        WorkloadSpec::Random { input_len, output_len, range_ratio, prefix_len, media, .. } => {
            let spec = RandomSpec {
                num_requests: num_prompts,
                input_len: *input_len,
                output_len: *output_len,
                range_ratio: *range_ratio,
                prefix_len: *prefix_len,
                seed,
            };
            let mut dataset = random::sample(tok, &spec)?;
            if let Some(media) = media {
                let note = images::attach(&mut dataset.samples, media, seed)?;
                dataset.notes.push(note);
            }
            Ok(dataset)
        }
        WorkloadSpec::Sharegpt { path, output_len, shuffle, multi_turn: Some(mt), .. } => multi_turn::sample(
            tok,
            Path::new(path),
            &MultiTurnSpec {
                num_conversations: num_prompts,
                output_len: *output_len,
                shuffle: *shuffle,
                seed,
                options: mt.clone(),
            },
        ),
        WorkloadSpec::Sharegpt { path, output_len, oversample, shuffle, multi_turn: None } => sharegpt::sample(
            tok,
            Path::new(path),
            &ShareGptSpec {
                num_requests: num_prompts,
                output_len: *output_len,
                oversample: *oversample,
                shuffle: *shuffle,
                seed,
            },
        ),
        WorkloadSpec::Custom { path, output_len, skip_chat_template, shuffle, oversample, images } => custom::sample(
            tok,
            Path::new(path),
            &CustomSpec {
                num_requests: num_prompts,
                output_len: *output_len,
                skip_chat_template: *skip_chat_template,
                shuffle: *shuffle,
                oversample: *oversample,
                seed,
                images: *images,
                template_kwargs: template_kwargs.cloned(),
            },
        ),
        WorkloadSpec::SpecBench { path, category, output_len, shuffle, oversample, skip_chat_template_asked }
        | WorkloadSpec::SpeedBench {
            path, category, output_len, shuffle, oversample, skip_chat_template_asked, ..
        } => spec_bench::sample(
            tok,
            Path::new(path),
            &SpecBenchSpec {
                suite: match spec {
                    WorkloadSpec::SpeedBench { subset, .. } => Suite::SpeedBench { subset: subset.clone() },
                    _ => Suite::SpecBench,
                },
                num_requests: num_prompts,
                category: category.clone(),
                output_len: *output_len,
                shuffle: *shuffle,
                oversample: *oversample,
                skip_chat_template_asked: *skip_chat_template_asked,
                template_kwargs: template_kwargs.cloned(),
            },
        ),
        WorkloadSpec::TxtSlices { path, input_len, output_len } => txt_slices::sample(
            tok,
            Path::new(path),
            &TxtSlicesSpec { num_requests: num_prompts, input_len: *input_len, output_len: *output_len, seed },
        ),
        WorkloadSpec::PrefixRepetition { prefix_len, suffix_len, num_prefixes, output_len } => {
            prefix_repetition::sample(
                tok,
                &PrefixRepetitionSpec {
                    num_requests: num_prompts,
                    prefix_len: *prefix_len,
                    suffix_len: *suffix_len,
                    num_prefixes: *num_prefixes,
                    output_len: *output_len,
                    shuffle: true,
                    seed,
                },
                np_random,
            )
        }
        WorkloadSpec::Trace { path, timed, .. } => {
            trace::sample(tok, Path::new(path), num_prompts, seed, timed.as_ref())
        }
    }
}

#[cfg(test)]
mod tests;
