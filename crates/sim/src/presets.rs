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

const HARDWARE: [(&str, &str); 23] = embedded!("hardware":
    "h100-sxm.toml", "h100-pcie.toml", "h100-nvl.toml", "h800.toml", "h200.toml", "h200-nvl.toml", "b200.toml", "gb200.toml", "b300.toml", "gb300.toml", "a100-80g.toml", "a100-40g.toml",
    "l40s.toml", "l4.toml", "rtx-4090.toml", "rtx-5090.toml", "rtx-pro-6000.toml", "dgx-spark.toml",
    "jetson-agx-thor.toml",
    "mi300x.toml", "mi325x.toml", "mi350x.toml", "mi355x.toml",
);

const MODELS: [(&str, &str); 84] = embedded!("models":
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
    "qwen2.5-7b-instruct.toml", "qwen2.5-14b-instruct.toml", "qwen2.5-32b-instruct.toml", "qwq-32b.toml", "deepseek-r1-distill-qwen-7b.toml",
    "deepseek-r1-distill-qwen-14b.toml", "deepseek-r1-distill-qwen-32b.toml", "deepseek-r1-distill-llama-8b.toml", "deepseek-r1-distill-llama-70b.toml", "llama-3.1-405b-instruct.toml",
    "mistral-7b-instruct-v0.3.toml", "mixtral-8x7b-instruct-v0.1.toml", "qwen2.5-vl-7b-instruct.toml", "qwen3-vl-8b-instruct.toml", "phi-4-reasoning-plus.toml",
    "llama-3-8b-instruct.toml", "llama-3-70b-instruct.toml", "qwen2.5-0.5b-instruct.toml", "qwen2.5-1.5b-instruct.toml",
    "qwen2.5-3b-instruct.toml", "gemma-2-2b-it.toml", "gemma-2-9b-it.toml", "gemma-2-27b-it.toml",
    "glm-4.5.toml", "kimi-k2-thinking.toml", "kimi-k2-instruct-0905.toml", "qwen3-4b-2507.toml",
    "qwen3-30b-a3b-2507.toml", "qwen3-235b-a22b-2507.toml", "deepseek-r1-distill-qwen-1.5b.toml",
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
            SimError::UnknownHardware {
                name: name.to_string(),
                nearest: did_you_mean(self.hardware.iter().map(|h| (h.nearness(name), h.name.as_str()))),
                known: self.hardware.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", "),
                user_dir: self.user_dir_hint(),
            }
        })
    }

    /// A model preset by Hugging Face id or one of its aliases; else by the part of one after
    /// the organisation, when one preset has it; else by the presets whose names, read without
    /// their quantization tags (`-FP8`, `-FP8-dynamic`, `-NVFP4`, `-AWQ`, `-GPTQ-Int4`, ...), have
    /// all of the name's other parts in order and leave out only release tags, sizes, expert
    /// counts and their organisation's name (`Llama-3.3-70B-NVFP4` for
    /// `nvidia/Llama-3.3-70B-Instruct-NVFP4`: how people shorten a name in their notes; never
    /// `GLM-4.5` for `GLM-4.5-Air`), given they are all one shape; a name that fits none so is
    /// tried without its release tags (`Qwen/Qwen3-8B-Base` is `Qwen/Qwen3-8B`'s shapes, with
    /// that preset's context length; a release whose context differs has its own preset, as
    /// `Qwen/Qwen3-235B-A22B-Instruct-2507` has).
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
        let short = |n: &str| n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase();
        let query = short(id);
        let query_sizes = sizes(&query);
        let unknown = || SimError::UnknownModel {
            name: id.to_string(),
            // By the names after their organisations (`Llama-3.1-8B-Instuct` is near
            // `meta-llama/Llama-3.1-8B-Instruct`), of the same sizes: `Qwen3-2B` is no typo of
            // `Qwen3-32B`.
            nearest: did_you_mean(self.models.iter().map(|m| {
                let near = names(m)
                    .map(short)
                    .filter(|n| sizes(n) == query_sizes)
                    .map(|n| strsim::normalized_levenshtein(&n, &query))
                    .fold(0.0, f64::max);
                (near, m.id.as_str())
            })),
            known: ids(self.models.iter()),
            user_dir: self.user_dir_hint(),
        };
        let named: Vec<&ModelShape> = self.models.iter().filter(|m| names(m).any(|n| short(n) == query)).collect();
        if let [m] = named.as_slice() {
            return Ok((*m).clone());
        }
        let Some(asked) = NameParts::read(&query) else { return Err(unknown()) };
        // Every preset with its names read once: their bases, and whether one has no tag.
        let readings: Vec<(&ModelShape, Vec<NameParts>)> =
            self.models.iter().map(|m| (m, names(m).filter_map(NameParts::read_id).collect())).collect();
        // The presets whose names fit `parts`: those of the same base, else those whose base
        // has all of its parts in order and leaves out only parts that name no other model.
        let fitting = |parts: &[&str]| -> Vec<&(&ModelShape, Vec<NameParts>)> {
            let exact: Vec<_> = readings.iter().filter(|(_, r)| r.iter().any(|n| n.base == parts)).collect();
            if !exact.is_empty() || parts.len() < 2 {
                return exact;
            }
            readings.iter().filter(|(_, r)| r.iter().any(|n| n.shortened_to(parts))).collect()
        };
        let parts: Vec<&str> = asked.base.iter().map(String::as_str).collect();
        let mut fits = fitting(&parts);
        // A release's tags that leave the shapes as they were (`-Instruct-2507`, `-0528`,
        // `-Thinking`): tried without them when the whole name fits nothing.
        let plain: Vec<&str> = parts.iter().copied().filter(|p| !is_release_tag(p)).collect();
        if fits.is_empty() && plain.len() >= 2 && plain.len() < parts.len() {
            fits = fitting(&plain);
        }
        let Some((first, _)) = fits.first() else {
            // A name whose other parts fit a preset but say its weights are in a format the
            // simulator does not price (`-Int8`, `-GGUF`, `-bnb-4bit`): told so, with the shapes.
            let (formats, rest): (Vec<&str>, Vec<&str>) = parts.iter().partition(|p| is_unpriced_format(p));
            let mut shapes = fitting(&rest);
            if shapes.is_empty() {
                shapes = fitting(&rest.iter().copied().filter(|p| !is_release_tag(p)).collect::<Vec<_>>());
            }
            return Err(match shapes.first() {
                Some((m, _)) if !formats.is_empty() && asked.precision.is_none() => SimError::UnpricedFormat {
                    name: id.to_string(),
                    shapes: m.id.clone(),
                    formats: formats.join("-"),
                    priced: Precision::ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", "),
                },
                _ => unknown(),
            });
        };
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

