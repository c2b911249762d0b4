//! `servebench sim presets`: the hardware and model presets `--hardware` and `--model`
//! accept, with their key numbers, and where the user's own presets are read from.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use servebench_sim::{KvDtype, Presets};

use crate::cli::sim_args::SimPresetsArgs;

/// `sim presets`: the hardware and model presets with their key numbers.
pub fn presets(args: SimPresetsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let presets = Presets::load_default()?;
    let both = !args.hardware && !args.models;
    if args.hardware || both {
        writeln!(
            out,
            "Hardware ({}):\n{:<16} {:>8} {:>8} {:>7} {:>7} {:>7} {:>5} {:>5}  description",
            presets.hardware_presets().len(),
            "name",
            "mem GiB",
            "GB/s",
            "BF16 TF",
            "FP8 TF",
            "FP4 TF",
            "MHz",
            "GPUs",
        )?;
        for h in presets.hardware_presets() {
            let or_dash = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
            writeln!(
                out,
                "{:<16} {:>8.1} {:>8.0} {:>7.0} {:>7} {:>7} {:>5} {:>5}  {}",
                h.name,
                h.memory_gib,
                h.bandwidth_gbs,
                h.peak_tflops.bf16,
                or_dash(h.peak_tflops.fp8),
                or_dash(h.peak_tflops.fp4),
                or_dash(h.boost_clock_mhz),
                h.gpus_per_node,
                h.description
            )?;
        }
    }
    if args.models || both {
        if both {
            writeln!(out)?;
        }
        writeln!(
            out,
            "Models ({}):\n{:<44} {:>9} {:>7} {:>7} {:>6} {:>8} {:>10} {:>9}",
            presets.model_presets().len(),
            "id",
            "params B",
            "active",
            "layers",
            "hidden",
            "weights",
            "KV KiB/tok",
            "context"
        )?;
        for m in presets.model_presets() {
            let kv = m.kv_bytes_per_token_layer(KvDtype::Auto, 1);
            let (sliding, window) = m.sliding_layers();
            // Linear-attention layers keep a state a request, not KV a token.
            let attention = kv * f64::from(m.attention_layers()) / 1024.0;
            let hybrid = if m.linear.is_some() { "+s" } else { "" };
            let kv_text = if sliding > 0 {
                format!("{attention:.0} ({:.0}>{window}){hybrid}", kv * f64::from(m.full_attention_layers()) / 1024.0)
            } else {
                format!("{attention:.0}{hybrid}")
            };
            writeln!(
                out,
                "{:<44} {:>9.2} {:>7.2} {:>7} {:>6} {:>8} {:>10} {:>9}",
                m.id,
                m.total_params() / 1e9,
                m.active_params() / 1e9,
                m.layers,
                m.hidden,
                m.precision.name(),
                kv_text,
                m.max_context
            )?;
            for alias in &m.aliases {
                writeln!(out, "  also {alias}")?;
            }
        }
        writeln!(
            out,
            "KV KiB/tok: BF16 cache, all attention layers (with sliding windows: the growth beyond the window; \
             +s: linear-attention layers keep a fixed state a request besides)."
        )?;
    }
    let dir = presets.user_dir().map(Path::to_path_buf).or_else(servebench_sim::presets::default_user_dir);
    match dir {
        Some(d) => writeln!(
            out,
            "\nUser presets are read from {} (hardware/*.toml, models/*.toml; set SERVEBENCH_PRESETS to move it){}.",
            d.display(),
            if d.is_dir() { "" } else { "; it does not exist yet" }
        )?,
        None => {
            writeln!(out, "\nUser presets: set SERVEBENCH_PRESETS to a folder with hardware/*.toml and models/*.toml.")?
        }
    }
    writeln!(
        out,
        "A model can also be given as the path of a Hugging Face config.json, or by a name with a quantization tag \
         (-FP8, -NVFP4, -AWQ, -GPTQ-Int4, -BF16): the shapes it names in that format."
    )?;
    Ok(ExitCode::SUCCESS)
}
