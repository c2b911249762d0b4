//! End-to-end plan building: vLLM-identical bodies, schedules, token counts, determinism and
//! the dry-run file round trip.

use serde_json::{Map, Value};
use servebench_core::config::{Backend, Lora, LoraAssignment, MultiTurn, RangeRatio, RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, TokenCounting};
use servebench_core::rng::RandomState;

use super::build_plan;
use crate::plan_file::{read_plan, write_plan};
use crate::testutil::{qwen3, testdata};
use servebench_core::pyjson;

use crate::arrival;

fn config(backend: Backend) -> RunConfig {
    let mut c = RunConfig::for_target("http://127.0.0.1:8000", "Qwen/Qwen3-0.6B");
    c.target.backend = backend;
    c.target.endpoint = backend.default_endpoint().into();
    c
}

/// `random` prompts of 40 tokens asking for 4.
fn short_random() -> WorkloadSpec {
    WorkloadSpec::Random {
        input_len: 40,
        output_len: 4,
        range_ratio: RangeRatio::default(),
        prefix_len: 0,
        media: None,
        batch_size: 1,
    }
}

fn random_reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(testdata().join("datasets/random_qwen3.json")).unwrap()).unwrap()
}

#[test]
fn random_plan_bodies_are_vllms_for_both_apis() {
    let r = random_reference();
    let case = &r["cases"][1];
    let spec = &case["case"];
    for (backend, key) in [(Backend::Vllm, "completions_bodies"), (Backend::OpenaiChat, "chat_bodies")] {
        let mut c = config(backend);
        c.workload = WorkloadSpec::Random {
            input_len: spec["input_len"].as_u64().unwrap() as u32,
            output_len: spec["output_len"].as_u64().unwrap() as u32,
            range_ratio: RangeRatio {
                input: spec["ratio"][0].as_f64().unwrap(),
                output: spec["ratio"][1].as_f64().unwrap(),
            },
            prefix_len: spec["prefix"].as_u64().unwrap() as u32,
            media: None,
            batch_size: 1,
        };
        c.traffic.num_prompts = spec["num"].as_u64().unwrap() as usize;
        c.traffic.seed = spec["seed"].as_u64().unwrap();
        c.traffic.request_rate = 5.0;
        c.extra_body = r["extra_body"].as_object().unwrap().clone();
        let plan = build_plan(&c, Some(qwen3())).unwrap();
        assert_eq!(plan.requests.len(), c.traffic.num_prompts);
        for (req, want) in plan.requests.iter().zip(case[key].as_array().unwrap()) {
            assert_eq!(req.body, want.as_str().unwrap().as_bytes());
        }
        let want_times = arrival::delays(&c.traffic, plan.requests.len(), &mut RandomState::new(42)).unwrap();
        for (req, t) in plan.requests.iter().zip(want_times) {
            assert_eq!(req.at_ns, arrival::to_ns(t));
        }
        assert_eq!(plan.notes[0], "Sampling input_len from [100, 300] and output_len from [25, 75]");
        assert_eq!(plan.token_counting, TokenCounting::Tokenizer(qwen3().name().to_string()));
    }
}

