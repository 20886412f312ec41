//! Host path checks that need the file system.
//!
//! Owns: the component-by-component symlink walk over a path before it is bind-mounted
//! (security-cases §4 "Mount through symlink"). Podman resolves symlinks on the host, so a
//! link planted in a writable project during an earlier run (`project/link -> ~/.ssh`) would
//! mount the link's target. Run [`reject_symlinks`] when the spec is checked and again right
//! before the container starts: the walk is a check, not a lock, so the window between the
//! check and the mount (the class of runc CVE-2021-30465) is only narrowed, not closed.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path is relative; only absolute, normalised paths are walked.
    #[error("checking {path}: the path is not absolute; give an absolute path")]
    NotAbsolute {
        /// The path as given.
        path: PathBuf,
    },
    /// The path has a `.` or `..` component; it must be normalised first.
    #[error("checking {path}: the path contains a `.` or `..` component; normalise it first")]
    NotNormalized {
        /// The path as given.
        path: PathBuf,
    },
    /// A component of the path is a symbolic link.
    #[error(
        "checking {path}: {component} is a symbolic link to {target}; mount the real directory \
         instead, or remove the link"
    )]
    Symlink {
        /// The path as given.
        path: PathBuf,
        /// The first component (a prefix of `path`) that is a symlink.
        component: PathBuf,
        /// Where the link points (as stored in the link, not resolved).
        target: PathBuf,
    },
    /// A component of the path does not exist.
    #[error("checking {path}: {component} does not exist; create it or fix the path in the spec")]
    Missing {
        /// The path as given.
        path: PathBuf,
        /// The first component that is missing.
        component: PathBuf,
    },
    /// Reading a component's metadata failed for another reason (e.g. permission denied).
    #[error("checking {path}: reading {component} failed: {source}")]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The component whose metadata could not be read.
        component: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Walks every component of an absolute path with `symlink_metadata` (lstat) and refuses the
/// path if any component is a symbolic link or missing.
///
/// The path must be absolute and normalised (no `.` or `..`); `validate` produces such paths.
///
/// # Errors
/// [`PathError::Symlink`] naming the first symlink component and its target,
/// [`PathError::Missing`] naming the first missing component, [`PathError::NotAbsolute`] /
/// [`PathError::NotNormalized`] for a path that is not absolute and normalised, and
/// [`PathError::Io`] when metadata cannot be read.
pub fn reject_symlinks(path: &Path) -> Result<(), PathError> {
    if !path.is_absolute() {
        return Err(PathError::NotAbsolute {
            path: path.to_owned(),
        });
    }
    let mut prefix = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => {
                prefix.push(component);
                continue;
            }
            Component::CurDir | Component::ParentDir => {
                return Err(PathError::NotNormalized {
                    path: path.to_owned(),
                });
            }
            Component::Normal(name) => prefix.push(name),
        }
        match std::fs::symlink_metadata(&prefix) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&prefix).map_err(|source| PathError::Io {
                    path: path.to_owned(),
                    component: prefix.clone(),
                    source,
                })?;
                return Err(PathError::Symlink {
                    path: path.to_owned(),
                    component: prefix,
                    target,
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(PathError::Missing {
                    path: path.to_owned(),
                    component: prefix,
                });
            }
            Err(source) => {
                return Err(PathError::Io {
                    path: path.to_owned(),
                    component: prefix,
                    source,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn plain_directories_pass() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deep = dir.path().join("a/b/c");
        std::fs::create_dir_all(&deep).expect("mkdir");
        std::fs::write(deep.join("f"), "x").expect("write");
        reject_symlinks(&deep).expect("plain dir passes");
        reject_symlinks(&deep.join("f")).expect("plain file passes");
        reject_symlinks(Path::new("/")).expect("root passes");
    }

    #[test]
    fn symlink_in_the_middle_is_named_with_its_target() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::create_dir_all(secret.join("keys")).expect("mkdir");
        let project = dir.path().join("project");
        std::fs::create_dir(&project).expect("mkdir");
        symlink(&secret, project.join("link")).expect("symlink");
        let err = reject_symlinks(&project.join("link/keys")).expect_err("must refuse");
        match &err {
            PathError::Symlink {
                component, target, ..
            } => {
                assert_eq!(component, &project.join("link"));
                assert_eq!(target, &secret);
            }
            other => panic!("unexpected {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("is a symbolic link to"), "{msg}");
        assert!(msg.contains(&secret.display().to_string()), "{msg}");
    }

    #[test]
    fn symlink_as_last_component_and_dangling_symlink_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("last");
        symlink("/etc", &link).expect("symlink");
        assert!(matches!(
            reject_symlinks(&link),
            Err(PathError::Symlink { .. })
        ));
        let dangling = dir.path().join("dangling");
        symlink("/nonexistent/x", &dangling).expect("symlink");
        match reject_symlinks(&dangling) {
            Err(PathError::Symlink { target, .. }) => {
                assert_eq!(target, Path::new("/nonexistent/x"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn missing_path_names_the_first_missing_component() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope/deeper");
        match reject_symlinks(&missing) {
            Err(PathError::Missing { component, .. }) => {
                assert_eq!(component, dir.path().join("nope"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn relative_and_unnormalised_paths_are_refused() {
        assert!(matches!(
            reject_symlinks(Path::new("rel/path")),
            Err(PathError::NotAbsolute { .. })
        ));
        assert!(matches!(
            reject_symlinks(Path::new("/tmp/../etc")),
            Err(PathError::NotNormalized { .. })
        ));
    }
}
