//! The simulator's errors. Each message says what went wrong with the numbers involved, and what
//! to do about it.

/// Why a simulated target could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(
        "unknown hardware {name:?}{nearest}; known presets: {known}. Add your own as \
         {user_dir}/hardware/NAME.toml"
    )]
    UnknownHardware { name: String, nearest: String, known: String, user_dir: String },

    #[error(
        "unknown model {name:?}{nearest}; known presets: {known}. Pass the path of a Hugging Face \
         config.json instead, or add {user_dir}/models/NAME.toml"
    )]
    UnknownModel { name: String, nearest: String, known: String, user_dir: String },

    #[error(
        "model {name:?} is {shapes}'s shapes with {formats} weights, a format the simulator does not price \
         (it prices {priced}); give {shapes} with the --precision nearest to it (fp8 for 8-bit weights, \
         awq-int4 for 4-bit), which the report then says"
    )]
    UnpricedFormat { name: String, shapes: String, formats: String, priced: String },

    #[error("model {name:?} fits several presets: {fits}; give one of their ids")]
    AmbiguousModel { name: String, fits: String },

    #[error("preset {origin}: {message}; fix the file, or move it out of the presets folder")]
    Preset { origin: String, message: String },

    #[error(
        "cannot read presets from {path}: {message}; check its permissions, or set SERVEBENCH_PRESETS to \
         another folder"
    )]
    PresetDir { path: String, message: String },

    #[error(
        "model config {path}: {message}; pass a Hugging Face config.json (or the folder holding one), or a \
         preset id from `servebench sim presets`"
    )]
    ModelConfig { path: String, message: String },

    #[error("profile {path}: {message}; pass a profile written by `servebench sim fit`")]
    Profile { path: String, message: String },

    #[error("cannot listen on {address}: {message}; choose another --port (0 picks any free one) or --host")]
    Listen { address: String, message: String },

    #[error("unknown option {key:?}; known options: {known}")]
    UnknownOption { key: String, known: String },

    #[error("option {key}={value:?}: {expected}")]
    BadOption { key: String, value: String, expected: String },

    #[error("conflicting options: {0}")]
    Conflict(String),

    #[error(
        "{model} does not fit on {hardware} with tp={tp} pp={pp}: its weights need \
         {weights_gib:.1} GiB per GPU, but {device_gib:.1} GiB x gpu-memory-utilization \
         {utilization} - {reserve_gib:.1} GiB activation reserve (CUDA graph memory with it, where given) \
         leaves {room_gib:.1} GiB for weights and KV cache. Use more GPUs (tp, pp, nodes), a smaller precision, or a device \
         with more memory"
    )]
    DoesNotFit {
        model: String,
        hardware: String,
        tp: u32,
        pp: u32,
        weights_gib: f64,
        device_gib: f64,
        utilization: f64,
        reserve_gib: f64,
        room_gib: f64,
    },

    #[error(
        "max-model-len={max_model_len} needs {needed_gib:.2} GiB of KV cache per GPU for one \
         request, but {kv_gib:.2} GiB is left after weights (room for {fit_tokens} tokens). \
         Lower max-model-len, raise gpu-memory-utilization, use kv-cache-dtype=fp8, or add GPUs"
    )]
    MaxModelLenTooLong { max_model_len: u32, needed_gib: f64, kv_gib: f64, fit_tokens: u64 },
}

impl SimError {
    /// Whether the error is in what the user asked for, not in the machine or the files: a
    /// hardware, model or option the simulator does not know, an option value it cannot read,
    /// options that conflict. (A deployment that does not fit is well formed: not usage.)
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            SimError::UnknownHardware { .. }
                | SimError::UnknownModel { .. }
                | SimError::UnpricedFormat { .. }
                | SimError::AmbiguousModel { .. }
                | SimError::UnknownOption { .. }
                | SimError::BadOption { .. }
                | SimError::Conflict(_)
        )
    }
}