#[test]
fn random_mm_sends_random_s_prompts_with_its_images_after_them_in_chat_only() {
    let media = servebench_core::config::RandomMedia {
        base_items: 2,
        items_range_ratio: 0.0,
        image_limit: 9,
        buckets: vec![servebench_core::config::ImageBucket { height: 24, width: 40, probability: 1.0 }],
    };
    let mut c = config(Backend::OpenaiChat);
    c.traffic.num_prompts = 4;
    c.workload = short_random();
    let text = build_plan(&c, Some(qwen3())).unwrap();
    let WorkloadSpec::Random { media: m, .. } = &mut c.workload else { unreachable!() };
    *m = Some(media);
    let mm = build_plan(&c, Some(qwen3())).unwrap();
    assert!(mm.notes.iter().any(|n| n.starts_with("random-mm: 8 images over 4 requests")), "{:?}", mm.notes);
    for (t, m) in text.requests.iter().zip(&mm.requests) {
        let (t, m): (Value, Value) =
            (serde_json::from_slice(&t.body).unwrap(), serde_json::from_slice(&m.body).unwrap());
        let parts = m["messages"][0]["content"].as_array().unwrap();
        assert_eq!(parts[0], t["messages"][0]["content"][0], "the text part is random's prompt");
        assert_eq!(parts.len(), 3);
        for p in &parts[1..] {
            assert_eq!(p["type"], "image_url");
            assert!(p["image_url"]["url"].as_str().unwrap().starts_with("data:image/jpeg;base64,/9j/"));
        }
    }
    assert_eq!(
        text.requests.iter().map(|r| r.prompt_tokens).collect::<Vec<_>>(),
        mm.requests.iter().map(|r| r.prompt_tokens).collect::<Vec<_>>(),
        "prompt tokens are the text's, as vLLM counts them"
    );
    c.target.backend = Backend::Vllm;
    let e = build_plan(&c, Some(qwen3())).unwrap_err().to_string();
    assert!(e.contains("images go in chat messages") && e.contains("--backend openai-chat"), "{e}");
    // Infinity's CLIP input is one image in place of the text: two are refused, one is sent.
    c.target.backend = Backend::InfinityEmbeddingsClip;
    let e = build_plan(&c, Some(qwen3())).unwrap_err().to_string();
    assert!(e.contains("one image a request") && e.contains("has 2") && e.contains("items-per-request 1"), "{e}");
    let WorkloadSpec::Random { media: Some(m), .. } = &mut c.workload else { unreachable!() };
    m.base_items = 1;
    let one = build_plan(&c, Some(qwen3())).unwrap();
    for r in &one.requests {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert!(body["input"].as_str().unwrap().starts_with("data:image/jpeg;base64,/9j/"), "{body}");
        assert_eq!(body["modality"], "image");
        assert_eq!(r.prompt_tokens, 0, "no text is sent");
    }
}

#[test]
fn prompt_tokens_are_what_the_server_counts() {
    let mut c = config(Backend::OpenaiChat);
    c.traffic.num_prompts = 3;
    c.workload = short_random();
    let chat = build_plan(&c, Some(qwen3())).unwrap();
    c.target.backend = Backend::Vllm;
    let comp = build_plan(&c, Some(qwen3())).unwrap();
    let tpl = qwen3().require_chat_template().unwrap();
    for (a, b) in chat.requests.iter().zip(&comp.requests) {
        let body: Value = serde_json::from_slice(&b.body).unwrap();
        let prompt = body["prompt"].as_str().unwrap();
        assert_eq!(b.prompt_tokens, 40);
        assert_eq!(b.prompt_tokens, qwen3().count(prompt, true).unwrap());
        assert_eq!(a.prompt_tokens, qwen3().count(&tpl.render_user(prompt).unwrap(), false).unwrap());
        assert!(a.prompt_tokens > b.prompt_tokens);
    }
    assert!(chat.notes.iter().any(|n| n.contains("chat template applied")));
}

#[test]
fn same_inputs_give_the_same_bytes_and_survive_a_dry_run_round_trip() {
    let mut c = config(Backend::Vllm);
    c.workload = WorkloadSpec::Sharegpt {
        path: testdata().join("sharegpt/sharegpt_small.json").display().to_string(),
        output_len: None,
        oversample: true,
        shuffle: true,
        multi_turn: None,
    };
    c.traffic.num_prompts = 30;
    c.traffic.request_rate = 2.0;
    c.traffic.burstiness = 0.5;
    c.extra_body.insert("temperature".into(), Value::from(0.0));
    let a = build_plan(&c, Some(qwen3())).unwrap();
    let b = build_plan(&c, Some(qwen3())).unwrap();
    assert_eq!(a, b);
    let mut buf = Vec::new();
    write_plan(&a, &mut buf).unwrap();
    let back = read_plan(&buf[..], std::path::Path::new("mem")).unwrap();
    assert_eq!(back, a);
    for (x, y) in a.requests.iter().zip(&back.requests) {
        assert_eq!(x.body, y.body);
    }
    let other_seed = build_plan(
        &RunConfig { traffic: servebench_core::config::Traffic { seed: 1, ..c.traffic.clone() }, ..c.clone() },
        Some(qwen3()),
    )
    .unwrap();
    assert_ne!(other_seed.requests[0].body, a.requests[0].body);
    // Python-compatible bodies: ASCII only, json.dumps spacing.
    let body = std::str::from_utf8(&a.requests[0].body).unwrap();
    assert!(body.is_ascii() && body.starts_with("{\"model\": \"Qwen/Qwen3-0.6B\", \"prompt\": \""));
    assert!(body.ends_with(
        ", \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"ignore_eos\": true, \"temperature\": 0.0}"
    ));
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(pyjson::dumps(&v), body);
}

