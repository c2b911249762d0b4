//! Whether vLLM ships a tuned tile table for a BF16 expert shape on a device, and what the
//! default tile costs where it does not.
//!
//! vLLM's Triton fused-MoE kernel reads its tiles from a JSON table named after the experts on
//! a GPU (`E`), the width of each expert's FFN on it (`N`) and the device; without one it runs a
//! default tile (64 x 64 x 32 for BF16 from 65 rows up). Block-scaled FP8 experts take a default
//! tile sized to their scale blocks that runs as fast as the tuned ones (the probe below), so
//! only BF16 and FP16 experts are looked up.

/// The BF16/FP16 tables of vLLM 0.13.0 (`presets/kernels/vllm-fused-moe-bf16-tables.txt`).
const TABLES: &str = include_str!("../../presets/kernels/vllm-fused-moe-bf16-tables.txt");

/// The rate of vLLM's default BF16 tile against a tuned one, for the two expert products at
/// 2,048 to 8,192 tokens: measured by `scripts/sim/fused_moe_probe.py` on an H100 and an H200,
/// GLM-4.6's untuned shard (E=160, N=192) against Qwen3-235B-A22B's tuned one of the same width
/// (E=128, N=192) and Qwen3-235B's TP4 shard untuned on the H100 against tuned on the H200:
/// 0.50 to 0.65, 0.62 at the median (CALIBRATION.md, "Untuned expert shapes").
pub const DEFAULT_TILE_RATE: f64 = 0.62;

/// The rate of the default tiles vLLM chose anew in February 2026 (pull request 34846: tiles
/// by batch size, `BLOCK_SIZE_K` 64 or 128 instead of 32, warps and stages set) against tuned
/// ones, from the kernel timings public pull requests give since, the new default against a
/// tuned table of the same shape at 1,024 to 4,096 rows: 0.90 and 0.91 (pull request 40542,
/// A100, E=64 N=1408), 0.95 to 0.98 (44818, H200, E=128 N=704), about 0.8 (as 54741 quotes
/// 44830, H100). Their median; not measured here.
pub const NEWER_DEFAULT_TILE_RATE: f64 = 0.9;

/// The first release with those tiles: 0.16.0 was published days after the change merged,
/// 0.17.0 in March 2026 is the first whose branch surely has it.
pub const NEWER_DEFAULT_TILES_SINCE: (u32, u32) = (0, 17);

const _: () = assert!(NEWER_DEFAULT_TILE_RATE > DEFAULT_TILE_RATE && NEWER_DEFAULT_TILE_RATE <= 1.0);

/// The rate of vLLM's default BF16 tile against a tuned one in the release served: the
/// calibrated releases' (0.11 to 0.13) where none is given.
pub fn default_tile_rate(release: Option<(u32, u32)>) -> f64 {
    match release {
        Some(r) if r >= NEWER_DEFAULT_TILES_SINCE => NEWER_DEFAULT_TILE_RATE,
        _ => DEFAULT_TILE_RATE,
    }
}

/// The name vLLM gives `device_name` in a table's file name: spaces as underscores, and every
/// H200 variant as `NVIDIA_H200`.
fn table_device(device_name: &str) -> String {
    let name = device_name.replace(' ', "_");
    if name.split('_').any(|part| part == "H200") { "NVIDIA_H200".to_string() } else { name }
}

/// Whether vLLM ships a tuned table for BF16 experts, `experts` on a GPU, `width` columns of
/// each expert's FFN on it, on the device the driver names `device_name`.
pub fn has_bf16_table(experts: u32, width: u32, device_name: &str) -> bool {
    let wanted = format!("E={experts},N={width},device_name={}", table_device(device_name));
    TABLES.lines().any(|line| line.trim() == wanted)
}

/// The expert shape (`E`, `N`) of `model` served with `opts` on `hw` when its experts run vLLM's
/// Triton fused-MoE kernel in BF16 and vLLM ships no tuned table for it: those products run at
/// [`default_tile_rate`] of the calibrated ceiling. None otherwise (dense models, experts in
/// FP8 or dequantized, shapes with a table).
pub fn untuned_bf16_experts(
    model: &crate::model::ModelShape,
    opts: &crate::options::ServingOptions,
    hw: &crate::hardware::HardwareSpec,
) -> Option<(u32, u32)> {
    use crate::precision::ComputePrecision;
    let moe = model.moe.as_ref()?;
    let peaks = &hw.peak_tflops;
    if !model.precision.keeps_experts_native(peaks) || model.precision.compute_on(peaks) != ComputePrecision::Bf16 {
        return None;
    }
    let experts = opts.experts_per_gpu(moe.experts);
    let width = opts.expert_width_per_gpu(moe.expert_intermediate);
    (!has_bf16_table(experts, width, &hw.device_name)).then_some((experts, width))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_the_probe_ran_are_found_and_the_missing_ones_are_not() {
        // Qwen3-235B-A22B (128 experts of 1,536): TP8 has tables on the H100, H200 and A100; TP4
        // only on the H200. GLM-4.6 (160 of 1,536) at TP8 on neither (only the MI300X's, in 0.13).
        assert!(has_bf16_table(128, 192, "NVIDIA H100 80GB HBM3"));
        assert!(has_bf16_table(128, 192, "NVIDIA A100-SXM4-80GB"));
        assert!(has_bf16_table(128, 384, "NVIDIA H200"));
        assert!(!has_bf16_table(128, 384, "NVIDIA H100 80GB HBM3"));
        assert!(!has_bf16_table(160, 192, "NVIDIA H200"));
        assert!(has_bf16_table(160, 192, "AMD Instinct MI300X"));
        // Every H200 variant reads the H200's tables.
        assert!(has_bf16_table(128, 192, "NVIDIA H200 NVL"));
        assert!(!has_bf16_table(128, 192, "NVIDIA GB10"));
    }

    #[test]
    fn releases_from_0_17_run_the_newer_default_tiles() {
        assert_eq!(default_tile_rate(None), DEFAULT_TILE_RATE);
        assert_eq!(default_tile_rate(Some((0, 13))), DEFAULT_TILE_RATE);
        assert_eq!(default_tile_rate(Some((0, 16))), DEFAULT_TILE_RATE);
        assert_eq!(default_tile_rate(Some((0, 17))), NEWER_DEFAULT_TILE_RATE);
        assert_eq!(default_tile_rate(Some((1, 0))), NEWER_DEFAULT_TILE_RATE);
    }

    #[test]
    fn every_line_names_a_shape_and_a_device() {
        let shapes: Vec<&str> = TABLES.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
        assert!(shapes.len() > 100, "{}", shapes.len());
        for l in shapes {
            let parts: Vec<&str> = l.split(',').collect();
            assert!(parts.len() == 3 && parts[0].starts_with("E=") && parts[1].starts_with("N="), "{l}");
            assert!(parts[0][2..].parse::<u32>().is_ok() && parts[1][2..].parse::<u32>().is_ok(), "{l}");
            assert!(parts[2].starts_with("device_name=") && !parts[2].contains(' '), "{l}");
        }
    }
}
