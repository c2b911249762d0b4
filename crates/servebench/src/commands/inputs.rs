//! Files named on the command line: a folder stands for the files in it, as vLLM's
//! `--result-dir` holds a run's results, so `import`, `merge`, `sim validate` and `sim fit` read
//! one the same way.

use std::path::{Path, PathBuf};

/// A named path as the files it stands for: a file as itself, a folder as its files in name
/// order that `keep` accepts, not its subfolders nor hidden files. A folder that holds none is
/// an error saying what it was expected to hold (`wanted`, as "vLLM results").
pub fn files_of(named: &Path, keep: impl Fn(&Path) -> bool, wanted: &str) -> anyhow::Result<Named> {
    if !named.is_dir() {
        return Ok(Named { files: vec![named.to_path_buf()], folder: false });
    }
    let read = |e: std::io::Error| anyhow::anyhow!("could not read the folder {}: {e}", named.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(named).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !hidden && path.is_file() && keep(&path) {
            files.push(path);
        }
    }
    if files.is_empty() {
        anyhow::bail!(
            "the folder {} holds no files of {wanted}; name the folder they were saved in, or the files",
            named.display()
        );
    }
    files.sort();
    Ok(Named { files, folder: true })
}

/// The files one named path stands for, and whether it was a folder (where a file without
/// results is passed over rather than an error).
#[derive(Debug)]
pub struct Named {
    pub files: Vec<PathBuf>,
    pub folder: bool,
}

/// Every file (for [`files_of`]'s `keep`).
pub fn any_file(_: &Path) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_its_visible_files_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for f in ["b.json", "a.json", "c.txt", ".hidden.json", "sub/d.json"] {
            std::fs::write(dir.path().join(f), "{}").unwrap();
        }
        let names = |n: &Named| {
            n.files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect::<Vec<_>>()
        };
        let all = files_of(dir.path(), any_file, "results").unwrap();
        assert!(all.folder);
        assert_eq!(names(&all), ["a.json", "b.json", "c.txt"]);
        let json = files_of(dir.path(), |p| p.extension().is_some_and(|x| x == "json"), "results").unwrap();
        assert_eq!(names(&json), ["a.json", "b.json"]);
        // A file stands for itself, whether or not it exists (reading it says what is wrong).
        let one = files_of(&dir.path().join("missing.json"), any_file, "results").unwrap();
        assert!(!one.folder && names(&one) == ["missing.json"]);
        let e = files_of(&dir.path().join("sub"), |_| false, "worker results").unwrap_err().to_string();
        assert!(e.contains("holds no files of worker results") && e.contains("sub"), "{e}");
    }
}
