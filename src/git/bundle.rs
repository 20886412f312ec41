//! A run's commits come back as data: a `git bundle` (gitformat-bundle(5)) that a short-lived
//! container wrote from the run's private repository, checked here before any of it reaches
//! the user's repository.
//!
//! [`parse_header`] reads the bundle's text header itself (pure: no git runs on it) and
//! [`check_header`] enforces the contract — exactly one ref, named as asked; its only
//! prerequisite the run's base; no filter capability; the repository's object format — and
//! [`import`] then lets git verify and fetch it in the user's repository with
//! [`super::hardened`] options (so nothing in the bundle can make git start a program), and
//! creates the run branch with a create-only ref update.

use std::path::Path;

use super::{GIT_WORKTREE_DEADLINE, GitError, HINT, Result, hardened};
use crate::process;

/// How much of a bundle file is read for its header: 64 KiB (one ref and one prerequisite
/// take about 150 bytes; a header larger than this is refused).
pub const HEADER_CAP: usize = 64 * 1024;

/// A bundle's header (gitformat-bundle(5)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// 2 or 3.
    pub version: u8,
    /// v3 capabilities, `key` or `key=value`.
    pub capabilities: Vec<String>,
    /// Prerequisite object names (the `-OID comment` lines).
    pub prerequisites: Vec<String>,
    /// `(object name, ref name)` of each ref line.
    pub refs: Vec<(String, String)>,
}

fn is_oid(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses the header at the start of `bytes` (up to the empty line that ends it).
///
/// # Errors
/// A description of what is wrong: no signature, a line that is not UTF-8 or not of the
/// documented shape, no end within [`HEADER_CAP`] bytes.
pub fn parse_header(bytes: &[u8]) -> std::result::Result<Header, String> {
    let window = &bytes[..bytes.len().min(HEADER_CAP)];
    if !window.starts_with(b"# v2 git bundle\n") && !window.starts_with(b"# v3 git bundle\n") {
        let first: String = String::from_utf8_lossy(&window[..window.len().min(40)]).into();
        return Err(format!("not a git bundle (it starts {first:?})"));
    }
    let mut h = Header::default();
    let mut rest = window;
    let mut first = true;
    loop {
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            return Err(format!(
                "the header does not end within {HEADER_CAP} bytes (or the file is truncated)"
            ));
        };
        let line = std::str::from_utf8(&rest[..nl])
            .map_err(|_| "a header line is not UTF-8".to_string())?;
        rest = &rest[nl + 1..];
        if first {
            h.version = match line {
                "# v2 git bundle" => 2,
                "# v3 git bundle" => 3,
                other => return Err(format!("not a git bundle (first line {other:?})")),
            };
            first = false;
            continue;
        }
        if line.is_empty() {
            return Ok(h);
        }
        if let Some(cap) = line.strip_prefix('@') {
            if h.version < 3 || !h.prerequisites.is_empty() || !h.refs.is_empty() {
                return Err(format!("capability {cap:?} out of place"));
            }
            h.capabilities.push(cap.to_string());
        } else if let Some(p) = line.strip_prefix('-') {
            let oid = p.split(' ').next().unwrap_or_default();
            if !is_oid(oid) {
                return Err(format!("prerequisite line {line:?} has no object name"));
            }
            h.prerequisites.push(oid.to_string());
        } else {
            let (oid, name) = line
                .split_once(' ')
                .ok_or_else(|| format!("ref line {line:?} has no ref name"))?;
            if !is_oid(oid) || name.is_empty() || name.contains(['\0', ' ']) {
                return Err(format!("ref line {line:?} is not `OID REFNAME`"));
            }
            h.refs.push((oid.to_string(), name.to_string()));
        }
    }
}

