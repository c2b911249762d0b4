//! The preset registry: hardware and model presets embedded in the binary, plus the user's own
//! from `$SERVEBENCH_PRESETS` or `~/.config/servebench/presets` (`hardware/*.toml`,
//! `models/*.toml`). A user preset with the same name replaces the embedded one. Lookups are
//! case-insensitive; a model may also be named by the part after its organisation
//! (`qwen3-8b` for `Qwen/Qwen3-8B`) when that is unambiguous.

use std::path::{Path, PathBuf};

use crate::error::SimError;
use crate::hardware::HardwareSpec;
use crate::model::ModelShape;
use crate::precision::Precision;

macro_rules! embedded {
    ($dir:literal: $($file:literal),* $(,)?) => {
        [$(($file, include_str!(concat!("../presets/", $dir, "/", $file)))),*]
    };
}

const HARDWARE: [(&str, &str); 20] = embedded!("hardware":
    "h100-sxm.toml", "h100-pcie.toml", "h100-nvl.toml", "h200.toml", "h200-nvl.toml", "b200.toml", "gb200.toml", "b300.toml", "gb300.toml", "a100-80g.toml",
    "l40s.toml", "l4.toml", "rtx-4090.toml", "rtx-5090.toml", "rtx-pro-6000.toml", "dgx-spark.toml",
    "jetson-agx-thor.toml",
    "mi300x.toml", "mi325x.toml", "mi355x.toml",
);

const MODELS: [(&str, &str); 54] = embedded!("models":
    "qwen3-0.6b.toml", "qwen3-1.7b.toml", "qwen3-4b.toml", "qwen3-8b.toml", "qwen3-14b.toml", "qwen3-32b.toml",
    "llama-3.2-1b.toml", "llama-3.2-3b.toml", "llama-3.1-8b-instruct.toml", "gemma-3-1b-it.toml", "gemma-3-4b-it.toml",
    "gemma-3-12b-it.toml", "phi-4.toml", "phi-4-mini-instruct.toml",
    "qwen3-vl-32b-instruct-fp8.toml", "qwen3-vl-235b-a22b-instruct-fp8.toml",
    "qwen3-vl-235b-a22b-instruct-awq.toml", "gpt-oss-20b.toml", "gpt-oss-120b.toml",
    "glm-4.6.toml", "glm-4.6-fp8.toml", "glm-4.5-air.toml", "llama-4-scout-17b-16e-instruct-nvfp4.toml",
    "llama-3.3-70b-instruct-nvfp4.toml", "llama-3.1-70b-instruct.toml", "llama-3.1-70b-instruct-fp8.toml",
    "qwen3-30b-a3b.toml", "qwen3-30b-a3b-fp8.toml", "qwen3-235b-a22b.toml", "qwen3-235b-a22b-fp8.toml",
    "deepseek-r1.toml", "kimi-k2-instruct.toml", "minimax-m2.toml", "qwen3-coder-30b-a3b-instruct.toml",
    "qwen3-next-80b-a3b-instruct.toml", "qwen3.5-35b-a3b.toml", "qwen3.5-122b-a10b.toml", "qwen3.5-397b-a17b.toml",
    "gemma-3-27b-it.toml", "qwen3-vl-30b-a3b-instruct.toml", "mistral-small-3.2-24b-instruct.toml",
    "qwen2.5-72b-instruct.toml", "nemotron-3-nano-30b-a3b.toml", "nemotron-nano-9b-v2.toml",
    "nemotron-3-super-120b-a12b.toml", "deepseek-v3.2.toml", "glm-5.toml",
    "kimi-k2.5.toml", "qwen3.5-9b.toml", "qwen3.5-27b.toml", "glm-5.2.toml",
    "qwen3-coder-480b-a35b-instruct.toml", "llama-4-maverick-17b-128e-instruct.toml", "mistral-large-instruct-2411.toml",
);

/// Hardware and model presets available by name.
#[derive(Clone, Debug)]
pub struct Presets {
    hardware: Vec<HardwareSpec>,
    models: Vec<ModelShape>,
    user_dir: Option<PathBuf>,
}