/// " (did you mean A or B?)" for the names scored nearest (1 the same, 0 nothing alike), every
/// one that ties, when the nearest is within a keystroke or two (0.75); else nothing.
fn did_you_mean<'a>(scored: impl Iterator<Item = (f64, &'a str)>) -> String {
    let scored: Vec<(f64, &str)> = scored.collect();
    let best = scored.iter().map(|(n, _)| *n).fold(0.0, f64::max);
    if best < 0.75 {
        return String::new();
    }
    let nearest: Vec<&str> = scored.iter().filter(|(n, _)| *n == best).map(|(_, name)| *name).collect();
    format!(" (did you mean {}?)", nearest.join(" or "))
}

/// The parts of a model's name that give its size in parameters (`32b`, `8x7b`, `a22b`, `1.7b`).
fn sizes(name: &str) -> Vec<&str> {
    name.split('-')
        .filter(|p| {
            p.strip_suffix('b').is_some_and(|n| {
                n.chars().any(|c| c.is_ascii_digit()) && n.chars().all(|c| c.is_ascii_digit() || "x.a".contains(c))
            })
        })
        .collect()
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
/// that say how its weights are quantized, and the format those tags name; and, for a preset's
/// name, its organisation's parts (`nvidia`, `meta`, `llama`).
#[derive(Debug, PartialEq)]
struct NameParts {
    base: Vec<String>,
    precision: Option<Precision>,
    org: Vec<String>,
}

impl NameParts {
    /// A preset's id or alias, organisation and all.
    fn read_id(id: &str) -> Option<NameParts> {
        let (org, name) = id.rsplit_once('/').unwrap_or(("", id));
        let org = org.to_ascii_lowercase().split('-').filter(|p| !p.is_empty()).map(str::to_string).collect();
        Some(NameParts { org, ..NameParts::read(&name.to_ascii_lowercase())? })
    }

    /// Whether `parts` is this name shortened as people shorten one in their notes: its parts
    /// in order, leaving out only what names no other model: a release's tags (`Instruct`,
    /// `2507`), sizes (`17B`, `A22B`), expert counts (`16E`) and the organisation's own name
    /// (`NVIDIA-`). A word that tells a model from its siblings (`Air`, `Mini`, `VL`, `Coder`,
    /// `Scout`) is never left out: `GLM-4.5` is not `GLM-4.5-Air`.
    fn shortened_to(&self, parts: &[&str]) -> bool {
        let droppable = |h: &str| {
            is_release_tag(h)
                || !sizes(h).is_empty()
                || h.strip_suffix('e').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                || self.org.iter().any(|o| o == h)
        };
        let mut want = parts.iter().peekable();
        for h in &self.base {
            if want.peek().is_some_and(|p| **p == h) {
                want.next();
            } else if !droppable(h) {
                return false;
            }
        }
        want.peek().is_none()
    }

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
        // (`-AWQ-4bit`), the tool that quantized it (Intel's `-int4-AutoRound`,
        // `-int4-mixed-AutoRound`) and the 8-bit share of a mix (QuantTrio's
        // `-GPTQ-Int4-Int8Mix`, some layers kept at 8 bits: priced as its 4-bit format, which
        // undercounts those layers' bytes; small beside a mixture of experts' experts) are no
        // part of the base.
        if precision.is_some() {
            let digits_between = |p: &str, suffix: &str, prefix: &str| {
                p.strip_suffix(suffix)
                    .and_then(|n| n.strip_prefix(prefix))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            };
            base.retain(|p| {
                !matches!(p.as_str(), "dynamic" | "static" | "block" | "autoround" | "mixed")
                    && !digits_between(p, "bit", "")
                    && !digits_between(p, "mix", "int")
            });
        }
        Some(NameParts { base, precision, org: Vec::new() })
    }
}

