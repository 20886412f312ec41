//! The mount checks that need the file system and the host's own view of its paths.
//!
//! Owns: what `spec::mount_guard` cannot know alone. The protected set as this host spells it
//! (cyclix's XDG directories as set, the project's real git dir when `.git` is a file, podman's
//! storage from `podman info`, and the canonical form of every protected path, so a symlinked
//! `~/.config` is still `~/.config`), git directories on disk (a directory named `.git`, a
//! `.git` file, or a directory holding `HEAD`, `objects` and `refs`) in a source, at it or
//! above it, found by a bounded walk that never follows symlinks.
//!
//! Callers: `spec validate` and every spec load (a shallow walk; hitting its bound is a note,
//! not an error), `cyclix check --tenant T` and the run's preflight and prepare phase (a deep
//! walk, podman's real storage; hitting the bound refuses the mount: what cannot be proven
//! clean is not mounted). Every refusal is a [`Diagnostic`] at the mount's `source`, so all of
//! them print as `FILE:LINE:COL: mounts[N].source: message` plus `fix:`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::HostEnv;
use crate::podman::Podman;
use crate::spec::mount_guard::{self, Protected};
use crate::spec::{Diagnostic, Mount, Spec, SpecError};

/// How far a walk over a mount source goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Directory levels below the source.
    pub depth: usize,
    /// Directory entries looked at, in all.
    pub entries: usize,
    /// Hitting the bound refuses the mount (`true`) or only adds a note (`false`).
    pub refuse_at_bound: bool,
}

/// `spec validate` (and every spec load): four levels, 2 000 entries, a note at the bound.
pub const SHALLOW: Bound = Bound {
    depth: 4,
    entries: 2_000,
    refuse_at_bound: false,
};

/// `cyclix check` and the run: 64 levels, 200 000 entries, a refusal at the bound.
pub const DEEP: Bound = Bound {
    depth: 64,
    entries: 200_000,
    refuse_at_bound: true,
};

/// Deadline of the `podman info` the run asks for podman's storage paths.
pub const INFO_DEADLINE: Duration = Duration::from_secs(60);

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// One per refused mount.
    pub diagnostics: Vec<Diagnostic>,
    /// Walks that stopped at a non-refusing bound, as `mounts[N].source: ...` lines.
    pub notes: Vec<String>,
}

/// The protected paths as this host spells them: the pure set (home, repository, cyclix's
/// default directories), cyclix's XDG directories as set, the project's real git dir, the
/// given podman paths, and the canonical form of each one that differs.
#[must_use]
pub fn host_protected(spec: &Spec, env: &HostEnv, podman: &[Protected]) -> Vec<Protected> {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut v = mount_guard::home_paths(&s(&env.home));
    v.extend(mount_guard::repo_paths(&spec.repo.path));
    v.extend(linked_git_dirs(Path::new(&spec.repo.path)));
    v.extend(mount_guard::cyclix_paths(
        &s(&env.config_home),
        &s(&env.data_home),
        &s(&env.state_home),
        env.runtime_dir.as_deref().map(s).as_deref(),
    ));
    v.extend(podman.iter().cloned());
    let canonical: Vec<Protected> = v
        .iter()
        .filter_map(|p| {
            let real = std::fs::canonicalize(&p.path).ok()?;
            let real = s(&real);
            (real != p.path).then(|| Protected {
                path: real,
                ..p.clone()
            })
        })
        .collect();
    v.extend(canonical);
    v
}

/// The git dir (and its common dir) a `.git` file in `repo` points at (`gitdir: PATH`, as
/// `git worktree add` and submodules write it).
fn linked_git_dirs(repo: &Path) -> Vec<Protected> {
    let Ok(text) = std::fs::read_to_string(repo.join(".git")) else {
        return Vec::new();
    };
    let Some(dir) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let dir = repo.join(dir.trim());
    let mut v = vec![Protected::whole(
        dir.to_string_lossy(),
        "the project's git directory",
    )];
    if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
        v.push(Protected::whole(
            dir.join(common.trim()).to_string_lossy(),
            "the project's git directory",
        ));
    }
    v
}