impl Presets {
    /// Only the presets built into the binary.
    pub fn embedded() -> Result<Self, SimError> {
        let mut p = Presets { hardware: Vec::new(), models: Vec::new(), user_dir: None };
        for (file, text) in HARDWARE {
            p.add_hardware(HardwareSpec::from_toml(text, &format!("(built-in) {file}"))?);
        }
        for (file, text) in MODELS {
            p.add_model(ModelShape::from_toml(text, &format!("(built-in) {file}"))?);
        }
        Ok(p)
    }

    /// The built-in presets plus those of the user directory, if it exists.
    pub fn load_default() -> Result<Self, SimError> {
        let p = Self::embedded()?;
        match default_user_dir() {
            Some(dir) if dir.is_dir() => p.with_user_dir(&dir),
            _ => Ok(p),
        }
    }

    /// Adds every `hardware/*.toml` and `models/*.toml` under `dir` (a missing subfolder is fine).
    pub fn with_user_dir(mut self, dir: &Path) -> Result<Self, SimError> {
        for sub in ["hardware", "models"] {
            let folder = dir.join(sub);
            if !folder.is_dir() {
                continue;
            }
            let listing = std::fs::read_dir(&folder)
                .map_err(|e| SimError::PresetDir { path: folder.display().to_string(), message: e.to_string() })?;
            let mut files: Vec<PathBuf> = listing
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for file in files {
                let origin = file.display().to_string();
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| SimError::Preset { origin: origin.clone(), message: e.to_string() })?;
                if sub == "hardware" {
                    self.add_hardware(HardwareSpec::from_toml(&text, &origin)?);
                } else {
                    self.add_model(ModelShape::from_toml(&text, &origin)?);
                }
            }
        }
        self.user_dir = Some(dir.to_path_buf());
        Ok(self)
    }

    fn add_hardware(&mut self, hw: HardwareSpec) {
        self.hardware.retain(|h| !h.name.eq_ignore_ascii_case(&hw.name));
        self.hardware.push(hw);
    }

    fn add_model(&mut self, m: ModelShape) {
        self.models.retain(|x| !x.id.eq_ignore_ascii_case(&m.id));
        self.models.push(m);
    }

    /// Every hardware preset, in load order.
    pub fn hardware_presets(&self) -> &[HardwareSpec] {
        &self.hardware
    }

    /// Every model preset, in load order.
    pub fn model_presets(&self) -> &[ModelShape] {
        &self.models
    }

    /// The user preset directory that was read, if any.
    pub fn user_dir(&self) -> Option<&Path> {
        self.user_dir.as_deref()
    }

    fn user_dir_hint(&self) -> String {
        self.user_dir
            .clone()
            .or_else(default_user_dir)
            .map_or_else(|| "~/.config/servebench/presets".to_string(), |d| d.display().to_string())
    }

    /// A hardware preset by name or alias.
    pub fn hardware(&self, name: &str) -> Result<&HardwareSpec, SimError> {
        self.hardware.iter().find(|h| h.matches(name)).ok_or_else(|| {
            // The presets a keystroke or two from the name (`mi300`, `h100-80gb`) are offered.
            let near: Vec<(f64, &str)> = self.hardware.iter().map(|h| (h.nearness(name), h.name.as_str())).collect();
            let best = near.iter().map(|(n, _)| *n).fold(0.0, f64::max);
            let nearest: Vec<&str> = near.iter().filter(|(n, _)| best >= 0.75 && *n == best).map(|(_, h)| *h).collect();
            SimError::UnknownHardware {
                name: name.to_string(),
                nearest: if nearest.is_empty() {
                    String::new()
                } else {
                    format!(" (did you mean {}?)", nearest.join(" or "))
                },
                known: self.hardware.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", "),
                user_dir: self.user_dir_hint(),
            }
        })
    }

    /// A model preset by Hugging Face id or one of its aliases; else by the part of one after
    /// the organisation, when one preset has it; else by the presets whose names, read without
    /// their quantization tags (`-FP8`, `-FP8-dynamic`, `-NVFP4`, `-AWQ`, `-GPTQ-Int4`, ...), have
    /// all of the name's other parts in order (`Llama-3.3-70B-NVFP4` for
    /// `nvidia/Llama-3.3-70B-Instruct-NVFP4`: how people shorten a name in their notes), given
    /// they are all one shape; a name that fits none so is tried without its release tags
    /// (`Qwen3-235B-A22B-Instruct-2507-FP8` is `Qwen/Qwen3-235B-A22B-FP8`'s shapes, with that
    /// preset's context length).
    ///
    /// The weights are in the format the name's tag says, or, with no tag, the untagged preset's
    /// (gpt-oss's MXFP4, DeepSeek-R1's FP8), else BF16, what a checkpoint is released in unless
    /// its name says otherwise. Where no preset of those shapes is in that format, the shapes are
    /// taken in it under the name asked for, with [`ModelShape::derived_from`] naming the
    /// preset (`meta-llama/Llama-3.3-70B-Instruct` is the NVFP4 preset's shapes in BF16). A name
    /// that fits presets of different shapes is refused with them.
    pub fn model(&self, id: &str) -> Result<ModelShape, SimError> {
        fn names(m: &ModelShape) -> impl Iterator<Item = &str> {
            std::iter::once(m.id.as_str()).chain(m.aliases.iter().map(String::as_str))
        }
        fn ids<'a>(models: impl Iterator<Item = &'a ModelShape>) -> String {
            models.map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
        }
        let id = id.trim();
        if let Some(m) = self.models.iter().find(|m| names(m).any(|n| n.eq_ignore_ascii_case(id))) {
            return Ok(m.clone());
        }
        let unknown = || SimError::UnknownModel {
            name: id.to_string(),
            known: ids(self.models.iter()),
            user_dir: self.user_dir_hint(),
        };
        let short = |n: &str| n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase();
        let query = short(id);
        let named: Vec<&ModelShape> = self.models.iter().filter(|m| names(m).any(|n| short(n) == query)).collect();
        if let [m] = named.as_slice() {
            return Ok((*m).clone());
        }
        let Some(asked) = NameParts::read(&query) else { return Err(unknown()) };
        // Every preset with its names read once: their bases, and whether one has no tag.
        let readings: Vec<(&ModelShape, Vec<NameParts>)> =
            self.models.iter().map(|m| (m, names(m).filter_map(|n| NameParts::read(&short(n))).collect())).collect();
        // The presets whose names fit `parts`: those of the same base, else those whose base
        // has all of its parts in order.
        let fitting = |parts: &[&str]| -> Vec<&(&ModelShape, Vec<NameParts>)> {
            let exact: Vec<_> = readings.iter().filter(|(_, r)| r.iter().any(|n| n.base == parts)).collect();
            if !exact.is_empty() || parts.len() < 2 {
                return exact;
            }
            let in_order = |n: &NameParts| {
                let mut have = n.base.iter();
                parts.iter().all(|p| have.any(|h| h == p))
            };
            readings.iter().filter(|(_, r)| r.iter().any(in_order)).collect()
        };
        let parts: Vec<&str> = asked.base.iter().map(String::as_str).collect();
        let mut fits = fitting(&parts);
        // A release's tags that leave the shapes as they were (`-Instruct-2507`, `-0528`,
        // `-Thinking`): tried without them when the whole name fits nothing.
        let plain: Vec<&str> = parts.iter().copied().filter(|p| !is_release_tag(p)).collect();
        if fits.is_empty() && plain.len() >= 2 && plain.len() < parts.len() {
            fits = fitting(&plain);
        }
        let Some((first, _)) = fits.first() else { return Err(unknown()) };
        if fits.iter().any(|(m, _)| !same_shapes(m, first)) {
            return Err(SimError::AmbiguousModel { name: id.to_string(), fits: ids(fits.iter().map(|(m, _)| *m)) });
        }
        let untagged = || fits.iter().find(|(_, r)| r.iter().any(|n| n.precision.is_none())).map(|(m, _)| m.precision);
        let precision = asked.precision.or_else(untagged).unwrap_or(Precision::Bf16);
        if let Some((m, _)) = fits.iter().find(|(m, _)| m.precision == precision) {
            return Ok((*m).clone());
        }
        Ok(ModelShape {
            id: id.to_string(),
            aliases: Vec::new(),
            precision,
            attention_precision: None,
            derived_from: Some(first.id.clone()),
            ..(*first).clone()
        })
    }
}

