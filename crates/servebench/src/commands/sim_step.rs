//! `servebench sim step`: one engine step priced term by term, for a batch the user describes,
//! so each physical term of the cost model can be checked against what a profiler shows.

use std::io::Write;
use std::process::ExitCode;

use servebench_sim::cost::terms::LinkCost;
use servebench_sim::profile::AttentionKernels;
use servebench_sim::{BatchStats, CostModel, SimSetup, StepBreakdown};

use crate::cli::sim_args::SimStepArgs;

/// `sim step`: the cost model's breakdown of one step.
pub fn run(args: &SimStepArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if args.batch == 0 && args.prefill == 0 {
        anyhow::bail!("the step has nothing to compute: give --batch N decoding sequences or --prefill TOKENS");
    }
    if args.prefill_after > 0 && args.prefill == 0 {
        anyhow::bail!(
            "--prefill-after places a prefill chunk after cached tokens: give the chunk with --prefill TOKENS"
        );
    }
    let d = &args.deployment;
    let setup = super::resolve::deployment_setup(d)?;
    let window = setup.model.pair_window();
    let mut batch = BatchStats::default();
    // With speculative decoding each decode verifies its drafts in the step.
    let drafts = setup.options.speculative.as_ref().map_or(0, |s| s.num_speculative_tokens);
    for _ in 0..args.batch {
        batch.add_verification(args.context, 1 + drafts, window);
    }
    if args.prefill > 0 {
        batch.add_sequence(args.prefill_after, args.prefill, window, true, true);
    }
    let images = images(args, &setup)?;
    for work in &images {
        batch.add_image(*work);
    }
    let cost = CostModel::new(&setup);
    let b = cost.breakdown(&batch);
    let tokens = batch.tokens();
    // With CUDA graphs the products (and the experts) run on the captured size's rows.
    let rows = cost.rows(&batch);
    let eager = cost.eager_reason(&batch);
    let mut notes = limits(args, &setup, tokens);
    if !images.is_empty() {
        let tokens: u32 = images.iter().map(|i| i.tokens).sum();
        let patches: u32 = images.iter().map(|i| i.patches).sum();
        notes.push(format!(
            "{} image(s): {tokens} prompt tokens (part of --prefill's {}), {patches} patches through the tower",
            images.len(),
            args.prefill
        ));
        if tokens > args.prefill {
            notes.push(format!(
                "the images' {tokens} tokens are more than the chunk's {}: raise --prefill",
                args.prefill
            ));
        }
    }
    if args.json {
        // With a batch a stage in flight, one leaves every stage's share of the step.
        let interval = b.total / f64::from(setup.options.pp.max(1));
        let doc = serde_json::json!({
            "model": setup.model.id, "hardware": setup.hardware.name, "tp": setup.options.tp,
            "pp": setup.options.pp, "dp": setup.options.dp, "batch": args.batch, "context": args.context,
            "prefill": args.prefill, "prefill_after": args.prefill_after, "tokens": tokens, "graph_rows": rows,
            "eager": eager,
            "experts_touched": experts(&setup, &cost, rows), "seconds": b,
            "batch_interval_s": interval, "notes": notes,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(out, "{}", render(args, &setup, &cost, &b, tokens, rows, eager))?;
        for note in &notes {
            writeln!(out, "note: {note}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The images of `--image`, as the model's tower makes tokens and patches of them.
fn images(args: &SimStepArgs, setup: &SimSetup) -> anyhow::Result<Vec<servebench_sim::model::ImageWork>> {
    if args.image.is_empty() {
        return Ok(Vec::new());
    }
    let Some(vision) = setup.model.vision.as_ref().filter(|_| !setup.options.language_model_only) else {
        anyhow::bail!(
            "{} loads no vision tower here: leave out --image, or price a model that takes images",
            setup.model.id
        );
    };
    if args.prefill == 0 {
        anyhow::bail!(
            "an image is encoded in the step of the prefill chunk that reaches it: give the chunk with --prefill TOKENS"
        );
    }
    args.image
        .iter()
        .map(|s| {
            let size =
                s.split_once(['x', 'X']).and_then(|(h, w)| Some((h.trim().parse().ok()?, w.trim().parse().ok()?)));
            match size {
                Some((h, w)) if h > 0 && w > 0 => Ok(vision.image(h, w)),
                _ => anyhow::bail!("--image {s:?}: give HEIGHTxWIDTH in pixels, like 720x1280"),
            }
        })
        .collect()
}

/// Where the step asked for is not one the engine would run: more sequences or tokens than a
/// step takes, a sequence longer than the context allowed, or more context than the KV cache
/// holds. The price is still given (a term can
/// be checked at any size), with what the engine would do instead.
fn limits(args: &SimStepArgs, setup: &SimSetup, tokens: u64) -> Vec<String> {
    let o = &setup.options;
    let mut notes = Vec::new();
    let (batch, context, prefill) = (u64::from(args.batch), u64::from(args.context), u64::from(args.prefill));
    let seqs = batch + u64::from(prefill > 0);
    if seqs > u64::from(o.max_num_seqs) {
        notes.push(format!(
            "{seqs} sequences are more than max-num-seqs ({}): the engine would run them over several steps",
            o.max_num_seqs
        ));
    }
    if tokens > u64::from(o.max_num_batched_tokens) {
        notes.push(format!(
            "{tokens} tokens are more than max-num-batched-tokens ({}): the engine would split the prefill into \
             chunks, or the batch over steps",
            o.max_num_batched_tokens
        ));
    }
    let longest = (context + 1).max(u64::from(args.prefill_after) + prefill);
    if longest > u64::from(setup.max_model_len) {
        notes.push(format!(
            "a sequence of {longest} tokens is longer than the context the server allows (max-model-len {}): \
             the engine would refuse its request",
            setup.max_model_len
        ));
    }
    let context = batch * (context + 1) + prefill + u64::from(args.prefill_after);
    if context > setup.memory.kv_tokens {
        notes.push(format!(
            "the step's context ({context} tokens) is more than the KV cache holds ({} tokens): the engine would \
             preempt sequences",
            setup.memory.kv_tokens
        ));
    }
    notes
}

/// Distinct experts a MoE layer's step touches, where the model has experts.
fn experts(setup: &SimSetup, cost: &CostModel, tokens: u64) -> Option<f64> {
    setup.model.moe.as_ref().map(|_| cost.experts_touched(tokens))
}

fn render(
    args: &SimStepArgs,
    setup: &SimSetup,
    cost: &CostModel,
    b: &StepBreakdown,
    tokens: u64,
    rows: u64,
    eager: Option<&str>,
) -> String {
    let o = &setup.options;
    let mut what = Vec::new();
    if args.batch > 0 {
        let drafts = match &o.speculative {
            Some(spec) => format!(", each verifying {} draft token(s)", spec.num_speculative_tokens),
            None => String::new(),
        };
        what.push(format!("{} decoding sequence(s) of {} tokens of context{drafts}", args.batch, args.context));
    }
    if args.prefill > 0 {
        what.push(if args.prefill_after > 0 {
            format!("a prefill of {} tokens after {} cached", args.prefill, args.prefill_after)
        } else {
            format!("a prefill of {} tokens", args.prefill)
        });
    }
    let mut s = format!(
        "{} on {} (tp {}, pp {}, dp {}): one step of {}\n",
        setup.model.id,
        setup.hardware.name,
        o.tp,
        o.pp,
        o.dp,
        what.join(" and ")
    );
    if rows > tokens {
        s.push_str(&format!(
            "run in the CUDA graph captured for {rows} rows: the products, and the experts the padded rows are routed to, cost {rows} tokens\n"
        ));
    }
    if let Some(why) = eager {
        s.push_str(&format!("run without CUDA graphs: {why}\n"));
    }
    let format = setup.model.precision.compute_on(&setup.hardware.peak_tflops);
    let expert_note = experts(setup, cost, rows).map(|touched| {
        let moe = setup.model.moe.as_ref().map_or(0, |m| m.experts);
        let (ceiling, peak) = cost.expert_ceiling();
        let fp4_blocks = setup.model.precision.runs_fp4_block_experts(&setup.hardware.peak_tflops);
        let kernels = match o.mxfp4_backend {
            servebench_sim::precision::Mxfp4Backend::Triton => " (triton)",
            servebench_sim::precision::Mxfp4Backend::Marlin if fp4_blocks => " (FP4 block-scaled kernels)",
            servebench_sim::precision::Mxfp4Backend::Marlin => "",
        };
        let fixed = cost.expert_fixed_us();
        let fixed = if fixed > 0.0 { format!(", {fixed:.0} µs a layer fixed") } else { String::new() };
        let tile = if cost.expert_default_tile() { " (vLLM's default tile)" } else { "" };
        let whole = if o.expert_parallel {
            format!(" (whole, over {} GPUs: the busiest reads the most)", o.expert_shards())
        } else {
            String::new()
        };
        format!(
            "{touched:.0} of {moe} experts a layer{whole}, {}{kernels} at {ceiling:.2}{tile} of {peak:.0} TFLOP/s{fixed}",
            format.name()
        )
    });
    // Tensor parallelism's two all-reduces a layer; data-parallel ranks' exchange around each
    // MoE layer (a gather and a reduce-scatter).
    let moe_layers = setup.model.moe_layers();
    let mut comm = Vec::new();
    if o.tp > 1 {
        let fused = if o.allreduce_norm_fusion(&setup.hardware).is_some() { " (fused with their RMSNorm)" } else { "" };
        let link = o.allreduce_link(&setup.hardware);
        // The rate the cost model takes: a network's may be the profile's own (`ar-gbs`).
        let rate = LinkCost::profiled(&link, &setup.stack).bandwidth * 1e-9;
        comm.push(format!("{} all-reduces over {} at {rate:.0} GB/s{fused}", setup.model.allreduces(), link.name));
    }
    if o.dp > 1 && moe_layers > 0 {
        comm.push(format!("{} exchanges between data-parallel ranks", 2 * moe_layers));
    }
    let comm = (!comm.is_empty()).then(|| format!("{} a step", comm.join(" and ")));
    // Attention is the longer of its KV reads and its compute: its FLOPs or its softmax's
    // exponentials, the longer, plus what the kernels do not hide of the shorter.
    let exps_note = (b.attention_exps > 0.0 && b.attention_exps >= b.attention * (1.0 - 1e-9)).then(|| {
        let rate = setup.hardware.peak_tflops.exp2.unwrap_or(0.0);
        format!("bound by the softmax's exponentials ({rate:.1} T/s on the SFUs)")
    });
    // The prefill queries' tile work, where the preset prices it.
    let tiles_note = (b.attention_tiles > 0.0).then(|| {
        format!(
            "{:.3} ms of it the prefill queries' tile work ({:.0} keys a query)",
            b.attention_tiles * 1e3,
            setup.stack.attn_query_keys
        )
    });
    // The exponentials the kernels do not hide under the tensor cores, where the preset says so.
    let exposed_note = (b.attention_exposed > 0.0).then(|| {
        format!(
            "{:.3} ms of it the softmax's exponentials the kernels do not hide ({:.2} of them)",
            b.attention_exposed * 1e3,
            setup.stack.attn_exp_exposed
        )
    });
    // Attention sinks where the stack serves them with Triton's kernels (its fast kernels lack
    // them, or, on ROCm, its unified attention runs them), at their own rate.
    let attn = setup.stack.attention_rate(setup.model.attention_sinks, setup.model.sparse.is_some());
    let sinks_note = (attn.kernels == AttentionKernels::SinksOnTriton)
        .then(|| format!("its sinks on Triton's kernels, at {:.2} of the peak", attn.eff));
    let notes: Vec<String> = [sinks_note, exps_note, exposed_note, tiles_note].into_iter().flatten().collect();
    let attention_note = (!notes.is_empty()).then(|| notes.join("; "));
    // Linear-attention layers, where the model has them: their state read and written, their
    // chunked prefill.
    let linear = setup.model.linear.as_ref().map(|l| {
        format!(
            "{} layers, each sequence's state of {:.0} KiB a GPU a layer read and written",
            l.layers,
            l.state_bytes(o.tp) / 1024.0
        )
    });
    let host = if o.async_scheduling { "async scheduling" } else { "no async scheduling" };
    let rows: Vec<(&str, f64, Option<String>)> = b
        .terms()
        .into_iter()
        // A model without linear-attention layers has no such row, nor a deployment without a
        // drafter a drafting one.
        .filter(|&(name, _)| name != "linear attention" || linear.is_some())
        .filter(|&(name, _)| name != "drafting" || setup.drafter.is_some())
        .filter(|&(name, v)| name != "vision encoder" || v > 0.0)
        .map(|(name, secs)| {
            let note = match name {
                "routed experts" => expert_note.clone(),
                "attention" => attention_note.clone(),
                "linear attention" => linear.clone(),
                "all-reduce" => comm.clone(),
                "host, not hidden" => Some(host.to_string()),
                _ => None,
            };
            (name, secs, note)
        })
        .chain([("total", b.total, None)])
        .collect();
    s.push_str(&format!("{:<32} {:>9} {:>6}\n", "term", "ms", "share"));
    for (name, secs, note) in rows {
        let share = if b.total > 0.0 { secs / b.total * 100.0 } else { 0.0 };
        let note = note.map_or(String::new(), |n| format!("  {n}"));
        s.push_str(&format!("{name:<32} {:>9.3} {share:>5.0}%{note}\n", secs * 1e3));
    }
    s.push_str(&format!(
        "{:<32} {:>9.3}         weights read and KV cache{} at {:.2} of {:.0} GB/s, for reference\n",
        "bytes over bandwidth",
        b.memory * 1e3,
        if setup.model.linear.is_some() { " and states" } else { "" },
        setup.stack.eta_bw,
        setup.hardware.bandwidth_gbs
    ));
    if b.total > 0.0 {
        s.push_str(&format!("{:<32} {:>9.0}\n", "tokens per second of the step", tokens as f64 / b.total));
        // The engine keeps a batch a stage in flight: with the pipeline full, one leaves every
        // stage's share of the step.
        if o.pp > 1 {
            let every = b.total / f64::from(o.pp);
            s.push_str(&format!(
                "{:<32} {:>9.0}  {} batches like it in flight, one leaving every {:.3} ms\n",
                "tokens per second, pipeline full",
                tokens as f64 / every,
                o.pp,
                every * 1e3
            ));
        }
    }
    s
}
