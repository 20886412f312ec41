//! Checks of each tenant: its spec against this host, mounts into podman's storage, its images.

use super::{Check, podman_storage, runtime};
use crate::host::facts::{CheckFacts, ImageFact, TenantFacts};
use crate::spec::{Spec, mount_guard};
use crate::tier::{self, Tier};
use std::fmt::Write as _;

pub(super) fn spec(f: &CheckFacts, t: &TenantFacts) -> Check {
    let id = format!("spec:{}", t.name);
    let s = match &t.spec {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                &id,
                format!("{} is invalid:\n{}", t.file, e.trim_end()),
                format!(
                    "fix the spec; `cyclix spec validate {}` lists every problem",
                    t.file
                ),
            );
        }
    };
    if let Some(fail) = mounts_in_podman_storage(f, t, s) {
        return fail;
    }
    let gvisor = match &f.gvisor {
        Ok(_) => tier::Runtime::Usable,
        Err(reason) => tier::Runtime::Unusable(reason.clone()),
    };
    match tier::gate(s.tier, s.legacy_worktree_isolation, &runtime(f), &gvisor) {
        Err(refusal @ tier::TierRefusal::GvisorUnusable { .. }) => Check::fail(
            &id,
            format!("{}: {refusal}", t.file),
            "install gVisor's runsc (Debian: `apt install runsc`; the `gvisor` check above says \
             what is missing), or set `tier: container` explicitly if sharing the host's \
             kernel is acceptable",
        ),
        Err(refusal) => Check::fail(&id, format!("{}: {refusal}", t.file), {
            "make a container runtime usable (the failed checks above), or set `tier: \
             worktree` explicitly if version isolation is enough"
                .to_string()
        }),
        Ok(got @ (Tier::Container | Tier::Gvisor)) => {
            Check::pass(&id, format!("{}: valid, tier {got}", t.file))
        }
        // What `cyclix run` does for a host tier, said as it is (issue 32 item 3: this said
        // `run` implemented only tier container, and the run went ahead).
        Ok(other) => Check::warn(
            &id,
            format!(
                "{}: valid, tier {other}: {}; `cyclix run` runs it so: the agent is a plain \
                 user unit with no probes and no egress proxy; {}; the gate runs `gate.command` \
                 on the host, not in `gate.image` (a host tier has no containers)",
                t.file,
                other.facts().summary,
                if other == Tier::Direct {
                    "its commits land on the branch checked out in your repository"
                } else {
                    "its commits are on the run branch in your repository"
                },
            ),
            "set `tier: container` for isolation",
        ),
    }
}

/// FAIL `spec:T` when a mount source is, contains or lies inside podman's storage: what
/// `spec validate` cannot know (the real paths come from `podman info`).
pub(super) fn mounts_in_podman_storage(f: &CheckFacts, t: &TenantFacts, s: &Spec) -> Option<Check> {
    let found = mount_guard::refusals(s, &podman_storage(f));
    let fix = found.first()?.hint.clone().unwrap_or_default();
    let text = crate::spec::SpecError {
        file: t.file.clone(),
        diagnostics: found,
    }
    .to_string();
    Some(Check::fail(&format!("spec:{}", t.name), text, fix))
}

