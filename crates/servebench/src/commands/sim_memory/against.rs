//! `sim memory --against LOG`: the plan held against a vLLM server's start-up log. The log's
//! model and settings are planned (flags given win), and the figures both have stand side by
//! side: the weights, the memory between them and the KV cache (activations, the memory outside
//! PyTorch's allocator), the CUDA graph estimate newer releases set aside, the KV cache in GiB
//! and in tokens, and the concurrency the server reported.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use servebench_core::vllm::{StartupLog, group_thousands};
use servebench_sim::{SimSetup, canonical_option_key};

use crate::cli::sim_model::SimModelArgs;

/// A start-up log read from a file.
pub struct LogFile {
    pub path: String,
    pub log: StartupLog,
    /// The settings taken from the log, as `key=value` (those the flags did not give).
    pub taken: Vec<String>,
}

/// One figure, planned and logged.
#[derive(Debug, Serialize)]
pub struct Row {
    pub figure: &'static str,
    pub plan: f64,
    pub log: f64,
    /// How the log's figure was had, where it is not printed as such.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
}

/// Reads the log at `path`, refusing one that has none of the memory figures a plan is held
/// against.
pub fn read(path: &Path) -> anyhow::Result<LogFile> {
    let bytes = std::fs::read(path).with_context(|| format!("--against {}: cannot read the log", path.display()))?;
    let log = StartupLog::parse(&String::from_utf8_lossy(&bytes));
    if !log.has_memory_figures() {
        anyhow::bail!(
            "--against {}: none of vLLM's start-up memory lines (\"Model loading took\", \"Available KV cache \
             memory\", \"GPU KV cache size\") is in it; pass the log of a server that started, e.g. the output \
             of `vllm serve ... 2>&1 | tee server.log`",
            path.display()
        );
    }
    Ok(LogFile { path: path.display().to_string(), log, taken: Vec::new() })
}

/// Plans the deployment the log names: the flags, with the log's model where none is given (the
/// log named where that model is not a preset) and the log's settings where the flags do not
/// set them, noted in `file.taken`.
pub fn setup(args: &SimModelArgs, file: &mut LogFile) -> anyhow::Result<SimSetup> {
    let mut planned = args.clone();
    let model_from_log = args.model.is_none() && args.model_config.is_none();
    if model_from_log {
        let model = file.log.model.clone().with_context(|| {
            format!(
                "--against {}: the log names no model; pass --model (a preset, see `servebench sim presets`)",
                file.path
            )
        })?;
        planned.model = Some(model);
    }
    let given: Vec<String> = args.option_pairs()?.iter().map(|(k, _)| canonical_option_key(k)).collect();
    let release = file.log.release.iter().map(|r| ("vllm-release".to_string(), r.clone()));
    for (key, value) in file.log.settings.iter().cloned().chain(release) {
        if !given.contains(&canonical_option_key(&key)) {
            let pair = format!("{key}={value}");
            planned.options.push(pair.clone());
            file.taken.push(pair);
        }
    }
    let setup = super::super::resolve::deployment_setup(&planned);
    if !model_from_log {
        return setup;
    }
    let model = planned.model.as_deref().unwrap_or_default();
    setup.with_context(|| {
        format!(
            "--against {}: the log's model {model:?} is planned as a preset; where it is a path or another \
             name, pass --model with the preset it is (see `servebench sim presets`) or --model-config",
            file.path
        )
    })
}

