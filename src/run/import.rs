//! The run's commits come back as data (issue 11, item 2).
//!
//! Once the agent has ended and the escape check has run, a short-lived container of
//! [`crate::images::GIT_IMAGE`] (run by image id) reads the run's private repository —
//! mounted read-only, `--network=none`, `--read-only`, `--cap-drop=all`, no-new-privileges, a
//! deadline, no log driver — and prints a `git bundle` of `BASE..refs/heads/BRANCH` to stdout,
//! which cyclix writes to a file in the run dir (never mounted anywhere) with a size cap. Any
//! program the agent planted in its own repository's configuration (fsmonitor, filters,
//! aliases…) can run only in that container, which sees nothing but the agent's own tree and
//! can only print: the host then checks the bundle as untrusted data
//! ([`crate::git::bundle::import`]) before one object of it reaches the user's repository.
//! A second such container prints the work the agent left uncommitted as a binary diff
//! against the branch tip (staged in a throwaway index in its own `/tmp`), kept beside the run
//! record.
//!
//! The container's exit status tells "no commits" (4) and "the branch is gone" (3) apart from
//! a bundle (0); it is the agent's to lie about, and a lie only hides the agent's own work.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest bundle accepted: 512 MiB (bytes). A bigger one is refused, the run's commits
/// stay unimported, and the record says why.
pub const BUNDLE_CAP: u64 = 512 * 1024 * 1024;

/// The largest uncommitted diff kept beside the record: 16 MiB (bytes); a bigger one is cut
/// (the record says so).
pub const DIFF_CAP: u64 = 16 * 1024 * 1024;

/// Deadline of one export container: 120 s (a hostile fsmonitor or filter that hangs is
/// killed by it).
pub const EXPORT_DEADLINE: Duration = Duration::from_secs(120);

/// Where the private repository is mounted in the export container.
const REPO: &str = "/repo";

/// git options of the export container: [`crate::git::hardened::EXPORT_CONFIG`].
const INNER_CONFIG: [&str; 23] = crate::git::hardened::EXPORT_CONFIG;

/// What one export asks for.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    /// Run id (labels, container name).
    pub run_id: String,
    /// Tenant (label).
    pub tenant: String,
    /// The private repository (its work tree; `.git` inside).
    pub repo: PathBuf,
    /// The run branch in it, e.g. `cyclix/acme/RUN`.
    pub branch: String,
    /// The base commit (40 or 64 hex digits).
    pub base: String,
    /// The file the output goes to (must not exist).
    pub out: PathBuf,
}

/// What the export container reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// A bundle was written to the request's `out`.
    Bundle,
    /// The branch still points at the base.
    NoCommits,
    /// The branch no longer exists in the private repository.
    BranchGone,
}

/// The shell script of the bundle export: `$1` base, `$2` branch ref.
const BUNDLE_SCRIPT: &str = r#"set -u
tip=$(git "$@CFG" rev-parse --verify --quiet "$2^{commit}") || exit 3
[ "$tip" = "$1" ] && exit 4
exec git "$@CFG" bundle create --quiet - "$1..$2""#;

/// The shell script that writes a gate's tree (`$1`, a tree id) into `/out` from the objects
/// cyclix packed in the user's repository (`/in/objects`, an alternate of a throwaway bare
/// repository in `/tmp`), with a throwaway index; attributes are read from `$2` (the base
/// commit's tree: `GIT_ATTR_SOURCE`, git 2.40), so nothing the run's commits wrote decides how
/// a file is written out.
const FILL_SCRIPT: &str = r#"set -u
GIT_DIR=$(mktemp -d) || exit 5
export GIT_DIR
git "$@CFG" init --quiet --bare "$GIT_DIR" || exit 5
echo /in/objects > "$GIT_DIR/objects/info/alternates" || exit 5
GIT_INDEX_FILE=$(mktemp) || exit 5
export GIT_INDEX_FILE
git "$@CFG" read-tree "$1" || exit 5
GIT_ATTR_SOURCE=$2
export GIT_ATTR_SOURCE
exec git "$@CFG" --work-tree=/out checkout-index --all --force"#;

