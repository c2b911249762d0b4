//! Test helpers: the committed fixtures, the shared Qwen3 tokenizer, optional extra tokenizers
//! from `SERVEBENCH_EXTRA_TOKENIZERS`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Tokenizer;

/// The repository's `testdata/` folder.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The committed Qwen3 tokenizer, loaded once per test binary.
pub fn qwen3() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let dir = testdata().join("tokenizers/qwen3");
        Tokenizer::load(dir.to_str().unwrap()).expect("the committed Qwen3 tokenizer loads")
    })
}

/// The environment variable naming a folder with `llama3/`, `gemma3/`, `gptoss/` tokenizer folders.
pub const EXTRA_TOKENIZERS_VAR: &str = "SERVEBENCH_EXTRA_TOKENIZERS";

/// When set (CI sets it), a missing extra tokenizer fails its checks instead of skipping them.
pub const REQUIRE_EXTRA_TOKENIZERS_VAR: &str = "SERVEBENCH_REQUIRE_EXTRA_TOKENIZERS";

/// Names of the optional tokenizers.
pub const EXTRA_TOKENIZERS: [&str; 3] = ["llama3", "gemma3", "gptoss"];

/// An optional tokenizer, or `None` (with a note on stderr) when it is not available; a panic
/// instead when [`REQUIRE_EXTRA_TOKENIZERS_VAR`] is set.
pub fn extra_tokenizer(name: &str) -> Option<&'static Tokenizer> {
    static CACHE: [OnceLock<Option<Tokenizer>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = EXTRA_TOKENIZERS.iter().position(|n| *n == name)?;
    CACHE[slot]
        .get_or_init(|| {
            let missing = |why: String| {
                if std::env::var_os(REQUIRE_EXTRA_TOKENIZERS_VAR).is_some() {
                    panic!("{REQUIRE_EXTRA_TOKENIZERS_VAR} is set but the {name} tokenizer is missing: {why}");
                }
                eprintln!("note: skipping the {name} checks: {why}");
            };
            let Some(root) = std::env::var_os(EXTRA_TOKENIZERS_VAR) else {
                missing(format!("set {EXTRA_TOKENIZERS_VAR} to a folder holding {name}/tokenizer.json"));
                return None;
            };
            let dir = PathBuf::from(root).join(name);
            if !dir.join("tokenizer.json").is_file() {
                missing(format!("{} has no tokenizer.json", dir.display()));
                return None;
            }
            Some(Tokenizer::load(dir.to_str()?).expect("an extra tokenizer loads"))
        })
        .as_ref()
}
