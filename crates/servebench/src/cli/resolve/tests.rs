//! Tests of resolving flags into a run's config.

use servebench_core::config::{MultiTurn, RangeRatio};

use super::*;

#[test]
fn goodput_accepts_vllm_keys_and_refuses_others() {
    let slos = parse_goodput(&["ttft:500".into(), "tpot:50.5".into()]).unwrap();
    assert_eq!(slos, vec![Slo { metric: Metric::Ttft, max_ms: 500.0 }, Slo { metric: Metric::Tpot, max_ms: 50.5 }]);
    assert!(parse_goodput(&["itl:5".into()]).unwrap_err().to_string().contains("ttft, tpot, e2el"));
    assert!(parse_goodput(&["ttft:-1".into()]).is_err());
    assert!(parse_goodput(&["ttft".into()]).is_err());
}

#[test]
fn percentile_flags_parse_like_vllm() {
    assert_eq!(parse_percentile_metrics(None).unwrap(), vec![Metric::Ttft, Metric::Tpot, Metric::Itl]);
    assert_eq!(parse_percentile_metrics(Some("e2el,ttft")).unwrap(), vec![Metric::E2el, Metric::Ttft]);
    // vLLM splits without stripping, so a space is an error there too.
    assert!(parse_percentile_metrics(Some("ttft, tpot")).is_err());
    assert_eq!(parse_metric_percentiles("50,90,99.9").unwrap(), vec![50.0, 90.0, 99.9]);
    assert!(parse_metric_percentiles("101").is_err());
}

#[test]
fn sampling_and_think_time_refuse_values_json_cannot_carry() {
    let c = ContentArgs { temperature: Some(f64::NAN), ..ContentArgs::default() };
    assert_eq!(parse_extra_body(&c, true).unwrap_err().to_string(), "--temperature must be a finite number, got NaN");
    let c = ContentArgs { top_p: Some(0.9), ..ContentArgs::default() };
    assert_eq!(parse_extra_body(&c, true).unwrap()["top_p"], 0.9);
    let sharegpt = |think_time: f64| DatasetArgs {
        dataset_name: "sharegpt".into(),
        dataset_path: Some("conversations.json".into()),
        multi_turn: true,
        think_time,
        ..DatasetArgs::default()
    };
    for bad in [f64::NAN, -1.0] {
        let e = parse_workload(&sharegpt(bad), &ContentArgs::default()).unwrap_err().to_string();
        assert!(e.starts_with("--think-time must be 0 or more seconds"), "{e}");
    }
    let ok = parse_workload(&sharegpt(0.5), &ContentArgs::default()).unwrap();
    assert!(matches!(ok, WorkloadSpec::Sharegpt { multi_turn: Some(MultiTurn { think_time_s: 0.5, .. }), .. }));
}

#[test]
fn ramp_up_rules_match_vllm() {
    let mut t = TrafficArgs { ramp_up_strategy: Some("linear".into()), ..TrafficArgs::default() };
    assert!(parse_traffic(&t).unwrap_err().to_string().contains("both"));
    t.ramp_up_start_rps = Some(5);
    t.ramp_up_end_rps = Some(1);
    assert!(parse_traffic(&t).unwrap_err().to_string().contains("less than"));
    t.ramp_up_end_rps = Some(10);
    assert_eq!(parse_traffic(&t).unwrap().ramp_up.unwrap().end_rps, 10.0);
    t.request_rate = 4.0;
    assert!(parse_traffic(&t).unwrap_err().to_string().contains("do not specify --request-rate"));
    let zero = TrafficArgs { max_concurrency: Some(0), ..TrafficArgs::default() };
    assert!(parse_traffic(&zero).is_err());
}

