//! Measurement tables: one JSON object per benchmark point with its deployment and workload as
//! fields, the way public benchmark suites publish their results (InferenceX's rows:
//! `hw`, `tp`, `isl`, `osl`, `conc`, `mean_ttft`, `mean_tpot`, `output_tput_per_gpu`, ...).
//!
//! A row is recognised by its `isl` and `osl` fields with a `conc`, a `request_rate` or both.
//! Its workload is a random-prompt run at concurrency `conc` (or none), sent at `request_rate`
//! requests a second (Poisson arrivals, or gamma ones of shape `burstiness`; default all at
//! once): `num_prompts` requests (default ten per concurrent stream) whose prompt and output
//! lengths are spread uniformly over `[range_ratio · isl, isl]` and `[range_ratio · osl, osl]`
//! (`range_ratio` or `random_range_ratio`, as InferenceX's client reads it; default 0.8,
//! InferenceX's settings), outputs run to their length (`--ignore-eos`). `prefix_len` tokens of
//! each prompt (counted in `isl`) are the same in every prompt, as a shared system prompt or
//! vLLM's sonnet dataset makes them. Times are seconds; throughput per GPU is multiplied by the
//! GPUs (`gpus`, else `tp · dp`). Every other scalar field becomes a label (`hw`, `tp`, `vllm`,
//! `model`, ...), so the validator can map the row to a deployment and group it; a serving
//! option in Python's spelling (`max_num_seqs`) is labelled by its flag's name
//! (`max-num-seqs`).
//!
//! The server flags InferenceX's launch scripts pass where they change what the simulator
//! prices are added as labels when the row does not give them ([`SUITE_FLAGS`]), so that a
//! row is predicted for the deployment that measured it; they show in the validator's labels.

use serde_json::Value;
use servebench_core::vllm::json::scalar::{label_text, whole_number};
use servebench_core::vllm::option_label;

use crate::options::vllm_release;

use super::points::{FitMetric, Lengths, MeasuredPoint, PointWorkload};

/// The defaults a row's workload takes where it has no field of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowDefaults {
    pub range_ratio: f64,
    pub prompts_per_stream: usize,
}

impl Default for RowDefaults {
    fn default() -> Self {
        RowDefaults { range_ratio: 0.8, prompts_per_stream: 10 }
    }
}

/// Whether a JSON document is a table row. A field given as `null` (as pandas writes a gap in a
/// column) counts as absent, so a row with a null `conc` is still a row, and says what it lacks.
pub fn is_row(value: &Value) -> bool {
    ["isl", "osl"].iter().all(|k| value.get(k).is_some_and(|v| !v.is_null()))
        && (value.get("conc").is_some() || value.get("request_rate").is_some())
}