/// Checks a parsed header against what the run asked for: exactly one ref, named `want_ref`;
/// exactly one prerequisite, `base`; capabilities only `object-format=FORMAT`. Returns the
/// ref's object name (the run's tip).
///
/// # Errors
/// What differs, in words for the record.
pub fn check_header(
    h: &Header,
    want_ref: &str,
    base: &str,
    format: &str,
) -> std::result::Result<String, String> {
    for c in &h.capabilities {
        if c != &format!("object-format={format}") {
            return Err(format!(
                "the bundle has capability `{c}` (only object-format={format} is accepted)"
            ));
        }
    }
    if format != "sha1" && h.capabilities.is_empty() {
        return Err(format!(
            "the bundle does not say object-format={format} (the repository's)"
        ));
    }
    let [(tip, name)] = h.refs.as_slice() else {
        let names: Vec<&str> = h.refs.iter().map(|(_, n)| n.as_str()).collect();
        return Err(format!(
            "the bundle must hold exactly one ref, `{want_ref}`; it holds {}: {}",
            names.len(),
            names.join(", ")
        ));
    };
    if name != want_ref {
        return Err(format!(
            "the bundle's ref is `{name}`, not the run's `{want_ref}`"
        ));
    }
    if h.prerequisites.as_slice() != [base.to_string()] {
        return Err(format!(
            "the bundle's prerequisites are [{}], not exactly the run's base {base}: its \
             history does not start at the base",
            h.prerequisites.join(", ")
        ));
    }
    if tip == base {
        return Err("the bundle's ref points at the base itself".into());
    }
    Ok(tip.clone())
}

/// The options of a hardened git call in `repo` ([`hardened`]).
fn hopts(stdin: Option<&[u8]>) -> process::Opts<'_> {
    process::Opts {
        stdin,
        deadline: GIT_WORKTREE_DEADLINE,
        hint: HINT,
        env: &hardened::ENV,
        env_remove_prefixes: &hardened::REMOVE_PREFIXES,
        stdout_file: None,
    }
}

/// Runs hardened git in `repo`: `Ok(output)` whatever the exit status.
fn hgit(repo: &Path, args: &[&str], stdin: Option<&[u8]>, action: &str) -> Result<process::Output> {
    let dir = repo.to_string_lossy();
    process::run_with("git", &hardened::argv(&dir, args), &hopts(stdin)).map_err(|source| {
        GitError::Command {
            action: action.to_string(),
            source,
        }
    })
}

/// Like [`hgit`], and a non-zero exit is an error naming `action`.
///
/// # Errors
/// [`GitError::Command`].
pub(crate) fn hgit_ok(
    repo: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
    action: &str,
) -> Result<process::Output> {
    let dir = repo.to_string_lossy();
    process::run_with_ok("git", &hardened::argv(&dir, args), &hopts(stdin)).map_err(|source| {
        GitError::Command {
            action: action.to_string(),
            source,
        }
    })
}

/// The commits `base..tip` of `repo`, oldest first, as `(sha, subject)`, with hardened options
/// (no signature shown or checked, no pager, no external diff) and subjects made
/// [`crate::text::printable`].
///
/// # Errors
/// [`GitError::Command`]; [`GitError::Output`] for a line without the separator.
pub fn commits(repo: &Path, base: &str, tip: &str) -> Result<Vec<super::Commit>> {
    let range = format!("{base}..{tip}");
    let action = format!("listing the run's commits {range} in {}", repo.display());
    let out = hgit_ok(
        repo,
        &[
            "log",
            "--no-show-signature",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--reverse",
            "--format=%H%x1f%s",
            "--end-of-options",
            &range,
            "--",
        ],
        None,
        &action,
    )?;
    let mut v = super::parse_log(&out.stdout, &action)?;
    for c in &mut v {
        c.subject = crate::text::printable(&c.subject);
    }
    Ok(v)
}

