//! Finds the tokenizer folder `--tokenizer` names: a tokenizer.json file, a model folder, or a
//! Hugging Face model id looked up offline in the local hub cache.

use std::path::{Path, PathBuf};

use crate::WorkloadError;

/// The environment variables the Hugging Face cache layout depends on.
#[derive(Clone, Debug, Default)]
pub struct CacheEnv {
    pub hf_hub_cache: Option<PathBuf>,
    pub huggingface_hub_cache: Option<PathBuf>,
    pub hf_home: Option<PathBuf>,
    pub xdg_cache_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
}

impl CacheEnv {
    /// Reads `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`, `HF_HOME`, `XDG_CACHE_HOME` and `HOME`.
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        CacheEnv {
            hf_hub_cache: var("HF_HUB_CACHE"),
            huggingface_hub_cache: var("HUGGINGFACE_HUB_CACHE"),
            hf_home: var("HF_HOME"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
        }
    }

    /// Hub cache roots, most specific first, without duplicates.
    pub fn hub_roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::new();
        let mut push = |p: PathBuf| {
            if !roots.contains(&p) {
                roots.push(p);
            }
        };
        if let Some(p) = &self.hf_hub_cache {
            push(p.clone());
        }
        if let Some(p) = &self.huggingface_hub_cache {
            push(p.clone());
        }
        if let Some(p) = &self.hf_home {
            push(p.join("hub"));
        }
        if let Some(p) = &self.xdg_cache_home {
            push(p.join("huggingface").join("hub"));
        }
        if let Some(p) = &self.home {
            push(p.join(".cache").join("huggingface").join("hub"));
        }
        roots
    }
}

/// Where a tokenizer's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The tokenizer.json file.
    pub tokenizer_json: PathBuf,
    /// The folder holding it, where tokenizer_config.json and chat_template.jinja are looked for.
    pub dir: PathBuf,
}

/// Resolves `spec` (a file, a folder, or a model id such as `Qwen/Qwen3-0.6B`).
pub fn locate(spec: &str, env: &CacheEnv) -> Result<Located, WorkloadError> {
    let path = Path::new(spec);
    let mut looked = Vec::new();
    if path.is_file() {
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        return Ok(Located { tokenizer_json: path.to_path_buf(), dir });
    }
    if path.is_dir() {
        let file = path.join("tokenizer.json");
        if file.is_file() {
            return Ok(Located { tokenizer_json: file, dir: path.to_path_buf() });
        }
        looked.push(file);
        return Err(WorkloadError::TokenizerNotFound { spec: spec.to_string(), looked });
    }
    looked.push(path.to_path_buf());
    if is_model_id(spec) {
        let folder = format!("models--{}", spec.replace('/', "--"));
        for root in env.hub_roots() {
            let repo = root.join(&folder);
            if let Some(found) = in_snapshot(&repo, &mut looked) {
                return Ok(found);
            }
        }
    }
    Err(WorkloadError::TokenizerNotFound { spec: spec.to_string(), looked })
}

/// A Hugging Face model id: `name` or `org/name`, without path syntax.
fn is_model_id(spec: &str) -> bool {
    !spec.is_empty()
        && spec.split('/').count() <= 2
        && spec.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
        && !spec.starts_with('~')
        && !spec.contains('\\')
}

/// The snapshot `refs/main` points at, else any snapshot (sorted) that has a tokenizer.json.
fn in_snapshot(repo: &Path, looked: &mut Vec<PathBuf>) -> Option<Located> {
    let snapshots = repo.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let dir = snapshots.join(rev.trim());
        let file = dir.join("tokenizer.json");
        if file.is_file() {
            return Some(Located { tokenizer_json: file, dir });
        }
        looked.push(file);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    dirs.sort();
    for dir in dirs {
        let file = dir.join("tokenizer.json");
        if file.is_file() {
            return Some(Located { tokenizer_json: file, dir });
        }
    }
    looked.push(snapshots.join("*").join("tokenizer.json"));
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_model_id_in_the_hub_cache_through_refs_main() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("hub/models--Org--Model");
        let snap = repo.join("snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "abc123\n").unwrap();
        std::fs::write(snap.join("tokenizer.json"), "{}").unwrap();
        let env = CacheEnv { hf_home: Some(tmp.path().to_path_buf()), ..CacheEnv::default() };
        let found = locate("Org/Model", &env).unwrap();
        assert_eq!(found.dir, snap);
        assert_eq!(found.tokenizer_json, snap.join("tokenizer.json"));
    }

    #[test]
    fn a_snapshot_without_refs_is_still_found() {
        let tmp = tempfile::tempdir().unwrap();
        let snap = tmp.path().join("models--gpt2/snapshots/r1");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(snap.join("tokenizer.json"), "{}").unwrap();
        let env = CacheEnv { hf_hub_cache: Some(tmp.path().to_path_buf()), ..CacheEnv::default() };
        assert_eq!(locate("gpt2", &env).unwrap().dir, snap);
    }

    #[test]
    fn a_missing_tokenizer_lists_every_place_looked() {
        let tmp = tempfile::tempdir().unwrap();
        let env = CacheEnv {
            hf_hub_cache: Some(tmp.path().join("a")),
            home: Some(tmp.path().join("home")),
            ..CacheEnv::default()
        };
        let err = locate("Org/Missing", &env).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("Org/Missing"), "{msg}");
        assert!(
            msg.contains(&tmp.path().join("a/models--Org--Missing/snapshots/*/tokenizer.json").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains(".cache/huggingface/hub/models--Org--Missing"), "{msg}");
        assert!(msg.contains("pass --tokenizer"), "{msg}");
    }

    #[test]
    fn a_folder_without_tokenizer_json_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = locate(tmp.path().to_str().unwrap(), &CacheEnv::default()).unwrap_err();
        assert!(err.to_string().contains("tokenizer.json"));
    }

    #[test]
    fn model_ids_are_told_apart_from_paths() {
        assert!(is_model_id("Qwen/Qwen3-0.6B"));
        assert!(is_model_id("gpt2"));
        assert!(!is_model_id("a/b/c"));
        assert!(!is_model_id("../x"));
        assert!(!is_model_id("/abs/path"));
        assert!(!is_model_id(""));
    }
}