#[test]
fn trace_plans_take_their_times_from_the_trace() {
    let mut c = config(Backend::Vllm);
    c.workload = WorkloadSpec::Trace {
        path: testdata().join("datasets/mooncake_small.jsonl").display().to_string(),
        time_scale: 2.0,
        timed: None,
    };
    // A rate would be ignored: it is refused instead of printed in the report as if it held.
    c.traffic.request_rate = 1.0;
    let err = build_plan(&c, None).unwrap_err().to_string();
    assert!(err.contains("a trace sets every arrival time"), "{err}");
    c.traffic.request_rate = f64::INFINITY;
    let plan = build_plan(&c, None).unwrap();
    let at: Vec<u64> = plan.requests.iter().map(|r| r.at_ns).collect();
    assert_eq!(at, [0, 500_000_000, 500_000_000, 2_000_000_000, 6_200_000_000]);
    assert_eq!(plan.token_counting, TokenCounting::Estimate);
    assert!(plan.notes.iter().any(|n| n.contains("arrival times come from the trace")));
    let max: Vec<u32> = plan.requests.iter().map(|r| r.max_tokens).collect();
    assert_eq!(max, [12, 30, 5, 77, 3]);
}

#[test]
fn multi_turn_plans_hold_conversations_with_start_times() {
    let mut c = config(Backend::OpenaiChat);
    c.workload = WorkloadSpec::Sharegpt {
        path: testdata().join("sharegpt/sharegpt_small.json").display().to_string(),
        output_len: Some(32),
        oversample: false,
        shuffle: true,
        multi_turn: Some(MultiTurn { max_active_conversations: 2, think_time_s: 1.0, max_turns: 4 }),
    };
    c.traffic.num_prompts = 6;
    c.traffic.request_rate = 3.0;
    let plan = build_plan(&c, Some(qwen3())).unwrap();
    assert!(plan.requests.is_empty());
    assert_eq!(plan.conversations.len(), 6);
    assert!(plan.len() >= 12);
    let want = arrival::delays(&c.traffic, 6, &mut RandomState::new(0)).unwrap();
    let got: Vec<u64> = plan.conversations.iter().map(|c| c.at_ns).collect();
    assert_eq!(got, want.into_iter().map(arrival::to_ns).collect::<Vec<_>>());
    assert_eq!(*got.last().unwrap(), 2_000_000_000);
    c.target.backend = Backend::Vllm;
    let err = build_plan(&c, Some(qwen3())).unwrap_err().to_string();
    assert!(err.contains("--backend openai-chat"), "{err}");
}

#[test]
fn prefix_repetition_and_custom_build_without_a_tokenizer() {
    let mut c = config(Backend::Vllm);
    c.workload = WorkloadSpec::PrefixRepetition { prefix_len: 10, suffix_len: 5, num_prefixes: 2, output_len: 8 };
    c.traffic.num_prompts = 4;
    let plan = build_plan(&c, None).unwrap();
    assert_eq!(plan.requests.len(), 4);
    assert!(plan.requests.iter().all(|r| r.prompt_tokens == 15 && r.max_tokens == 8 && r.at_ns == 0));
    let with_tok = build_plan(&c, Some(qwen3())).unwrap();
    for r in &with_tok.requests {
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(r.prompt_tokens, qwen3().count(v["prompt"].as_str().unwrap(), true).unwrap());
    }
}

#[test]
fn seeds_numpy_cannot_take_are_refused() {
    let mut c = config(Backend::Vllm);
    c.traffic.seed = 1 << 32;
    let err = build_plan(&c, None).unwrap_err().to_string();
    assert!(err.contains("--seed") && err.contains("2^32"), "{err}");
}

