//! The configuration and environment of every host git call that touches what a sandbox
//! produced (the bundle it wrote, the objects and refs fetched from it, the run's commits):
//! nothing the agent wrote may make host git start a program (issue 11).
//!
//! Structurally, such a call never runs in a directory the agent could write: it runs in the
//! user's repository (which no container mounts; see `run::import`) on a bundle file cyclix
//! wrote itself from a container's stdout. What remains is git's own reach for programs while
//! it handles agent-made *data* (objects, ref names, commit headers). The options below close
//! each such door for the commands cyclix runs on agent output — `bundle verify`,
//! `bundle list-heads`, `fetch` from a bundle file, `update-ref`, `merge-base --is-ancestor`,
//! `rev-list`/`log --format` of the run's commits, `for-each-ref`, `diff` tree to tree — and
//! the list is complete for them because none of those commands reads a work tree or an index
//! (so no `filter.*`, `core.fsmonitor` query, `merge.*.driver` or checkout hook can apply),
//! and every remaining program git may start is named here:
//!
//! | key / variable | why (git-config(1), git(1), githooks(5)) |
//! |---|---|
//! | `core.hooksPath=/dev/null` | no hook runs (`reference-transaction` runs on `update-ref` and `fetch`) |
//! | `core.fsmonitor=false` | no fsmonitor daemon or hook, should a command refresh an index |
//! | `core.pager=cat`, `GIT_PAGER=cat`, `PAGER=cat`, `--no-pager` | no pager program |
//! | `core.editor=false`, `GIT_EDITOR`/`VISUAL`/`EDITOR` removed | no editor (none is asked for) |
//! | `core.askPass=`, `GIT_ASKPASS`/`SSH_ASKPASS` removed, `GIT_TERMINAL_PROMPT=0` | no prompt program |
//! | `credential.helper=` (an empty value resets the list) | no credential helper |
//! | `protocol.allow=never`, `protocol.file.allow=always` | only local files (the bundle) can be a source: no ssh, `ext::`, http, so `core.sshCommand`, `core.gitProxy`, `http.*` never apply |
//! | `core.sshCommand=false`, `GIT_SSH`/`GIT_SSH_COMMAND`/`GIT_PROXY_COMMAND` removed | the same, twice |
//! | `diff.external=`, `GIT_EXTERNAL_DIFF` removed, `--no-ext-diff`, `--no-textconv` | no external diff or textconv driver |
//! | `gpg.program=false`, `gpg.ssh.program=false`, `gpg.x509.program=false`, `log.showSignature=false`, `--no-show-signature` | a crafted `gpgsig` header is never handed to a verifier, and signatures are never shown |
//! | `core.alternateRefsCommand=` | no command for alternates' refs during `fetch` |
//! | `fetch.fsckObjects=true`, `transfer.fsckObjects=true` | every fetched object is checked (bad headers, bad trees, `.gitmodules` with option-like URLs: fsck's own list) |
//! | `fetch.recurseSubmodules=false`, `submodule.recurse=false` | a `.gitmodules` in the agent's tree never makes git fetch anything |
//! | `gc.auto=0`, `maintenance.auto=false`, `fetch.writeCommitGraph=false` | `fetch` starts no background `gc`/`maintenance` process |
//! | `i18n.logOutputEncoding=UTF-8` | a commit's `encoding` header is converted, never passed on raw |
//! | every other `GIT_*` variable removed, `GIT_NO_REPLACE_OBJECTS=1` | cyclix's environment (`GIT_DIR`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, …) cannot redirect the call; history is shown as it is |
//!
//! The user's own configuration (system, global, the repository's) is read as usual: it is the
//! user's, and the sandbox can no longer write any of it.

