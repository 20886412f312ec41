//! Free space of the project's file systems after a failed run (security-cases §3 "disk full
//! in project dir"). Pure: the numbers come from `statvfs` through the run seam.
//!
//! An agent whose project file system fills up sees `ENOSPC` on its writes and usually fails
//! with a message of its own among others; cyclix names the cause in the record instead of
//! leaving it to be dug out of the agent's log. It looks right after the run (before teardown
//! removes the worktree and frees the space) at the worktree and at the repository's git dir,
//! which the agent's commits write to.

use std::fmt::Write as _;
use std::path::Path;

/// Below this many available bytes a file system counts as full (1 MiB: the next write of
/// any size may fail; ext4 keeps its reserved blocks out of `f_bavail` already).
pub const FULL_BELOW: u64 = 1 << 20;

/// What `statvfs` says about one file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    /// Bytes available to unprivileged users (`f_bavail × f_frsize`).
    pub avail: u64,
    /// Size of the file system in bytes (`f_blocks × f_frsize`).
    pub total: u64,
    /// The file system's id (`f_fsid`), to name a shared one once.
    pub fsid: u64,
}

/// The record's causes for the run's project file systems: `(what, path, space)` for the
/// worktree and the git dir; one cause per full file system.
#[must_use]
pub fn full_causes(looked: &[(&str, &Path, FsSpace)]) -> Vec<String> {
    let mut causes: Vec<(u64, String)> = Vec::new();
    for (what, path, s) in looked {
        if s.avail >= FULL_BELOW {
            continue;
        }
        if let Some((_, c)) = causes.iter_mut().find(|(id, _)| *id == s.fsid) {
            let _ = write!(c, "; also holds {what} {}", path.display());
            continue;
        }
        causes.push((
            s.fsid,
            format!(
                "project filesystem full (avail {} of {}) at {} ({what}): the run's writes there \
                 fail with ENOSPC (No space left on device); free space on that file system and \
                 run again",
                crate::limits::bytes(s.avail),
                crate::limits::bytes(s.total),
                path.display()
            ),
        ));
    }
    causes.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_project_file_system_is_named_once_with_what_it_holds() {
        let wt = Path::new("/home/u/.local/share/cyclix/worktrees/t/r1");
        let git = Path::new("/home/u/src/t/.git");
        let full = FsSpace {
            avail: 0,
            total: 8 << 20,
            fsid: 7,
        };
        let roomy = FsSpace {
            avail: 1 << 30,
            total: 8 << 30,
            fsid: 9,
        };
        assert_eq!(
            full_causes(&[("the run's worktree", wt, full), ("the git dir", git, full)]),
            [
                "project filesystem full (avail 0 B of 8 MiB) at /home/u/.local/share/cyclix/worktrees/t/r1 (the run's worktree): the run's writes there fail with ENOSPC (No space left on device); free space on that file system and run again; also holds the git dir /home/u/src/t/.git"
            ]
        );
        let c = full_causes(&[
            ("the run's worktree", wt, roomy),
            (
                "the git dir",
                git,
                FsSpace {
                    avail: 4096,
                    ..full
                },
            ),
        ]);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].contains("avail 4 KiB of 8 MiB") && c[0].contains("(the git dir)"),
            "{c:?}"
        );
        assert!(full_causes(&[("the run's worktree", wt, roomy)]).is_empty());
        assert!(
            full_causes(&[(
                "x",
                wt,
                FsSpace {
                    avail: FULL_BELOW,
                    ..full
                }
            )])
            .is_empty(),
            "1 MiB left is not full"
        );
    }
}