#[test]
fn a_route_that_serves_another_api_than_the_backend_builds_is_noted() {
    let mut c = config(Backend::Openai);
    assert!(!build_plan(&c, None).unwrap().notes.iter().any(|n| n.contains("--endpoint")));
    c.target.endpoint = "/v1/chat/completions".into();
    let plan = build_plan(&c, None).unwrap();
    let note = plan.notes.iter().find(|n| n.contains("--endpoint")).expect("a note on the route");
    assert_eq!(
        note,
        "--endpoint /v1/chat/completions serves chat requests, but --backend openai builds completions ones: \
         a server refuses each of them; pass --backend openai-chat, or --endpoint /v1/completions"
    );
    // A proxy's own route names no API: nothing to say.
    c.target.endpoint = "/gateway/generate".into();
    assert!(!build_plan(&c, None).unwrap().notes.iter().any(|n| n.contains("--endpoint")));
    // An embeddings route takes every embeddings body: chat messages, Infinity's input.
    for (backend, endpoint) in [
        (Backend::OpenaiEmbeddingsChat, "/v1/embeddings"),
        (Backend::InfinityEmbeddings, "/embeddings"),
        (Backend::OpenaiEmbeddingsClip, "/v1/embeddings"),
    ] {
        let mut c = config(backend);
        c.target.endpoint = endpoint.into();
        let notes = build_plan(&c, None).unwrap().notes;
        assert!(!notes.iter().any(|n| n.contains("--endpoint")), "{backend:?}: {notes:?}");
    }
    let mut c = config(Backend::OpenaiEmbeddings);
    c.target.endpoint = "/v1/rerank".into();
    let notes = build_plan(&c, None).unwrap().notes;
    assert!(
        notes.iter().any(|n| n.starts_with(
            "--endpoint /v1/rerank serves rerank requests, but --backend openai-embeddings builds embeddings ones"
        ) && n.ends_with("pass --backend vllm-rerank, or --endpoint /v1/embeddings")),
        "{notes:?}"
    );
}

#[test]
fn more_prompts_than_request_indices_hold_are_refused() {
    let mut c = config(Backend::Vllm);
    c.traffic.num_prompts = 1 << 40;
    let err = build_plan(&c, None).unwrap_err().to_string();
    assert!(err.contains("--num-prompts"), "{err}");
}

fn models(plan: &servebench_core::plan::Plan) -> Vec<String> {
    let model = |body: &[u8]| serde_json::from_slice::<Value>(body).unwrap()["model"].as_str().unwrap().to_string();
    plan.requests.iter().map(|r| model(&r.body)).collect()
}

fn sharegpt(output_len: Option<u32>, multi_turn: Option<MultiTurn>) -> WorkloadSpec {
    let path = testdata().join("sharegpt/sharegpt_small.json").display().to_string();
    WorkloadSpec::Sharegpt { path, output_len, oversample: output_len.is_none(), shuffle: true, multi_turn }
}

fn lora(assignment: LoraAssignment) -> Option<Lora> {
    Some(Lora { modules: vec!["a".into(), "b".into(), "c".into()], assignment })
}

