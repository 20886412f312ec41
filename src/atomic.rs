//! Writing a file whole or not at all: a temporary file in the same directory (created
//! `0600`, or the mode asked for), written, synced, then renamed over the target in one
//! `rename(2)`, so a reader sees the old content or the new one, never a part, and a
//! process that dies mid-write leaves the target as it was. The one writer of its kind:
//! records, state files, caches and rendered files all go through it.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};

/// Writes `data` to `path` atomically (see the module doc), mode `0600`.
///
/// # Errors
/// I/O failures, naming the file.
pub fn write(path: &Path, data: &[u8]) -> Result<()> {
    write_mode(path, data, 0o600)
}

/// Writes `data` to `path` atomically with `mode` (the temporary file is created with it).
///
/// # Errors
/// I/O failures, naming the file.
pub fn write_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_with(path, data, mode, true, false)
}

/// [`write_mode`] with `mode` exactly, whatever the umask: the temporary file's mode is set
/// (`fchmod(2)`) before the rename, so the target never has another. For a file another
/// user's process must read (`node_exporter`'s textfile collector reads the metrics file), where
/// a umask of `077` would make it unreadable (attack review of issue 32 item 4).
///
/// # Errors
/// I/O failures, naming the file.
pub fn write_exact_mode(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    write_with(path, data, mode, true, true)
}

/// [`write`] without the sync: the file is whole or as it was whatever instant the writer
/// dies, but a power loss may lose the new content. For the notes a run writes at every
/// phase (`run::state::reached`), where a sync per phase would cost more than it buys.
///
/// # Errors
/// I/O failures, naming the file.
pub fn replace(path: &Path, data: &[u8]) -> Result<()> {
    write_with(path, data, 0o600, false, false)
}

fn write_with(path: &Path, data: &[u8], mode: u32, sync: bool, exact: bool) -> Result<()> {
    let dir = path
        .parent()
        .context("invariant: a file written atomically has a parent directory")?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".cyclix-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    if exact {
        tmp.as_file()
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
            .with_context(|| {
                format!("setting the mode of a temporary file in {}", dir.display())
            })?;
    }
    tmp.write_all(data)
        .with_context(|| format!("writing {}", path.display()))?;
    if sync {
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("syncing {}", path.display()))?;
    }
    tmp.persist(path)
        .with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}

/// [`write_mode`] after creating `path`'s parent directories.
///
/// # Errors
/// As [`write`], or the directory cannot be made.
pub fn write_creating(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_mode(path, data, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_mode_is_the_one_asked_for_whatever_the_umask() {
        let d = tempfile::tempdir().expect("tmp");
        // 0666: any umask with a write bit for the group or others (022, 027, 077) would
        // take one off; the process's umask is not changed here (it is the whole process's).
        let p = d.path().join("m.prom");
        write_exact_mode(&p, b"x 1\n", 0o666).expect("write");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        write_exact_mode(&p, b"x 2\n", 0o644).expect("rewrite");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_file_is_replaced_whole_with_its_mode_and_no_temporary_left() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("a/b.json");
        write_creating(&p, b"one", 0o600).expect("first");
        write(&p, b"two").expect("second");
        assert_eq!(std::fs::read(&p).expect("read"), b"two");
        assert_eq!(
            std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777,
            0o600
        );
        write_mode(&p, b"three", 0o644).expect("third");
        assert_eq!(
            std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777,
            0o644
        );
        let names: Vec<String> = std::fs::read_dir(p.parent().expect("dir"))
            .expect("ls")
            .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["b.json"]);
        assert!(write(Path::new("/"), b"x").is_err());
    }
}