/// The point a row measured.
pub fn point_from_row(value: &Value, label: String, defaults: RowDefaults) -> Result<MeasuredPoint, String> {
    let field = |k: &str| value.get(k).filter(|v| !v.is_null());
    let whole = |k: &str| -> Result<u64, String> {
        let given = field(k);
        given.and_then(whole_number).filter(|n| *n >= 1).ok_or_else(|| {
            let got = given.map(|v| format!(", not {v}")).unwrap_or_default();
            format!("{k} must be a whole number of at least 1{got}")
        })
    };
    let optional = |k: &str| field(k).map(|_| whole(k)).transpose();
    let (isl, osl, conc) = (whole("isl")?, whole("osl")?, optional("conc")?);
    let number = |k: &str| field(k).and_then(Value::as_f64).filter(|v| v.is_finite() && *v > 0.0);
    let request_rate = match field("request_rate") {
        None => f64::INFINITY,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("inf") => f64::INFINITY,
        Some(_) => {
            number("request_rate").ok_or("request_rate must be a number of requests a second above 0, or \"inf\"")?
        }
    };
    if conc.is_none() && request_rate.is_infinite() {
        return Err("a row without conc needs a request_rate: say how the requests were sent".into());
    }
    let burstiness = match field("burstiness") {
        None => 1.0,
        Some(_) => number("burstiness").ok_or("burstiness must be a number above 0 (1 is Poisson)")?,
    };
    // InferenceX's client names it `random_range_ratio`, with the same meaning.
    let range_ratio = match field("range_ratio").or_else(|| field("random_range_ratio")) {
        None => defaults.range_ratio,
        Some(v) => v.as_f64().filter(|r| (0.0..=1.0).contains(r)).ok_or("range_ratio must be in [0, 1]")?,
    };
    let shared_prefix = optional("prefix_len")?.unwrap_or(0);
    let shortest = (isl as f64 * range_ratio).floor() as u64;
    if shared_prefix > 0 && shared_prefix >= shortest.max(1) {
        return Err(format!(
            "prefix_len {shared_prefix} must be shorter than the shortest prompt ({shortest} tokens): it counts within isl"
        ));
    }
    let n = match (field("num_prompts"), conc) {
        (None, Some(conc)) => usize::try_from(conc).unwrap_or(usize::MAX).saturating_mul(defaults.prompts_per_stream),
        (None, None) => return Err("a row without conc needs num_prompts".into()),
        (Some(_), _) => usize::try_from(whole("num_prompts")?).unwrap_or(usize::MAX),
    };
    let gpus = number("gpus").unwrap_or_else(|| number("tp").unwrap_or(1.0) * number("dp").unwrap_or(1.0));
    // The times, in seconds.
    let times = [
        ("mean_ttft", FitMetric::MeanTtft),
        ("median_ttft", FitMetric::MedianTtft),
        ("mean_tpot", FitMetric::MeanTpot),
        ("median_tpot", FitMetric::MedianTpot),
        ("mean_e2el", FitMetric::MeanE2el),
        ("median_e2el", FitMetric::MedianE2el),
    ];
    let mut measured: Vec<(FitMetric, f64)> =
        times.iter().filter_map(|&(column, m)| number(column).map(|v| (m, v * 1e3))).collect();
    if let Some(v) = number("output_tput_per_gpu") {
        measured.push((FitMetric::OutputThroughput, v * gpus));
    } else if let Some(v) = number("output_throughput") {
        measured.push((FitMetric::OutputThroughput, v));
    }
    if measured.is_empty() {
        return Err("the row has none of mean_ttft, mean_tpot and output_tput_per_gpu".into());
    }
    let mut labels: Vec<(String, String)> = value
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !is_measurement(k))
                .filter_map(|(k, v)| Some((option_label(k), label_text(v)?)))
                .collect()
        })
        .unwrap_or_default();
    // InferenceX reports throughput per GPU; a row of another lab in this format (a whole
    // deployment's `output_throughput`) did not run the suite's scripts.
    if value.as_object().is_some_and(|o| o.keys().any(|k| k.ends_with("_per_gpu"))) {
        add_suite_flags(&mut labels);
    }
    let mut point = MeasuredPoint {
        label,
        headings: Vec::new(),
        labels,
        workload: PointWorkload {
            num_prompts: n,
            input: Lengths::Each(spread(isl, range_ratio, n)),
            output: Lengths::Each(spread(osl, range_ratio, n)),
            max_concurrency: conc.and_then(|c| usize::try_from(c).ok()),
            request_rate,
            burstiness,
            seed: 0,
            warmup: true,
            chat: false,
            shared_prefix: u32::try_from(shared_prefix).unwrap_or(u32::MAX),
        },
        measured,
    };
    point.read_backend();
    Ok(point)
}

