//! The option keys that set a stack constant (`t0-ms`, `gemm-eff.fp8`) and the field each names.

/// Option keys that set a profile field (`gemm-eff` sets all formats, `gemm-eff.fp8` one).
pub const PROFILE_OPTION_KEYS: [&str; 38] = [
    "eta-bw",
    "gemm-eff",
    "moe-eff",
    "attn-eff",
    "attn-query-keys",
    "attn-exp-exposed",
    "attn-eff-sinks",
    "attn-eff-sparse",
    "linear-eff",
    "linear-chunk-us",
    "gemm-m-half",
    "t0-ms",
    "t-layer-us",
    "t-seq-us",
    "t-moe-us",
    "t-host-ms",
    "t-host-seq-us",
    "t-admit-us",
    "alpha-api-ms",
    "api-us-per-token",
    "api-ms-per-request",
    "api-ms-per-input",
    "tokenizer-parallel",
    "api-us-per-output-token",
    "alpha-ar-us",
    "ar-step-us",
    "ar-fixed-us",
    "ar-gbs",
    "dequant-ops-per-weight",
    "dequant-mma",
    "fused-moe-us",
    "eager-layer-us",
    "activation-reserve-gib",
    "activation-reserve-moe-gib",
    "graph-max-tokens",
    "graph-max-ctx",
    "jitter-sigma",
    "jitter",
];

/// Whether `key` (`t0-ms`, `gemm-eff.fp8`, `jitter`) names a profile constant, as
/// [`StackProfile::set_option`] takes it.
pub fn is_option_key(key: &str) -> bool {
    option_field(key).is_some()
}

/// The profile key an option names (its old names read as the current ones) and the format it
/// sets of a per-format table; `None` when it names none.
pub(super) fn option_field(key: &str) -> Option<(&str, Option<&str>)> {
    let (field, sub) = match key.split_once('.') {
        Some((f, s)) => (f, Some(s)),
        None => (key, None),
    };
    let field = match field {
        "jitter" => "jitter-sigma",
        "dequant-mma-moe" => "dequant-mma",
        other => other,
    };
    PROFILE_OPTION_KEYS.contains(&field).then_some((field, sub))
}