/// `gate:TENANT`: whether the tenant's gate can be gamed (docs/gate.md). PASS with
/// `gate.protected` (the gate runs the base's tests and counts them), WARN without it (the
/// gate runs whatever tests the agent's tree holds: deleting, skipping or deselecting the
/// failing one passes), WARN too when `gate.command` does not name `$CYCLIX_RESULTS` (the
/// base's tests cannot be counted without a `JUnit` report there). `None` when the spec is
/// invalid.
pub(super) fn gate(t: &TenantFacts) -> Option<Check> {
    let s = t.spec.as_ref().ok()?;
    let id = format!("gate:{}", t.name);
    let g = &s.gate;
    if g.protected.is_empty() {
        let fix = if s.tier.is_sandboxed() {
            "add `gate.protected` with the tests and their configuration (for Python: `protected: \
             [tests/, \"**/test_*.py\", \"**/conftest.py\", pytest.ini, tox.ini, setup.cfg, \
             pyproject.toml]`) and have `gate.command` write JUnit XML to $CYCLIX_RESULTS \
             (docs/gate.md)"
        } else {
            "use `tier: container` with `gate.protected` (docs/gate.md): on a host tier the gate \
             runs in the agent's own work tree"
        };
        return Some(Check::warn(
            &id,
            format!(
                "{}: the gate runs the agent's own tests: an agent can delete, skip or deselect \
                 a failing test (or change its configuration) and pass",
                t.file
            ),
            fix,
        ));
    }
    let results = crate::twin::RESULTS_ENV;
    if !g.command.iter().any(|a| a.contains(results)) {
        return Some(Check::warn(
            &id,
            format!(
                "{}: `gate.protected` is set, but `gate.command` does not name ${results}: \
                 unless it writes a JUnit XML report there, the base's tests cannot be counted \
                 and every run ends setup_broken",
                t.file
            ),
            format!(
                "write the report there, e.g. [sh, -c, 'exec python3 -m pytest -q \
                 --junitxml=\"${results}\"'] (docs/gate.md)"
            ),
        ));
    }
    Some(Check::pass(
        &id,
        format!(
            "the gate runs the base's tests and counts them one by one (protected: {})",
            g.protected.join(", ")
        ),
    ))
}

/// `pool:TENANT`: a tenant with a warm pool (`pool:` with a size above 0) and its keeper
/// (`cyclix-pool@TENANT.service`): PASS while the keeper runs and its last fill did not fail;
/// WARN (its runs pass, cold when none is ready) when the keeper is not running, cannot be
/// asked, or cannot refill (its last fills failed, or the tenant cannot have a pool), with a
/// fix. `None` without a pool or when the spec is invalid.
pub(super) fn pool(t: &TenantFacts) -> Option<Check> {
    let p = t.spec.as_ref().ok()?.pool.as_ref().filter(|p| p.size > 0)?;
    let id = format!("pool:{}", t.name);
    let unit = format!("cyclix-pool@{}.service", t.name);
    let cold = "runs that find none ready go cold";
    let journal = format!("`journalctl --user -u {unit}` says why");
    let Some(k) = &t.keeper else {
        return Some(Check::warn(
            &id,
            format!(
                "{}: pool of size {}: its keeper {unit} was not looked at",
                t.file, p.size
            ),
            "run `cyclix check` without `--quick`",
        ));
    };
    let active = match &k.active {
        Ok(a) => a.as_str(),
        Err(e) => {
            return Some(Check::warn(
                &id,
                format!(
                    "{}: pool of size {}: the state of {unit} cannot be read: {e}",
                    t.file, p.size
                ),
                "make the user manager reachable (the checks above)",
            ));
        }
    };
    if !matches!(active, "active" | "activating" | "reloading") {
        return Some(Check::warn(
            &id,
            format!(
                "{}: pool of size {} cannot refill: its keeper {unit} is {active}; {cold}",
                t.file, p.size
            ),
            format!(
                "`cyclix install --tenant {}` enables and starts it ({journal}); or remove `pool:` (or set `size: 0`)",
                t.name
            ),
        ));
    }
    match &k.note {
        Ok(Some(n)) if n.state == "blocked" || n.failures > 0 => Some(Check::warn(
            &id,
            format!(
                "{}: pool of size {} cannot refill: {unit} {}; {cold}",
                t.file, p.size, n.line
            ),
            format!(
                "fix what the error names ({journal}); `cyclix pool fill {}` tries one fill by hand",
                t.name
            ),
        )),
        Ok(n) => Some(Check::pass(
            &id,
            format!(
                "{}: pool of size {} kept by {unit}: {}",
                t.file,
                p.size,
                n.as_ref().map_or("starting", |n| n.line.as_str())
            ),
        )),
        Err(e) => Some(Check::warn(
            &id,
            format!(
                "{}: pool of size {}: {unit} runs but its state cannot be read: {e}",
                t.file, p.size
            ),
            format!("{journal}; `systemctl --user restart {unit}` writes it afresh"),
        )),
    }
}