#[test]
fn lora_adapters_are_assigned_as_vllm_assigns_them() {
    let mut c = config(Backend::Vllm);
    c.traffic.num_prompts = 10;
    c.workload = WorkloadSpec::Random {
        input_len: 16,
        output_len: 4,
        range_ratio: RangeRatio { input: 0.0, output: 0.0 },
        prefix_len: 0,
        media: None,
        batch_size: 1,
    };
    c.target.lora = lora(LoraAssignment::RoundRobin);
    assert_eq!(models(&build_plan(&c, None).unwrap()), ["a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]);
    // random.seed(0); [random.choice(['a', 'b', 'c']) for _ in range(10)]: the random dataset
    // leaves Python's global `random` as vLLM seeded it.
    c.target.lora = lora(LoraAssignment::Random);
    let plan = build_plan(&c, None).unwrap();
    assert_eq!(models(&plan), ["b", "b", "a", "b", "c", "b", "b", "b", "b", "b"]);
    // Only `model` differs from a plan without adapters.
    let mut plain = c.clone();
    plain.target.lora = None;
    let plain = build_plan(&plain, None).unwrap();
    for (l, p) in plan.requests.iter().zip(&plain.requests) {
        let (mut l, p): (Value, Value) =
            (serde_json::from_slice(&l.body).unwrap(), serde_json::from_slice(&p.body).unwrap());
        l["model"] = p["model"].clone();
        assert_eq!(l, p);
    }
}

#[test]
fn random_lora_draws_continue_from_the_sharegpt_shuffle() {
    let mut c = config(Backend::Vllm);
    c.workload = sharegpt(None, None);
    c.traffic.num_prompts = 5;
    c.target.lora = lora(LoraAssignment::Random);
    // kept = entries with two messages or more; random.seed(0); random.shuffle(kept);
    // [random.choice(['a', 'b', 'c']) for _ in range(5)]
    assert_eq!(models(&build_plan(&c, Some(qwen3())).unwrap()), ["c", "c", "b", "c", "b"]);
}

#[test]
fn lora_is_refused_for_conversations_and_without_adapters() {
    let mut c = config(Backend::OpenaiChat);
    c.workload = sharegpt(Some(8), Some(MultiTurn { max_active_conversations: 2, think_time_s: 0.0, max_turns: 2 }));
    c.traffic.num_prompts = 2;
    c.target.lora = lora(LoraAssignment::Random);
    let err = build_plan(&c, None).unwrap_err().to_string();
    assert!(err.contains("leave out --lora-modules or --multi-turn"), "{err}");
    let mut c = config(Backend::Vllm);
    c.traffic.num_prompts = 2;
    c.target.lora = Some(Lora { modules: Vec::new(), assignment: LoraAssignment::Random });
    let err = build_plan(&c, None).unwrap_err().to_string();
    assert!(err.contains("at least one adapter"), "{err}");
}

#[test]
fn a_batch_of_prompts_is_one_request_with_their_list_and_their_tokens() {
    let mut c = config(Backend::OpenaiEmbeddings);
    c.workload = short_random();
    c.traffic.num_prompts = 10;
    let single = build_plan(&c, Some(qwen3())).unwrap();
    if let WorkloadSpec::Random { batch_size, .. } = &mut c.workload {
        *batch_size = 4;
    }
    let plan = build_plan(&c, Some(qwen3())).unwrap();
    assert_eq!(plan.requests.len(), 3);
    let prompts: Vec<Value> =
        single.requests.iter().map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["input"].clone()).collect();
    for (k, r) in plan.requests.iter().enumerate() {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        // The same prompts as one a request, in order; the last batch (of 2) is a list too.
        let inputs = body["input"].as_array().unwrap();
        assert_eq!(inputs[..], prompts[4 * k..(4 * k + 4).min(10)]);
        let each: Vec<u32> = single.requests[4 * k..(4 * k + 4).min(10)].iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(r.prompt_tokens, each.iter().sum::<u32>());
        assert_eq!(r.input_tokens, each, "each input's own count");
        assert_eq!(r.index, k as u32);
    }
    assert!(single.requests.iter().all(|r| r.input_tokens.is_empty()), "one prompt: its total alone");
    assert_eq!(plan.requests[2].prompt_tokens, 80);
    c.target.backend = Backend::Vllm;
    c.target.endpoint = "/v1/completions".into();
    assert!(build_plan(&c, Some(qwen3())).unwrap_err().to_string().contains("--random-batch-size"));
}

#[test]
fn a_rerank_plan_sends_the_query_with_each_batch_of_documents() {
    let mut c = config(Backend::VllmRerank);
    c.traffic.num_prompts = 6;
    c.workload = WorkloadSpec::RandomRerank { input_len: 40, range_ratio: 0.0, batch_size: 4, reranker: true };
    let plan = build_plan(&c, Some(qwen3())).unwrap();
    let bodies: Vec<Value> = plan.requests.iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["query"], bodies[1]["query"]);
    assert_eq!(qwen3().encode(bodies[0]["query"].as_str().unwrap(), false).unwrap().len(), 19);
    assert_eq!(
        [bodies[0]["documents"].as_array().unwrap().len(), bodies[1]["documents"].as_array().unwrap().len()],
        [4, 2]
    );
    // Each pair counts the query, a separator and its document: the input length.
    assert_eq!([plan.requests[0].prompt_tokens, plan.requests[1].prompt_tokens], [160, 80]);
    // Each input's own count: the query's (19), then each document's (20).
    assert_eq!(
        [&plan.requests[0].input_tokens[..], &plan.requests[1].input_tokens[..]],
        [&[19, 20, 20, 20, 20][..], &[19, 20, 20]]
    );
    // Without a reranker the query is counted once, and is one of the prompts and one input
    // of each batch.
    c.workload = WorkloadSpec::RandomRerank { input_len: 40, range_ratio: 0.0, batch_size: 3, reranker: false };
    let plan = build_plan(&c, Some(qwen3())).unwrap();
    let tokens: Vec<u32> = plan.requests.iter().map(|r| r.prompt_tokens).collect();
    assert_eq!(tokens, [120, 120, 80]);
    assert_eq!(plan.requests[2].input_tokens, [40, 40], "the query's 40, then the last document's");
    c.target.backend = Backend::OpenaiEmbeddings;
    assert!(build_plan(&c, Some(qwen3())).unwrap_err().to_string().contains("pass --backend vllm-rerank"));
}

