//! The constants of a [`StackProfile`] that a fit may move: their names, plausible ranges and
//! the width of the prior that pulls a fit toward the preset's value.

use super::StackProfile;
use crate::precision::ComputePrecision;

/// A constant of the profile that has a physical range (and so can be fitted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FitParam {
    AlphaApi,
    ApiPerToken,
    ApiPerRequest,
    ApiPerOutputToken,
    T0,
    TLayer,
    TSeq,
    TMoe,
    THost,
    THostSeq,
    TAdmit,
    EtaBw,
    GemmEff(ComputePrecision),
    MoeEff(ComputePrecision),
    AttnEff,
    GemmMHalf,
    EagerLayer,
    AlphaAr,
    ArStep,
    ArFixed,
    ArRate,
    DequantOps,
    DequantMma,
}

/// Scalar constants: (constant, option name, plausible range, prior σ in ln units).
const SCALARS: [(FitParam, &str, (f64, f64), f64); 21] = [
    (FitParam::AlphaApi, "alpha-api-ms", (0.5, 500.0), 0.7),
    (FitParam::ApiPerToken, "api-us-per-token", (0.01, 50.0), 1.0),
    (FitParam::ApiPerRequest, "api-ms-per-request", (0.01, 50.0), 1.0),
    (FitParam::ApiPerOutputToken, "api-us-per-output-token", (0.01, 500.0), 1.0),
    (FitParam::T0, "t0-ms", (0.05, 30.0), 0.7),
    (FitParam::TLayer, "t-layer-us", (1.0, 300.0), 0.7),
    (FitParam::TSeq, "t-seq-us", (0.1, 1000.0), 1.0),
    (FitParam::TMoe, "t-moe-us", (0.1, 1000.0), 1.0),
    (FitParam::THost, "t-host-ms", (0.05, 30.0), 0.7),
    (FitParam::THostSeq, "t-host-seq-us", (0.1, 200.0), 1.0),
    (FitParam::TAdmit, "t-admit-us", (1.0, 5000.0), 1.0),
    (FitParam::EtaBw, "eta-bw", (0.3, 1.0), 0.15),
    (FitParam::AttnEff, "attn-eff", (0.02, 0.95), 0.5),
    (FitParam::GemmMHalf, "gemm-m-half", (1.0, 2048.0), 0.7),
    (FitParam::EagerLayer, "eager-layer-us", (1.0, 5000.0), 0.7),
    (FitParam::AlphaAr, "alpha-ar-us", (1.0, 2000.0), 0.5),
    (FitParam::ArStep, "ar-step-us", (0.5, 1000.0), 0.5),
    (FitParam::ArFixed, "ar-fixed-us", (0.5, 2000.0), 0.5),
    (FitParam::ArRate, "ar-gbs", (0.5, 1000.0), 0.5),
    (FitParam::DequantOps, "dequant-ops-per-weight", (1.0, 100.0), 0.5),
    (FitParam::DequantMma, "dequant-mma", (0.05, 0.95), 0.4),
];
const TABLES: [(&str, (f64, f64), f64); 2] = [("gemm-eff", (0.02, 0.95), 0.4), ("moe-eff", (0.02, 0.95), 0.5)];

impl FitParam {
    /// Every constant, each per-format table once per format.
    pub fn all() -> Vec<FitParam> {
        let mut v: Vec<FitParam> = SCALARS.iter().map(|s| s.0).collect();
        for p in ComputePrecision::ALL {
            v.push(FitParam::GemmEff(p));
            v.push(FitParam::MoeEff(p));
        }
        v
    }

    /// Every name [`FitParam::parse`] accepts, comma-separated.
    pub fn known_names() -> String {
        let mut names: Vec<String> = SCALARS.iter().map(|s| s.1.to_string()).collect();
        for (table, _, _) in TABLES {
            names.push(format!("{table}.{{bf16,fp8,fp4,weight_only}}"));
        }
        names.join(", ")
    }

    /// Parses an option-style name: `t0-ms`, `gemm-eff.fp8`.
    pub fn parse(name: &str) -> Option<FitParam> {
        let key = name.trim().to_ascii_lowercase().replace('_', "-");
        // The name `dequant-mma` had while it priced expert products only.
        let key = if key == "dequant-mma-moe" { "dequant-mma".to_string() } else { key };
        if let Some(s) = SCALARS.iter().find(|s| s.1 == key) {
            return Some(s.0);
        }
        let (table, fmt) = key.split_once('.')?;
        let fmt = ComputePrecision::parse(fmt)?;
        match table {
            "gemm-eff" => Some(FitParam::GemmEff(fmt)),
            "moe-eff" => Some(FitParam::MoeEff(fmt)),
            _ => None,
        }
    }

