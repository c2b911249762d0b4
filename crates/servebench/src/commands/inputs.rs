//! Files named on the command line: a folder stands for the files in it and in its
//! subfolders, as vLLM's `--result-dir` holds a run's results and a parameter sweep's folder
//! (`bench sweep serve -o`, `vllm bench sweep serve`) holds a folder of runs per combination, so
//! `import`, `merge`, `sim validate`, `sim fit` and `bench sweep plot` read one the same way.

use std::path::{Path, PathBuf};

/// A named path as the files it stands for: a file as itself, a folder as the files in it and
/// in its subfolders that `keep` accepts, in path order, not hidden ones (nor subfolders that
/// are links, which could loop). A folder that holds none is an error saying what it was
/// expected to hold (`wanted`, as "vLLM results").
pub fn files_of(named: &Path, keep: impl Fn(&Path) -> bool, wanted: &str) -> anyhow::Result<Named> {
    if !named.is_dir() {
        return Ok(Named { files: vec![named.to_path_buf()], folder: false });
    }
    let mut files = Vec::new();
    walk(named, &keep, &mut files)?;
    if files.is_empty() {
        anyhow::bail!(
            "the folder {} holds no files of {wanted}; name the folder they were saved in, or the files",
            named.display()
        );
    }
    files.sort();
    Ok(Named { files, folder: true })
}

fn walk(dir: &Path, keep: &impl Fn(&Path) -> bool, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let read = |e: std::io::Error| anyhow::anyhow!("could not read the folder {}: {e}", dir.display());
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let path = entry.path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            continue;
        }
        if entry.file_type().map_err(read)?.is_dir() {
            walk(&path, keep, files)?;
        } else if path.is_file() && keep(&path) {
            files.push(path);
        }
    }
    Ok(())
}

/// The files one named path stands for, and whether it was a folder (where a file without
/// results is passed over rather than an error).
#[derive(Debug)]
pub struct Named {
    pub files: Vec<PathBuf>,
    pub folder: bool,
}

/// Every file that may hold a measured run (for [`files_of`]'s `keep`): not the files a
/// parameter sweep keeps beside its runs, which repeat them (`summary.json`, `summary.csv`),
/// hold an unmeasured warm-up (`warmup.json`), or record a failure (`run=N.failure.json`, and
/// a failed run's partial measurements, `run=N.partial.json`). A file named on its own is read
/// whatever its name.
pub fn measured(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let bookkeeping = ["summary.json", "summary.csv", "warmup.json"].contains(&name.as_ref())
        || name.ends_with(".failure.json")
        || name.ends_with(".partial.json");
    !bookkeeping
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_its_visible_files_and_its_subfolders_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["sub", ".hidden", "sweep/SERVE--a-BENCH--b"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        for f in ["b.json", "a.json", "c.txt", ".hidden.json", "sub/d.json", ".hidden/e.json"] {
            std::fs::write(dir.path().join(f), "{}").unwrap();
        }
        let names = |n: &Named| {
            let rel = |f: &PathBuf| f.strip_prefix(dir.path()).unwrap().to_string_lossy().into_owned();
            n.files.iter().map(rel).collect::<Vec<_>>()
        };
        let all = files_of(dir.path(), measured, "results").unwrap();
        assert!(all.folder);
        assert_eq!(names(&all), ["a.json", "b.json", "c.txt", "sub/d.json"]);
        let json = files_of(dir.path(), |p| p.extension().is_some_and(|x| x == "json"), "results").unwrap();
        assert_eq!(names(&json), ["a.json", "b.json", "sub/d.json"]);
        // A file stands for itself, whether or not it exists (reading it says what is wrong).
        let one = files_of(&dir.path().join("missing.json"), measured, "results").unwrap();
        assert!(!one.folder && names(&one) == ["missing.json"]);
        let e = files_of(&dir.path().join("sub"), |_| false, "worker results").unwrap_err().to_string();
        assert!(e.contains("holds no files of worker results") && e.contains("sub"), "{e}");
        // A sweep's folder stands for its runs, not what it keeps beside them.
        let comb = dir.path().join("sweep/SERVE--a-BENCH--b");
        for f in ["run=0.json", "run=1.json", "run=2.partial.json", "run=3.failure.json", "summary.json", "warmup.json"]
        {
            std::fs::write(comb.join(f), "{}").unwrap();
        }
        std::fs::write(dir.path().join("sweep/summary.csv"), "").unwrap();
        let runs = files_of(&dir.path().join("sweep"), measured, "results").unwrap();
        assert_eq!(names(&runs), ["sweep/SERVE--a-BENCH--b/run=0.json", "sweep/SERVE--a-BENCH--b/run=1.json"]);
        assert!(!files_of(&comb.join("summary.json"), measured, "results").unwrap().folder, "named alone, it is read");
    }
}