/// Whether `dir` is a git directory: `HEAD` a file, `objects` and `refs` directories (what
/// git itself looks for), or anything named `.git`.
fn is_git_dir(dir: &Path) -> bool {
    if dir.file_name().is_some_and(|n| n == ".git") {
        return dir.symlink_metadata().is_ok();
    }
    let is = |rel: &str, want_dir: bool| {
        dir.join(rel)
            .symlink_metadata()
            .is_ok_and(|m| if want_dir { m.is_dir() } else { m.is_file() })
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

/// What the walk below a source found.
enum Walk {
    /// Nothing (within the bound).
    Clean,
    /// A git directory.
    Git(PathBuf),
    /// The bound was hit after this many entries, this deep.
    Bound(usize, usize),
}

/// Breadth-first over `root` (never following symlinks), looking for a git directory.
fn walk(root: &Path, bound: Bound) -> Walk {
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
    let mut seen = 0usize;
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue; // unreadable here is unreadable in the sandbox too
        };
        for entry in rd.flatten() {
            seen += 1;
            if seen > bound.entries {
                return Walk::Bound(bound.entries, depth);
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if entry.file_name() == ".git" || (kind.is_dir() && is_git_dir(&path)) {
                return Walk::Git(path);
            }
            if kind.is_dir() {
                if depth + 1 >= bound.depth {
                    return Walk::Bound(seen, bound.depth);
                }
                queue.push_back((path, depth + 1));
            }
        }
    }
    Walk::Clean
}

/// The refusal (or note) for one mount's source, from the disk.
fn scan_one(
    (i, m): (usize, &Mount),
    tenant: &str,
    protected: &[Protected],
    bound: Bound,
    out: &mut Scan,
) {
    let source = Path::new(&m.source);
    let real = std::fs::canonicalize(source)
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    for spelled in std::iter::once(m.source.as_str()).chain(real.as_deref()) {
        if let Some(c) = mount_guard::conflict(spelled, protected) {
            let (message, fix) = mount_guard::explain(&m.source, &c);
            out.diagnostics
                .push(mount_guard::diagnostic(i, m, message, fix));
            return;
        }
    }
    let git = |how: &str, found: &Path| {
        let (message, fix) = mount_guard::explain_git(&m.source, how, &found.to_string_lossy());
        mount_guard::diagnostic(i, m, message, fix)
    };
    if let Some(above) = source.ancestors().skip(1).find(|a| is_git_dir(a)) {
        out.diagnostics.push(git("lies inside", above));
        return;
    }
    if !source.is_dir() || source.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
        if source.file_name().is_some_and(|n| n == ".git") && source.exists() {
            out.diagnostics.push(git("is", source));
        }
        return; // a file, or missing: the preflight's symlink walk names what is missing
    }
    if is_git_dir(source) {
        out.diagnostics.push(git("is", source));
        return;
    }
    match walk(source, bound) {
        Walk::Clean => {}
        Walk::Git(found) => out.diagnostics.push(git("contains", &found)),
        Walk::Bound(seen, depth) => {
            let what = format!(
                "mount source `{}` was not searched to the end for git directories: the walk stopped at its bound ({} entries, {} levels) after {seen} entries, {depth} levels down",
                m.source, bound.entries, bound.depth
            );
            if bound.refuse_at_bound {
                out.diagnostics.push(mount_guard::diagnostic(
                    i,
                    m,
                    format!("{what}; a source that cannot be proven free of git directories is not mounted"),
                    format!(
                        "mount a smaller directory (at most {} entries, {} levels deep) that holds only the data the agent needs",
                        bound.entries, bound.depth
                    ),
                ));
            } else {
                out.notes.push(format!(
                    "mounts[{i}].source: {what}; `cyclix check --tenant {tenant}` and the run walk it fully"
                ));
            }
        }
    }
}

/// Scans every mount of `spec` against the host's protected set (with `podman`'s storage
/// paths) and the disk.
#[must_use]
pub fn scan(spec: &Spec, env: &HostEnv, podman: &[Protected], bound: Bound) -> Scan {
    let mut out = Scan::default();
    if spec.mounts.is_empty() {
        return out;
    }
    let protected = host_protected(spec, env, podman);
    for (i, m) in spec.mounts.iter().enumerate() {
        scan_one((i, m), &spec.tenant, &protected, bound, &mut out);
    }
    out
}