#[test]
fn rerank_plan_bodies_are_vllms() {
    let path = testdata().join("datasets/random_rerank_qwen3.json");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in r["cases"].as_array().unwrap() {
        let spec = &case["case"];
        let mut c = config(Backend::VllmRerank);
        c.traffic.num_prompts = spec["num"].as_u64().unwrap() as usize;
        c.traffic.seed = spec["seed"].as_u64().unwrap();
        c.workload = WorkloadSpec::RandomRerank {
            input_len: spec["input_len"].as_u64().unwrap() as u32,
            range_ratio: spec["ratio"].as_f64().unwrap(),
            batch_size: spec["batch"].as_u64().unwrap() as u32,
            reranker: spec["reranker"].as_bool().unwrap(),
        };
        let plan = build_plan(&c, Some(qwen3())).unwrap();
        let want = case["bodies"].as_array().unwrap();
        assert_eq!(plan.requests.len(), want.len(), "{spec}");
        for ((req, body), len) in plan.requests.iter().zip(want).zip(case["prompt_lens"].as_array().unwrap()) {
            assert_eq!(std::str::from_utf8(&req.body).unwrap(), body.as_str().unwrap(), "{spec}");
            assert_eq!(u64::from(req.prompt_tokens), len.as_u64().unwrap(), "{spec}");
        }
    }
}

#[test]
fn chat_template_kwargs_reach_the_prompts_the_client_templates_and_are_noted_where_none_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.jsonl");
    std::fs::write(&path, "{\"prompt\": \"What is 2+2?\"}\n").unwrap();
    let mut c = config(Backend::Vllm);
    c.traffic.num_prompts = 1;
    c.workload = WorkloadSpec::Custom {
        path: path.to_str().unwrap().into(),
        output_len: 8,
        skip_chat_template: false,
        shuffle: false,
        oversample: true,
        images: false,
    };
    let prompt = |plan: &Plan| -> String {
        let v: Value = serde_json::from_slice(&plan.requests[0].body).unwrap();
        v["prompt"].as_str().unwrap().to_string()
    };
    let plain = build_plan(&c, Some(qwen3())).unwrap();
    assert_eq!(prompt(&plain), "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
    let mut kwargs = Map::new();
    kwargs.insert("enable_thinking".into(), Value::Bool(false));
    c.chat_template_kwargs = Some(kwargs);
    let off = build_plan(&c, Some(qwen3())).unwrap();
    // Qwen3's template closes an empty thinking block when thinking is off: 4 tokens more.
    assert_eq!(prompt(&off), format!("{}<think>\n\n</think>\n\n", prompt(&plain)));
    assert_eq!(off.requests[0].prompt_tokens, plain.requests[0].prompt_tokens + 4);
    let noted = |plan: &Plan| plan.notes.iter().any(|n| n.starts_with("--chat-template-kwargs changes nothing"));
    assert!(!noted(&off));
    // Nothing the client templates: said, with the flag that reaches the server's template.
    let untemplated = build_plan(&c, None).unwrap();
    assert!(noted(&untemplated), "{:?}", untemplated.notes);
    c.workload = short_random();
    let random = build_plan(&c, Some(qwen3())).unwrap();
    let note = random.notes.iter().find(|n| n.starts_with("--chat-template-kwargs")).unwrap();
    assert!(note.ends_with(r#"--extra-body '{"chat_template_kwargs": {"enable_thinking":false}}'."#), "{note}");
}