/// Why an import was refused: the bundle broke the contract (a finding about the run's
/// output, not a cyclix failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Imports the bundle at `bundle` into `repo`: checks its header ([`check_header`]), lets git
/// verify it (`git bundle verify`), fetches its one ref's objects with fsck
/// (`--no-write-fetch-head`: no file of the repository changes but its objects), checks that
/// the tip descends from `base`, and creates `dest_ref` at the tip with a create-only update
/// (`update-ref --stdin`: `create`). Returns the tip, or why the bundle was refused.
///
/// # Errors
/// git could not run, or the file could not be read ([`GitError`]); a refusal is
/// `Ok(Err(Refused))`.
pub fn import(
    repo: &Path,
    bundle: &Path,
    want_ref: &str,
    base: &str,
    dest_ref: &str,
) -> Result<std::result::Result<String, Refused>> {
    let action = |what: &str| format!("{what} {} into {}", bundle.display(), repo.display());
    let mut head = vec![0u8; HEADER_CAP];
    let n = {
        use std::io::Read as _;
        let mut f = std::fs::File::open(bundle).map_err(|source| GitError::Io {
            action: format!("opening {}", bundle.display()),
            source,
        })?;
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(source) => {
                    return Err(GitError::Io {
                        action: format!("reading {}", bundle.display()),
                        source,
                    });
                }
            }
        }
        n
    };
    let format = hgit_ok(
        repo,
        &["rev-parse", "--show-object-format"],
        None,
        &action("finding the object format for"),
    )?
    .stdout
    .trim()
    .to_string();
    let header = match parse_header(&head[..n]) {
        Ok(h) => h,
        Err(why) => return Ok(Err(Refused(format!("the bundle is malformed: {why}")))),
    };
    let tip = match check_header(&header, want_ref, base, &format) {
        Ok(t) => t,
        Err(why) => return Ok(Err(Refused(why))),
    };
    let path = bundle.to_string_lossy();
    let verify = hgit(
        repo,
        &["bundle", "verify", "--quiet", &path],
        None,
        &action("verifying"),
    )?;
    // git's words can carry the agent's bytes (fsck's `disallowed submodule url: URL` quotes its
    // `.gitmodules`; git replaces C0 controls only): made printable before any record or
    // summary holds them.
    if !verify.status.success() {
        return Ok(Err(Refused(format!(
            "`git bundle verify` refused it: {}",
            crate::text::printable(&verify.stderr.trim().chars().take(500).collect::<String>())
        ))));
    }
    let fetch = hgit(
        repo,
        &[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--no-auto-maintenance",
            "--no-auto-gc",
            "--",
            &path,
            want_ref,
        ],
        None,
        &action("fetching"),
    )?;
    if !fetch.status.success() {
        return Ok(Err(Refused(format!(
            "fetching it (with fsck) failed: {}",
            crate::text::printable(&fetch.stderr.trim().chars().take(500).collect::<String>())
        ))));
    }
    let anc = hgit(
        repo,
        &["merge-base", "--is-ancestor", base, &tip],
        None,
        &action("checking the ancestry of"),
    )?;
    if anc.status.code() != Some(0) {
        return Ok(Err(Refused(format!(
            "its tip {tip} does not descend from the base {base}"
        ))));
    }
    let stdin = format!("create {dest_ref} {tip}\n");
    hgit_ok(
        repo,
        &["update-ref", "--stdin"],
        Some(stdin.as_bytes()),
        &format!("creating {dest_ref} at {tip} in {}", repo.display()),
    )?;
    Ok(Ok(tip))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn hdr(text: &str) -> Header {
        parse_header(text.as_bytes()).expect("parses")
    }

    #[test]
    fn parses_v2_and_v3_headers() {
        let h = hdr(&format!(
            "# v2 git bundle\n-{A} base commit\n{B} refs/heads/x\n\nPACK"
        ));
        assert_eq!(h.version, 2);
        assert_eq!(h.prerequisites, vec![A.to_string()]);
        assert_eq!(h.refs, vec![(B.to_string(), "refs/heads/x".to_string())]);
        let h = hdr(&format!(
            "# v3 git bundle\n@object-format=sha1\n{B} refs/heads/x\n\n"
        ));
        assert_eq!(h.capabilities, vec!["object-format=sha1".to_string()]);
    }

    #[test]
    fn malformed_headers_are_refused_with_a_reason() {
        for (text, why) in [
            ("PACK....", "not a git bundle"),
            (
                "# v2 git bundle\nnotanoid refs/heads/x\n\n",
                "is not `OID REFNAME`",
            ),
            ("# v2 git bundle\n-zz\n\n", "no object name"),
            ("# v2 git bundle\n@filter=blob:none\n\n", "out of place"),
            ("# v2 git bundle\n", "does not end"),
        ] {
            let e = parse_header(text.as_bytes()).expect_err(text);
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let mut big = b"# v2 git bundle\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', HEADER_CAP));
        assert!(
            parse_header(&big)
                .expect_err("cap")
                .contains("does not end")
        );
    }

    #[test]
    fn the_contract_one_ref_named_as_asked_based_on_the_base() {
        let want = "refs/heads/cyclix/t/r";
        let ok = hdr(&format!("# v2 git bundle\n-{A} c\n{B} {want}\n\n"));
        assert_eq!(check_header(&ok, want, A, "sha1"), Ok(B.to_string()));
        let two = hdr(&format!(
            "# v2 git bundle\n-{A} c\n{B} {want}\n{B} refs/heads/main\n\n"
        ));
        assert!(
            check_header(&two, want, A, "sha1")
                .expect_err("two")
                .contains("exactly one ref")
        );
        let main = hdr(&format!("# v2 git bundle\n-{A} c\n{B} refs/heads/main\n\n"));
        assert!(
            check_header(&main, want, A, "sha1")
                .expect_err("main")
                .contains("refs/heads/main")
        );
        let none = hdr(&format!("# v2 git bundle\n{B} {want}\n\n"));
        assert!(
            check_header(&none, want, A, "sha1")
                .expect_err("orphan")
                .contains("prerequisites")
        );
        let foreign = hdr(&format!("# v2 git bundle\n-{B} c\n-{A} d\n{B} {want}\n\n"));
        assert!(check_header(&foreign, want, A, "sha1").is_err());
        let filt = hdr(&format!(
            "# v3 git bundle\n@filter=blob:none\n-{A} c\n{B} {want}\n\n"
        ));
        assert!(
            check_header(&filt, want, A, "sha1")
                .expect_err("filter")
                .contains("filter")
        );
        let at_base = hdr(&format!("# v2 git bundle\n-{A} c\n{A} {want}\n\n"));
        assert!(check_header(&at_base, want, A, "sha1").is_err());
    }

    fn sh(dir: &Path, script: &str) -> String {
        let o = process::run("sh", &["-c", script], None, GIT_WORKTREE_DEADLINE, "")
            .unwrap_or_else(|e| panic!("{script}: {e}"));
        let _ = dir;
        o.stdout
    }

    #[test]
    fn a_bundle_of_the_run_branch_is_imported_create_only_and_crafted_ones_are_refused() {
        let tmp = tempfile::tempdir().expect("tmp");
        let user = tmp.path().join("user");
        let g = crate::git::Git::init_repo(&user, &[("a.txt", "a\n")], "first").expect("repo");
        let base = g.rev_parse_commit("main").expect("base");
        let private = tmp.path().join("work");
        crate::git::private::create(&user, &private, "cyclix/t/r", &base).expect("private");
        let p = private.display();
        let id = "-c user.name=a -c user.email=a@a";
        sh(
            &private,
            &format!(
                "cd {p} && echo b > b.txt && git add b.txt && git {id} commit -qm b && \
             git bundle create -q ../ok.bundle {base}..refs/heads/cyclix/t/r && \
             git branch main2 && git bundle create -q ../two.bundle {base}..cyclix/t/r {base}..main2 && \
             git checkout -q --orphan o && git {id} commit -qm orphan && \
             git bundle create -q ../orphan.bundle refs/heads/o"
            ),
        );
        let want = "refs/heads/cyclix/t/r";
        let dest = "refs/heads/cyclix/t/r";
        let b = |n: &str| tmp.path().join(n);
        let tip = import(&user, &b("ok.bundle"), want, &base, dest)
            .expect("runs")
            .expect("accepted");
        assert_eq!(g.rev_parse_commit(dest).expect("created"), tip);
        assert!(
            !user.join(".git/FETCH_HEAD").exists(),
            "no FETCH_HEAD written"
        );
        // Create-only: a second import of the same branch is an error, the ref is unchanged.
        assert!(import(&user, &b("ok.bundle"), want, &base, dest).is_err());
        for name in ["two.bundle", "orphan.bundle"] {
            let r =
                import(&user, &b(name), want, &base, "refs/heads/cyclix/t/other").expect("runs");
            assert!(r.is_err(), "{name} was accepted");
        }
        std::fs::write(b("junk.bundle"), b"# v2 git bundle\n\nnot a pack").expect("junk");
        let r = import(&user, &b("junk.bundle"), want, &base, "refs/heads/x").expect("runs");
        assert!(r.is_err());
        assert!(g.rev_parse_commit("refs/heads/cyclix/t/other").is_err());
    }
}
