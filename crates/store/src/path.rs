//! Where the run store lives when no `--db PATH` is given.

use std::path::{Path, PathBuf};

use crate::StoreError;

/// The run store's path without `--db`: `$SERVEBENCH_DB` when set and not empty, else
/// `$XDG_DATA_HOME/servebench/runs.db`, else `~/.local/share/servebench/runs.db`.
///
/// The folder is not created here; [`crate::Store::open`] creates it.
pub fn default_db_path() -> Result<PathBuf, StoreError> {
    db_path_from(|name| std::env::var_os(name).map(PathBuf::from))
}

/// [`default_db_path`] with the environment read through `env` (for tests and callers that
/// carry their own environment).
pub fn db_path_from(env: impl Fn(&str) -> Option<PathBuf>) -> Result<PathBuf, StoreError> {
    let set = |name: &str| env(name).filter(|p| !p.as_os_str().is_empty());
    if let Some(path) = set("SERVEBENCH_DB") {
        return Ok(path);
    }
    // The XDG spec says a relative $XDG_DATA_HOME is invalid and must be ignored.
    if let Some(data) = set("XDG_DATA_HOME").filter(|p| p.is_absolute()) {
        return Ok(data.join("servebench").join("runs.db"));
    }
    let home = set("HOME").ok_or(StoreError::NoDataDir)?;
    Ok(home.join(".local").join("share").join("servebench").join("runs.db"))
}

/// Refuses `output` as the path of a file to write (a report, an export, a result file, a
/// plan) when it holds an SQLite database already: a run store there would be replaced by the
/// file and every run in it lost. Other files, and paths that do not exist yet, pass.
pub fn refuse_store_overwrite(output: &Path) -> Result<(), StoreError> {
    use std::io::Read;
    let mut head = [0u8; 16];
    let sqlite = std::fs::File::open(output)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0");
    if sqlite && output.is_file() {
        return Err(StoreError::WouldOverwrite { path: output.to_path_buf() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<PathBuf> {
        let vars: Vec<(String, PathBuf)> = vars.iter().map(|(k, v)| (k.to_string(), PathBuf::from(v))).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_variable_wins_then_xdg_then_home() {
        let all = [("SERVEBENCH_DB", "/tmp/x.db"), ("XDG_DATA_HOME", "/data"), ("HOME", "/home/u")];
        assert_eq!(db_path_from(env(&all)).unwrap(), PathBuf::from("/tmp/x.db"));
        assert_eq!(db_path_from(env(&all[1..])).unwrap(), PathBuf::from("/data/servebench/runs.db"));
        assert_eq!(db_path_from(env(&all[2..])).unwrap(), PathBuf::from("/home/u/.local/share/servebench/runs.db"));
    }

    #[test]
    fn empty_or_relative_values_are_ignored() {
        let vars = [("SERVEBENCH_DB", ""), ("XDG_DATA_HOME", "rel/dir"), ("HOME", "/home/u")];
        assert_eq!(db_path_from(env(&vars)).unwrap(), PathBuf::from("/home/u/.local/share/servebench/runs.db"));
    }

    #[test]
    fn without_home_the_error_says_what_to_pass() {
        let err = db_path_from(env(&[])).unwrap_err();
        assert!(err.to_string().contains("--db PATH"), "{err}");
    }

    #[test]
    fn an_output_path_that_holds_a_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        crate::Store::open(&db).unwrap();
        let err = refuse_store_overwrite(&db).unwrap_err();
        assert!(err.to_string().contains("choose another output path"), "{err}");
        let text = dir.path().join("report.html");
        std::fs::write(&text, "<html>").unwrap();
        refuse_store_overwrite(&text).unwrap();
        refuse_store_overwrite(&dir.path().join("new.csv")).unwrap();
        refuse_store_overwrite(dir.path()).unwrap();
    }
}