/// Whether two presets differ only in their names and weight format.
fn same_shapes(a: &ModelShape, b: &ModelShape) -> bool {
    let plain = |m: &ModelShape| ModelShape {
        id: String::new(),
        aliases: Vec::new(),
        precision: Precision::Bf16,
        attention_precision: None,
        derived_from: None,
        ..m.clone()
    };
    plain(a) == plain(b)
}

/// A model name's `-`-separated parts (lowercase, after its organisation) without the tags
/// that say how its weights are quantized, and the format those tags name.
#[derive(Debug, PartialEq)]
struct NameParts {
    base: Vec<String>,
    precision: Option<Precision>,
}

impl NameParts {
    /// None for a name whose tags name two formats (`-FP8-AWQ`).
    fn read(name: &str) -> Option<NameParts> {
        let mut base = Vec::new();
        let mut precision = None;
        for part in name.split('-').filter(|p| !p.is_empty()) {
            // RedHat's `-quantized.w4a16`.
            let tag = part.strip_prefix("quantized.").unwrap_or(part);
            match Precision::from_name_tag(tag) {
                Some(p) if precision.is_some_and(|q| q != p) => return None,
                Some(p) => precision = Some(p),
                None => base.push(part.to_string()),
            }
        }
        // How a tag's scales are taken (`-FP8-Dynamic`, `-FP8-block`), its bit width
        // (`-AWQ-4bit`) and the tool that quantized it (Intel's `-int4-AutoRound`,
        // `-int4-mixed-AutoRound`) are no part of the base.
        if precision.is_some() {
            let bit_width =
                |p: &str| p.strip_suffix("bit").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            base.retain(|p| {
                !matches!(p.as_str(), "dynamic" | "static" | "block" | "autoround" | "mixed") && !bit_width(p)
            });
        }
        Some(NameParts { base, precision })
    }
}