/// The shell script of the uncommitted diff: every change in the work tree against the run
/// branch's tip (`$2`, not `HEAD`: the agent may have switched branches), untracked files
/// included, in a throwaway index and object directory in `/tmp` (the repository is mounted
/// read-only; its objects are an alternate).
const DIFF_SCRIPT: &str = r#"set -u
cd "$GIT_WORK_TREE" || exit 5
GIT_INDEX_FILE=$(mktemp) || exit 5
GIT_OBJECT_DIRECTORY=$(mktemp -d) || exit 5
GIT_ALTERNATE_OBJECT_DIRECTORIES="$GIT_DIR/objects"
export GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
cp "$GIT_DIR/index" "$GIT_INDEX_FILE" 2>/dev/null || :
git "$@CFG" add --all --force -- . >/dev/null 2>&1 || exit 5
exec git "$@CFG" diff --cached --binary --no-ext-diff --no-textconv --no-color "$2""#;

fn script(text: &str) -> String {
    let cfg: Vec<String> = INNER_CONFIG.iter().map(|kv| format!("-c {kv}")).collect();
    text.replace("\"$@CFG\"", &cfg.join(" "))
}

/// `--env=GIT_NO_LAZY_FETCH=1` ([`crate::git::hardened::EXPORT_ENV`]).
fn lazy_fetch_env() -> String {
    let (k, v) = crate::git::hardened::EXPORT_ENV[0];
    format!("--env={k}={v}")
}

/// `podman run` options of an export container (see the module doc).
#[must_use]
pub fn run_args(repo: &Path) -> Vec<String> {
    vec![
        "--network=none".into(),
        "--read-only".into(),
        "--cap-drop=all".into(),
        "--security-opt=no-new-privileges".into(),
        "--log-driver=none".into(),
        "--pull=never".into(),
        "--tmpfs=/tmp:rw,nosuid,nodev,size=256m".into(),
        format!("--volume={}:{REPO}:ro,nosuid,nodev,noexec", repo.display()),
        format!("--env=GIT_DIR={REPO}/.git"),
        // The walk must see the history as committed: the agent's replace refs and grafts
        // would hide the base and make a legit branch look rootless.
        "--env=GIT_NO_REPLACE_OBJECTS=1".into(),
        "--env=GIT_GRAFT_FILE=/dev/null".into(),
        lazy_fetch_env(),
        format!("--env=GIT_WORK_TREE={REPO}"),
        format!("--workdir={REPO}"),
    ]
}

/// The container's argv for the bundle (`kind` = `bundle`) or the diff (`diff`).
#[must_use]
pub fn argv(kind: &str, base: &str, branch_ref: &str) -> Vec<String> {
    let body = match kind {
        "bundle" => script(BUNDLE_SCRIPT),
        _ => script(DIFF_SCRIPT),
    };
    vec![
        "sh".into(),
        "-c".into(),
        body,
        "cyclix-export".into(),
        base.into(),
        branch_ref.into(),
    ]
}

/// Runs one export container through `podman` (the image by id); `kind` as for [`argv`].
/// Returns the container's exit code.
///
/// # Errors
/// podman failed, the deadline or the cap passed (the container is removed at once then).
pub fn run_export(
    podman: &crate::podman::Podman,
    image_id: &str,
    req: &ExportRequest,
    kind: &str,
    cap: u64,
) -> anyhow::Result<i32> {
    use anyhow::Context as _;
    let name = crate::naming::RunNames::new(&req.run_id).role(&format!("export-{kind}"));
    let opts = run_args(&req.repo);
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let branch_ref = format!("refs/heads/{}", req.branch);
    let cmd = argv(kind, &req.base, &branch_ref);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let labels = [
        (crate::naming::label::RUN, req.run_id.as_str()),
        (crate::naming::label::TENANT, req.tenant.as_str()),
        (crate::naming::label::ROLE, "export"),
    ];
    let r = podman.run_rm_to_file(
        &name,
        &labels,
        &opts,
        image_id,
        &cmd,
        EXPORT_DEADLINE,
        (&req.out, cap),
    );
    match r {
        Ok(out) => out.status.code().with_context(|| {
            format!(
                "the export container {name} was killed by a signal ({}): {}",
                out.status,
                out.stderr.trim()
            )
        }),
        Err(e) => {
            let _ = podman.rm_force(&name);
            Err(e).with_context(|| format!("exporting the run's {kind} (container {name})"))
        }
    }
}

/// What one fill of a gate's tree asks for: `tree` of the objects in `objects` (packed by
/// [`crate::git::Git::pack_trees`] in the user's repository) written into the new, empty
/// directory `out`.
#[derive(Debug, Clone)]
pub struct FillRequest {
    /// Run id (labels, container name).
    pub run_id: String,
    /// Tenant (label).
    pub tenant: String,
    /// The container's role in its name (`fill-gate`, `fill-gate-base`).
    pub role: String,
    /// The object directory holding the pack.
    pub objects: PathBuf,
    /// The tree to write out.
    pub tree: String,
    /// The tree whose `.gitattributes` apply (the base commit's).
    pub attr_tree: String,
    /// The directory the tree is written into (exists, empty).
    pub out: PathBuf,
    /// Where the container's stdout goes (created new; nothing is expected there).
    pub log: PathBuf,
}

