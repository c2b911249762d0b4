//! The host's work a step (scheduling, input preparation, admissions): added to the step
//! without async scheduling, hidden under the GPU's work with it unless it outlasts it.

use proptest::prelude::*;

use super::tests::{decode_batch, model};

#[test]
fn async_scheduling_hides_the_host_s_work_unless_it_outlasts_the_gpu() {
    let on = model("Qwen/Qwen3-8B", "h100-sxm", &[("t-host-ms", "2"), ("t-host-seq-us", "0")]);
    let off = model(
        "Qwen/Qwen3-8B",
        "h100-sxm",
        &[("t-host-ms", "2"), ("t-host-seq-us", "0"), ("async-scheduling", "false")],
    );
    // A decode step of 15 GB of weights (about 5 ms) hides 2 ms of host work; without async
    // scheduling the step waits for it.
    let (a, b) = (on.breakdown(&decode_batch(1, 100)), off.breakdown(&decode_batch(1, 100)));
    assert_eq!(a.host, 0.0, "{a:?}");
    assert!((b.total - a.total - 2e-3).abs() < 1e-12, "{a:?} {b:?}");
    // A tiny model's step is shorter than the host's work: the host sets the pace.
    let tiny = model("Qwen/Qwen3-0.6B", "b200", &[("t-host-ms", "5"), ("t-host-seq-us", "0")]);
    let d = tiny.breakdown(&decode_batch(1, 100));
    assert!(d.host > 0.0 && (d.total - 5e-3).abs() < 1e-12, "{d:?}");
}

proptest! {
    #[test]
    fn a_step_never_takes_less_than_the_host_s_work(host_ms in 0.05f64..30.0, seq_us in 0.0f64..100.0, n in 1u32..256, ctx in 1u32..8000, sync in any::<bool>()) {
        let (host, seq) = (host_ms.to_string(), seq_us.to_string());
        let asy = (!sync).to_string();
        let c = model("Qwen/Qwen3-8B", "h100-sxm", &[("t-host-ms", host.as_str()), ("t-host-seq-us", seq.as_str()), ("async-scheduling", asy.as_str())]);
        let d = c.breakdown(&decode_batch(n, ctx));
        let work = host_ms * 1e-3 + seq_us * 1e-6 * f64::from(n);
        prop_assert!(d.total >= work - 1e-12);
        let gpu = d.total - d.host;
        if sync { prop_assert!((d.host - work).abs() < 1e-12); } else { prop_assert!(d.total >= gpu); }
    }
}

#[test]
fn admitted_requests_add_host_work_that_async_scheduling_hides_like_the_rest() {
    let pairs = |sync: &'static str| {
        [("t-host-ms", "1"), ("t-host-seq-us", "0"), ("t-admit-us", "500"), ("async-scheduling", sync)]
    };
    let (on, off) =
        (model("Qwen/Qwen3-8B", "h100-sxm", &pairs("true")), model("Qwen/Qwen3-8B", "h100-sxm", &pairs("false")));
    let mut b = decode_batch(4, 100);
    let base = off.breakdown(&b).total;
    b.admitted = 8;
    // Without async scheduling each admission lengthens the step by its host work.
    assert!((off.breakdown(&b).total - base - 8.0 * 500e-6).abs() < 1e-12);
    // With it, 1 + 4 ms of host work hides under a 5 ms decode step, and shows past it.
    assert_eq!(on.breakdown(&b).host, 0.0);
    b.admitted = 20;
    let d = on.breakdown(&b);
    assert!(d.host > 0.0 && (d.total - 11e-3).abs() < 1e-12, "{d:?}");
}

