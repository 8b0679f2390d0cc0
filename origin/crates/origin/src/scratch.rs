//! Tests' scratch directories: a fresh one per name and process, under the system's
//! temporary directory.

use std::path::PathBuf;

/// An empty directory `origin-<name>-<pid>` (emptied if a run before left it).
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("origin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A scratch directory holding one file.
pub(crate) fn scratch_with(name: &str, file: &str, bytes: &[u8]) -> PathBuf {
    let dir = scratch(name);
    std::fs::write(dir.join(file), bytes).unwrap();
    dir
}