/// `podman run` options of a fill container: hardened as an export container, the packed
/// objects read-only at `/in/objects` and the one writable mount, `/out`.
#[must_use]
pub fn fill_args(objects: &Path, out: &Path) -> Vec<String> {
    vec![
        "--network=none".into(),
        "--read-only".into(),
        "--cap-drop=all".into(),
        "--security-opt=no-new-privileges".into(),
        "--log-driver=none".into(),
        "--pull=never".into(),
        "--tmpfs=/tmp:rw,nosuid,nodev,size=64m".into(),
        format!(
            "--volume={}:/in/objects:ro,nosuid,nodev,noexec",
            objects.display()
        ),
        format!("--volume={}:/out:rw,nosuid,nodev", out.display()),
        "--env=GIT_NO_REPLACE_OBJECTS=1".into(),
        lazy_fetch_env(),
        "--workdir=/tmp".into(),
    ]
}

/// The fill container's argv: [`FILL_SCRIPT`] with the tree and the attributes' tree.
#[must_use]
pub fn fill_argv(tree: &str, attr_tree: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        script(FILL_SCRIPT),
        "cyclix-fill".into(),
        tree.into(),
        attr_tree.into(),
    ]
}

/// Runs one fill container through `podman` (the image by id).
///
/// # Errors
/// podman failed, the deadline passed, or the container's git exited non-zero.
pub fn run_fill(
    podman: &crate::podman::Podman,
    image_id: &str,
    req: &FillRequest,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let name = crate::naming::RunNames::new(&req.run_id).role(&req.role);
    let opts = fill_args(&req.objects, &req.out);
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let cmd = fill_argv(&req.tree, &req.attr_tree);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let labels = [
        (crate::naming::label::RUN, req.run_id.as_str()),
        (crate::naming::label::TENANT, req.tenant.as_str()),
        (crate::naming::label::ROLE, "export"),
    ];
    let _ = std::fs::remove_file(&req.log);
    let r = podman.run_rm_to_file(
        &name,
        &labels,
        &opts,
        image_id,
        &cmd,
        EXPORT_DEADLINE,
        (&req.log, 1 << 20),
    );
    let _ = std::fs::remove_file(&req.log);
    let out = match r {
        Ok(out) => out,
        Err(e) => {
            let _ = podman.rm_force(&name);
            return Err(e)
                .with_context(|| format!("writing out tree {} (container {name})", req.tree));
        }
    };
    match out.status.code() {
        Some(0) => Ok(()),
        code => anyhow::bail!(
            "writing out tree {} for the gate failed: the container {name}'s git exited {} ({})",
            req.tree,
            code.map_or_else(|| out.status.to_string(), |c| c.to_string()),
            out.stderr.trim()
        ),
    }
}

/// Reads the exit code of the bundle export as an [`Export`].
///
/// # Errors
/// Any other code: the container failed (its own git refused the repository, e.g. the agent
/// broke it).
pub fn bundle_outcome(code: i32) -> Result<Export, String> {
    match code {
        0 => Ok(Export::Bundle),
        3 => Ok(Export::BranchGone),
        4 => Ok(Export::NoCommits),
        c => Err(format!(
            "the export container's git exited {c}: the private repository could not be \
             bundled (the agent may have broken it)"
        )),
    }
}