/// Serving flags of InferenceX's vLLM launch scripts (`benchmarks/gptoss_fp4_HW*.sh` in
/// github.com/SemiAnalysisAI/InferenceX) that differ from vLLM's defaults and change a
/// prediction, by the row's `hw`: the B200 and B300 runs keep the KV cache in FP8
/// (`kv-cache-dtype: fp8` in every version of their scripts), and the B200's fuse each
/// all-reduce with the RMSNorm after it (`compilation-config` with `pass_config`'s
/// `fuse_allreduce_rms`, in every version since September 2025; the B300's script sets it
/// too, but vLLM 0.13 has no fusion for the B300's compute capability, 10.3); the AMD runs
/// all-reduce through ROCm's QuickReduce at INT4 (`VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4`:
/// the MI300X's script since September 2025, the MI325X's and MI355X's only since their update
/// to vLLM 0.17.0 of March 2026, so a row of theirs that names an older vLLM runs without it).
/// Every one ran with async scheduling (`ASYNC`) and without prefix caching (`NO_PREFIX_CACHE`).
/// Other flags they pass (`max-num-seqs` at or above the concurrency, 95 % of memory on AMD
/// parts where the KV cache is never short at these loads) change nothing the simulator prices
/// here.
pub const SUITE_FLAGS: [(&str, &[SuiteFlag]); 7] = [
    ("h100", &[ASYNC, NO_PREFIX_CACHE]),
    ("h200", &[ASYNC, NO_PREFIX_CACHE]),
    (
        "b200",
        &[
            ASYNC,
            NO_PREFIX_CACHE,
            SuiteFlag::always("kv-cache-dtype", "fp8"),
            SuiteFlag::always("fuse-allreduce-rms", "true"),
        ],
    ),
    ("b300", &[ASYNC, NO_PREFIX_CACHE, SuiteFlag::always("kv-cache-dtype", "fp8")]),
    ("mi300x", &[ASYNC, NO_PREFIX_CACHE, SuiteFlag::always("quick-reduce", "int4")]),
    ("mi325x", &[ASYNC, NO_PREFIX_CACHE, SuiteFlag::since("quick-reduce", "int4", (0, 17))]),
    ("mi355x", &[ASYNC, NO_PREFIX_CACHE, SuiteFlag::since("quick-reduce", "int4", (0, 17))]),
];

/// Every vLLM script of the suite ran with async scheduling: the NVIDIA ones and the MI355X's
/// pass `--async-scheduling` in every version, the MI300X's and MI325X's did until their move
/// to vLLM 0.14 (January 2026), whose default it is; so a row of a release before 0.14 is not
/// taken for that release's default.
const ASYNC: SuiteFlag = SuiteFlag::always("async-scheduling", "true");

/// Every gpt-oss launch script of the suite serves without prefix caching
/// (`no-enable-prefix-caching: true` in its config, or `--no-enable-prefix-caching`), in every
/// version after their first week (September 2025). With vLLM's default the twin would find
/// the run's first prompt cached by the test prompt `vllm bench serve` sends before a run
/// (the same prompt): there every prompt of the first wave is prefilled in full.
const NO_PREFIX_CACHE: SuiteFlag = SuiteFlag::always("enable-prefix-caching", "false");

/// One serving flag of a suite's launch script, and the first vLLM release (major, minor) its
/// script passed it with; a row that names no release, or one that cannot be read, takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuiteFlag {
    pub key: &'static str,
    pub value: &'static str,
    pub since: Option<(u32, u32)>,
}

impl SuiteFlag {
    const fn always(key: &'static str, value: &'static str) -> Self {
        SuiteFlag { key, value, since: None }
    }

    const fn since(key: &'static str, value: &'static str, release: (u32, u32)) -> Self {
        SuiteFlag { key, value, since: Some(release) }
    }
}

/// Labels that may name the vLLM release a point measured (InferenceX's rows: `vllm`, the
/// image's tag; a report's `vllm: v0.11.0` heading).
const RELEASE_KEYS: [&str; 3] = ["vllm", "image", "version"];

/// The vLLM release (major, minor) a point's labels name: the first of [`RELEASE_KEYS`] that
/// is one, else a heading or section that says it among other words (`vLLM API server version
/// 0.11.0`, `GPUStack's lab, vLLM v0.11.0`).
pub(crate) fn release_named(labels: &[(String, String)]) -> Option<(u32, u32)> {
    let label = |key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let said = || {
        labels
            .iter()
            .filter(|(k, v)| matches!(k.as_str(), "heading" | "section") && v.to_ascii_lowercase().contains("vllm"))
            .find_map(|(_, v)| vllm_release(v))
    };
    RELEASE_KEYS.iter().find_map(|k| label(k).and_then(vllm_release)).or_else(said)
}

