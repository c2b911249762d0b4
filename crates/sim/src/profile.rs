//! The serving-stack constants of the step-time model, in one struct a fitter can vary.
//!
//! A [`StackProfile`] holds every calibrated number of the cost model (efficiencies, fixed
//! overheads, the client-visible API delay, memory reserves, jitter). Hardware presets carry
//! defaults (priors for the device); a fitted profile file (TOML or JSON, any
//! subset of the fields) and `key=value` options override them, in that order.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::precision::PrecisionTable;

/// Every constant of the step-time model that is not read from a datasheet or config.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackProfile {
    /// What the constants were fitted on, e.g. `dgx-spark/vllm-0.11`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fraction of datasheet memory bandwidth reached by weight and KV reads.
    pub eta_bw: f64,
    /// Fraction of peak tensor throughput reached by prefill tokens, per compute format.
    pub eta_f_prefill: PrecisionTable,
    /// Fraction of peak reached by decode tokens (and the lm_head).
    pub eta_f_decode: PrecisionTable,
    /// Fraction of peak reached by MoE expert matrix products (both phases).
    pub eta_f_moe: PrecisionTable,
    /// Fixed cost of every step (scheduling, sampling, launch), ms.
    pub t0_ms: f64,
    /// Cost per transformer layer per step (kernel launches), µs.
    pub t_layer_us: f64,
    /// Cost per sequence in the batch (input preparation, detokenisation), µs.
    pub t_seq_us: f64,
    /// Cost per MoE layer per step (routing, permutation), µs.
    pub t_moe_us: f64,
    /// Delay between the client sending a request and the scheduler seeing it (HTTP, tokenising), ms.
    /// It lands in every TTFT.
    pub alpha_api_ms: f64,
    /// Latency of one tensor-parallel all-reduce, µs; unset takes the link's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_ar_us: Option<f64>,
    /// Memory kept for activations and CUDA graphs of a dense model, GiB per GPU.
    pub activation_reserve_gib: f64,
    /// The same for a mixture-of-experts model, GiB per GPU.
    pub activation_reserve_moe_gib: f64,
    /// Extra cost of a step that runs without CUDA graphs, ms (0 disables the rule).
    pub eager_ms: f64,
    /// Steps with more tokens than this run without graphs.
    pub graph_max_tokens: u32,
    /// Steps with a context longer than this run without graphs (0: no limit).
    pub graph_max_ctx: u32,
    /// σ of the lognormal factor applied to each step's duration (0: deterministic).
    pub jitter_sigma: f64,
}

impl Default for StackProfile {
    /// Generic priors for a datacenter GPU running vLLM V1 with CUDA graphs.
    fn default() -> Self {
        Self {
            name: None,
            eta_bw: 0.85,
            eta_f_prefill: PrecisionTable { bf16: 0.55, fp8: 0.5, fp4: 0.4 },
            eta_f_decode: PrecisionTable { bf16: 0.3, fp8: 0.25, fp4: 0.2 },
            eta_f_moe: PrecisionTable { bf16: 0.3, fp8: 0.25, fp4: 0.2 },
            t0_ms: 2.0,
            t_layer_us: 30.0,
            t_seq_us: 10.0,
            t_moe_us: 20.0,
            alpha_api_ms: 15.0,
            alpha_ar_us: None,
            activation_reserve_gib: 5.5,
            activation_reserve_moe_gib: 8.0,
            eager_ms: 0.0,
            graph_max_tokens: 512,
            graph_max_ctx: 0,
            jitter_sigma: 0.03,
        }
    }
}

/// Option keys that set a profile field (`eta-f-prefill` sets all formats, `eta-f-prefill.fp8` one).
pub const PROFILE_OPTION_KEYS: [&str; 17] = [
    "eta-bw",
    "eta-f-prefill",
    "eta-f-decode",
    "eta-f-moe",
    "t0-ms",
    "t-layer-us",
    "t-seq-us",
    "t-moe-us",
    "alpha-api-ms",
    "alpha-ar-us",
    "activation-reserve-gib",
    "activation-reserve-moe-gib",
    "eager-ms",
    "graph-max-tokens",
    "graph-max-ctx",
    "jitter-sigma",
    "jitter",
];