/// Whether a part of a model's name marks a release or tuning of the same weights' shapes:
/// `instruct`, `chat`, `it`, `base`, `thinking`, or a four-digit date (`2507`, `0528`).
fn is_release_tag(part: &str) -> bool {
    matches!(part, "instruct" | "chat" | "it" | "base" | "thinking")
        || (part.len() == 4 && part.bytes().all(|b| b.is_ascii_digit()))
}

/// `$SERVEBENCH_PRESETS`, else `$HOME/.config/servebench/presets`.
pub fn default_user_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SERVEBENCH_PRESETS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config/servebench/presets"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::precision::Precision;

    #[test]
    fn hardware_is_found_by_device_name_and_any_word_separator_but_never_guessed() {
        let p = Presets::embedded().unwrap();
        for (given, preset) in [
            ("NVIDIA H100 80GB HBM3", "h100-sxm"),
            ("H100_SXM", "h100-sxm"),
            ("h100 sxm", "h100-sxm"),
            ("NVIDIA B200", "b200"),
            ("AMD Instinct MI300X", "mi300x"),
            ("  MI355X ", "mi355x"),
            ("NVIDIA H100 PCIe", "h100-pcie"),
            ("NVIDIA H100 NVL", "h100-nvl"),
            ("NVIDIA H200 NVL", "h200-nvl"),
            ("NVIDIA DGX Spark", "dgx-spark"),
            ("DGX Spark", "dgx-spark"),
        ] {
            assert_eq!(p.hardware(given).unwrap().name, preset, "{given:?}");
        }
        for unknown in ["h100-nvl-pcie", "h20", "b2000", "nvidia", ""] {
            assert!(p.hardware(unknown).is_err(), "{unknown:?} is no preset");
        }
    }

    #[test]
    fn every_embedded_preset_parses_and_is_found_by_name() {
        let p = Presets::embedded().unwrap();
        assert_eq!(p.hardware_presets().len(), HARDWARE.len());
        assert_eq!(p.model_presets().len(), MODELS.len());
        for hw in p.hardware_presets() {
            assert_eq!(p.hardware(&hw.name.to_uppercase()).unwrap().name, hw.name);
        }
        for m in p.model_presets() {
            assert_eq!(p.model(&m.id.to_lowercase()).unwrap().id, m.id);
        }
        assert_eq!(p.model("qwen3-8b").unwrap().id, "Qwen/Qwen3-8B");
        assert_eq!(p.hardware("GB10").unwrap().name, "dgx-spark");
    }

    #[test]
    fn model_presets_match_published_parameter_counts() {
        // (id, total B, active B) as published, embeddings counted once per matrix.
        let published = [
            ("Qwen/Qwen3-0.6B", 0.60, 0.60),
            ("Qwen/Qwen3-4B", 4.02, 4.02),
            ("meta-llama/Llama-3.2-1B", 1.24, 1.24),
            ("meta-llama/Llama-3.2-3B", 3.21, 3.21),
            ("meta-llama/Llama-3.1-8B-Instruct", 8.03, 8.03),
            ("google/gemma-3-1b-it", 1.00, 1.00),
            ("google/gemma-3-12b-it", 11.76, 11.76),
            ("microsoft/phi-4", 14.66, 14.66),
            ("microsoft/Phi-4-mini-instruct", 3.84, 3.84),
            ("nvidia/Llama-3.3-70B-Instruct-NVFP4", 70.55, 70.55),
            ("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", 235.1, 22.2),
            ("openai/gpt-oss-20b", 20.9, 4.19),
            ("openai/gpt-oss-120b", 116.8, 5.71),
            ("zai-org/GLM-4.6-FP8", 352.8, 33.6),
            ("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", 107.8, 17.2),
            ("meta-llama/Llama-3.1-70B-Instruct", 70.55, 70.55),
            ("nvidia/Llama-3.1-70B-Instruct-FP8", 70.55, 70.55),
            ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
            ("Qwen/Qwen3-30B-A3B-FP8", 30.5, 3.3),
            ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
            ("Qwen/Qwen3-235B-A22B-FP8", 235.1, 22.2),
            // 671 B without the multi-token-prediction layer, 37 B active.
            ("deepseek-ai/DeepSeek-R1", 671.0, 37.0),
            // Without their multi-token-prediction modules.
            ("moonshotai/Kimi-K2-Instruct", 1026.0, 32.9),
            // 230 B published; its "10 B activated" leaves out the 1.2 B of the embeddings.
            ("MiniMaxAI/MiniMax-M2", 228.7, 11.0),
            ("Qwen/Qwen3-Coder-30B-A3B-Instruct", 30.5, 3.3),
            // The language models (their vision towers, about 0.5 B, take memory only).
            ("Qwen/Qwen3.5-397B-A17B", 397.0, 17.0),
            ("Qwen/Qwen3.5-122B-A10B", 122.0, 10.0),
            // The language models of 27.4 B, 31.1 B and 24.0 B published with their vision towers.
            ("google/gemma-3-27b-it", 27.0, 27.0),
            ("Qwen/Qwen3-VL-30B-A3B-Instruct", 30.5, 3.3),
            ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", 23.6, 23.6),
            ("Qwen/Qwen2.5-72B-Instruct", 72.7, 72.7),
            ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480.0, 35.0),
            // The language model: 400 B in all, 17 B active (its vision tower takes memory only).
            ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400.0, 17.0),
            ("mistralai/Mistral-Large-Instruct-2411", 123.0, 123.0),
        ];
        let p = Presets::embedded().unwrap();
        for (id, total, active) in published {
            let m = p.model(id).unwrap();
            let t = m.total_params() / 1e9;
            let a = m.active_params() / 1e9;
            assert!((t / total - 1.0).abs() < 0.02, "{id}: total {t:.2} B vs {total}");
            assert!((a / active - 1.0).abs() < 0.03, "{id}: active {a:.2} B vs {active}");
        }
        // Published as totals, their active counts only rounded in their names (A3B).
        for (id, total) in [("Qwen/Qwen3-Next-80B-A3B-Instruct", 80.0), ("Qwen/Qwen3.5-35B-A3B", 35.0)] {
            let t = p.model(id).unwrap().total_params() / 1e9;
            assert!((t / total - 1.0).abs() < 0.02, "{id}: total {t:.2} B vs {total}");
        }
        // The dense Qwen3.5 models, named for their language models (the vision tower apart).
        for (id, named) in [("Qwen/Qwen3.5-9B", 9.0), ("Qwen/Qwen3.5-27B", 27.0)] {
            let m = p.model(id).unwrap();
            let t = m.total_params() / 1e9;
            assert!((t / named - 1.0).abs() < 0.02, "{id}: language model {t:.2} B vs {named}");
            assert_eq!(m.active_params(), m.total_params(), "{id} is dense");
        }
    }

    #[test]
    fn fp8_variants_keep_the_shape_of_their_base_model() {
        let p = Presets::embedded().unwrap();
        for (base, fp8) in [
            ("meta-llama/Llama-3.1-70B-Instruct", "nvidia/Llama-3.1-70B-Instruct-FP8"),
            ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-FP8"),
            ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8"),
        ] {
            let (b, f) = (p.model(base).unwrap(), p.model(fp8).unwrap());
            assert_eq!((b.precision, f.precision), (Precision::Bf16, Precision::Fp8), "{fp8}");
            assert!(same_shapes(&b, &f), "{fp8}");
        }
        let r1 = p.model("DeepSeek-R1").unwrap();
        assert!(r1.mla.is_some() && r1.precision == Precision::Fp8);
    }

    #[test]
    fn a_model_is_found_by_its_aliases_which_name_no_other_preset() {
        let p = Presets::embedded().unwrap();
        for alias in ["nvidia/Llama-3.3-70B-Instruct-FP4", "redhatai/llama-3.3-70b-instruct-nvfp4"] {
            assert_eq!(p.model(alias).unwrap().id, "nvidia/Llama-3.3-70B-Instruct-NVFP4", "{alias}");
        }
        let names: Vec<String> =
            p.models.iter().flat_map(|m| std::iter::once(&m.id).chain(&m.aliases)).map(|n| n.to_lowercase()).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name is given to two presets");
    }

    #[test]
    fn unknown_names_list_the_known_presets() {
        let p = Presets::embedded().unwrap();
        let err = p.hardware("tpu-v5").unwrap_err().to_string();
        assert!(err.contains("tpu-v5") && err.contains("h100-sxm") && err.contains("mi300x"));
        let err = p.model("Qwen/Qwen9-1T").unwrap_err().to_string();
        assert!(err.contains("Qwen/Qwen3-8B") && err.contains("config.json"), "{err}");
    }

    #[test]
    fn a_shortened_name_finds_the_one_preset_it_fits() {
        let p = Presets::embedded().unwrap();
        for (name, id) in [
            ("gpt-oss-120b", "openai/gpt-oss-120b"),
            ("GLM-4.6", "zai-org/GLM-4.6"),
            ("Llama-3.3-70B-Instruct-FP4", "nvidia/Llama-3.3-70B-Instruct-NVFP4"),
            ("Llama-3.3-70B-NVFP4", "nvidia/Llama-3.3-70B-Instruct-NVFP4"),
            ("Llama-4-Scout-NVFP4", "nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4"),
            ("Qwen3-VL-235B-AWQ", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
            ("qwen3-vl-32b-fp8", "Qwen/Qwen3-VL-32B-Instruct-FP8"),
        ] {
            assert_eq!(p.model(name).unwrap().id, id, "{name}");
        }
        // A release's tags that keep the shapes are passed over when the whole name fits none.
        for (name, id) in [
            ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B-FP8"),
            ("Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-235B-A22B"),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
            ("Qwen3-30B-A3B-Instruct-2507-FP8", "Qwen/Qwen3-30B-A3B-FP8"),
        ] {
            assert_eq!(p.model(name).unwrap().id, id, "{name}");
        }
        assert!(p.model("Qwen/Qwen3-8B-Instruct-2507-Abliterated").is_err(), "a part no preset has still fits none");
        // Presets of different shapes fit (the VL model's vision tower): refused, with them.
        let err = p.model("Qwen3-235B").unwrap_err().to_string();
        assert!(
            err.contains("fits several") && err.contains("Qwen/Qwen3-235B-A22B-FP8") && !err.contains("Qwen3-8B"),
            "{err}"
        );
        // A part no preset has, one part alone, or tags of two formats: nothing.
        for name in ["Qwen3-8B-Int8", "Qwen3", "Qwen3-FP8", "Qwen3-8B-FP8-AWQ"] {
            assert!(p.model(name).is_err(), "{name}");
        }
    }

    #[test]
    fn a_name_s_quantization_tag_sets_the_weight_format_of_the_shapes_it_names() {
        let p = Presets::embedded().unwrap();
        let llama = p.model("nvidia/Llama-3.3-70B-Instruct-NVFP4").unwrap();
        // With no tag a checkpoint is its untagged preset's format, else BF16; a tag says it.
        for (name, from, precision) in [
            ("meta-llama/Llama-3.3-70B-Instruct", "nvidia/Llama-3.3-70B-Instruct-NVFP4", Precision::Bf16),
            ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "nvidia/Llama-3.3-70B-Instruct-NVFP4", Precision::Fp8),
            (
                "RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16",
                "nvidia/Llama-3.3-70B-Instruct-NVFP4",
                Precision::AwqInt4,
            ),
            ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", Precision::Fp8),
            ("Qwen/Qwen3-8B-AWQ", "Qwen/Qwen3-8B", Precision::AwqInt4),
            ("Qwen/Qwen3-14B-GPTQ-Int4", "Qwen/Qwen3-14B", Precision::AwqInt4),
            ("zai-org/GLM-4.5-Air-FP8", "zai-org/GLM-4.5-Air", Precision::Fp8),
            ("Qwen/Qwen3-VL-235B-A22B-Instruct", "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", Precision::Bf16),
            ("Qwen/Qwen3-VL-235B-A22B-Thinking", "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", Precision::Bf16),
            ("nvidia/Qwen3-235B-A22B-FP4", "Qwen/Qwen3-235B-A22B", Precision::Nvfp4),
            ("nvidia/DeepSeek-R1-0528-FP4", "deepseek-ai/DeepSeek-R1", Precision::Nvfp4),
            ("unsloth/gpt-oss-20b-BF16", "openai/gpt-oss-20b", Precision::Bf16),
            ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B-Instruct", Precision::Fp8),
            ("Qwen/Qwen3-VL-30B-A3B-Instruct-FP8", "Qwen/Qwen3-VL-30B-A3B-Instruct", Precision::Fp8),
            ("Qwen/Qwen2.5-72B-Instruct-AWQ", "Qwen/Qwen2.5-72B-Instruct", Precision::AwqInt4),
            ("Intel/Qwen3.5-397B-A17B-int4-AutoRound", "Qwen/Qwen3.5-397B-A17B", Precision::AwqInt4),
            ("Intel/Qwen3.5-122B-A10B-int4-mixed-AutoRound", "Qwen/Qwen3.5-122B-A10B", Precision::AwqInt4),
            ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct", Precision::Fp8),
            (
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
                Precision::Fp8,
            ),
            (
                "nvidia/Llama-4-Maverick-17B-128E-Instruct-FP4",
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
                Precision::Nvfp4,
            ),
        ] {
            let m = p.model(name).unwrap();
            let base = p.model(from).unwrap();
            assert_eq!((m.id.as_str(), m.derived_from.as_deref(), m.precision), (name, Some(from), precision));
            assert!(same_shapes(&m, &base) && m.aliases.is_empty(), "{name}");
        }
        assert_eq!(p.model("meta-llama/Llama-3.3-70B-Instruct").unwrap().layers, llama.layers);
        // A preset in the format asked for is that preset, whatever the tag's spelling.
        for (name, id) in [
            ("QuantTrio/GLM-4.6-FP8", "zai-org/GLM-4.6-FP8"),
            ("Qwen/Qwen3-VL-235B-A22B-Instruct-AWQ", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
            ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B"),
            ("Qwen3-235B-A22B-Instruct-2507-FP8-dynamic", "Qwen/Qwen3-235B-A22B-FP8"),
            ("cpatonn/Qwen3-VL-235B-A22B-Instruct-AWQ-4bit", "QuantTrio/Qwen3-VL-235B-A22B-Instruct-AWQ"),
        ] {
            let m = p.model(name).unwrap();
            assert_eq!((m.id.as_str(), m.derived_from), (id, None), "{name}");
        }
    }

    #[test]
    fn the_parts_of_a_model_s_name_are_read_apart_from_its_quantization_tags() {
        let read = |name: &str| NameParts::read(name).map(|n| (n.base.join("-"), n.precision));
        assert_eq!(
            read("llama-3.3-70b-instruct-fp8-dynamic"),
            Some(("llama-3.3-70b-instruct".into(), Some(Precision::Fp8)))
        );
        assert_eq!(read("qwen3-14b-gptq-int4"), Some(("qwen3-14b".into(), Some(Precision::AwqInt4))));
        assert_eq!(
            read("llama-3.3-70b-instruct-quantized.w4a16"),
            Some(("llama-3.3-70b-instruct".into(), Some(Precision::AwqInt4)))
        );
        assert_eq!(
            read("qwen3-vl-235b-a22b-instruct-awq-4bit"),
            Some(("qwen3-vl-235b-a22b-instruct".into(), Some(Precision::AwqInt4)))
        );
        // `dynamic` and a bit width are only a tag's qualifiers beside a tag.
        assert_eq!(read("some-dynamic-model"), Some(("some-dynamic-model".into(), None)));
        assert_eq!(read("some-model-4bit"), Some(("some-model-4bit".into(), None)));
        assert_eq!(read("qwen3-8b-fp8-awq"), None);
    }

    proptest::proptest! {
        #[test]
        fn a_tag_added_to_any_name_is_read_back_and_leaves_its_parts(
            parts in proptest::collection::vec("[a-z][a-z0-9.]{0,7}", 1..6),
            tag in proptest::sample::select(vec!["bf16", "fp16", "fp8", "nvfp4", "fp4", "mxfp4", "awq", "gptq", "int4", "w4a16"]),
            at in 0usize..6,
        ) {
            let parts: Vec<String> = parts.into_iter().filter(|p| Precision::from_name_tag(p).is_none()).collect();
            proptest::prop_assume!(!parts.is_empty() && !parts.iter().any(|p| p.starts_with("quantized.")));
            let plain = NameParts::read(&parts.join("-")).unwrap();
            proptest::prop_assert_eq!(&plain.base, &parts);
            proptest::prop_assert_eq!(plain.precision, None);
            let mut tagged = parts.clone();
            tagged.insert(at.min(parts.len()), tag.to_string());
            let read = NameParts::read(&tagged.join("-")).unwrap();
            proptest::prop_assert_eq!(read.precision, Precision::from_name_tag(tag));
            let kept: Vec<String> = parts.iter().filter(|p| !matches!(p.as_str(), "dynamic" | "static" | "block")).cloned().collect();
            proptest::prop_assert_eq!(read.base, kept);
        }
    }

    #[test]
    fn user_presets_are_added_and_replace_built_in_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("hardware")).unwrap();
        std::fs::create_dir_all(dir.join("models")).unwrap();
        let h100 = HARDWARE[0].1.replace("memory_gib = 79.2", "memory_gib = 70.0");
        std::fs::write(dir.join("hardware/mine.toml"), h100).unwrap();
        let tiny = MODELS[0].1.replace("Qwen/Qwen3-0.6B", "me/tiny");
        std::fs::write(dir.join("models/tiny.toml"), tiny).unwrap();
        let p = Presets::embedded().unwrap().with_user_dir(dir).unwrap();
        assert_eq!(p.hardware("h100-sxm").unwrap().memory_gib, 70.0);
        assert_eq!(p.hardware_presets().len(), HARDWARE.len());
        assert_eq!(p.model("ME/TINY").unwrap().layers, 28);
        std::fs::write(dir.join("models/broken.toml"), "id = 3").unwrap();
        let err = Presets::embedded().unwrap().with_user_dir(dir).unwrap_err().to_string();
        assert!(err.contains("broken.toml"), "{err}");
    }
}