/// Adds, to a row of InferenceX's (its throughput given per GPU), the [`SUITE_FLAGS`] of the
/// row's `hw` that the row does not give itself and that the
/// script of the row's vLLM release ([`release_named`]) passed;
/// `hw` may be a runner (`b200-dgxc`) or a dashboard series (`b200_vllm`) of the device.
fn add_suite_flags(labels: &mut Vec<(String, String)>) {
    let label = |key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let Some(hw) = label("hw").map(|v| v.to_ascii_lowercase()) else { return };
    let release = release_named(labels);
    let device = hw.split('_').next().unwrap_or_default();
    let names = |name: &str| device == name || device.strip_prefix(name).is_some_and(|rest| rest.starts_with('-'));
    let Some((_, flags)) = SUITE_FLAGS.iter().find(|(name, _)| names(name)) else {
        return;
    };
    for flag in *flags {
        let passed = match (flag.since, release) {
            (Some(since), Some(release)) => release >= since,
            _ => true,
        };
        let given = labels.iter().any(|(k, _)| k == flag.key);
        if passed && !given {
            labels.push((flag.key.to_string(), flag.value.to_string()));
        }
    }
}

/// Fields that hold results rather than settings (never labels).
fn is_measurement(key: &str) -> bool {
    key.starts_with("mean_")
        || key.starts_with("median_")
        || key.starts_with("p9")
        || key.starts_with("std_")
        || key.contains("tput")
        || key.contains("throughput")
        || key == "n"
}

/// The most lengths [`spread`] lists; a point's requests repeat them in turn.
const SPREAD_CYCLE: usize = 1 << 16;

