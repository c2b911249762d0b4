//! Test helpers: the committed fixtures, the shared Qwen3 tokenizer, optional extra tokenizers
//! from `SERVEBENCH_EXTRA_TOKENIZERS`, and self-cleaning temporary folders.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Names of the optional tokenizers.
pub const EXTRA_TOKENIZERS: [&str; 3] = ["llama3", "gemma3", "gptoss"];

/// An optional tokenizer, or `None` (with a note on stderr) when it is not available.
pub fn extra_tokenizer(name: &str) -> Option<&'static Tokenizer> {
    static CACHE: [OnceLock<Option<Tokenizer>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = EXTRA_TOKENIZERS.iter().position(|n| *n == name)?;
    CACHE[slot]
        .get_or_init(|| {
            let Some(root) = std::env::var_os(EXTRA_TOKENIZERS_VAR) else {
                eprintln!("note: skipping the {name} checks: set {EXTRA_TOKENIZERS_VAR} to a folder holding {name}/tokenizer.json");
                return None;
            };
            let dir = PathBuf::from(root).join(name);
            if !dir.join("tokenizer.json").is_file() {
                eprintln!("note: skipping the {name} checks: {} has no tokenizer.json", dir.display());
                return None;
            }
            Some(Tokenizer::load(dir.to_str()?).expect("an extra tokenizer loads"))
        })
        .as_ref()
}

/// A temporary folder removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("servebench-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
