//! Prometheus expositions of several engines read into signals, digested (levels, increases,
//! ratios, counter resets) and round-tripped.

use proptest::prelude::*;

use super::*;

const VLLM: &str = "\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0
vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0
vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1.0
vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5
vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.25
vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 4.0
vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1000.0
vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"m\"} 0.5
vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"m\"} 10.0
vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"0.3\",model_name=\"m\"} 10.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} NaN
python_gc_objects_collected_total{generation=\"0\"} 12.0
";

fn value(r: &Reading, s: Signal) -> Option<f64> {
    r.values.iter().find(|(x, _)| *x == s).map(|(_, v)| *v)
}

#[test]
fn vllm_names_map_to_signals_summing_or_averaging_label_sets() {
    let r = read(VLLM);
    assert_eq!(r.engine, Some("vllm"));
    assert_eq!(r.bad_lines, 0);
    assert_eq!(value(&r, Signal::Running), Some(5.0), "summed over the two engines");
    assert_eq!(value(&r, Signal::KvCacheUsage), Some(0.375), "averaged over the two engines");
    assert_eq!(value(&r, Signal::Waiting), Some(1.0));
    assert_eq!(value(&r, Signal::Preemptions), Some(4.0));
    assert_eq!(value(&r, Signal::QueueTimeCount), Some(10.0));
    assert_eq!(value(&r, Signal::TtftSum), None, "a NaN sample is left out");
    assert_eq!(r.values.len(), 7, "unknown names and histogram buckets are ignored: {:?}", r.values);
}

#[test]
fn other_engines_are_recognised_by_their_names() {
    let sglang = read(
        "sglang:num_running_reqs{model_name=\"m\"} 7\nsglang:num_queue_reqs{model_name=\"m\"} 2\nsglang:token_usage{model_name=\"m\"} 0.3\n",
    );
    assert_eq!(sglang.engine, Some("sglang"));
    assert_eq!(value(&sglang, Signal::Running), Some(7.0));
    let llama = read(
        "llamacpp:requests_processing 2\nllamacpp:requests_deferred 0\nllamacpp:tokens_predicted_total 55\n\
         llamacpp:prompt_seconds_total 0.25\n",
    );
    assert_eq!(llama.engine, Some("llama.cpp"));
    assert_eq!(value(&llama, Signal::GenerationTokens), Some(55.0));
    assert_eq!(value(&llama, Signal::PrefillTimeSum), Some(0.25));
    let tgi = read("tgi_batch_current_size 4\ntgi_queue_size 1\n");
    assert_eq!(tgi.engine, Some("tgi"));
    let dcgm = read(
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 90\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 70\n\
         DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 600.5\nDCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 400.5\n",
    );
    assert_eq!(dcgm.engine, Some("dcgm"));
    assert_eq!(value(&dcgm, Signal::GpuUtil), Some(80.0), "utilisation is a mean over GPUs");
    assert_eq!(value(&dcgm, Signal::GpuPower), Some(1001.0), "power is a sum over GPUs");
    let none = read("garbage here\nnode_load1 0.5\n");
    assert_eq!((none.engine, none.values.len(), none.bad_lines), (None, 0, 1));
}

fn source_of(scrapes: &[(f64, &str)]) -> Source {
    let mut s = Source::new("http://127.0.0.1:1/metrics");
    for (t, text) in scrapes {
        s.record(*t, &read(text));
    }
    s
}

#[test]
fn digest_gives_gauge_levels_counter_increases_and_ratios() {
    let s = source_of(&[
        (
            0.0,
            "vllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0\nvllm:prefix_cache_hits_total 100\nvllm:prefix_cache_queries_total 1000\nvllm:generation_tokens_total 50\nvllm:request_queue_time_seconds_sum 1\nvllm:request_queue_time_seconds_count 4\nvllm:request_prefill_time_seconds_sum 0.5\nvllm:request_prefill_time_seconds_count 4\n",
        ),
        (
            1.0,
            "vllm:num_requests_running 8\nvllm:kv_cache_usage_perc 0.6\nvllm:prefix_cache_hits_total 400\nvllm:prefix_cache_queries_total 2000\nvllm:generation_tokens_total 550\nvllm:request_queue_time_seconds_sum 1.5\nvllm:request_queue_time_seconds_count 14\n",
        ),
        (
            2.0,
            "vllm:num_requests_running 4\nvllm:kv_cache_usage_perc 0.3\nvllm:prefix_cache_hits_total 600\nvllm:prefix_cache_queries_total 3000\nvllm:generation_tokens_total 1050\nvllm:request_queue_time_seconds_sum 2\nvllm:request_queue_time_seconds_count 24\nvllm:request_prefill_time_seconds_sum 4.5\nvllm:request_prefill_time_seconds_count 24\n",
        ),
    ]);
    assert_eq!(s.scrapes, 3);
    assert_eq!(s.engine.as_deref(), Some("vllm"));
    assert_eq!(s.series(Signal::Running).unwrap().points, vec![[0.0, 0.0], [1.0, 8.0], [2.0, 4.0]]);
    let d = Digest::of(&s);
    assert_eq!(d.running, Some(Level { max: 8.0, mean: 4.0 }));
    assert_eq!(d.generation_tokens, Some(1000.0));
    assert_eq!(d.prefix_hit_rate, Some(0.25), "500 hits of 2000 queries during the run");
    assert_eq!(d.mean_queue_ms, Some(50.0), "1 s of queueing over 20 requests");
    assert_eq!(d.mean_prefill_ms, Some(200.0), "4 s of prefill over 20 requests");
    let line = render_source(&s, None);
    assert!(line.contains("mean queue 50.0 ms, mean prefill 200.0 ms"), "{line}");
    // The engine's share of the first token is the first source's that gives both phases.
    let only_queue = source_of(&[
        (0.0, "vllm:request_queue_time_seconds_sum 0\nvllm:request_queue_time_seconds_count 0\n"),
        (1.0, "vllm:request_queue_time_seconds_sum 1\nvllm:request_queue_time_seconds_count 10\n"),
    ]);
    let t = |sources: Vec<Source>| ServerTelemetry { interval_s: 1.0, sources };
    assert_eq!(t(vec![only_queue.clone()]).engine_first_token_ms(), None);
    assert_eq!(t(vec![only_queue, s]).engine_first_token_ms(), Some(250.0));
    assert_eq!(d.preemptions, None, "never exposed");
}

#[test]
fn a_counter_reset_counts_what_came_after_it() {
    let series =
        Series { signal: Signal::GenerationTokens, points: vec![[0.0, 100.0], [1.0, 300.0], [2.0, 50.0], [3.0, 80.0]] };
    assert_eq!(increase(&series), 200.0 + 50.0 + 30.0);
}

#[test]
fn the_gpus_energy_is_their_counter_s_increase_else_their_power_integrated() {
    // Two GPUs' counters, millijoules since the driver loaded: 3 kJ and 2 kJ over the run.
    let counted = source_of(&[
        (
            0.0,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 1000000\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\"} 5000000\n",
        ),
        (
            10.0,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 4000000\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\"} 7000000\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 900\n",
        ),
    ]);
    assert_eq!(counted.engine.as_deref(), Some("dcgm"));
    assert_eq!(Digest::of(&counted).gpu_energy_j, Some(5000.0), "the counter wins over the gauge");
    // Without the counter, the power (summed over GPUs) over the scrapes' times: 400 W for
    // 1 s, rising to 600 W over the next 2 s, is 400 + 1000 J.
    let gauged = source_of(&[
        (0.0, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 200\nDCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 200\n"),
        (1.0, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 200\nDCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 200\n"),
        (3.0, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 300\nDCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 300\n"),
    ]);
    assert_eq!(Digest::of(&gauged).gpu_energy_j, Some(1400.0));
    let line = render_source(&gauged, Some(2800));
    assert!(line.contains("GPU power max 600 W mean 467 W, GPU energy 1.4 kJ (2.00 output tok/J)"), "{line}");
    // One scrape spans no time: no energy.
    let once = source_of(&[(0.0, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 200\n")]);
    assert_eq!(Digest::of(&once).gpu_energy_j, None);
    // The run's energy is the first source's that tells it.
    let t = ServerTelemetry { interval_s: 1.0, sources: vec![once, gauged, counted] };
    assert_eq!(t.gpu_energy_j(), Some(1400.0));
    assert_eq!(energy_text(850.0), "850 J");
    assert_eq!(energy_text(4.56e6), "4.56 MJ");
}

#[test]
fn failures_are_noted_once_with_the_first_reason() {
    let mut s = Source::new("http://127.0.0.1:1/metrics");
    s.fail("connection refused");
    s.fail("timed out");
    assert_eq!((s.failed, s.first_error.as_deref()), (2, Some("connection refused")));
    let t = ServerTelemetry { interval_s: 1.0, sources: vec![s] };
    assert_eq!(
        render(&t, None),
        "Server telemetry (unknown names, http://127.0.0.1:1/metrics, 0 scrapes, 2 failed: connection refused): nothing recorded.\n"
    );
}

#[test]
fn rendered_lines_are_stable() {
    let vllm = source_of(&[(0.0, VLLM), (1.0, &VLLM.replace("} 1000.0", "} 1800.0").replace("} 3.0", "} 9.0"))]);
    let mut dcgm = source_of(&[(0.0, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 95\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 40960\n")]);
    dcgm.url = "http://dcgm:9400/metrics".into();
    dcgm.fail("HTTP 503");
    let t = ServerTelemetry { interval_s: 1.0, sources: vec![vllm, dcgm] };
    insta::assert_snapshot!(render(&t, Some(800)));
}

#[test]
fn telemetry_round_trips_through_json() {
    let t = ServerTelemetry { interval_s: 0.5, sources: vec![source_of(&[(0.0, VLLM), (0.5, VLLM)])] };
    let json = serde_json::to_string(&t).unwrap();
    assert!(json.contains("\"signal\":\"kv_cache_usage\""), "{json}");
    let back: ServerTelemetry = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
}

proptest! {
    /// A counter's increase is never negative, and for a counter that only grows it is the
    /// last value less the first.
    #[test]
    fn increases_are_never_negative(steps in proptest::collection::vec(0.0f64..1e6, 1..20), resets in proptest::collection::vec(any::<bool>(), 20)) {
        let mut v = 0.0;
        let mut monotonic = Vec::new();
        let mut reset = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            v += s;
            monotonic.push([i as f64, v]);
            reset.push([i as f64, if resets[i] { *s } else { v }]);
        }
        let m = Series { signal: Signal::PromptTokens, points: monotonic.clone() };
        let grown = monotonic.last().unwrap()[1] - monotonic[0][1];
        prop_assert!((increase(&m) - grown).abs() <= 1e-6 * grown.max(1.0));
        let after_resets = Series { signal: Signal::PromptTokens, points: reset };
        prop_assert!(increase(&after_resets) >= 0.0);
    }

    /// Any text at all is read without a panic; every value read is finite or infinite, never NaN.
    #[test]
    fn any_exposition_is_read(text in "(vllm:num_requests_running|sglang:token_usage|x)(\\{[a-z=\",]{0,12}\\})? (NaN|[0-9.e+-]{1,8})\n{0,3}") {
        let r = read(&text);
        prop_assert!(r.values.iter().all(|(_, v)| !v.is_nan()));
    }
}