/// `n` lengths spread evenly over `[⌊ratio · len⌋, len]` in a fixed interleaved order (the
/// golden-ratio sequence), so any run of consecutive requests covers the range; at most
/// [`SPREAD_CYCLE`] of them, which `Lengths::Each` repeats for more requests (a damaged row
/// of 10^12 requests is refused later, not allocated here).
fn spread(len: u64, ratio: f64, n: usize) -> Vec<u32> {
    let n = n.min(SPREAD_CYCLE);
    let hi = u32::try_from(len).unwrap_or(u32::MAX);
    let lo = ((len as f64 * ratio).floor() as u32).clamp(1, hi);
    let span = f64::from(hi - lo);
    (0..n)
        .map(|i| {
            let u = (i as f64 * 0.618_033_988_749_894_9).fract();
            lo + (u * (span + 1.0)).floor().min(span) as u32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Value {
        serde_json::json!({
            "hw": "h100", "vllm": "v0.11.2", "tp": 2, "isl": 1024, "osl": 8192, "conc": 4, "n": 1,
            "median_ttft": 0.053, "mean_ttft": 0.06, "median_tpot": 0.0051, "mean_tpot": 0.0051,
            "output_tput_per_gpu": 385.5, "tput_per_gpu": 434.7, "median_e2el": 37.0
        })
    }

    #[test]
    fn a_row_becomes_a_point_with_its_settings_as_labels() {
        let p = point_from_row(&row(), "t line 1".into(), RowDefaults::default()).unwrap();
        assert_eq!(p.workload.num_prompts, 40);
        assert_eq!(p.workload.max_concurrency, Some(4));
        assert!(p.workload.request_rate.is_infinite());
        assert_eq!(p.value(FitMetric::MeanTtft), Some(60.0));
        assert!((p.value(FitMetric::MedianTpot).unwrap() - 5.1).abs() < 1e-12);
        assert_eq!(p.value(FitMetric::MedianE2el), Some(37_000.0));
        assert_eq!(p.value(FitMetric::MeanE2el), None);
        assert_eq!(p.value(FitMetric::OutputThroughput), Some(771.0));
        let keys: Vec<&str> = p.labels.iter().map(|(k, _)| k.as_str()).collect();
        // Every script of the suite ran with async scheduling, whatever its release's default,
        // and without prefix caching.
        assert_eq!(keys, ["hw", "vllm", "tp", "isl", "osl", "conc", "async-scheduling", "enable-prefix-caching"]);
        assert_eq!(p.labels.last(), Some(&("enable-prefix-caching".to_string(), "false".to_string())));
        let inputs = p.workload.input.expand(40);
        assert!(inputs.iter().all(|&x| (819..=1024).contains(&x)), "{inputs:?}");
        let mean = p.workload.output.mean(40);
        assert!((mean - 0.9 * 8192.0).abs() < 0.02 * 8192.0, "{mean}");
        assert!(is_row(&row()));
        // InferenceX's client's name for the spread: fixed lengths at 1.
        let mut r = row();
        r["random_range_ratio"] = serde_json::json!(1.0);
        let fixed = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        assert!(fixed.workload.input.expand(40).iter().all(|&x| x == 1024));
        assert!(!is_row(&serde_json::json!({"isl": 1, "osl": 2})));
    }

    #[test]
    fn whole_numbers_written_as_floats_read_as_the_integers_they_are() {
        // A table that went through pandas writes every count of a column with a gap as a float.
        let mut r = row();
        for k in ["tp", "isl", "osl", "conc", "n"] {
            r[k] = serde_json::json!(r[k].as_f64().unwrap());
        }
        r["num_prompts"] = serde_json::json!(40.0);
        assert_eq!(r["tp"].to_string(), "2.0");
        let floats = point_from_row(&r, "t line 1".into(), RowDefaults::default()).unwrap();
        let ints = point_from_row(&row(), "t line 1".into(), RowDefaults::default()).unwrap();
        assert_eq!(floats.workload, ints.workload);
        assert_eq!(floats.measured, ints.measured);
        assert!(floats.labels.contains(&("tp".into(), "2".into())), "{:?}", floats.labels);
        // A count that is not one is named with its value.
        for (k, v) in
            [("isl", serde_json::json!(1024.5)), ("conc", serde_json::json!(1e30)), ("osl", serde_json::json!(0))]
        {
            let mut bad = row();
            bad[k] = v.clone();
            let err = point_from_row(&bad, "x".into(), RowDefaults::default()).unwrap_err();
            assert_eq!(err, format!("{k} must be a whole number of at least 1, not {v}"));
        }
    }

    #[test]
    fn a_row_takes_the_suite_s_flags_for_its_device_unless_it_gives_them() {
        let mut r = row();
        r["hw"] = serde_json::json!("B200");
        let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        assert!(p.labels.contains(&("kv-cache-dtype".into(), "fp8".into())), "{:?}", p.labels);
        r["kv_cache_dtype"] = serde_json::json!("auto");
        let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        let kv: Vec<_> = p.labels.iter().filter(|(k, _)| k.contains("kv")).collect();
        assert_eq!(kv, [&("kv-cache-dtype".to_string(), "auto".to_string())], "{:?}", p.labels);
        for hw in ["b200_vllm", "b200-dgxc"] {
            r["hw"] = serde_json::json!(hw);
            r.as_object_mut().unwrap().remove("kv_cache_dtype");
            let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
            assert!(p.labels.contains(&("kv-cache-dtype".into(), "fp8".into())), "{hw}: {:?}", p.labels);
            assert!(p.labels.contains(&("fuse-allreduce-rms".into(), "true".into())), "{hw}: {:?}", p.labels);
        }
        // The B300's script asks for the fusion too, but vLLM 0.13 has none for its SMs.
        r["hw"] = serde_json::json!("b300");
        let b300 = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        assert!(b300.labels.contains(&("kv-cache-dtype".into(), "fp8".into())), "{:?}", b300.labels);
        assert!(!b300.labels.iter().any(|(k, _)| k == "fuse-allreduce-rms"), "{:?}", b300.labels);
        r["hw"] = serde_json::json!("gb200");
        let gb200 = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        assert!(!gb200.labels.iter().any(|(k, _)| k == "kv-cache-dtype"));
        // Another lab's row in this format (a deployment's throughput, not a GPU's) did not run
        // the suite's scripts: none of their flags.
        let mut other = row();
        other["hw"] = serde_json::json!("b200");
        let v = other.as_object_mut().unwrap();
        v.remove("output_tput_per_gpu");
        v.remove("tput_per_gpu");
        v.insert("output_throughput".into(), serde_json::json!(771.0));
        let p = point_from_row(&other, "x".into(), RowDefaults::default()).unwrap();
        let keys: Vec<&str> = p.labels.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["hw", "vllm", "tp", "isl", "osl", "conc"], "{:?}", p.labels);
        // The AMD scripts all-reduce through QuickReduce at INT4: the MI300X's since 2025, the
        // MI325X's and MI355X's from vLLM 0.17.0 on (and where a row names no release).
        let quick_reduce = |hw: &str, release: Option<&str>| {
            let mut r = row();
            r["hw"] = serde_json::json!(hw);
            match release {
                Some(v) => r["vllm"] = serde_json::json!(v),
                None => drop(r.as_object_mut().unwrap().remove("vllm")),
            }
            let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
            p.labels.contains(&("quick-reduce".into(), "int4".into()))
        };
        for hw in ["mi300x", "MI355X_vllm", "mi325x-amds"] {
            assert!(quick_reduce(hw, None), "{hw}");
            assert!(quick_reduce(hw, Some("v0.17.0")), "{hw}");
            assert!(quick_reduce(hw, Some("rocm")), "{hw}: a label with no release");
        }
        let image = "rocm/7.0:rocm7.0_ubuntu_22.04_vllm_0.10.1_instinct_20250927_rc1";
        assert!(quick_reduce("mi300x", Some(image)));
        for hw in ["mi325x", "mi355x"] {
            assert!(!quick_reduce(hw, Some(image)), "{hw}");
            assert!(!quick_reduce(hw, Some("v0.16.0")), "{hw}");
            // The first label that names a release: a `vllm` of `rocm` leaves it to the image.
            let mut r = row();
            r["hw"] = serde_json::json!(hw);
            r["vllm"] = serde_json::json!("rocm");
            r["image"] = serde_json::json!(image);
            let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
            assert!(!p.labels.iter().any(|(k, _)| k == "quick-reduce"), "{hw}: {:?}", p.labels);
        }
        let h100 = point_from_row(&row(), "x".into(), RowDefaults::default()).unwrap();
        assert!(!h100.labels.iter().any(|(k, _)| k == "kv-cache-dtype"));
    }

    #[test]
    fn a_row_may_send_at_a_rate_with_a_shared_prefix() {
        let r = serde_json::json!({
            "hw": "b200", "isl": 512, "prefix_len": 256, "osl": 256, "range_ratio": 1.0,
            "request_rate": 2.5, "num_prompts": 100, "median_ttft": 0.019, "median_tpot": 0.0072
        });
        assert!(is_row(&r));
        let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        assert_eq!(p.workload.max_concurrency, None);
        assert_eq!(p.workload.request_rate, 2.5);
        assert_eq!(p.workload.burstiness, 1.0);
        assert_eq!(p.workload.shared_prefix, 256);
        assert_eq!(p.workload.num_prompts, 100);
        assert!(p.workload.input.expand(100).iter().all(|&x| x == 512));
        assert_eq!(p.value(FitMetric::MedianTtft), Some(19.0));
        // A capped run at a rate, gamma arrivals, everything at once spelled out.
        let mut both = r.clone();
        both["conc"] = serde_json::json!(8);
        both["burstiness"] = serde_json::json!(0.5);
        let p = point_from_row(&both, "x".into(), RowDefaults::default()).unwrap();
        assert_eq!((p.workload.max_concurrency, p.workload.burstiness), (Some(8), 0.5));
        both["request_rate"] = serde_json::json!("inf");
        assert!(point_from_row(&both, "x".into(), RowDefaults::default()).unwrap().workload.request_rate.is_infinite());
        // InferenceX's rows share nothing.
        assert_eq!(point_from_row(&row(), "x".into(), RowDefaults::default()).unwrap().workload.shared_prefix, 0);
    }

    #[test]
    fn bad_rows_say_what_is_wrong() {
        let rated =
            || serde_json::json!({"isl": 512, "osl": 2, "request_rate": 1, "num_prompts": 10, "median_ttft": 0.02});
        let err = |r: &Value| point_from_row(r, "x".into(), RowDefaults::default()).unwrap_err();
        let mut r = rated();
        r.as_object_mut().unwrap().remove("request_rate");
        assert!(!is_row(&r), "neither conc nor a rate: not a row of this format");
        r["request_rate"] = serde_json::json!("inf");
        assert!(err(&r).contains("needs a request_rate"), "{}", err(&r));
        let mut r = rated();
        r.as_object_mut().unwrap().remove("num_prompts");
        assert!(err(&r).contains("needs num_prompts"), "{}", err(&r));
        let mut r = rated();
        r["request_rate"] = serde_json::json!(-1);
        assert!(err(&r).contains("request_rate must be"), "{}", err(&r));
        let mut r = rated();
        r["burstiness"] = serde_json::json!(0);
        assert!(err(&r).contains("burstiness"), "{}", err(&r));
        // The prefix counts within the prompt, whose shortest here is 0.8 x 512 = 409 tokens.
        let mut r = rated();
        r["prefix_len"] = serde_json::json!(409);
        assert!(err(&r).contains("shorter than the shortest prompt (409 tokens)"), "{}", err(&r));
        r["prefix_len"] = serde_json::json!(408);
        assert!(point_from_row(&r, "x".into(), RowDefaults::default()).is_ok());
        let mut r = row();
        r["conc"] = serde_json::json!(0);
        assert!(point_from_row(&r, "x".into(), RowDefaults::default()).unwrap_err().contains("conc"));
        let mut r = row();
        r["range_ratio"] = serde_json::json!(2.0);
        assert!(point_from_row(&r, "x".into(), RowDefaults::default()).unwrap_err().contains("range_ratio"));
        let r = serde_json::json!({"isl": 1, "osl": 2, "conc": 3});
        assert!(point_from_row(&r, "x".into(), RowDefaults::default()).unwrap_err().contains("none of"));
        // A gap in a column (pandas writes null) is a missing field, named as such.
        let mut r = row();
        r["conc"] = Value::Null;
        assert!(is_row(&r), "a null conc is still a row of this format, so it is named, not mistaken");
        assert!(err(&r).contains("without conc needs a request_rate"), "{}", err(&r));
        // A length written as text is this format's field, named as such (not read as a vLLM
        // result that lacks `completed`).
        let mut r = row();
        r["isl"] = serde_json::json!("1k");
        assert!(is_row(&r));
        assert!(err(&r).contains("isl must be a whole number of at least 1, not \"1k\""), "{}", err(&r));
    }

    #[test]
    fn null_fields_count_as_absent() {
        let mut r = row();
        for k in ["request_rate", "burstiness", "range_ratio", "num_prompts", "prefix_len", "ep", "mean_e2el"] {
            r[k] = Value::Null;
        }
        let p = point_from_row(&r, "x".into(), RowDefaults::default()).unwrap();
        let plain = point_from_row(&row(), "x".into(), RowDefaults::default()).unwrap();
        assert_eq!(p.workload, plain.workload);
        assert_eq!(p.measured, plain.measured);
        assert!(p.labels.iter().all(|(k, _)| k != "ep" && k != "request_rate"), "{:?}", p.labels);
    }

    proptest::proptest! {
        #[test]
        fn spread_lengths_stay_in_range(len in 1u64..100_000, ratio in 0.0..1.0f64, n in 1usize..500) {
            let v = spread(len, ratio, n);
            let lo = ((len as f64 * ratio).floor() as u32).max(1);
            proptest::prop_assert_eq!(v.len(), n);
            proptest::prop_assert!(v.iter().all(|&x| x >= lo.min(len as u32) && u64::from(x) <= len));
        }
    }
}