#[test]
fn the_host_s_work_grows_with_the_sequences_of_a_step_and_async_scheduling_hides_it_the_same() {
    let pairs = |sync: &'static str| [("t-host-ms", "0.5"), ("t-host-seq-us", "16"), ("async-scheduling", sync)];
    let (on, off) =
        (model("Qwen/Qwen3-8B", "h100-sxm", &pairs("true")), model("Qwen/Qwen3-8B", "h100-sxm", &pairs("false")));
    // Without async scheduling every step waits for 0.5 ms plus 16 µs a sequence.
    for n in [1, 8, 64, 256] {
        let host = off.breakdown(&decode_batch(n, 1000)).host;
        assert!((host - (0.5e-3 + 16e-6 * f64::from(n))).abs() < 1e-12, "{n}: {host}");
    }
    // With it, the work hides under a decode step of the same batch (4.6 ms at 256 sequences
    // is shorter than the step) ...
    assert_eq!(on.breakdown(&decode_batch(256, 1000)).host, 0.0);
    // ... and shows where it outlasts the step: 4,096 sequences of host work are 66 ms.
    let mut huge = decode_batch(256, 100);
    huge.num_seqs = 4096;
    let d = on.breakdown(&huge);
    assert!(d.host > 0.0 && (d.total - (0.5e-3 + 16e-6 * 4096.0)).abs() < 1e-12, "{d:?}");
}

/// vLLM 0.11.0's engine core timed with no GPU (`scripts/sim/engine_host_probe.py`,
/// `testdata/engine-host-probe/vllm-0.11.0.jsonl`; CALIBRATION.md, "vLLM's engine core,
/// measured"): its scheduler, its KV cache manager, its output bookkeeping and the encoding of a
/// step's outputs, at 1 to 1,024 decoding sequences, three runs of each. The presets' host work a
/// sequence (fitted on whole servers) covers that engine core's, as fast as the frontend probe
/// puts the fitted hosts against this VM, and leaves the GPU worker's own loop (not measured) at
/// most twice as much again; and the engine core's work grows about linearly, as the term does.
#[test]
fn the_host_s_work_a_sequence_covers_vllm_s_engine_core_as_measured() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    // How much faster the hosts the frontend's constants were fitted on are than the VM both
    // probes ran on: the fitted cost of a streamed token over the frontend probe's, where its
    // loop keeps up (completions, 64 and 256 streams at 15 ms steps).
    let frontend = std::fs::read_to_string(root.join("frontend-probe/gpt-oss-vllm-0.11.0.txt")).unwrap();
    let per_token: Vec<f64> = frontend
        .lines()
        .filter(|l| l.starts_with("completions") && l.contains("streams") && l.ends_with("us") && l.contains("step=15"))
        .map(|l| l.split_whitespace().rev().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(per_token.len(), 2, "{per_token:?}");
    let stack = crate::profile::StackProfile::default();
    let speed = stack.api_us_per_output_token / servebench_core::metrics::median(&per_token);
    assert!((0.6..0.8).contains(&speed), "{speed}");

    let probe = std::fs::read_to_string(root.join("engine-host-probe/vllm-0.11.0.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = probe.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut runs: Vec<&str> = rows.iter().map(|r| r["run"].as_str().unwrap()).collect();
    runs.dedup();
    assert_eq!(runs.len(), 3, "{runs:?}");
    for run in runs {
        // The median of the three runs at each count of sequences.
        let host_us = |n: u64| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| r["run"] == run && r["seqs"].as_u64() == Some(n))
                .map(|r| r["host_us"].as_f64().unwrap())
                .collect();
            assert_eq!(v.len(), 3, "{run} at {n}");
            servebench_core::metrics::median(&v)
        };
        let counts = [64u64, 128, 256, 512, 1024];
        let (xs, ys): (Vec<f64>, Vec<f64>) = counts.iter().map(|&n| (n as f64, host_us(n))).unzip();
        let (mx, my) = (xs.iter().sum::<f64>() / 5.0, ys.iter().sum::<f64>() / 5.0);
        let slope = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum::<f64>()
            / xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>();
        let engine_core = slope * speed;
        assert!(
            (engine_core..=3.0 * engine_core).contains(&stack.t_host_seq_us),
            "{run}: the engine core takes {slope:.1} µs a sequence here, {engine_core:.1} on the fitted hosts; \
             the presets charge {}",
            stack.t_host_seq_us
        );
        // About linear: a sequence costs at most half as much again at 1,024 as at 128.
        let (few, many) = (host_us(128) / 128.0, host_us(1024) / 1024.0);
        assert!(many < 1.5 * few && many > 0.8 * few, "{run}: {few:.1} and {many:.1} µs a sequence");
    }
}
