//! `servebench sim step` and `sim memory`, in-process: one step priced term by term and one
//! GPU's memory plan, with their tables, JSON and refusals.

use std::path::Path;

use clap::Parser;
use servebench::cli::{Cli, Command, SimCommand};
use servebench::commands;

/// `sim step` in-process: one step priced term by term (a snapshot of the table), the terms
/// adding up to the total in the JSON, a step with nothing to compute refused, and a step past
/// the engine's limits priced with a note.
#[test]
fn sim_step_prices_one_step_term_by_term() {
    let on = |hardware: &str, extra: &[&str]| {
        let mut argv = vec!["servebench", "sim", "step", "--model", "openai/gpt-oss-120b", "--hardware", hardware];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Sim(SimCommand::Step(args)) = cli.command else { panic!("not sim step") };
        let mut out = Vec::new();
        let r = commands::sim_step::run(&args, &mut out);
        (r, String::from_utf8(out).unwrap())
    };
    let run = |extra: &[&str]| on("h100-sxm", extra);
    let (r, out) = run(&["--tp", "4", "--batch", "16"]);
    assert!(r.is_ok());
    insta::assert_snapshot!(out);
    let (_, out) = run(&["--tp", "2", "--batch", "8", "--prefill", "2048", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &doc["seconds"];
    let parts: f64 =
        ["fixed", "dense", "experts", "attention", "lm_head", "allreduce", "pipeline", "moe_routing", "eager", "host"]
            .iter()
            .map(|k| s[k].as_f64().unwrap())
            .sum();
    assert!((parts - s["total"].as_f64().unwrap()).abs() < 1e-12, "{doc}");
    assert_eq!(doc["tokens"], 2056);
    assert!(doc["experts_touched"].as_f64().unwrap() > 120.0, "2,056 tokens touch nearly all 128 experts: {doc}");
    // Five decodes run in the graph of eight; the padded rows reach the experts too.
    let (_, out) = run(&["--batch", "5"]);
    assert!(out.contains("run in the CUDA graph captured for 8 rows"), "{out}");
    assert!(!out.contains("without CUDA graphs"), "{out}");
    // A step beside a prefill runs eagerly with graphs for decodes only, and says why.
    let (_, out) = run(&["--batch", "5", "--prefill", "20", "--option", "cudagraph-mode=full-decode-only"]);
    assert!(out.contains("run without CUDA graphs: it carries a prefill"), "{out}");
    assert!(!out.contains("run in the CUDA graph captured"), "{out}");
    // Data-parallel ranks with whole experts: the exchange around each MoE layer, no all-reduce.
    let (r, out) = run(&["--batch", "64", "--option", "dp=4", "--option", "ep=true"]);
    assert!(r.is_ok(), "{r:?}");
    assert!(out.contains("(whole, over 4 GPUs: the busiest reads the most)"), "{out}");
    assert!(out.contains("72 exchanges between data-parallel ranks a step") && !out.contains("all-reduces"), "{out}");
    // The fused all-reduce and norm is named where it runs (on Hopper it saves nothing).
    let (r, out) = run(&["--tp", "8", "--batch", "64", "--option", "fuse-allreduce-rms=true"]);
    assert!(r.is_ok(), "{r:?}");
    assert!(out.contains("73 all-reduces over nvlink4 at 450 GB/s (fused with their RMSNorm) a step"), "{out}");
    // Bridged cards name the link the group crosses: the bridge, or PCIe past it.
    let (_, out) = on("h100-nvl", &["--tp", "2", "--batch", "8"]);
    assert!(out.contains("73 all-reduces over nvlink4-bridge at 300 GB/s a step"), "{out}");
    let (_, out) = on("h100-nvl", &["--tp", "4", "--batch", "8"]);
    assert!(out.contains("73 all-reduces over pcie5 at 50 GB/s a step"), "{out}");
    // A rate of the profile's own replaces a link's with message steps, and is named.
    let (_, out) = on("h100-nvl", &["--tp", "4", "--batch", "8", "--option", "ar-gbs=20"]);
    assert!(out.contains("73 all-reduces over pcie5 at 20 GB/s a step"), "{out}");
    let (_, out) = run(&["--batch", "5", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((doc["tokens"].as_u64(), doc["graph_rows"].as_u64()), (Some(5), Some(8)), "{doc}");
    let (_, eight) = run(&["--batch", "8", "--json"]);
    let eight: serde_json::Value = serde_json::from_str(&eight).unwrap();
    assert_eq!(doc["experts_touched"], eight["experts_touched"], "{doc} {eight}");
    // Captured at five, five decodes run as five.
    let (_, own) = run(&["--batch", "5", "--json", "--option", "cudagraph-capture-sizes=1,2,4,5,8"]);
    let own: serde_json::Value = serde_json::from_str(&own).unwrap();
    assert_eq!(own["graph_rows"].as_u64(), Some(5), "{own}");
    let (r, _) = run(&["--batch", "0"]);
    assert!(r.unwrap_err().to_string().contains("--batch N decoding sequences or --prefill"));
    // A chunk after cached tokens of its prompt attends to them: only attention grows.
    let seconds = |extra: &[&str]| {
        let mut argv = vec!["--batch", "0", "--prefill", "8192", "--json"];
        argv.extend_from_slice(extra);
        let doc: serde_json::Value = serde_json::from_str(&run(&argv).1).unwrap();
        doc["seconds"].clone()
    };
    let (fresh, later) = (seconds(&[]), seconds(&["--prefill-after", "24576"]));
    assert!(later["attention"].as_f64() > fresh["attention"].as_f64(), "{fresh} {later}");
    assert_eq!((later["dense"].clone(), later["experts"].clone()), (fresh["dense"].clone(), fresh["experts"].clone()));
    let (_, out) = run(&["--batch", "0", "--prefill", "8192", "--prefill-after", "24576"]);
    assert!(out.contains("a prefill of 8192 tokens after 24576 cached"), "{out}");
    let (r, _) = run(&["--batch", "4", "--prefill-after", "100"]);
    assert!(r.unwrap_err().to_string().contains("give the chunk with --prefill"));
    // Pipeline stages: a batch a stage in flight, so with the pipeline full one leaves every
    // half step over two stages.
    let (_, out) = run(&["--tp", "4", "--pp", "2", "--prefill", "8192", "--batch", "0"]);
    let rate = |name: &str| -> f64 {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{out}"));
        line[name.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    let (step, full) = (rate("tokens per second of the step"), rate("tokens per second, pipeline full"));
    assert!((full / step - 2.0).abs() < 0.01, "{out}");
    assert!(out.contains("2 batches like it in flight, one leaving every"), "{out}");
    let (_, out) = run(&["--tp", "4", "--pp", "2", "--prefill", "8192", "--batch", "0", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let total = doc["seconds"]["total"].as_f64().unwrap();
    assert!((doc["batch_interval_s"].as_f64().unwrap() - total / 2.0).abs() < 1e-12, "{doc}");
    let (_, out) = run(&["--tp", "4", "--batch", "16"]);
    assert!(!out.contains("pipeline full"), "{out}");
    // A step the engine would not run as one is still priced, with what the engine would do.
    assert_eq!(doc["notes"], serde_json::json!([]), "{doc}");
    let (r, out) = run(&["--batch", "2000", "--context", "100000"]);
    assert!(r.is_ok());
    let notes: Vec<&str> = out.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(notes.len(), 3, "{out}");
    assert!(notes[0].contains("2000 sequences are more than max-num-seqs (1024)"), "{out}");
    assert!(notes[1].contains("a sequence of 100001 tokens is longer than the context the server allows"), "{out}");
    assert!(notes[2].contains("200002000 tokens) is more than the KV cache holds"), "{out}");
    let (_, out) = run(&["--prefill", "10000", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["notes"][0].as_str().unwrap().contains("more than max-num-batched-tokens (8192)"), "{doc}");
    // BF16 experts of a shape vLLM has no tuned tiles for say so beside their ceiling.
    let line_of = |term: &str, model: &str, hw: &str| {
        let argv = ["servebench", "sim", "step", "--model", model, "--hardware", hw, "--tp", "8", "--prefill", "8192"];
        let Command::Sim(SimCommand::Step(args)) = Cli::try_parse_from(argv).unwrap().command else { panic!() };
        let mut out = Vec::new();
        commands::sim_step::run(&args, &mut out).unwrap();
        String::from_utf8(out).unwrap().lines().find(|l| l.starts_with(term)).unwrap().to_string()
    };
    assert!(line_of("routed experts", "zai-org/GLM-4.6", "h200").contains("(vLLM's default tile)"));
    assert!(!line_of("routed experts", "Qwen/Qwen3-235B-A22B", "h100-sxm").contains("default tile"));
    // gpt-oss's 64-wide heads: on a B200 the softmax's exponentials bind its prefill's attention.
    let exps = "bound by the softmax's exponentials (4.4 T/s on the SFUs)";
    assert!(line_of("attention", "openai/gpt-oss-120b", "b200").contains(exps));
    // On Hopper they add to the tensor cores' time, as much as the preset says they are not hidden.
    let hopper = line_of("attention", "openai/gpt-oss-120b", "h100-sxm");
    assert!(!hopper.contains("bound by") && hopper.contains("exponentials the kernels do not hide (0.73 of them)"));
    // Where the preset prices the prefill queries' tile work (datacenter Blackwell, Hopper), it
    // says how much; elsewhere neither note.
    assert!(
        line_of("attention", "openai/gpt-oss-120b", "b200")
            .contains("the prefill queries' tile work (780 keys a query)")
    );
    assert!(hopper.contains("the prefill queries' tile work (350 keys a query)"), "{hopper}");
    let a100 = line_of("attention", "openai/gpt-oss-120b", "a100-80g");
    assert!(!a100.contains("tile work") && !a100.contains("do not hide"), "{a100}");
    // Sinks served by Triton's kernels say so and at what rate: the A100's fallback, ROCm's
    // unified attention; not where the fast kernels have them, nor for a model without sinks.
    assert!(a100.contains("its sinks on Triton's kernels, at 0.15 of the peak"), "{a100}");
    let mi355x = line_of("attention", "openai/gpt-oss-120b", "mi355x");
    assert!(mi355x.contains("its sinks on Triton's kernels, at 0.29 of the peak"), "{mi355x}");
    assert!(!hopper.contains("sinks"), "{hopper}");
    assert!(!line_of("attention", "Qwen/Qwen3-8B", "mi355x").contains("sinks"));
}

/// `sim memory` in-process: one GPU's plan (a snapshot of the table, with the figures vLLM's
/// log prints), the reserve's parts adding up in the JSON, the tower left out of a language
/// model served alone, and a large batch's forward setting the reserve.
#[test]
fn sim_memory_shows_where_one_gpu_s_memory_goes() {
    let run = |extra: &[&str]| {
        let mut argv = vec!["servebench", "sim", "memory"];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Sim(SimCommand::Memory(args)) = cli.command else { panic!("not sim memory") };
        let mut out = Vec::new();
        commands::sim_memory::run(&args, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let vl = ["--model", "Qwen/Qwen3-VL-32B-Instruct-FP8", "--hardware", "l40s"];
    let out = run(&[&vl[..], &["--option", "limit-mm-per-prompt=image=0,video=0"]].concat());
    insta::assert_snapshot!(out);
    let json =
        |extra: &[&str]| -> serde_json::Value { serde_json::from_str(&run(&[extra, &["--json"]].concat())).unwrap() };
    let gib = |doc: &serde_json::Value, path: &[&str]| {
        path.iter().fold(doc, |v, k| &v[*k]).as_f64().unwrap_or_else(|| panic!("{path:?} in {doc}"))
    };
    // The parts add up to the device's usable memory, and the reserve to its stated parts.
    let with_tower = json(&vl);
    let m = |k: &str| gib(&with_tower, &["memory", k]);
    let r = |k: &str| gib(&with_tower, &["memory", "reserve", k]);
    assert!((m("weights_gib") + r("gib") + m("kv_gib") - m("device_gib") * m("utilization")).abs() < 1e-9);
    let own = r("sampler_gib").max(r("forward_gib"));
    assert!((r("stated_gib") - r("stated_peak_gib") + own - r("gib")).abs() < 1e-9, "{with_tower}");
    // Served alone, the tower's 0.93 GiB is the KV cache's.
    let alone = json(&[&vl[..], &["--option", "language-model-only=true"]].concat());
    let kv = |doc: &serde_json::Value| gib(doc, &["memory", "kv_gib"]);
    assert!((kv(&alone) - kv(&with_tower) - gib(&with_tower, &["tower_gib"])).abs() < 1e-9, "{alone}");
    assert_eq!(alone["language_model_only"], true);
    // 65,536 batched tokens of Llama-3.1-70B at TP 2: the forward is the peak, per engine even
    // with two data-parallel engines.
    let llama = ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--hardware", "h200", "--tp", "2"];
    let big = run(&[&llama[..], &["--max-num-batched-tokens", "65536", "--option", "dp=2"]].concat());
    assert!(big.contains("plus this deployment's: the forward") && big.contains("65,536 tokens in one pass"), "{big}");
    assert!(big.contains("(tp=2 dp=2)") && big.contains("1,024 rows of 128,256 logits"), "{big}");
}

/// `sim memory --against LOG`: the log's model and settings planned (flags given win), its
/// figures beside the plan's, and a log the plan cannot be held against refused with what to do.
#[test]
fn sim_memory_holds_the_plan_against_a_server_s_start_up_log() {
    let dir = tempfile::tempdir().unwrap();
    // A start-up log in vLLM 0.11's words (this test's own figures): Qwen3-8B at TP 2.
    let log = dir.path().join("server.log");
    std::fs::write(
        &log,
        "INFO 10-02 09:14:01 [api_server.py:1839] vLLM API server version 0.11.0\n\
         INFO 10-02 09:14:01 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', \
         'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.8, 'max_num_seqs': 256, 'port': 8000, \
         'kv_transfer_config': {'kv_connector': 'LMCacheConnectorV1'}}\n\
         (EngineCore_DP0 pid=301) INFO 10-02 09:14:09 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: \
         model='Qwen/Qwen3-8B', tokenizer='Qwen/Qwen3-8B', max_seq_len=40960, tensor_parallel_size=2, \
         pipeline_parallel_size=1, data_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto\n\
         (Worker_TP0 pid=410) INFO 10-02 09:15:40 [gpu_model_runner.py:2602] Model loading took 7.6500 GiB and 9.1 seconds\n\
         (Worker_TP0 pid=410) INFO 10-02 09:16:02 [gpu_worker.py:298] Available KV cache memory: 52.10 GiB\n\
         (EngineCore_DP0 pid=301) INFO 10-02 09:16:03 [kv_cache_utils.py:1087] GPU KV cache size: 758,720 tokens\n\
         (EngineCore_DP0 pid=301) INFO 10-02 09:16:03 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 18.52x\n",
    )
    .unwrap();
    // `sim memory --hardware h100-sxm --against LOG` and any other flags: its output, or its error.
    let against = |log: &Path, extra: &[&str]| {
        let mut argv =
            vec!["servebench", "sim", "memory", "--hardware", "h100-sxm", "--against", log.to_str().unwrap()];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Sim(SimCommand::Memory(args)) = cli.command else { panic!("not sim memory") };
        let mut out = Vec::new();
        commands::sim_memory::run(&args, &mut out).map(|_| String::from_utf8(out).unwrap())
    };
    let run = |extra: &[&str]| against(&log, extra);
    let out = run(&[]).unwrap();
    let compared = &out[out.find("\nAgainst").expect("the comparison")..];
    insta::assert_snapshot!(compared.replace(log.to_str().unwrap(), "server.log"));
    assert!(out.starts_with("Qwen/Qwen3-8B on h100-sxm (tp=2)"), "{out}");
    // A flag given wins over the log's setting, and is not said to come from the log.
    let json: serde_json::Value =
        serde_json::from_str(&run(&["--gpu-memory-utilization", "0.9", "--json"]).unwrap()).unwrap();
    assert_eq!(json["memory"]["utilization"], 0.9);
    let taken: Vec<&str> =
        json["against"]["settings_taken"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(taken.contains(&"tp=2") && taken.contains(&"max-num-seqs=256"), "{taken:?}");
    assert!(!taken.iter().any(|t| t.starts_with("gpu-memory-utilization")), "{taken:?}");
    // Each figure stands beside the plan's own, the log's as printed.
    let figures = json["against"]["figures"].as_array().unwrap();
    let figure =
        |name: &str| figures.iter().find(|f| f["figure"] == name).unwrap_or_else(|| panic!("{name}: {figures:?}"));
    assert_eq!(figure("weights (GiB)")["log"], 7.65);
    assert_eq!(figure("KV cache (GiB)")["plan"], json["memory"]["kv_gib"]);
    assert_eq!(figure("KV cache (tokens)")["log"], 758_720.0);
    // What lies between the weights and the KV cache in the log: the usable memory less both.
    let between = figure("activation reserve (GiB)")["log"].as_f64().unwrap();
    let device = json["memory"]["device_gib"].as_f64().unwrap();
    assert!((between - (device * 0.9 - 7.65 - 52.10)).abs() < 1e-9, "{between}");
    // A newer release's log: its CUDA graph estimate, set aside, is planned as it logged it.
    let newer = dir.path().join("newer.log");
    std::fs::write(
        &newer,
        "non-default args: {'model': 'Qwen/Qwen3-8B', 'max_num_seqs': 64}\n\
         Model loading took 15.27 GiB memory and 4.1 seconds\n\
         Estimated CUDA graph memory: 0.61 GiB total\n\
         Available KV cache memory: 49.50 GiB\n\
         CUDA graph memory profiling is enabled (default since v0.21.0).\n",
    )
    .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&against(&newer, &["--json"]).unwrap()).unwrap();
    assert_eq!(doc["memory"]["graph_gib"], 0.61);
    assert_eq!(doc["against"]["warning"], serde_json::Value::Null);
    // A device whose total is not the preset's is named: an H100 NVL's 93 GiB planned as an SXM.
    let mut text = std::fs::read_to_string(&newer).unwrap();
    text += "Free memory on device (92.52/93.10 GiB) on startup. Desired GPU memory utilization is (0.9, 83.79 GiB).\n";
    std::fs::write(&newer, text).unwrap();
    let out = against(&newer, &[]).unwrap();
    assert!(out.contains("warning: the log's device has 93.10 GiB, h100-sxm has 79.20"), "{out}");
    let graph = doc["against"]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "CUDA graph estimate (GiB)")
        .cloned();
    assert_eq!(graph.map(|g| (g["plan"].clone(), g["log"].clone())), Some((0.61.into(), 0.61.into())));
    // A log that is not one, or whose model is a path, is refused with what to do.
    let other = dir.path().join("other.log");
    std::fs::write(&other, "Traceback (most recent call last):\n").unwrap();
    let err = against(&other, &[]).unwrap_err().to_string();
    assert!(err.contains("none of vLLM's start-up memory lines") && err.contains("tee server.log"), "{err}");
    std::fs::write(&other, "non-default args: {'model': '/models/q8'}\nAvailable KV cache memory: 3.00 GiB\n").unwrap();
    let err = format!("{:#}", against(&other, &[]).unwrap_err());
    assert!(err.contains("the log's model \"/models/q8\"") && err.contains("pass --model"), "{err}");
}

/// `sim step --image`: the tower's term appears for a model that takes images, with the image's
/// tokens and patches; a text model, a size that is not one, or no chunk to reach it is refused.
#[test]
fn sim_step_prices_the_vision_tower_for_the_images_a_chunk_reaches() {
    let step = |model: &str, extra: &[&str]| {
        let mut argv = vec!["servebench", "sim", "step", "--model", model, "--hardware", "h100-sxm", "--batch", "0"];
        argv.extend_from_slice(extra);
        let Command::Sim(SimCommand::Step(args)) = Cli::try_parse_from(argv).unwrap().command else { panic!() };
        let mut out = Vec::new();
        commands::sim_step::run(&args, &mut out).map(|_| String::from_utf8(out).unwrap()).map_err(|e| e.to_string())
    };
    let vl = "Qwen/Qwen3-VL-8B-Instruct";
    let out = step(vl, &["--prefill", "1000", "--image", "720x1280"]).unwrap();
    assert!(out.lines().any(|l| l.starts_with("vision encoder")), "{out}");
    assert!(out.contains("1 image(s): 880 prompt tokens (part of --prefill's 1000), 3520 patches"), "{out}");
    let plain = step(vl, &["--prefill", "1000"]).unwrap();
    assert!(!plain.contains("vision encoder"), "{plain}");
    let total = |s: &str| -> f64 {
        s.lines().find(|l| l.starts_with("total")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(total(&out) > total(&plain));
    let json = step(vl, &["--prefill", "1000", "--image", "720x1280", "--image", "256x256", "--json"]).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(doc["seconds"]["encoder"].as_f64().unwrap() > 0.0, "{doc}");
    for (model, extra, says) in [
        ("Qwen/Qwen3-8B", &["--prefill", "100", "--image", "64x64"][..], "loads no vision tower"),
        (vl, &["--prefill", "100", "--image", "64by64"][..], "HEIGHTxWIDTH"),
        (vl, &["--image", "64x64"][..], "--prefill TOKENS"),
    ] {
        let e = step(model, extra).unwrap_err();
        assert!(e.contains(says), "{e}");
    }
}