/// Podman's storage paths for the run: from `podman info` (the real ones), else from
/// `storage.conf` and podman's defaults when podman cannot answer.
#[must_use]
pub fn podman_storage(env: &HostEnv) -> Vec<Protected> {
    if let Ok(info) = Podman::new().info(INFO_DEADLINE) {
        mount_guard::podman_paths(&info.graph_root, &info.run_root, &info.volume_path)
    } else {
        let graphroot = crate::host::storage_conf::of(env);
        mount_guard::podman_paths(&graphroot.to_string_lossy(), "", "")
    }
}

/// The run's mount guard (preflight and prepare): the deep scan with podman's real storage.
/// `None` when every mount may be bound; else the refusal as `spec validate` prints one
/// (`FILE:LINE:COL: mounts[N].source: message` + `fix:`), `file` being the spec's path.
#[must_use]
pub fn run_refusal(spec: &Spec, file: &str, env: &HostEnv) -> Option<String> {
    if spec.mounts.is_empty() {
        return None;
    }
    let found = scan(spec, env, &podman_storage(env), DEEP);
    (!found.diagnostics.is_empty()).then(|| {
        SpecError {
            file: file.to_string(),
            diagnostics: found.diagnostics,
        }
        .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{SpecContext, parse};
    use std::fs;

    struct World {
        _dir: tempfile::TempDir,
        home: PathBuf,
        env: HostEnv,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home/u");
        fs::create_dir_all(home.join("proj/.git")).expect("mkdir");
        let env = HostEnv {
            home: home.clone(),
            runtime_dir: Some(dir.path().join("run")),
            config_home: dir.path().join("xdg/config"),
            data_home: dir.path().join("xdg/data"),
            state_home: dir.path().join("xdg/state"),
            config_file: None,
        };
        World {
            _dir: dir,
            home,
            env,
        }
    }

    /// The spec with one mount of `source`, validated with `w`'s home.
    fn spec(w: &World, source: &Path) -> Spec {
        let text = format!(
            "tenant: t\nrepo: {{ path: {}/proj, base: main }}\ntask: {{ text: x }}\n\
             agent: {{ image: localhost/a, unpinned_local_image: true, command: [a] }}\n\
             gate: {{ image: localhost/a, unpinned_local_image: true, command: [b] }}\n\
             mounts:\n  - {{ source: \"{}\", target: /mnt/d }}\n",
            w.home.display(),
            source.display()
        );
        let ctx = SpecContext {
            file: "t.yaml".into(),
            home: w.home.display().to_string(),
            runtime_dir: "/run/user/1000".into(),
        };
        parse(&text, &ctx).expect("valid without the disk")
    }

    fn refusal(w: &World, source: &Path, podman: &[Protected], bound: Bound) -> String {
        let s = spec(w, source);
        let found = scan(&s, &w.env, podman, bound);
        assert_eq!(found.diagnostics.len(), 1, "{source:?}: {found:?}");
        let text = SpecError {
            file: "t.yaml".into(),
            diagnostics: found.diagnostics,
        }
        .to_string();
        assert!(
            text.starts_with("t.yaml:7:15: mounts[0].source: mount source `"),
            "{text}"
        );
        assert!(text.contains("\n  fix: "), "{text}");
        text
    }

    fn git_repo(at: &Path) {
        fs::create_dir_all(at.join("objects")).expect("mkdir");
        fs::create_dir_all(at.join("refs")).expect("mkdir");
        fs::write(at.join("HEAD"), "ref: refs/heads/main\n").expect("write");
    }

    #[test]
    fn a_plain_data_directory_passes_deep_and_shallow() {
        let w = world();
        let data = w.home.join("datasets/x");
        fs::create_dir_all(data.join("a/b")).expect("mkdir");
        fs::write(data.join("a/b/f.csv"), "1,2\n").expect("write");
        for bound in [SHALLOW, DEEP] {
            assert_eq!(scan(&spec(&w, &data), &w.env, &[], bound), Scan::default());
        }
    }

    #[test]
    fn another_git_dir_inside_the_source_is_refused() {
        let w = world();
        let data = w.home.join("datasets/x");
        fs::create_dir_all(data.join("a/clone/.git")).expect("mkdir");
        let t = refusal(&w, &data, &[], SHALLOW);
        assert!(
            t.contains(&format!(
                "contains a git directory `{}/a/clone/.git`",
                data.display()
            )),
            "{t}"
        );
        // A bare repository (HEAD + objects + refs) and a `.git` file count too.
        let bare = w.home.join("datasets/bare");
        git_repo(&bare.join("deep/r.git"));
        let t = refusal(&w, &bare, &[], DEEP);
        assert!(t.contains("contains a git directory"), "{t}");
        let file = w.home.join("datasets/wt");
        fs::create_dir_all(&file).expect("mkdir");
        fs::write(file.join(".git"), "gitdir: /elsewhere\n").expect("write");
        assert!(refusal(&w, &file, &[], SHALLOW).contains("contains a git directory"));
        // The source itself, or a source inside a bare repository.
        git_repo(&w.home.join("srv/r.git"));
        let t = refusal(&w, &w.home.join("srv/r.git"), &[], SHALLOW);
        assert!(t.contains("is a git directory"), "{t}");
        fs::create_dir_all(w.home.join("srv/r.git/objects/pack")).expect("mkdir");
        let t = refusal(&w, &w.home.join("srv/r.git/objects/pack"), &[], SHALLOW);
        assert!(t.contains("lies inside a git directory"), "{t}");
    }

    #[test]
    fn the_bound_is_a_note_at_validate_time_and_a_refusal_for_the_run() {
        let w = world();
        let data = w.home.join("datasets/deep");
        let mut p = data.clone();
        for i in 0..6 {
            p.push(format!("d{i}"));
        }
        fs::create_dir_all(p.join(".git")).expect("mkdir");
        let found = scan(&spec(&w, &data), &w.env, &[], SHALLOW);
        assert!(found.diagnostics.is_empty(), "{found:?}");
        assert_eq!(found.notes.len(), 1);
        assert!(
            found.notes[0].starts_with("mounts[0].source: mount source `")
                && found.notes[0].contains("stopped at its bound")
                && found.notes[0].contains("cyclix check --tenant t"),
            "{found:?}"
        );
        // The deep walk finds what the shallow one could not.
        let t = refusal(&w, &data, &[], DEEP);
        assert!(t.contains("contains a git directory"), "{t}");
        let tight = Bound {
            depth: 3,
            entries: 10,
            refuse_at_bound: true,
        };
        let t = refusal(&w, &data, &[], tight);
        assert!(
            t.contains("cannot be proven free of git directories"),
            "{t}"
        );
        assert!(t.contains("fix: mount a smaller directory"), "{t}");
    }

    #[test]
    fn cyclix_dirs_as_set_and_podman_storage_are_refused() {
        let w = world();
        let state = w.env.state_home.join("cyclix/runs");
        fs::create_dir_all(&state).expect("mkdir");
        let t = refusal(&w, &state, &[], SHALLOW);
        assert!(
            t.contains("lies inside cyclix's state (run records)"),
            "{t}"
        );
        let t = refusal(&w, &w.env.data_home, &[], SHALLOW);
        assert!(
            t.contains("contains cyclix's data (every run's work tree)"),
            "{t}"
        );
        let graph = w.home.join("pod/storage");
        let podman = mount_guard::podman_paths(&graph.to_string_lossy(), "", "");
        let t = refusal(&w, &graph.join("overlay"), &podman, DEEP);
        assert!(
            t.contains("lies inside podman's storage (graph root, with its secrets)"),
            "{t}"
        );
    }

    #[test]
    fn protected_paths_are_compared_after_symlink_resolution() {
        let w = world();
        // ~/.ssh is a link to a directory elsewhere: mounting that directory is mounting ~/.ssh.
        let keys = w.home.join("vault/keys");
        fs::create_dir_all(&keys).expect("mkdir");
        std::os::unix::fs::symlink(&keys, w.home.join(".ssh")).expect("symlink");
        let real = fs::canonicalize(&keys).expect("canonical");
        let t = refusal(&w, &real, &[], SHALLOW);
        assert!(t.contains("is your SSH keys"), "{t}");
        // The project's real git dir, named by a `.git` file (a linked worktree).
        let w2 = world();
        let proj = w2.home.join("proj");
        fs::remove_dir(proj.join(".git")).expect("rmdir");
        let gitdir = w2.home.join("store/proj.git");
        git_repo(&gitdir);
        fs::write(proj.join(".git"), format!("gitdir: {}\n", gitdir.display())).expect("write");
        let t = refusal(&w2, &w2.home.join("store"), &[], SHALLOW);
        assert!(t.contains("contains the project's git directory"), "{t}");
    }
}