impl StackProfile {
    /// Overlays a partial profile (a JSON object with any subset of the fields; nested
    /// per-format tables may be partial too). Unknown fields and out-of-range values are errors.
    pub fn apply_patch(&mut self, patch: &serde_json::Value) -> Result<(), String> {
        let serde_json::Value::Object(_) = patch else {
            return Err("expected a table of constants".into());
        };
        let mut base = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        merge(&mut base, patch);
        let next: StackProfile = serde_json::from_value(base).map_err(|e| e.to_string())?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Reads a fitted profile file (`.json`, else TOML) and overlays it.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), SimError> {
        let bad = |message: String| SimError::Profile { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let value: serde_json::Value = if is_json {
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?
        } else {
            toml::from_str(&text).map_err(|e| bad(e.to_string()))?
        };
        self.apply_patch(&value).map_err(bad)
    }

    /// Sets one field from an option (`t0-ms=3`, `eta-f-prefill.fp8=0.6`, `jitter=0`).
    /// Returns `Ok(false)` when `key` is not a profile key.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let (field, sub) = match key.split_once('.') {
            Some((f, s)) => (f, Some(s)),
            None => (key, None),
        };
        let field = if field == "jitter" { "jitter-sigma" } else { field };
        if !PROFILE_OPTION_KEYS.contains(&field) {
            return Ok(false);
        }
        let number: f64 = value.trim().parse().map_err(|_| format!("expected a number, got {value:?}"))?;
        let name = field.replace('-', "_");
        let table_field = name.starts_with("eta_f_");
        let v = if name.starts_with("graph_max") {
            if number < 0.0 || number.fract() != 0.0 {
                return Err(format!("expected a whole number, got {value:?}"));
            }
            serde_json::json!(number as u64)
        } else {
            serde_json::json!(number)
        };
        let patch = match (table_field, sub) {
            (true, None) => serde_json::json!({ name: { "bf16": v, "fp8": v, "fp4": v } }),
            (true, Some(fmt)) => serde_json::json!({ name: { fmt: v } }),
            (false, None) => serde_json::json!({ name: v }),
            (false, Some(_)) => return Err(format!("{field} has no per-format values")),
        };
        self.apply_patch(&patch)?;
        Ok(true)
    }

    /// Checks that every constant is in a meaningful range.
    pub fn validate(&self) -> Result<(), String> {
        let effs = [
            ("eta_bw", self.eta_bw),
            ("eta_f_prefill.bf16", self.eta_f_prefill.bf16),
            ("eta_f_prefill.fp8", self.eta_f_prefill.fp8),
            ("eta_f_prefill.fp4", self.eta_f_prefill.fp4),
            ("eta_f_decode.bf16", self.eta_f_decode.bf16),
            ("eta_f_decode.fp8", self.eta_f_decode.fp8),
            ("eta_f_decode.fp4", self.eta_f_decode.fp4),
            ("eta_f_moe.bf16", self.eta_f_moe.bf16),
            ("eta_f_moe.fp8", self.eta_f_moe.fp8),
            ("eta_f_moe.fp4", self.eta_f_moe.fp4),
        ];
        for (name, v) in effs {
            if !(v.is_finite() && v > 0.0 && v <= 2.0) {
                return Err(format!("{name} is an efficiency and must be in (0, 2], got {v}"));
            }
        }
        let times = [
            ("t0_ms", self.t0_ms),
            ("t_layer_us", self.t_layer_us),
            ("t_seq_us", self.t_seq_us),
            ("t_moe_us", self.t_moe_us),
            ("alpha_api_ms", self.alpha_api_ms),
            ("alpha_ar_us", self.alpha_ar_us.unwrap_or(0.0)),
            ("activation_reserve_gib", self.activation_reserve_gib),
            ("activation_reserve_moe_gib", self.activation_reserve_moe_gib),
            ("eager_ms", self.eager_ms),
        ];
        for (name, v) in times {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name} must be zero or positive, got {v}"));
            }
        }
        if !(self.jitter_sigma.is_finite() && (0.0..=1.0).contains(&self.jitter_sigma)) {
            return Err(format!("jitter_sigma must be in [0, 1], got {}", self.jitter_sigma));
        }
        Ok(())
    }

    /// The profile as TOML text, readable back by [`StackProfile::apply_file`].
    pub fn to_toml(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut scalars = String::new();
        let mut tables = String::new();
        if let serde_json::Value::Object(map) = value {
            for (k, v) in map {
                match v {
                    serde_json::Value::Object(inner) => {
                        tables.push_str(&format!("\n[{k}]\n"));
                        for (ik, iv) in inner {
                            tables.push_str(&format!("{ik} = {iv}\n"));
                        }
                    }
                    other => scalars.push_str(&format!("{k} = {other}\n")),
                }
            }
        }
        scalars + &tables
    }
}

fn merge(base: &mut serde_json::Value, patch: &serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(b), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_fields_and_per_format_tables() {
        let mut p = StackProfile::default();
        assert!(p.set_option("t0-ms", "3.5").unwrap());
        assert!(p.set_option("eta-f-prefill.fp8", "0.7").unwrap());
        assert!(p.set_option("eta-f-decode", "0.2").unwrap());
        assert!(p.set_option("jitter", "0").unwrap());
        assert!(p.set_option("alpha-ar-us", "120").unwrap());
        assert_eq!(p.t0_ms, 3.5);
        assert_eq!(p.eta_f_prefill.fp8, 0.7);
        assert_eq!(p.eta_f_prefill.bf16, StackProfile::default().eta_f_prefill.bf16);
        assert_eq!(p.eta_f_decode, PrecisionTable::splat(0.2));
        assert_eq!(p.jitter_sigma, 0.0);
        assert_eq!(p.alpha_ar_us, Some(120.0));
        assert!(!p.set_option("max-num-seqs", "4").unwrap());
        assert!(p.set_option("eta-bw", "-1").unwrap_err().contains("eta_bw"));
        assert!(p.set_option("t0-ms", "fast").is_err());
        assert!(p.set_option("t0-ms.fp8", "1").is_err());
    }

    #[test]
    fn toml_output_reads_back_to_the_same_profile() {
        let p = StackProfile {
            name: Some("toy/vllm".into()),
            alpha_ar_us: Some(42.0),
            t_seq_us: 123.25,
            ..StackProfile::default()
        };
        let dir = std::env::temp_dir().join(format!("sb-sim-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fit.toml");
        std::fs::write(&path, p.to_toml()).unwrap();
        let mut back = StackProfile::default();
        back.apply_file(&path).unwrap();
        assert_eq!(back, p);
        let json = dir.join("fit.json");
        std::fs::write(&json, r#"{"eta_bw": 0.9, "eta_f_moe": {"fp4": 0.1}}"#).unwrap();
        let mut partial = StackProfile::default();
        partial.apply_file(&json).unwrap();
        assert_eq!(partial.eta_bw, 0.9);
        assert_eq!(partial.eta_f_moe.fp4, 0.1);
        std::fs::write(&json, r#"{"eta_bandwidth": 0.9}"#).unwrap();
        let err = StackProfile::default().apply_file(&json).unwrap_err().to_string();
        assert!(err.contains("eta_bandwidth") && err.contains("fit.json"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