/// How many files an uncommitted diff touches (`diff --git` headers). The diff is the
/// agent's: this is a count for the record, never parsed further.
#[must_use]
pub fn files_in_diff(diff: &[u8]) -> usize {
    let mut n = usize::from(diff.starts_with(b"diff --git "));
    n += diff.windows(12).filter(|w| w == b"\ndiff --git ").count();
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_container_is_hardened_and_sees_only_the_private_repository() {
        let a = run_args(Path::new("/x/work"));
        for want in [
            "--network=none",
            "--read-only",
            "--cap-drop=all",
            "--security-opt=no-new-privileges",
            "--log-driver=none",
            "--volume=/x/work:/repo:ro,nosuid,nodev,noexec",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} missing from {a:?}");
        }
        assert_eq!(a.iter().filter(|x| x.starts_with("--volume")).count(), 1);
        let v = argv("bundle", "ab", "refs/heads/cyclix/t/r");
        assert!(
            v[2].contains("-c safe.directory=* -c core.hooksPath=/dev/null"),
            "{}",
            v[2]
        );
        assert!(
            v[2].contains("bundle create --quiet - \"$1..$2\""),
            "{}",
            v[2]
        );
        assert_eq!(
            &v[4..],
            &["ab".to_string(), "refs/heads/cyclix/t/r".to_string()]
        );
        assert!(argv("diff", "ab", "r")[2].contains("--no-ext-diff --no-textconv"));
    }

    #[test]
    fn the_fill_script_writes_a_packed_tree_with_the_base_attributes() {
        // The script, run by the host's sh and git with its two paths moved into a scratch
        // directory (the e2e tests run it in the container).
        let tmp = tempfile::tempdir().expect("tmp");
        let user = tmp.path().join("u");
        let g = crate::git::Git::init_repo(
            &user,
            &[("a.txt", "a\n"), ("t/x.py", "x\n"), (".gitattributes", "")],
            "first",
        )
        .expect("repo");
        let base = g.rev_parse_commit("main").expect("base");
        let tree = crate::process::run(
            "git",
            &["-C", &user.to_string_lossy(), "rev-parse", "HEAD^{tree}"],
            None,
            EXPORT_DEADLINE,
            "",
        )
        .expect("tree")
        .stdout
        .trim()
        .to_string();
        let objects = g
            .pack_trees(&[&tree], &tmp.path().join("pack"))
            .expect("pack");
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).expect("out");
        let v = fill_argv(&tree, &tree);
        let body = v[2]
            .replace("/in/objects", &objects.to_string_lossy())
            .replace("/out", &out.to_string_lossy());
        let r = crate::process::run_status(
            "env",
            &["-u", "GIT_DIR", "sh", "-c", &body, "x", &tree, &tree],
            None,
            EXPORT_DEADLINE,
            "",
        )
        .expect("runs");
        assert!(r.status.success(), "{}", r.stderr);
        assert_eq!(
            std::fs::read_to_string(out.join("t/x.py")).expect("x"),
            "x\n"
        );
        assert!(!out.join(".git").exists());
        let _ = base;
        let a = fill_args(Path::new("/o"), Path::new("/w.gate"));
        assert!(
            a.iter()
                .any(|x| x == "--volume=/o:/in/objects:ro,nosuid,nodev,noexec")
        );
        assert_eq!(a.iter().filter(|x| x.starts_with("--volume")).count(), 2);
    }

    #[test]
    fn exit_codes_and_diff_counts() {
        assert_eq!(bundle_outcome(0), Ok(Export::Bundle));
        assert_eq!(bundle_outcome(4), Ok(Export::NoCommits));
        assert_eq!(bundle_outcome(3), Ok(Export::BranchGone));
        assert!(bundle_outcome(128).is_err());
        assert_eq!(files_in_diff(b""), 0);
        assert_eq!(
            files_in_diff(b"diff --git a/x b/x\n+1\ndiff --git a/y b/y\n+2\n"),
            2
        );
    }

    #[test]
    fn the_scripts_run_against_a_real_repository() {
        // The same scripts, run by the host's sh and git on a scratch repository (the e2e
        // tests run them in the container).
        let tmp = tempfile::tempdir().expect("tmp");
        let user = tmp.path().join("u");
        let g = crate::git::Git::init_repo(&user, &[("a", "a\n")], "first").expect("repo");
        let base = g.rev_parse_commit("main").expect("base");
        let work = tmp.path().join("w");
        crate::git::private::create(&user, &work, "cyclix/t/r", &base).expect("private");
        let run = |kind: &str| {
            let v = argv(kind, &base, "refs/heads/cyclix/t/r");
            let v: Vec<&str> = v.iter().map(String::as_str).collect();
            let gd = format!("GIT_DIR={}/.git", work.display());
            let wt = format!("GIT_WORK_TREE={}", work.display());
            let mut full = vec![gd.as_str(), wt.as_str()];
            full.extend(v);
            crate::process::run_status("env", &full, None, EXPORT_DEADLINE, "").expect("runs")
        };
        assert_eq!(run("bundle").status.code(), Some(4));
        std::fs::write(work.join("new.txt"), "n\n").expect("write");
        let d = run("diff");
        assert!(d.status.success(), "{}", d.stderr);
        assert_eq!(files_in_diff(d.stdout.as_bytes()), 1, "{}", d.stdout);
    }
}