/// `repo:TENANT`: `repo.base` names a commit in `repo.path` (a run resolves it first in
/// `prepare`; a typo there passed `spec validate`, which reads no repository). `None` when the
/// spec is invalid.
pub(super) fn repo(t: &TenantFacts) -> Option<Check> {
    let base = t.base.as_ref()?;
    let s = t.spec.as_ref().ok()?;
    let id = format!("repo:{}", t.name);
    Some(match base {
        Ok(sha) => Check::pass(
            &id,
            format!(
                "repo.base `{}` is {} in {}",
                s.repo.base,
                sha.get(..12).unwrap_or(sha),
                s.repo.path
            ),
        ),
        Err(e) => Check::fail(
            &id,
            format!("{}: repo.base `{}`: {e}", t.file, s.repo.base),
            format!(
                "`repo.path` must be a git work tree and `repo.base` a branch, tag or commit in it (`git -C {} branch --list`)",
                s.repo.path
            ),
        ),
    })
}

/// `task:TENANT`: the spec's `task.file` reads as a run reads it (a regular UTF-8 file of at
/// most 1 MiB); FAIL naming the file and the problem otherwise (a run would end at once,
/// issue 32 item 3). `None` for a task given as text or an invalid spec.
pub(super) fn task(t: &TenantFacts) -> Option<Check> {
    let read = t.task.as_ref()?;
    let s = t.spec.as_ref().ok()?;
    let crate::spec::Task::File(f) = &s.task else {
        return None;
    };
    let id = format!("task:{}", t.name);
    Some(match read {
        Ok(()) => Check::pass(&id, format!("task.file `{f}` reads")),
        Err(problem) => Check::fail(
            &id,
            format!("{}: task.file: {problem}", t.file),
            format!("write the task to `{f}`, or give it inline as `task: {{ text: … }}`"),
        ),
    })
}

/// `env:TENANT`: every variable the spec names reaches a run the user manager starts — from
/// the tenant's env file (the run unit's `EnvironmentFile=`) or the manager's environment
/// block — FAIL when it is set nowhere (a run would stop in `prepare`), WARN when only the
/// shell running `check` has it (`cyclix run` from that shell sees it, `systemctl --user
/// start` does not). `None` when the spec is invalid or names no variable.
pub(super) fn env(f: &CheckFacts, t: &TenantFacts) -> Option<Check> {
    if t.spec.is_err() || t.env.is_empty() {
        return None;
    }
    let id = format!("env:{}", t.name);
    let in_manager = |n: &str| {
        f.manager_env
            .as_ref()
            .is_ok_and(|names| names.iter().any(|m| m == n))
    };
    let at = |e: &crate::host::facts::EnvNeed| match e.line {
        Some(l) => format!("{}:{l}: {} `{}`", t.file, e.key, e.name),
        None => format!("{}: {} `{}`", t.file, e.key, e.name),
    };
    let env_file = format!("~/.config/cyclix/tenants/{}.env", t.name);
    let (mut missing, mut shell_only) = (Vec::new(), Vec::new());
    for e in &t.env {
        if e.in_file || in_manager(&e.name) {
            continue;
        }
        if e.in_shell {
            shell_only.push(e);
        } else {
            missing.push(e);
        }
    }
    let manager_note = match &f.manager_env {
        Ok(_) => String::new(),
        Err(e) => format!(" (the user manager's environment could not be read: {e})"),
    };
    let fix = |list: &[&crate::host::facts::EnvNeed]| {
        let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
        format!(
            "add `{}=...` to {env_file} (mode 0600), or `systemctl --user set-environment {}=...`",
            names.join("=... "),
            names.join("=... ")
        )
    };
    if !missing.is_empty() {
        let what: Vec<String> = missing.iter().map(|e| at(e)).collect();
        return Some(Check::fail(
            &id,
            format!(
                "not set in {env_file} nor in the user manager's environment{manager_note}: {}; a run fails at its start, before it writes a record",
                what.join(", ")
            ),
            fix(&missing),
        ));
    }
    if !shell_only.is_empty() {
        let what: Vec<String> = shell_only.iter().map(|e| at(e)).collect();
        return Some(Check::warn(
            &id,
            format!(
                "set only in this shell{manager_note}: {}; `cyclix run` here sees it, a run the user manager starts (`cyclix start`, the timer) does not",
                what.join(", ")
            ),
            fix(&shell_only),
        ));
    }
    let names: Vec<&str> = t.env.iter().map(|e| e.name.as_str()).collect();
    Some(Check::pass(
        &id,
        format!(
            "set for runs (the env file or the manager's environment): {}",
            names.join(", ")
        ),
    ))
}