#[test]
fn warm_ups_and_prompts_are_bounded_before_any_is_built() {
    let most = TrafficArgs { num_warmups: MAX_WARMUPS, ..TrafficArgs::default() };
    assert_eq!(parse_traffic(&most).unwrap().num_warmups, MAX_WARMUPS);
    let huge = TrafficArgs { num_warmups: 4_000_000_000, ..TrafficArgs::default() };
    let e = parse_traffic(&huge).unwrap_err().to_string();
    assert!(e.starts_with("--num-warmups 4000000000 is more than 1000000"), "{e}");
    let most = TrafficArgs { num_prompts: MAX_PROMPTS, ..TrafficArgs::default() };
    assert_eq!(parse_traffic(&most).unwrap().num_prompts, MAX_PROMPTS);
    let huge = TrafficArgs { num_prompts: MAX_PROMPTS + 1, ..TrafficArgs::default() };
    let e = parse_traffic(&huge).unwrap_err().to_string();
    assert!(
        e.starts_with("--num-prompts 10000001 is more than the 10000000 one run holds") && e.contains("split"),
        "{e}"
    );
}

#[test]
fn range_ratio_is_a_float_or_json() {
    assert_eq!(parse_range_ratio("0.5").unwrap(), RangeRatio { input: 0.5, output: 0.5 });
    assert_eq!(parse_range_ratio(r#"{"input":0.1,"output":0.2}"#).unwrap(), RangeRatio { input: 0.1, output: 0.2 });
    assert!(parse_range_ratio("1.0").is_err());
    assert!(parse_range_ratio("x").is_err());
}

#[test]
fn urls_follow_vllm_rules() {
    let e = EndpointArgs { host: "::1".into(), port: 9000, ..EndpointArgs::default() };
    let (base, ep, api) = endpoint_urls(&e, Backend::OpenaiChat);
    assert_eq!(
        (base.as_str(), ep.as_str(), api.as_str()),
        ("http://[::1]:9000", "/v1/chat/completions", "http://[::1]:9000/v1/chat/completions")
    );
    assert!(check_endpoint("/v1/completions", Backend::OpenaiChat).is_err());
    assert!(parse_backend("openai-audio").unwrap_err().to_string().contains("not supported"));
    // vLLM's other backends say what to run instead: TGI and its peers serve the OpenAI API.
    let tgi = parse_backend("tgi").unwrap_err().to_string();
    assert!(tgi.starts_with("the vLLM backend \"tgi\" is not supported by servebench: TGI serves"), "{tgi}");
    assert!(tgi.contains("--backend openai-chat"), "{tgi}");
    for name in ["tensorrt-llm", "deepspeed-mii", "lmdeploy", "scalellm"] {
        let e = parse_backend(name).unwrap_err().to_string();
        assert!(e.contains("--backend openai"), "{e}");
    }
    assert_eq!(parse_backend("infinity-embeddings-clip").unwrap(), Backend::InfinityEmbeddingsClip);
    assert!(
        parse_backend("tgx").unwrap_err().to_string().starts_with("unknown --backend \"tgx\"; expected one of: vllm,")
    );
    assert_eq!(parse_backend("openai-responses").unwrap(), Backend::OpenaiResponses);
    assert_eq!(endpoint_urls(&e, Backend::OpenaiResponses).1, "/v1/responses");
    assert!(check_endpoint("/v1/responses", Backend::OpenaiResponses).is_ok());
    let e = check_endpoint("/v1/chat/completions", Backend::OpenaiResponses).unwrap_err().to_string();
    assert!(e.contains("use /v1/responses"), "{e}");
    assert_eq!(parse_backend("anthropic-messages").unwrap().default_endpoint(), "/v1/messages");
    assert!(check_endpoint("/v1/messages", Backend::AnthropicMessages).is_ok());
    assert!(check_endpoint("/v1/responses", Backend::AnthropicMessages).is_err());
}

#[test]
fn dataset_flags_that_would_be_ignored_or_clamped_are_refused() {
    let c = ContentArgs::default();
    let random = DatasetArgs { multi_turn: true, ..DatasetArgs::default() };
    assert!(
        parse_workload(&random, &c).unwrap_err().to_string().starts_with("--multi-turn replays ShareGPT conversations")
    );
    let prefixes = DatasetArgs {
        dataset_name: "prefix_repetition".into(),
        prefix_repetition_num_prefixes: 0,
        ..DatasetArgs::default()
    };
    assert_eq!(
        parse_workload(&prefixes, &c).unwrap_err().to_string(),
        "--prefix-repetition-num-prefixes must be at least 1"
    );
    let turns = DatasetArgs {
        dataset_name: "sharegpt".into(),
        dataset_path: Some("x.json".into()),
        multi_turn: true,
        max_turns: 0,
        ..DatasetArgs::default()
    };
    assert!(parse_workload(&turns, &c).unwrap_err().to_string().contains("--max-turns must be at least 1"));
}

#[test]
fn dataset_rules() {
    let c = ContentArgs { output_len: Some(64), ..ContentArgs::default() };
    let d = DatasetArgs { dataset_path: Some("x.json".into()), ..DatasetArgs::default() };
    assert!(parse_workload(&d, &c).unwrap_err().to_string().contains("--dataset-path"));
    let d = DatasetArgs { dataset_name: "sharegpt".into(), ..DatasetArgs::default() };
    assert!(parse_workload(&d, &c).unwrap_err().to_string().contains("needs --dataset-path"));
    let d = DatasetArgs::default();
    match parse_workload(&d, &c).unwrap() {
        WorkloadSpec::Random { output_len, input_len, .. } => assert_eq!((input_len, output_len), (1024, 64)),
        other => panic!("unexpected {other:?}"),
    }
    let d = DatasetArgs { dataset_name: "hf".into(), ..DatasetArgs::default() };
    assert!(parse_workload(&d, &c).unwrap_err().to_string().contains("not supported"));
    let d = DatasetArgs { dataset_name: "nope".into(), ..DatasetArgs::default() };
    assert!(parse_workload(&d, &c).unwrap_err().to_string().contains("spec_bench, speed_bench, txt-slices"));
}

#[test]
fn spec_bench_and_txt_slices_take_their_own_flags_and_the_generic_lengths() {
    let path = Some("q.jsonl".to_string());
    let d = DatasetArgs {
        dataset_name: "spec_bench".into(),
        dataset_path: path.clone(),
        spec_bench_category: Some("coding".into()),
        skip_chat_template: true,
        no_oversample: true,
        ..DatasetArgs::default()
    };
    let spec = parse_workload(&d, &ContentArgs::default()).unwrap();
    assert_eq!(
        spec,
        WorkloadSpec::SpecBench {
            path: "q.jsonl".into(),
            category: Some("coding".into()),
            output_len: 256,
            shuffle: true,
            oversample: false,
            skip_chat_template_asked: true,
        }
    );
    assert_eq!(spec.dataset_name(), "spec_bench");
    let c = ContentArgs { output_len: Some(64), input_len: Some(300), ..ContentArgs::default() };
    match parse_workload(&d, &c).unwrap() {
        WorkloadSpec::SpecBench { output_len, .. } => assert_eq!(output_len, 64),
        other => panic!("unexpected {other:?}"),
    }
    let slices = DatasetArgs {
        dataset_name: "txt-slices".into(),
        dataset_path: path,
        random_input_len: 2000,
        ..DatasetArgs::default()
    };
    let want = WorkloadSpec::TxtSlices { path: "q.jsonl".into(), input_len: 2000, output_len: 128 };
    assert_eq!(parse_workload(&slices, &ContentArgs::default()).unwrap(), want);
    let want = WorkloadSpec::TxtSlices { path: "q.jsonl".into(), input_len: 300, output_len: 64 };
    assert_eq!(parse_workload(&slices, &c).unwrap(), want);
    for name in ["spec_bench", "speed_bench", "txt-slices", "timed_trace"] {
        let d = DatasetArgs { dataset_name: name.into(), ..DatasetArgs::default() };
        let msg = parse_workload(&d, &c).unwrap_err().to_string();
        assert!(msg.contains(&format!("--dataset-name {name} needs --dataset-path")), "{msg}");
    }
    // The custom dataset now keeps --no-oversample, as vLLM's does.
    let custom = DatasetArgs { dataset_name: "custom".into(), no_oversample: true, ..slices };
    let spec = parse_workload(&custom, &c).unwrap();
    assert!(matches!(spec, WorkloadSpec::Custom { oversample: false, skip_chat_template: false, images: false, .. }));
    assert_eq!(spec.dataset_name(), "custom");
    // custom_image (custom_mm in some releases) sends each row's images and never templates.
    for name in ["custom_image", "custom_mm"] {
        let d = DatasetArgs { dataset_name: name.into(), ..custom.clone() };
        let spec = parse_workload(&d, &c).unwrap();
        assert!(matches!(spec, WorkloadSpec::Custom { skip_chat_template: true, images: true, .. }), "{spec:?}");
        assert_eq!(spec.dataset_name(), "custom_image");
    }
    let audio = DatasetArgs { dataset_name: "custom_audio".into(), ..custom };
    assert!(parse_workload(&audio, &c).unwrap_err().to_string().contains("not supported by servebench yet"));
}

#[test]
fn speed_bench_takes_vllm_s_flags_and_offers_its_subsets() {
    let argv =
        ["servebench", "bench", "serve", "--model", "m", "--dataset-name", "speed_bench", "--dataset-path", "sb"];
    let extra = ["--speed-bench-dataset-subset", "throughput_8k", "--speed-bench-category", "coding"];
    let spec = serve_config(&argv, &extra).unwrap().workload;
    assert_eq!(
        spec,
        WorkloadSpec::SpeedBench {
            path: "sb".into(),
            subset: "throughput_8k".into(),
            category: Some("coding".into()),
            output_len: 4096,
            shuffle: true,
            oversample: true,
            skip_chat_template_asked: false,
        }
    );
    assert_eq!(spec.dataset_name(), "speed_bench");
    use clap::Parser;
    let bad = ["servebench", "bench", "serve", "--speed-bench-dataset-subset", "throughput_4k"];
    let msg = crate::cli::Cli::try_parse_from(bad).unwrap_err().to_string();
    assert!(msg.contains("throughput_4k") && msg.contains("throughput_32k"), "{msg}");
}

#[test]
fn timed_trace_reads_with_vllm_s_flags_and_refuses_an_empty_block() {
    let timed = |extra: &[&str]| {
        let argv =
            ["servebench", "bench", "serve", "--model", "m", "--dataset-name", "timed_trace", "--dataset-path", "t"];
        serve_config(&argv, extra).map(|c| c.workload)
    };
    let spec = timed(&["--timed-trace-chunk-hash-size", "512", "--timed-trace-label-hash-ids", "blocks"]).unwrap();
    assert_eq!(spec.dataset_name(), "timed_trace");
    let WorkloadSpec::Trace { time_scale, timed: Some(t), .. } = spec else { panic!("{spec:?}") };
    assert_eq!((time_scale, t.chunk_tokens, t.sec_multiplier), (1.0, 512, 1.0));
    assert_eq!(
        [t.label_timestamp, t.label_input_length, t.label_output_length, t.label_hash_ids],
        ["timestamp", "input_length", "output_length", "blocks"]
    );
    assert_eq!(timed(&["--self-timed"]).unwrap().dataset_name(), "timed_trace", "vLLM's spelling is taken");
    let msg = timed(&["--timed-trace-chunk-hash-size", "0"]).unwrap_err().to_string();
    assert!(msg.contains("--timed-trace-chunk-hash-size must be at least 1"), "{msg}");
    let msg = timed(&["--timed-trace-sec-multiplier", "0"]).unwrap_err().to_string();
    assert!(msg.contains("--timed-trace-sec-multiplier"), "{msg}");
    let d = DatasetArgs { self_timed: true, ..DatasetArgs::default() };
    let msg = parse_workload(&d, &ContentArgs::default()).unwrap_err().to_string();
    assert!(msg.contains("--self-timed") && msg.contains("--dataset-name random"), "{msg}");
}

#[test]
fn random_mm_takes_vllm_s_flags_and_refuses_video() {
    let mm = |extra: &[&str]| {
        let argv =
            ["servebench", "bench", "serve", "--model", "m", "--backend", "openai-chat", "--dataset-name", "random-mm"];
        serve_config(&argv, extra).map(|c| c.workload)
    };
    let spec = mm(&[]).unwrap();
    assert_eq!(spec.dataset_name(), "random-mm");
    let WorkloadSpec::Random { input_len: 1024, media: Some(m), .. } = spec else { panic!("{spec:?}") };
    // vLLM's defaults: one image, 256x256 or 720x1280 even odds, the video bucket at 0 dropped.
    assert_eq!((m.base_items, m.items_range_ratio, m.image_limit), (1, 0.0, 255));
    let shapes: Vec<_> = m.buckets.iter().map(|b| (b.height, b.width, b.probability)).collect();
    assert_eq!(shapes, [(256, 256, 0.5), (720, 1280, 0.5)]);
    let spec = mm(&[
        "--random-mm-base-items-per-request",
        "3",
        "--random-mm-num-mm-items-range-ratio",
        "0.5",
        "--random-mm-limit-mm-per-prompt",
        r#"{"image": 4}"#,
        "--random-mm-bucket-config",
        "{(64, 32, 1): 1.0}",
    ])
    .unwrap();
    let WorkloadSpec::Random { media: Some(m), .. } = spec else { panic!("{spec:?}") };
    assert_eq!((m.base_items, m.items_range_ratio, m.image_limit, m.buckets.len()), (3, 0.5, 4, 1));
    let msg = mm(&["--random-mm-bucket-config", "{(720, 1280, 16): 1.0}"]).unwrap_err().to_string();
    assert!(msg.contains("video items") && msg.contains("probability 0"), "{msg}");
    let msg = mm(&["--random-mm-limit-mm-per-prompt", r#"{"video": 1}"#]).unwrap_err().to_string();
    assert!(msg.contains("no \"image\" cap"), "{msg}");
    let msg = mm(&["--dataset-path", "x"]).unwrap_err().to_string();
    assert!(msg.contains("\"random-mm\" dataset with --dataset-path"), "{msg}");
    // The flags were refused by name before; the plain random dataset has no media.
    let argv = ["servebench", "bench", "serve", "--model", "m"];
    assert!(matches!(serve_config(&argv, &[]).unwrap().workload, WorkloadSpec::Random { media: None, .. }));
}

/// The command `argv` and then `extra` parse into.
fn command(argv: &[&str], extra: &[&str]) -> crate::cli::Command {
    use clap::Parser;
    crate::cli::Cli::try_parse_from(argv.iter().chain(extra)).unwrap_or_else(|e| panic!("{e}")).command
}

/// The run config a `bench serve` command line (`argv`, then `extra`) resolves into.
fn serve_config(argv: &[&str], extra: &[&str]) -> Result<RunConfig, ResolveError> {
    let crate::cli::Command::Bench(crate::cli::BenchCommand::Serve(args)) = command(argv, extra) else {
        panic!("not bench serve: {argv:?}")
    };
    run_config(&args.flags(false))
}

#[test]
fn anthropic_messages_runs_send_the_version_header_unless_one_is_given() {
    let config = |extra: &[&str]| {
        let argv = ["servebench", "bench", "serve", "--backend", "anthropic-messages", "--model", "m"];
        serve_config(&argv, extra).unwrap()
    };
    let c = config(&[]);
    assert_eq!(c.target.endpoint, "/v1/messages");
    assert_eq!(c.target.headers, vec![("anthropic-version".to_string(), "2023-06-01".to_string())]);
    let c = config(&["--header", "Anthropic-Version=2024-01-01"]);
    assert_eq!(c.target.headers, vec![("Anthropic-Version".to_string(), "2024-01-01".to_string())]);
}

/// A header HTTP cannot carry is refused with the flags, before a server is asked anything.
#[test]
fn headers_http_cannot_carry_are_refused_when_resolved() {
    let argv = ["servebench", "bench", "serve", "--model", "m", "--header"];
    for (header, says) in [
        ("bad name=x", "invalid header \"bad name\""),
        ("=x", "invalid header \"\""),
        ("X-Ok=line\nbreak", "invalid header \"X-Ok\""),
        ("no-equals", "use KEY=VALUE"),
    ] {
        let e = serve_config(&argv, &[header]).unwrap_err().to_string();
        assert!(e.contains(says), "{header:?}: {e}");
    }
}

#[test]
fn sim_predict_takes_a_pasted_endpoint_that_fits_its_backend() {
    let config = |extra: &[&str]| {
        let argv = ["servebench", "sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "h100-sxm"];
        let crate::cli::Command::Sim(crate::cli::SimCommand::Predict(args)) = command(&argv, extra) else {
            panic!("not sim predict")
        };
        run_config(&args.flags())
    };
    let c = config(&["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]).unwrap();
    assert_eq!((c.target.backend, c.target.endpoint.as_str()), (Backend::OpenaiChat, "/v1/chat/completions"));
    assert_eq!(config(&["--backend", "openai-chat"]).unwrap().target.endpoint, "/v1/chat/completions");
    let e = config(&["--backend", "openai-chat", "--endpoint", "/v1/completions"]).unwrap_err().to_string();
    assert!(e.contains("does not fit --backend openai-chat") && e.contains("use /v1/chat/completions"), "{e}");
}

#[test]
fn negative_sampling_values_parse_as_vllm_s_argparse_takes_them() {
    let argv = ["servebench", "bench", "serve", "--model", "m", "--top-k", "-1", "--presence-penalty", "-0.5"];
    let body = serve_config(&argv, &["--temperature", "-1"]).unwrap().extra_body;
    assert_eq!(
        (body["top_k"].clone(), body["presence_penalty"].clone()),
        (serde_json::json!(-1), serde_json::json!(-0.5))
    );
    // Sent as given: the server judges its range (the simulator as vLLM does).
    assert_eq!(body["temperature"], serde_json::json!(-1.0));
}

#[test]
fn max_model_len_passes_vllm_s_spellings_on_to_the_simulator() {
    let pairs = |len: &str| {
        let argv =
            ["servebench", "sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "h100", "--max-model-len", len];
        let crate::cli::Command::Sim(crate::cli::SimCommand::Predict(args)) = command(&argv, &[]) else {
            panic!("not sim predict")
        };
        args.deployment.option_pairs().unwrap()
    };
    // `-1` is a value here, not a flag; each reaches the one reader of serving options as given.
    for len in ["-1", "auto", "32k", "32K", "40960"] {
        assert_eq!(pairs(len), vec![("max-model-len".to_string(), len.to_string())], "{len}");
    }
}

#[test]
fn chat_template_kwargs_and_timeline_thresholds_resolve_or_say_what_to_give() {
    let argv = ["servebench", "bench", "serve", "--model", "m"];
    let c = serve_config(&argv, &["--chat-template-kwargs", r#"{"enable_thinking": false}"#]).unwrap();
    assert_eq!(c.chat_template_kwargs, serde_json::json!({"enable_thinking": false}).as_object().cloned());
    assert_eq!(serve_config(&argv, &[]).unwrap().chat_template_kwargs, None);
    for bad in ["[1]", "enable_thinking", "{"] {
        let e = serve_config(&argv, &["--chat-template-kwargs", bad]).unwrap_err().to_string();
        assert!(e.starts_with("invalid --chat-template-kwargs") && e.contains("must be a JSON object"), "{bad}: {e}");
    }
    let c = serve_config(&argv, &["--plot-timeline"]).unwrap();
    assert_eq!(c.output.plot_timeline, Some([25.0, 50.0]));
    let c = serve_config(&argv, &["--plot-timeline", "--timeline-itl-thresholds", " 10 ,10"]).unwrap();
    assert_eq!(c.output.plot_timeline, Some([10.0, 10.0]));
    assert_eq!(serve_config(&argv, &["--timeline-itl-thresholds", "10,20"]).unwrap().output.plot_timeline, None);
    assert_eq!(parse_itl_thresholds("0,0.5").unwrap(), [0.0, 0.5]);
    for bad in ["", "5", "5,4", "1,2,3", "x,1", "nan,1", "-1,1"] {
        assert!(parse_itl_thresholds(bad).is_err(), "{bad}");
    }
}