/// Whether a part of a model's name marks a release or tuning of the same weights' shapes:
/// `instruct`, `chat`, `it`, `base`, `pt` (Gemma's pretrained), `thinking`, a tuning for pooling
/// (`embedding`, `reranker`: Qwen3-Embedding-8B is Qwen3-8B's shapes), or a four-digit date
/// (`2507`, `0528`).
fn is_release_tag(part: &str) -> bool {
    matches!(part, "instruct" | "chat" | "it" | "base" | "pt" | "thinking" | "embedding" | "reranker")
        || (part.len() == 4 && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a part of a model's name says its weights are quantized in a format the simulator
/// does not price: 8-bit integers (`int8`, `w8a8`, `w8a16`), llama.cpp's, MLX's and ExLlama's
/// files (`gguf`, `mlx`, `exl2`, `exl3`), bitsandbytes (`bnb`, `nf4`), HQQ, or a bare bit width
/// (`4bit`) beside one of them.
fn is_unpriced_format(part: &str) -> bool {
    // RedHat's `-quantized.w8a8`.
    let part = part.strip_prefix("quantized.").unwrap_or(part);
    matches!(part, "int8" | "w8a8" | "w8a16" | "gguf" | "mlx" | "exl2" | "exl3" | "bnb" | "nf4" | "hqq")
        || part.strip_suffix("bit").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `$SERVEBENCH_PRESETS`, else `$HOME/.config/servebench/presets`.
pub fn default_user_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SERVEBENCH_PRESETS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config/servebench/presets"))
}

#[cfg(test)]
mod tests;