/// `-c` pairs given before the subcommand of every call on agent output (see the module doc).
pub const CONFIG: [&str; 27] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "core.sshCommand=false",
    "diff.external=",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "log.showSignature=false",
    "core.alternateRefsCommand=",
    "fetch.fsckObjects=true",
    "transfer.fsckObjects=true",
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.writeCommitGraph=false",
    "i18n.logOutputEncoding=UTF-8",
    "core.untrackedCache=false",
    "advice.detachedHead=false",
    "color.ui=false",
    "core.quotePath=true",
];

/// Environment changes of every call on agent output (after every `GIT_*` variable is
/// removed; see [`REMOVE_PREFIXES`]).
pub const ENV: [(&str, Option<&str>); 10] = [
    ("GIT_PAGER", Some("cat")),
    ("PAGER", Some("cat")),
    ("GIT_TERMINAL_PROMPT", Some("0")),
    ("GIT_NO_REPLACE_OBJECTS", Some("1")),
    ("SSH_ASKPASS", None),
    ("EDITOR", None),
    ("VISUAL", None),
    ("LESSOPEN", None),
    ("LESSCLOSE", None),
    ("DISPLAY", None),
];

/// Variable-name prefixes removed from the environment of every call on agent output.
pub const REMOVE_PREFIXES: [&str; 1] = ["GIT_"];

/// `git --no-pager -C DIR -c K=V … ARGS…` as one argv (without the program name).
#[must_use]
pub fn argv<'a>(dir: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--no-pager", "-C", dir];
    for kv in CONFIG {
        v.push("-c");
        v.push(kv);
    }
    v.extend_from_slice(args);
    v
}

/// git options of a container that reads an agent's repository (`cyclix run`'s export
/// container, `run::import`; the Kubernetes collector), inside it (defence in depth: the
/// container is the boundary): the repository is the agent's, so it is declared safe, and the
/// program-starting keys are neutralised as on the host. Every transport is refused by name:
/// a `protocol.NAME.allow` in the agent's own `.git/config` outranks `protocol.allow`, and a
/// repository the agent made a partial clone (`extensions.partialClone`, a promisor remote
/// `ext::PROGRAM`) would otherwise start PROGRAM to fetch an object it removed (the attack
/// review of issue 34: it forged the collector's log). With [`EXPORT_ENV`] no lazy fetch is
/// tried at all. The pack's compression and delta settings are git's defaults whatever the
/// agent set (`pack.compression=0` made a few hundred KiB of repository a bundle of 60 MiB;
/// `core.bigFileThreshold=1` 1 MiB of deltas one of 100 MiB). A `-delta` attribute of the
/// agent's still stores its files whole: the bundle stays bounded by the import's cap.
pub const EXPORT_CONFIG: [&str; 23] = [
    "core.useReplaceRefs=false",
    "safe.directory=*",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "protocol.file.allow=never",
    "protocol.git.allow=never",
    "protocol.ssh.allow=never",
    "protocol.http.allow=never",
    "protocol.https.allow=never",
    "protocol.ftp.allow=never",
    "protocol.ftps.allow=never",
    "core.untrackedCache=false",
    "core.compression=-1",
    "pack.compression=-1",
    "pack.window=10",
    "pack.depth=50",
    "core.bigFileThreshold=512m",
];

/// Environment of a container that reads an agent's repository (with [`EXPORT_CONFIG`]):
/// never fetch a missing object from a promisor remote (git ≥ 2.45).
pub const EXPORT_ENV: [(&str, &str); 1] = [("GIT_NO_LAZY_FETCH", "1")];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_pair_is_key_equals_value_and_precedes_the_subcommand() {
        for kv in CONFIG {
            let (k, _) = kv.split_once('=').expect("key=value");
            assert!(k.contains('.'), "{kv}");
        }
        let v = argv("/r", &["log"]);
        assert_eq!(&v[..3], &["--no-pager", "-C", "/r"]);
        assert_eq!(v.last(), Some(&"log"));
        assert_eq!(v.len(), 3 + 2 * CONFIG.len() + 1);
    }
}