    /// The option-style name.
    pub fn name(self) -> String {
        match self {
            FitParam::GemmEff(p) => format!("gemm-eff.{}", p.name()),
            FitParam::MoeEff(p) => format!("moe-eff.{}", p.name()),
            other => SCALARS.iter().find(|s| s.0 == other).map_or("?", |s| s.1).to_string(),
        }
    }

    pub fn get(self, s: &StackProfile) -> f64 {
        match self {
            FitParam::AlphaApi => s.alpha_api_ms,
            FitParam::ApiPerToken => s.api_us_per_token,
            FitParam::ApiPerRequest => s.api_ms_per_request,
            FitParam::ApiPerOutputToken => s.api_us_per_output_token,
            FitParam::T0 => s.t0_ms,
            FitParam::TLayer => s.t_layer_us,
            FitParam::TSeq => s.t_seq_us,
            FitParam::TMoe => s.t_moe_us,
            FitParam::THost => s.t_host_ms,
            FitParam::THostSeq => s.t_host_seq_us,
            FitParam::TAdmit => s.t_admit_us,
            FitParam::EtaBw => s.eta_bw,
            FitParam::GemmEff(p) => s.gemm_eff.get(p),
            FitParam::MoeEff(p) => s.moe_eff.get(p),
            FitParam::AttnEff => s.attn_eff,
            FitParam::GemmMHalf => s.gemm_m_half,
            FitParam::EagerLayer => s.eager_layer_us,
            FitParam::AlphaAr => s.alpha_ar_us.unwrap_or(0.0),
            FitParam::ArStep => s.ar_step_us.unwrap_or(0.0),
            FitParam::ArFixed => s.ar_fixed_us.unwrap_or(0.0),
            FitParam::ArRate => s.ar_gbs.unwrap_or(0.0),
            FitParam::DequantOps => s.dequant_ops_per_weight.unwrap_or(0.0),
            FitParam::DequantMma => s.dequant_mma,
        }
    }

    pub fn set(self, s: &mut StackProfile, v: f64) {
        match self {
            FitParam::AlphaApi => s.alpha_api_ms = v,
            FitParam::ApiPerToken => s.api_us_per_token = v,
            FitParam::ApiPerRequest => s.api_ms_per_request = v,
            FitParam::ApiPerOutputToken => s.api_us_per_output_token = v,
            FitParam::T0 => s.t0_ms = v,
            FitParam::TLayer => s.t_layer_us = v,
            FitParam::TSeq => s.t_seq_us = v,
            FitParam::TMoe => s.t_moe_us = v,
            FitParam::THost => s.t_host_ms = v,
            FitParam::THostSeq => s.t_host_seq_us = v,
            FitParam::TAdmit => s.t_admit_us = v,
            FitParam::EtaBw => s.eta_bw = v,
            FitParam::GemmEff(p) => *s.gemm_eff.get_mut(p) = v,
            FitParam::MoeEff(p) => *s.moe_eff.get_mut(p) = v,
            FitParam::AttnEff => s.attn_eff = v,
            FitParam::GemmMHalf => s.gemm_m_half = v,
            FitParam::EagerLayer => s.eager_layer_us = v,
            FitParam::AlphaAr => s.alpha_ar_us = Some(v),
            FitParam::ArStep => s.ar_step_us = Some(v),
            FitParam::ArFixed => s.ar_fixed_us = Some(v),
            FitParam::ArRate => s.ar_gbs = Some(v),
            FitParam::DequantOps => s.dequant_ops_per_weight = Some(v),
            FitParam::DequantMma => s.dequant_mma = v,
        }
    }

    /// The constant's plausible range and prior width, from its row of `TABLES` or `SCALARS`.
    fn range_and_prior(self) -> ((f64, f64), f64) {
        match self {
            FitParam::GemmEff(_) => (TABLES[0].1, TABLES[0].2),
            FitParam::MoeEff(_) => (TABLES[1].1, TABLES[1].2),
            other => SCALARS.iter().find(|s| s.0 == other).map_or(((0.0, f64::INFINITY), 1.0), |s| (s.2, s.3)),
        }
    }

    /// The physically plausible range, in the constant's unit: a fit stays inside it.
    pub fn bounds(self) -> (f64, f64) {
        self.range_and_prior().0
    }

    /// Width of the prior around the preset's value, in ln units (0.7: a factor of two is one σ).
    pub fn prior_sigma(self) -> f64 {
        self.range_and_prior().1
    }

    /// The starting value for a profile: its value clamped into the range (a switched-off term,
    /// 0, starts at the bottom of its range).
    pub fn start(self, s: &StackProfile) -> f64 {
        let (lo, hi) = self.bounds();
        self.get(s).clamp(lo, hi)
    }
}
