//! `servebench sim memory`: where one GPU's memory goes in the simulator's plan (weights, the
//! activation reserve and what it is made of, the KV cache), with the figures vLLM's start-up
//! log prints for the same deployment, and, given a server's log, the plan held against it.

mod against;

use std::io::Write;
use std::process::ExitCode;

use servebench_core::vllm::group_thousands;
use servebench_sim::memory::{GIB, tower_bytes_per_gpu};
use servebench_sim::options::GRAPH_ESTIMATE_SINCE;
use servebench_sim::{ServingOptions, SimSetup};

use crate::cli::sim_args::SimMemoryArgs;

/// `sim memory`: the memory plan of one GPU, held against a server's log where one is given.
pub fn run(args: &SimMemoryArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut log = args.against.as_deref().map(against::read).transpose()?;
    let setup = match log.as_mut() {
        Some(file) => against::setup(&args.deployment, file)?,
        None => super::resolve::deployment_setup(&args.deployment)?,
    };
    let engine = per_engine(&setup.options);
    let concurrency = max_concurrency(&setup);
    let compared = log
        .as_ref()
        .map(|file| (file, against::rows(&setup, concurrency, &file.log), against::device_mismatch(&setup, &file.log)));
    let m = &setup.memory;
    if args.json {
        let mut doc = serde_json::json!({
            "model": setup.model.id, "hardware": setup.hardware.name, "tp": engine.tp, "pp": engine.pp,
            "dp": engine.dp, "max_num_seqs": engine.max_num_seqs,
            "max_num_batched_tokens": engine.max_num_batched_tokens, "max_model_len": setup.max_model_len,
            "memory": m, "tower_gib": tower_bytes_per_gpu(&setup.model, &engine) / GIB,
            "language_model_only": engine.language_model_only, "max_concurrency": concurrency,
        });
        if let Some((file, rows, warning)) = &compared {
            doc["against"] = serde_json::json!({
                "path": file.path, "log": file.log, "settings_taken": file.taken, "figures": rows,
                "warning": warning,
            });
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(out, "{}", render(&setup, &engine, concurrency))?;
        if let Some((file, rows, warning)) = &compared {
            write!(out, "{}", against::render(file, rows, warning.as_deref()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One engine's options, as the memory plan was made with them: the setup keeps `dp` engines'
/// batch limits together.
fn per_engine(o: &ServingOptions) -> ServingOptions {
    let mut engine = o.clone();
    engine.max_num_seqs = o.max_num_seqs / o.dp.max(1);
    engine.max_num_batched_tokens = o.max_num_batched_tokens / o.dp.max(1);
    engine
}

/// Requests of `max-model-len` tokens one engine's KV pool holds at once ("Maximum
/// concurrency" in vLLM's log).
fn max_concurrency(setup: &SimSetup) -> f64 {
    let layout = &setup.memory.layout;
    let blocks = u64::from(setup.max_model_len).div_ceil(u64::from(layout.block_size.max(1)));
    let units = layout.units_for_blocks(blocks).max(1);
    layout.total_units as f64 / f64::from(setup.options.dp.max(1)) / units as f64
}

fn render(setup: &SimSetup, engine: &ServingOptions, concurrency: f64) -> String {
    let m = &setup.memory;
    let r = &m.reserve;
    let mut s = format!(
        "{} on {} ({}): the memory of one GPU, as vLLM plans it\n",
        setup.model.id,
        setup.hardware.name,
        engine.parallel_text()
    );
    s += &format!("{:<20}{:>8}\n", "part", "GiB");
    let row = |s: &mut String, part: &str, gib: f64, what: &str| {
        *s += format!("{part:<20}{gib:>8.2}  {what}").trim_end();
        s.push('\n');
    };
    row(&mut s, "device", m.device_gib, "");
    row(&mut s, "usable", m.device_gib * m.utilization, &format!("at gpu-memory-utilization {:.2}", m.utilization));
    let tower = tower_bytes_per_gpu(&setup.model, engine) / GIB;
    let weights = if tower == 0.0 {
        "the busiest GPU's share".to_string()
    } else if engine.language_model_only {
        format!("the language model alone: the tower's {tower:.2} not loaded")
    } else {
        format!("with the vision tower's {tower:.2}")
    };
    row(&mut s, "weights", m.weights_gib, &weights);
    let peak = if r.sampler_gib >= r.forward_gib { "sampler rows" } else { "forward" };
    row(
        &mut s,
        "activation reserve",
        r.gib,
        &format!(
            "the stack's {:.2} (1,024 sequences of {} logits, 8,192 tokens), less its profiled peak {:.2}, \
             plus this deployment's: the {peak}",
            r.stated_gib,
            group_thousands(r.stated_vocab.into()),
            r.stated_peak_gib
        ),
    );
    let rows = engine.max_num_seqs.min(engine.max_num_batched_tokens);
    row(
        &mut s,
        "  sampler rows",
        r.sampler_gib,
        &format!(
            "{} rows of {} logits (max-num-seqs)",
            group_thousands(rows.into()),
            group_thousands(setup.model.vocab.into())
        ),
    );
    row(
        &mut s,
        "  forward",
        r.forward_gib,
        &format!(
            "{} tokens in one pass (max-num-batched-tokens)",
            group_thousands(engine.max_num_batched_tokens.into())
        ),
    );
    if m.graph_gib > 0.0 {
        row(&mut s, "CUDA graphs", m.graph_gib, "set aside before the KV cache (cudagraph-memory-gib)");
    }
    row(&mut s, "KV cache", m.kv_gib, &format!("blocks of {} tokens", m.layout.block_size));
    s += &format!(
        "\nvLLM's log would read:\n  Available KV cache memory: {:.2} GiB\n  GPU KV cache size: {} tokens\n  \
         Maximum concurrency for {} tokens per request: {:.2}x\n",
        m.kv_gib,
        group_thousands(m.kv_tokens),
        group_thousands(u64::from(setup.max_model_len)),
        concurrency
    );
    if m.graph_gib == 0.0 && engine.vllm_release.is_none_or(|r| r >= GRAPH_ESTIMATE_SINCE) {
        s += "note: vLLM 0.21 and later also set their CUDA graph estimate aside (0.2 to 2 GiB in public logs), \
              which this plan leaves in the KV cache: --option cudagraph-memory-gib=X with the \"Estimated CUDA \
              graph memory\" of your server's log\n";
    }
    // The setup's summary line restates the table above: only the other notes.
    for note in &setup.notes {
        s += &format!("note: {note}\n");
    }
    s
}