pub(super) fn image_fix(i: &ImageFact) -> String {
    let preset = crate::agents::PRESETS
        .iter()
        .find(|p| crate::images::agents::preset_image(p).as_deref() == Some(i.reference.as_str()));
    if i.reference == crate::images::PROXY_IMAGE || i.reference == crate::images::AGENT_PYTHON_IMAGE
    {
        "`cyclix images build`".to_string()
    } else if let Some(p) = preset {
        format!(
            "`cyclix images build --preset {p}` (offline, from the package cache `scripts/fetch-agent-packages {p}` fills; in the testbed add `--packages /opt/cyclix-packages`)"
        )
    } else if i.reference.starts_with("localhost/") {
        format!("build it: `podman build -t {} ...`", i.reference)
    } else {
        format!("`podman pull {}`", i.reference)
    }
}

pub(super) fn images(f: &CheckFacts, t: &TenantFacts) -> Check {
    let id = format!("images:{}", t.name);
    if t.spec.is_err() {
        return Check::skip(&id, "the spec is invalid");
    }
    if t.images.is_empty() {
        return Check::skip(&id, "the tenant's tier runs no containers");
    }
    let how = if f.quick {
        "image store"
    } else {
        "podman image exists"
    };
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    let mut unpinned = Vec::new();
    let mut fixes = Vec::new();
    // A preset's own image (`cyclix images build --preset P`) is its local build of a package
    // pinned by hash: no `unpinned_local_image` was written, so none is to be dropped.
    let preset = t.spec.as_ref().ok().and_then(|s| {
        s.agent
            .preset
            .as_ref()
            .filter(|p| !p.overridden.iter().any(|o| o == "agent.image"))
    });
    for i in &t.images {
        match &i.present {
            Ok(true) => {}
            Ok(false) => {
                missing.push(format!("{} {}", i.role, i.reference));
                let fix = image_fix(i);
                if !fixes.contains(&fix) {
                    fixes.push(fix);
                }
            }
            Err(e) => unknown.push(format!("{} {}: {e}", i.role, i.reference)),
        }
        // The proxy is cyclix's own locally built image: pinned by cyclix, not by the spec.
        if !i.pinned && i.role != "proxy" && !(i.role == "agent" && preset.is_some()) {
            unpinned.push(format!("{} {}", i.role, i.reference));
        }
    }
    if !missing.is_empty() {
        return Check::fail(
            &id,
            format!("not in local storage ({how}): {}", missing.join(", ")),
            fixes.join("; "),
        );
    }
    if !unknown.is_empty() {
        return Check::fail(
            &id,
            format!("cannot tell whether present: {}", unknown.join("; ")),
            "run `podman images` to see podman's error",
        );
    }
    // The spec's images, then cyclix's own proxy apart: it is pinned by cyclix's build, not by
    // a digest, so "pinned" does not list it (newcomer trial 7, item 15).
    let mut refs: Vec<&str> = Vec::new();
    let mut own: Vec<&str> = Vec::new();
    for i in &t.images {
        let list = if i.role == "proxy" {
            &mut own
        } else {
            &mut refs
        };
        if !list.contains(&i.reference.as_str()) {
            list.push(&i.reference);
        }
    }
    let mut all = refs.join(", ");
    if !own.is_empty() {
        let _ = write!(
            all,
            "; the proxy is cyclix's own build ({}, `cyclix images build`)",
            own.join(", ")
        );
    }
    if unpinned.is_empty() {
        let how = preset.map_or_else(String::new, |p| {
            format!(
                " (the agent's is preset {}'s local build of {}, pinned by hash)",
                p.name, p.package
            )
        });
        Check::pass(&id, format!("present and pinned{how}: {all}"))
    } else {
        Check::warn(
            &id,
            format!(
                "present; not pinned by digest (unpinned_local_image opt-out): {}",
                unpinned.join(", ")
            ),
            "pin each image by digest (`podman image inspect --format '{{.Digest}}' REF`, then \
             `REF@sha256:...` in the spec) and drop `unpinned_local_image`",
        )
    }
}