/// The figures the plan and the log both have.
pub fn rows(setup: &SimSetup, concurrency: f64, log: &StartupLog) -> Vec<Row> {
    let m = &setup.memory;
    let mut rows = Vec::new();
    let mut row = |figure, plan, log: Option<f64>, derived: Option<String>| {
        if let Some(log) = log {
            rows.push(Row { figure, plan, log, derived });
        }
    };
    row("weights (GiB)", m.weights_gib, log.weights_gib, None);
    // What lies between the weights and the KV cache: vLLM's split where it prints one, else
    // the usable memory less what it printed of the rest.
    let graph = log.graph_estimate_gib.filter(|_| log.graph_counted).unwrap_or(0.0);
    let between = match (log.usage, log.weights_gib, log.kv_cache_gib) {
        (Some(u), Some(w), _) => Some((
            u.consumed_gib - w + u.peak_activation_gib,
            "memory outside PyTorch's allocator and the profiled peak, as the log splits it".to_string(),
        )),
        (None, Some(w), Some(kv)) => {
            let device = log.device_gib.unwrap_or(m.device_gib);
            let graph_part = if graph > 0.0 { ", the graph estimate" } else { "" };
            Some((
                device * m.utilization - w - kv - graph,
                format!("{device:.2} GiB x {:.2}, less the weights{graph_part} and the KV cache", m.utilization),
            ))
        }
        _ => None,
    };
    if let Some((gib, how)) = between {
        row("activation reserve (GiB)", m.reserve.gib, Some(gib), Some(how));
    }
    if graph > 0.0 || m.graph_gib > 0.0 {
        row(
            "CUDA graph estimate (GiB)",
            m.graph_gib,
            Some(graph),
            Some("set aside from the KV cache (vLLM 0.21 on)".into()),
        );
    }
    row("KV cache (GiB)", m.kv_gib, log.kv_cache_gib, None);
    row("KV cache (tokens)", m.kv_tokens as f64, log.kv_cache_tokens.map(|t| t as f64), None);
    if let Some((tokens, times)) = log.max_concurrency {
        let same_len = tokens == u64::from(setup.max_model_len);
        let derived =
            (!same_len).then(|| format!("the log's for {tokens} tokens, the plan's for {}", setup.max_model_len));
        row("maximum concurrency", concurrency, Some(times), derived);
    }
    rows
}

/// A warning where the device the log reports is not the one planned: its total memory more than
/// 3 % from the preset's (another model of GPU, or another memory size).
pub fn device_mismatch(setup: &SimSetup, log: &StartupLog) -> Option<String> {
    let logged = log.device_gib?;
    let planned = setup.memory.device_gib;
    ((logged / planned - 1.0).abs() > 0.03).then(|| {
        format!(
            "warning: the log's device has {logged:.2} GiB, {} has {planned:.2}: is --hardware the GPU the server ran \
             on? (`servebench sim presets` lists them)",
            setup.hardware.name
        )
    })
}

/// The comparison as printed under the plan.
pub fn render(file: &LogFile, rows: &[Row], warning: Option<&str>) -> String {
    let release = file.log.release.as_deref().map(|r| format!(", vLLM {r}")).unwrap_or_default();
    let mut s = format!("\nAgainst {}{release}:\n", file.path);
    if !file.taken.is_empty() {
        s += &format!("planned with the log's {}\n", file.taken.join(", "));
    }
    if !file.log.unread.is_empty() {
        s += &format!("not planned, though the log sets them: {}\n", file.log.unread.join(", "));
    }
    if let Some(w) = warning {
        s += w;
        s.push('\n');
    }
    s += &format!("{:<28}{:>12}{:>12}{:>10}\n", "figure", "plan", "log", "vs log");
    for r in rows {
        let ratio = if r.log.abs() > 1e-9 { format!("{:+.1}%", 100.0 * (r.plan / r.log - 1.0)) } else { "-".into() };
        let (plan, log) = if r.figure.contains("tokens") {
            (group_thousands(r.plan as u64), group_thousands(r.log as u64))
        } else {
            (format!("{:.2}", r.plan), format!("{:.2}", r.log))
        };
        let line = format!("{:<28}{plan:>12}{log:>12}{ratio:>10}  {}", r.figure, r.derived.as_deref().unwrap_or(""));
        s += line.trim_end();
        s.push('\n');
    }
    s
}
