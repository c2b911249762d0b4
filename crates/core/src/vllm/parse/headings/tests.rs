//! Tests of how headings become labels.

use super::*;

/// The labels of every block of a vLLM console report.
fn labels_of(text: &str) -> BlockLabels {
    block_labels(&super::super::parse_reports(text, super::super::ReportOrigin::Vllm))
}

fn label(key: &str, values: &[&str]) -> Heading {
    Heading::Labels(vec![(key.into(), values.iter().map(|v| v.to_string()).collect())])
}

#[test]
fn each_kind_of_heading_is_recognised() {
    assert_eq!(classify("# Prefill"), label("section", &["Prefill"]));
    assert_eq!(classify("## Decode phase "), label("section", &["Decode phase"]));
    assert_eq!(classify("num_prompts: 1, 2, 4"), label("num_prompts", &["1", "2", "4"]));
    assert_eq!(classify("num_prompt:1"), label("num_prompt", &["1"]));
    assert_eq!(classify("seq_length: 80"), label("seq_length", &["80"]));
    assert_eq!(classify("tp=2"), label("tp", &["2"]));
    let two = Heading::Labels(vec![("tp".into(), vec!["2".into()]), ("pp".into(), vec!["1".into()])]);
    assert_eq!(classify("tp=2 pp=1"), two);
    assert_eq!(classify("tp=2, pp=1"), two);
    assert_eq!(classify("mode: a=1, b=2"), label("mode", &["a=1, b=2"]));
    assert_eq!(classify("Model: Qwen/Qwen3-8B"), label("model", &["Qwen/Qwen3-8B"]));
    assert_eq!(classify("Note: run after the reboot, twice"), label("Note", &["run after the reboot, twice"]));
    assert_eq!(classify("Results Qwen/Qwen3-8B"), label("model", &["Qwen/Qwen3-8B"]));
    assert_eq!(classify("google/gemma-3-1b-it"), label("model", &["google/gemma-3-1b-it"]));
    assert_eq!(classify("vllm"), Heading::Text("vllm".into()));
    assert_eq!(classify("Qwen/Qwen3-8B on two H100"), Heading::Text("Qwen/Qwen3-8B on two H100".into()));
    assert_eq!(classify("see http://host/x"), Heading::Text("see http://host/x".into()));
    assert_eq!(classify("2025/06"), Heading::Text("2025/06".into()));
}

#[test]
fn a_vllm_serve_command_gives_the_model_and_the_parallel_sizes() {
    let two = |model: &str, tp: &str| {
        Heading::Labels(vec![("model".into(), vec![model.into()]), ("tp".into(), vec![tp.into()])])
    };
    let line = "vllm serve openai/gpt-oss-120b --host 0.0.0.0 -tp 4";
    assert_eq!(classify(line), two("openai/gpt-oss-120b", "4"));
    // The executor, and the machines of vLLM's multi-node multiprocessing executor.
    let spread = classify("vllm serve org/m -tp 8 --distributed-executor-backend ray");
    let want: Vec<(String, Vec<String>)> = [("model", "org/m"), ("tp", "8"), ("distributed-executor-backend", "ray")]
        .map(|(k, v)| (k.into(), vec![v.into()]))
        .into();
    assert_eq!(spread, Heading::Labels(want));
    let mp = classify("vllm serve org/m -tp 8 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1");
    let want: Vec<(String, Vec<String>)> =
        [("model", "org/m"), ("tp", "8"), ("nnodes", "2")].map(|(k, v)| (k.into(), vec![v.into()])).into();
    assert_eq!(mp, Heading::Labels(want));
    assert_eq!(classify("$ vllm serve Qwen/Qwen3-8B --tensor-parallel-size=8"), two("Qwen/Qwen3-8B", "8"));
    let all = classify("vllm serve org/m -pp 2 -tp 4 --data-parallel-size 2 --kv-cache-dtype fp8");
    let want: Vec<(String, Vec<String>)> =
        [("model", "org/m"), ("pp", "2"), ("tp", "4"), ("dp", "2"), ("kv-cache-dtype", "fp8")]
            .map(|(k, v)| (k.into(), vec![v.into()]))
            .into();
    assert_eq!(all, Heading::Labels(want));
    let flags = classify(
        "vllm serve org/m -tp 4 --enable-expert-parallel --max-num-batched-tokens=16384 --max-model-len 32768 \
         --no-enable-prefix-caching --async-scheduling --gpu-memory-utilization 0.85 --max-num-seqs --host h",
    );
    let want: Vec<(String, Vec<String>)> = [
        ("model", "org/m"),
        ("tp", "4"),
        ("ep", "true"),
        ("max-num-batched-tokens", "16384"),
        ("max-model-len", "32768"),
        ("enable-prefix-caching", "false"),
        ("async-scheduling", "true"),
        ("gpu-memory-utilization", "0.85"),
    ]
    .map(|(k, v)| (k.into(), vec![v.into()]))
    .into();
    assert_eq!(flags, Heading::Labels(want), "a flag without its value gives no label");
    // ROCm's QuickReduce is chosen in the environment, before the command.
    let want: Vec<(String, Vec<String>)> =
        [("quick-reduce", "int4"), ("model", "org/m"), ("tp", "8")].map(|(k, v)| (k.into(), vec![v.into()])).into();
    assert_eq!(classify("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4 vllm serve org/m -tp 8"), Heading::Labels(want));
    assert_eq!(classify("OTHER=1 vllm serve org/m"), label("model", &["org/m"]));
    // FlashInfer's fused all-reduce and RMSNorm is a pass of the compilation config, however
    // it is spelled.
    let fused = |on: &str| -> Vec<(String, Vec<String>)> {
        [("model", "org/m"), ("fuse-allreduce-rms", on), ("tp", "4")].map(|(k, v)| (k.into(), vec![v.into()])).into()
    };
    for line in [
        r#"vllm serve org/m --compilation-config '{"pass_config":{"fuse_allreduce_rms":true,"eliminate_noops":true}}' -tp 4"#,
        r#"vllm serve org/m -O '{"pass_config": {"enable_fi_allreduce_fusion": true}, "level": 3}' -tp 4"#,
        "vllm serve org/m --compilation-config.pass_config.fuse_allreduce_rms=true -tp 4",
    ] {
        assert_eq!(classify(line), Heading::Labels(fused("true")), "{line}");
    }
    let off = "vllm serve org/m -O.pass_config.fuse_allreduce_rms=False -tp 4";
    assert_eq!(classify(off), Heading::Labels(fused("false")));
    // So is the CUDA graph mode, and vLLM 0.9 and 0.10's switch for full graphs.
    let mode = |m: &str| -> Vec<(String, Vec<String>)> {
        [("model", "org/m"), ("cudagraph-mode", m)].map(|(k, v)| (k.into(), vec![v.into()])).into()
    };
    for (line, want) in [
        ("vllm serve org/m -O.cudagraph_mode=PIECEWISE", "piecewise"),
        (r#"vllm serve org/m --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}'"#, "full_decode_only"),
        (r#"vllm serve org/m -O '{"level": 3, "cudagraph_mode":"FULL_AND_PIECEWISE"}'"#, "full_and_piecewise"),
        ("vllm serve org/m --compilation-config.cudagraph_mode NONE", "none"),
        (r#"vllm serve org/m -O '{"full_cuda_graph": true}'"#, "full"),
    ] {
        assert_eq!(classify(line), Heading::Labels(mode(want)), "{line}");
    }
    assert_eq!(classify(r#"vllm serve org/m -O '{"full_cuda_graph": false}'"#), label("model", &["org/m"]));
    // And the batch sizes graphs are captured at: a list, or the largest of vLLM's own list.
    let graphs = |pairs: &[(&str, &str)]| -> Heading {
        let mut want = vec![("model".to_string(), vec!["org/m".to_string()])];
        want.extend(pairs.iter().map(|(k, v)| (k.to_string(), vec![v.to_string()])));
        Heading::Labels(want)
    };
    let sizes = [("cudagraph-capture-sizes", "1,2,4,5,8,10")];
    for line in [
        r#"vllm serve org/m --compilation-config '{"cudagraph_capture_sizes": [1, 2, 4, 5, 8, 10]}'"#,
        "vllm serve org/m -cc.cudagraph_capture_sizes=[1,2,4,5,8,10]",
        "vllm serve org/m --cuda-graph-sizes 1 2 4 5 8 10 --max-num-seqs 10",
    ] {
        let mut want = sizes.to_vec();
        if line.contains("max-num-seqs") {
            want.push(("max-num-seqs", "10"));
        }
        assert_eq!(classify(line), graphs(&want), "{line}");
    }
    assert_eq!(
        classify("vllm serve org/m --api-server-count 4"),
        graphs(&[("api-server-count", "4")]),
        "API server processes"
    );
    // The speculative decoder's JSON, read whole (spaces and all), in either spelling.
    let spec = r#"{"method": "mtp", "num_speculative_tokens": 2}"#;
    for line in [
        format!("vllm serve org/m --speculative-config '{spec}' --max-num-seqs 10"),
        format!("vllm serve org/m --speculative_config={spec} --max-num-seqs 10"),
    ] {
        assert_eq!(classify(&line), graphs(&[("speculative-config", spec), ("max-num-seqs", "10")]), "{line}");
    }
    let largest = [("max-cudagraph-capture-size", "2048")];
    for line in [
        "vllm serve org/m --max-cudagraph-capture-size 2048",
        r#"vllm serve org/m -O '{"max_cudagraph_capture_size": 2048}'"#,
        "vllm serve org/m --cuda-graph-sizes 2048",
    ] {
        assert_eq!(classify(line), graphs(&largest), "{line}");
    }
    // A placeholder model or size is none; a bench command is not a serve command.
    assert_eq!(classify("vllm serve M -tp X"), Heading::Labels(Vec::new()));
    for placeholder in ["$MODEL", "${MODEL}", "<model>", "{model}"] {
        assert_eq!(classify(&format!("vllm serve {placeholder} -tp 2")), label("tp", &["2"]), "{placeholder}");
    }
    assert!(matches!(classify("vllm bench serve --model M --num-prompts 10"), Heading::Text(_)));
    // A benchmark command says which dataset its requests came from, and through which endpoint.
    let line = "vllm bench serve --backend vllm --model m --dataset-name sharegpt --dataset-path S.json";
    let both = |backend: &str| {
        Heading::Labels(vec![("dataset".into(), vec!["sharegpt".into()]), ("backend".into(), vec![backend.into()])])
    };
    assert_eq!(classify(line), both("vllm"));
    let chat = "vllm bench serve --backend=openai-chat --endpoint /v1/chat/completions --dataset-name sharegpt";
    assert_eq!(classify(chat), both("openai-chat"));
    let script = "$ python3 benchmarks/benchmark_serving.py --dataset-name=ShareGPT --num-prompts 1000";
    assert_eq!(classify(script), label("dataset", &["sharegpt"]));
    assert_eq!(classify("vllm bench serve --backend openai-chat --model m"), label("backend", &["openai-chat"]));
    assert!(matches!(classify("run with --dataset-name sharegpt"), Heading::Text(_)));
    // The tokens every prompt shares, whichever dataset shares them.
    let prefixed = "vllm bench serve --model m --random-input-len 128 --random-prefix-len 896";
    assert_eq!(classify(prefixed), label("prefix-len", &["896"]));
    let sonnet = "vllm bench serve --dataset-name sonnet --sonnet-input-len 512 --sonnet-prefix-len=256";
    let both =
        Heading::Labels(vec![("dataset".into(), vec!["sonnet".into()]), ("prefix-len".into(), vec!["256".into()])]);
    assert_eq!(classify(sonnet), both);
}

#[test]
fn a_serve_command_quoted_inside_another_is_read() {
    // As pasted from a forum: typographic quotes around a command run in a container.
    let line = "docker exec -it vllm_node bash -i -c \u{201c}vllm serve M --host 0.0.0.0 --gpu-memory-utilization 0.8 \
                -pp 1 -tp X --distributed-executor-backend ray --kv-cache-dtype fp8\u{201d}";
    let want: Vec<(String, Vec<String>)> = [
        ("gpu-memory-utilization", "0.8"),
        ("pp", "1"),
        ("distributed-executor-backend", "ray"),
        ("kv-cache-dtype", "fp8"),
    ]
    .map(|(k, v)| (k.into(), vec![v.into()]))
    .into();
    assert_eq!(classify(line), Heading::Labels(want));
    let plain = "bash -c \"vllm serve Qwen/Qwen3-8B -tp 2\"";
    assert_eq!(
        classify(plain),
        Heading::Labels(vec![("model".into(), vec!["Qwen/Qwen3-8B".into()]), ("tp".into(), vec!["2".into()])])
    );
}

#[test]
fn a_parallel_layout_over_machines_is_a_label() {
    for (line, key, n) in [
        ("4 nodes (tp)", "tp-nodes", "4"),
        ("8 Nodes (TP)", "tp-nodes", "8"),
        ("TP over 8 nodes", "tp-nodes", "8"),
        ("tensor parallel across 2 nodes", "tp-nodes", "2"),
        ("2-node pp", "pp-nodes", "2"),
        ("[3 nodes, pipeline parallel]", "pp-nodes", "3"),
        ("4 nodes (tp=4)", "tp-nodes", "4"),
        ("TP 8 - 8 nodes", "tp-nodes", "8"),
    ] {
        assert_eq!(classify(line), label(key, &[n]), "{line}");
    }
    for line in
        ["4 nodes", "tp", "0 nodes (tp)", "4 nodes (tp=2)", "4 nodes (tp) twice", "4 nodes 8 nodes tp", "4 nodes (dp)"]
    {
        assert!(matches!(classify(line), Heading::Text(_)), "{line}: {:?}", classify(line));
    }
    // With the model first on the line.
    let both = |model: &str, key: &str, n: &str| {
        Heading::Labels(vec![("model".into(), vec![model.into()]), (key.into(), vec![n.into()])])
    };
    assert_eq!(
        classify("Qwen/Qwen3-VL-32B-Instruct-FP8 (4 nodes, tp)"),
        both("Qwen/Qwen3-VL-32B-Instruct-FP8", "tp-nodes", "4")
    );
    assert_eq!(classify("openai/gpt-oss-120b - TP over 8 nodes"), both("openai/gpt-oss-120b", "tp-nodes", "8"));
    assert!(matches!(classify("openai/gpt-oss-120b on 8 H100"), Heading::Text(_)));
    // The simulator's keys in any case.
    assert_eq!(classify("TP: 4"), label("tp", &["4"]));
    assert_eq!(classify("Nodes=2"), label("nodes", &["2"]));
    assert_eq!(classify("Hardware: DGX Spark"), label("hardware", &["DGX Spark"]));
    assert_eq!(classify("GPU: H100"), label("gpu", &["H100"]));
    assert_eq!(classify("vLLM: v0.11.0"), label("vllm", &["v0.11.0"]));
    assert_eq!(classify("Image: vllm/vllm-openai:v0.13.0"), label("image", &["vllm/vllm-openai:v0.13.0"]));
    assert_eq!(
        classify("TP=2 PP=1"),
        Heading::Labels(vec![("tp".into(), vec!["2".into()]), ("pp".into(), vec!["1".into()])])
    );
}

#[test]
fn a_later_vllm_serve_line_does_not_inherit_an_earlier_one_s_flags() {
    let text = format!(
        "vllm serve org/m -tp 4 --enable-expert-parallel --max-num-batched-tokens 4096\n{}\nvllm serve org/m -tp 8\n{}",
        block(1),
        block(2)
    );
    let labels = labels_of(&text);
    assert_eq!(
        labels.blocks[0],
        pairs(&[("model", "org/m"), ("tp", "4"), ("ep", "true"), ("max-num-batched-tokens", "4096")])
    );
    assert_eq!(labels.blocks[1], pairs(&[("model", "org/m"), ("tp", "8")]));
}

#[test]
fn a_serve_command_continued_over_lines_is_one_heading() {
    let text = format!(
        "vllm serve org/m --tensor-parallel-size 4 --kv-cache-dtype fp8 \\\n  --max-model-len 32768 --gpu-memory-utilization 0.85 \\\n  --enable-prefix-caching &\nvllm bench serve --model org/m \\\n  --max-concurrency 64\n{}",
        block(1)
    );
    let labels = labels_of(&text);
    assert_eq!(
        labels.blocks[0],
        pairs(&[
            ("model", "org/m"),
            ("tp", "4"),
            ("kv-cache-dtype", "fp8"),
            ("max-model-len", "32768"),
            ("gpu-memory-utilization", "0.85"),
            ("enable-prefix-caching", "true"),
            ("heading", "vllm bench serve --model org/m --max-concurrency 64"),
        ])
    );
    // A trailing backslash on the last heading joins nothing that is not there.
    assert_eq!(join_continued(&[(3, "a \\")]), vec![(3, "a".to_string())]);
    assert_eq!(join_continued(&[(1, "a \\"), (2, " b"), (4, "c")]), vec![(1, "a b".to_string()), (4, "c".to_string())]);
}

#[test]
fn lines_vllm_prints_are_not_headings() {
    for line in [
        "INFO 05-01 12:00:00 [datasets.py:123] Sampling input_len from [127, 127]",
        "WARNING: /tokenize unavailable (404 Not Found), skipping alignment.",
        "Namespace(backend='vllm', base_url=None)",
        "Traffic request rate: inf",
        "Burstiness factor: 1.0 (Poisson process)",
        "Maximum request concurrency: 4",
        "Error 0: Bad Request",
        "100%|██████████| 20/20 [01:04<00:00,  3.22s/it]",
        "Starting main benchmark run...",
        "#",
    ] {
        assert_eq!(classify(line), Heading::Ignored, "{line}");
    }
    assert_eq!(classify("Errors seen: none"), Heading::Text("Errors seen: none".into()));
}

#[test]
fn a_list_gives_one_value_per_block_then_ends() {
    let mut h = Headings::default();
    let mut notes = Vec::new();
    let first = h.block(&[(1, "vllm"), (2, "n: 1, 2"), (3, "len: 80")], &mut notes);
    assert_eq!(
        first,
        [("heading".into(), "vllm".into()), ("n".into(), "1".into()), ("len".into(), "80".into())]
            as [(String, String); 3]
    );
    let second = h.block(&[], &mut notes);
    assert_eq!(second[1], ("n".into(), "2".into()));
    let third = h.block(&[], &mut notes);
    assert_eq!(third, [("heading".into(), "vllm".into()), ("len".into(), "80".into())] as [(String, String); 2]);
    h.finish(&mut notes);
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn a_heading_lasts_until_the_same_key_is_set_again() {
    let mut h = Headings::default();
    let mut notes = Vec::new();
    h.block(&[(1, "# Prefill"), (2, "gpu: H100")], &mut notes);
    let next = h.block(&[(20, "# Decode")], &mut notes);
    assert_eq!(next, [("section".into(), "Decode".into()), ("gpu".into(), "H100".into())] as [(String, String); 2]);
    let free = h.block(&[(40, "first run"), (41, "after reboot")], &mut notes);
    assert_eq!(free[2], ("heading".into(), "first run / after reboot".into()));
}

#[test]
fn lists_cut_short_are_noted_with_their_line() {
    let mut h = Headings::default();
    let mut notes = Vec::new();
    h.block(&[(3, "n: 1, 2, 4")], &mut notes);
    h.block(&[(30, "n: 8, 16")], &mut notes);
    h.block(&[], &mut notes);
    h.block(&[(60, "c: 1, 2")], &mut notes);
    h.finish(&mut notes);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0].line, 3);
    assert!(notes[0].message.contains("3 values but only 1 result blocks came before line 30"), "{}", notes[0]);
    assert_eq!(notes[1].line, 60);
    assert!(notes[1].message.contains("from \"2\" on"), "{}", notes[1]);
}

/// A block of `n` requests as vLLM prints it.
fn block(n: u64) -> String {
    let s =
        crate::metrics::Summary { completed: n, duration_s: 1.0, request_throughput: n as f64, ..Default::default() };
    crate::vllm::render_result_block(&s)
}

fn pairs(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn each_parsed_block_gets_the_labels_of_the_headings_above_it() {
    let bad = block(2).replace("Benchmark duration (s):                  1.00", "Benchmark duration (s): fast");
    let text = format!(
        "INFO 05-01 12:00:00 starting\nResults Qwen/Qwen3-8B\nn: 1, 2, 3, 4\n{}\n# Decode\n{bad}{}\nResults google/gemma-3-1b-it\n{}",
        block(1),
        block(3),
        block(4)
    );
    let entries = super::super::parse_reports(&text, super::super::ReportOrigin::Vllm);
    assert_eq!(entries.iter().map(Result::is_ok).collect::<Vec<_>>(), [true, false, true, true]);
    let got = block_labels(&entries);
    assert_eq!(got.blocks.len(), 4);
    assert_eq!(got.blocks[0], pairs(&[("model", "Qwen/Qwen3-8B"), ("n", "1")]));
    // The malformed block takes its value, so the next one gets the third.
    assert_eq!(got.blocks[1], pairs(&[("model", "Qwen/Qwen3-8B"), ("n", "2"), ("section", "Decode")]));
    assert_eq!(got.blocks[2], pairs(&[("model", "Qwen/Qwen3-8B"), ("n", "3"), ("section", "Decode")]));
    assert_eq!(got.blocks[3], pairs(&[("model", "google/gemma-3-1b-it"), ("n", "4"), ("section", "Decode")]));
    assert!(got.notes.is_empty(), "{:?}", got.notes);
}

#[test]
fn a_list_longer_than_its_blocks_is_noted_at_its_heading_line() {
    let text = format!("\n# Sweep\nn: 1, 2, 4\n{}{}", block(1), block(2));
    let got = labels_of(&text);
    assert_eq!(got.blocks[1], pairs(&[("section", "Sweep"), ("n", "2")]));
    assert_eq!(got.notes.len(), 1);
    let note = got.notes[0].to_string();
    assert!(note.starts_with("line 3: the list `n` has 3 values but only 2 result blocks"), "{note}");
    assert!(block_labels(&[]).blocks.is_empty());
}

#[test]
fn a_layout_over_machines_and_parallel_sizes_replace_each_other() {
    // The forum's order: a serve template, the model, then the layout; later a new layout, then
    // a serve line with sizes of its own.
    let text = format!(
        "vllm serve M -pp 1 -tp X --kv-cache-dtype fp8\norg/a\n4 nodes (tp)\n{}\n8 nodes (tp)\n{}\nvllm serve org/b -tp 2\n{}\ntp: 4\n{}",
        block(1),
        block(2),
        block(3),
        block(4)
    );
    let labels = labels_of(&text);
    assert_eq!(labels.blocks[0], pairs(&[("kv-cache-dtype", "fp8"), ("model", "org/a"), ("tp-nodes", "4")]));
    assert_eq!(labels.blocks[1], pairs(&[("kv-cache-dtype", "fp8"), ("model", "org/a"), ("tp-nodes", "8")]));
    assert_eq!(labels.blocks[2], pairs(&[("model", "org/b"), ("tp", "2")]));
    assert_eq!(labels.blocks[3], pairs(&[("model", "org/b"), ("tp", "4")]));
}

#[test]
fn a_comment_over_several_lines_is_titled_by_its_first() {
    let text = format!(
        "# GPUStack's lab, one H100\n# ShareGPT, then random prompts\n\n# Second part\n{}\n# a title\n\n# another\n{}",
        block(1),
        block(2)
    );
    let labels = labels_of(&text);
    // The second line goes on with the first; after a blank line a `#` line titles anew.
    assert_eq!(labels.blocks[0], pairs(&[("section", "Second part")]));
    assert_eq!(labels.blocks[1], pairs(&[("section", "another")]));
    let text = format!("# GPUStack's lab, one H100\n# ShareGPT, then random prompts\n{}", block(1));
    let labels = labels_of(&text);
    assert_eq!(labels.blocks[0], pairs(&[("section", "GPUStack's lab, one H100")]));
}

#[test]
fn captions_name_their_deployment_and_a_whole_one_replaces_the_last() {
    let text = format!(
        "4 nodes (tp)\n## gpt-oss-120b\n{}## GLM-4.6-FP8 -tp 8 (8x Spark)\n{}Qwen3-VL-235B-A22B-Instruct-AWQ tp4\n{}\
         model: openai/gpt-oss-20b, tp=8, nodes=8\n{}",
        block(1),
        block(2),
        block(3),
        block(4)
    );
    let got = labels_of(&text);
    let get = |i: usize, key: &str| got.blocks[i].iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    // A caption naming only the model keeps the layout above it; a title naming no model sets
    // no machines.
    assert_eq!((get(0, "model"), get(0, "tp-nodes"), get(0, "nodes")), (Some("gpt-oss-120b"), Some("4"), None));
    // One naming how the model is spread states the whole deployment.
    assert_eq!(
        (get(1, "model"), get(1, "tp"), get(1, "nodes"), get(1, "tp-nodes")),
        (Some("GLM-4.6-FP8"), Some("8"), Some("8"), None)
    );
    assert_eq!((get(2, "tp"), get(2, "nodes")), (Some("4"), None), "{:?}", got.blocks[2]);
    // Comma-separated pairs give a label each.
    assert_eq!((get(3, "model"), get(3, "tp"), get(3, "nodes")), (Some("openai/gpt-oss-20b"), Some("8"), Some("8")));
    assert_eq!(classify("mode: a=1, b=2"), label("mode", &["a=1, b=2"]), "a value with its own pairs stays whole");
    let caption = Heading::Labels(vec![
        ("model".into(), vec!["GLM-4.6-FP8".into()]),
        ("tp".into(), vec!["8".into()]),
        ("nodes".into(), vec!["8".into()]),
    ]);
    assert_eq!(classify("Model: GLM-4.6-FP8 (TP=8, 8 nodes)"), caption, "a model key followed by a caption");
}

#[test]
fn a_title_that_names_no_model_sets_no_deployment() {
    let got = labels_of(&format!("# Runs over 8 nodes\nResults openai/gpt-oss-120b\n{}", block(1)));
    assert_eq!(got.blocks[0], pairs(&[("section", "Runs over 8 nodes"), ("model", "openai/gpt-oss-120b")]));
}

#[test]
fn a_serve_line_s_modality_limits_are_one_label_in_any_of_vllm_s_spellings() {
    let limits = |line: &str| match classify(line) {
        Heading::Labels(labels) => {
            let pick = |key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v[0].clone());
            (pick("limit-mm-per-prompt"), pick("language-model-only"), pick("max-model-len"))
        }
        other => panic!("not a serve line: {other:?}"),
    };
    // The dotted flags of vLLM pull request 29217's run, beside a flag that takes a value.
    let dotted = "vllm serve Qwen/Qwen3-VL-32B-Instruct-FP8 --limit-mm-per-prompt.video 0 \
                  --limit-mm-per-prompt.image 0 --max-model-len 24000";
    assert_eq!(limits(dotted), (Some("video=0,image=0".into()), None, Some("24000".into())));
    // The JSON, quoted, with `=`, under underscores, or a modality's options and their count.
    let json = r#"vllm serve m --limit-mm-per-prompt '{"image": 0, "video": 0}'"#;
    assert_eq!(limits(json).0.as_deref(), Some("image=0,video=0"));
    assert_eq!(limits(r#"vllm serve m --limit_mm_per_prompt={"image":3}"#).0.as_deref(), Some("image=3"));
    let options = r#"vllm serve m --limit-mm-per-prompt '{"image": {"count": 5, "width": 512}, "video": 1}'"#;
    assert_eq!(limits(options).0.as_deref(), Some("image=5,video=1"));
    // A dotted flag after the JSON wins for its modality; `=` joins a dotted flag to its count.
    let both = r#"vllm serve m --limit-mm-per-prompt '{"image": 2, "video": 1}' --limit-mm-per-prompt.video=0"#;
    assert_eq!(limits(both).0.as_deref(), Some("image=2,video=0"));
    // vLLM's switch for the language model alone; a line without either says nothing.
    assert_eq!(limits("vllm serve m --language-model-only"), (None, Some("true".into()), None));
    assert_eq!(limits("vllm serve m --max-model-len 4096"), (None, None, Some("4096".into())));
    // A dotted flag without a count is no limit.
    assert_eq!(limits("vllm serve m --limit-mm-per-prompt.image --max-model-len 8").0, None);
}

#[test]
fn modality_limits_that_are_not_a_list_of_counts_are_refused() {
    assert_eq!(mm_limits("image=0, video=2"), Some(vec![("image".into(), 0), ("video".into(), 2)]));
    assert_eq!(mm_limits(r#"{"Image": 1}"#), Some(vec![("image".into(), 1)]));
    for bad in ["", "{}", "image", "image=", "image=x", r#"{"image": {"width": 5}}"#, "=3", "image=-1"] {
        assert_eq!(mm_limits(bad), None, "{bad:?}");
    }
}

proptest::proptest! {
    #[test]
    fn modality_limits_read_back_in_either_spelling(
        limits in proptest::collection::vec(("[a-z][a-z_]{0,8}", 0u32..1000), 1..4),
    ) {
        let list = limits.iter().map(|(m, n)| format!("{m}={n}")).collect::<Vec<_>>().join(",");
        let json = format!("{{{}}}", limits.iter().map(|(m, n)| format!("\"{m}\": {n}")).collect::<Vec<_>>().join(", "));
        proptest::prop_assert_eq!(mm_limits(&list), Some(limits.clone()));
        proptest::prop_assert_eq!(mm_limits(&json), Some(limits));
    }
}

#[test]
fn serve_parameters_given_as_keys_are_read_as_their_labels() {
    for (field, label) in [
        ("max_num_seqs", "max-num-seqs"),
        ("max-num-seqs", "max-num-seqs"),
        ("tensor_parallel_size", "tp"),
        ("tensor-parallel-size", "tp"),
        ("pipeline_parallel_size", "pp"),
        ("data_parallel_size", "dp"),
        ("enable_expert_parallel", "ep"),
        ("tp", "tp"),
        ("_benchmark_name", "_benchmark_name"),
        ("max_concurrency", "max_concurrency"),
    ] {
        assert_eq!(super::option_label(field), label, "{field}");
    }
}
