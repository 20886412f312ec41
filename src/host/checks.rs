//! The verdicts of `cyclix check`: PURE functions over [`CheckFacts`] (no I/O, no environment,
//! no clock). [`checks`] returns one [`Check`] per check, in a fixed order, each with a stable
//! id, a [`Status`], what was found and, unless it passed, the exact fix.
//!
//! Field reports (../shared/research/field-reports.md): B01 (the Quadlet generator and the
//! podman floor), B07 (the network-online stall), B08 (linger), B09 (runtime dir, user bus,
//! cgroup manager and delegation), B10 (sub-ids, newuidmap/newgidmap).
//!
//! Floors: podman 4.3 runs cyclix with plain units; 5.0 with Quadlet (`.pod` units, B01).
//! Since 5.3 user Quadlet units wait for the system's `network-online.target` (B07).
//!
//! Files by check family: `checks/podman.rs` (podman, Quadlet, runtime, network, storage),
//! `checks/account.rs` (rootless, runtime dir, user manager, linger, sub-ids, network-online),
//! `checks/cgroups.rs`, `checks/gvisor.rs` (runsc and its proof), `checks/tenants.rs` (spec,
//! images), `checks/outcome.rs`; the table tests
//! in `checks/tests.rs` + `checks/tests/rows_*.rs`.

use serde::Serialize;

use super::facts::CheckFacts;

mod account;
mod cgroups;
mod gvisor;
mod outcome;
mod podman;
mod tenants;

use account::{id_mapper, linger, network_online, rootless, runtime_dir, subids, user_manager};
use cgroups::{cgroup_delegation, cgroup_v2};
use gvisor::gvisor;
use outcome::outcome;
pub use podman::*;
use tenants::{images, spec};

/// The lowest podman cyclix runs on (plain units): 4.3.
pub const PODMAN_FLOOR: (u32, u32) = (4, 3);
/// The lowest podman cyclix uses Quadlet with: 5.0.
pub const QUADLET_FLOOR: (u32, u32) = (5, 0);
/// The podman version whose user Quadlet units wait for `network-online.target`: 5.3 (B07).
pub const NETWORK_ONLINE_WAIT_SINCE: (u32, u32) = (5, 3);
/// The sub-id range rootless podman needs for common images: 65536 ids.
pub const SUBID_MIN: u64 = 65_536;
/// The controllers resource limits need in the user manager's cgroup.
pub const LIMIT_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];
/// A probe slower than this did not fail fast (ENETUNREACH is immediate): 3000 ms.
pub const FAST_FAIL_MS: u64 = 3000;

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, with a caveat worth fixing.
    Warn,
    /// cyclix cannot run correctly here until this is fixed.
    Fail,
    /// Not checked; `found` says why.
    Skip,
}

impl Status {
    /// `pass`, `warn`, `fail` or `skip`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable id (`podman`, `subuid`, ..., `spec:TENANT`, `images:TENANT`, `env:TENANT`).
    pub id: String,
    /// The verdict.
    pub status: Status,
    /// What was found (for `skip`: why it was skipped).
    pub found: String,
    /// The exact fix; `None` when the check passed or was skipped.
    pub fix: Option<String>,
}

impl Check {
    fn new(id: &str, status: Status, found: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            id: id.to_string(),
            status,
            found: found.into(),
            fix,
        }
    }
    fn pass(id: &str, found: impl Into<String>) -> Check {
        Check::new(id, Status::Pass, found, None)
    }
    fn warn(id: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Warn, found, Some(fix.into()))
    }
    fn fail(id: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Fail, found, Some(fix.into()))
    }
    fn skip(id: &str, why: impl Into<String>) -> Check {
        Check::new(id, Status::Skip, why, None)
    }
}

/// Options of `cyclix check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// `--tenant T`: the facts hold only T, and T must exist.
    pub tenant: Option<String>,
}

/// Every check, in a fixed order.
#[must_use]
pub fn checks(f: &CheckFacts, o: &CheckOptions) -> Vec<Check> {
    let mut v = vec![
        podman(f),
        quadlet(f),
        rootless(f),
        runtime_dir(f),
        user_manager(f),
        linger(f),
        subids(f, &f.subuid, "subuid", "--add-subuids"),
        subids(f, &f.subgid, "subgid", "--add-subgids"),
        id_mapper(&f.newuidmap, "cap_setuid"),
        id_mapper(&f.newgidmap, "cap_setgid"),
        cgroup_v2(f),
        cgroup_delegation(f),
        oci_runtime(f),
        gvisor(f),
        network_backend(f),
        rootless_network(f),
        storage_driver(f),
        podman_info(f),
        network_online(f),
        host_tools(f),
    ];
    if let Some(t) = &o.tenant
        && !f.tenants.iter().any(|x| &x.name == t)
    {
        v.push(Check::fail(
            &format!("spec:{t}"),
            format!("no spec for tenant `{t}`"),
            format!(
                "write ~/.config/cyclix/tenants/{t}.yaml (docs/spec.md), or \
                 `cyclix demo setup` for the demo tenant"
            ),
        ));
    }
    for t in &f.tenants {
        v.push(spec(f, t));
        v.push(images(f, t));
        if let Some(c) = tenants::repo(t) {
            v.push(c);
        }
        if let Some(c) = tenants::task(t) {
            v.push(c);
        }
        if let Some(c) = tenants::env(f, t) {
            v.push(c);
        }
        if let Some(c) = tenants::pool(t) {
            v.push(c);
        }
        if let Some(c) = tenants::gate(t) {
            v.push(c);
        }
    }
    v.push(outcome(f));
    v
}

/// `config`: cyclix's own settings file (`max_runs`, `queue_timeout`; issue 16, item 4):
/// `settings` is the limit in force, where it comes from and the queue timeout (s), or why the
/// file does not validate (then every run is refused until it is fixed).
#[must_use]
pub fn host_config(settings: &Result<(u32, String, u64), String>) -> Check {
    match settings {
        Ok((max, from, timeout_s)) => Check::pass(
            "config",
            format!("{max} run(s) at once ({from}); a run over it waits up to {timeout_s} s"),
        ),
        Err(e) => Check::fail(
            "config",
            e.clone(),
            "fix the file as the message says (docs/capacity.md), or remove it for the defaults",
        ),
    }
}

/// `install`: whether what is installed (unit templates, timers, notify drop-ins, pool
/// keepers) is what `cyclix install` would install from the specs now (issue 32 item 2: a
/// schedule removed from a spec kept firing, a new `notify:` did nothing). PASS when nothing
/// would change; WARN listing each change, at most [`DRIFT_SHOWN`] (`drift`: the lines of
/// `app::installer::drift`); WARN when it could not be read.
#[must_use]
pub fn install_drift(drift: &Result<Vec<String>, String>) -> Check {
    match drift {
        Ok(d) if d.is_empty() => Check::pass(
            "install",
            "the installed units, timers, notify drop-ins and pool keepers match the specs",
        ),
        Ok(d) => {
            let mut found = format!("`cyclix install` would change {} thing(s): ", d.len());
            found.push_str(
                &d.iter()
                    .take(DRIFT_SHOWN)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            if d.len() > DRIFT_SHOWN {
                use std::fmt::Write as _;
                let _ = write!(found, "; and {} more", d.len() - DRIFT_SHOWN);
            }
            Check::warn(
                "install",
                found,
                "run `cyclix install` (it prints this plan before it acts)",
            )
        }
        Err(e) => Check::warn(
            "install",
            format!("what `cyclix install` would change could not be read: {e}"),
            "run `cyclix install`",
        ),
    }
}

/// How many of `install`'s changes the check names.
pub const DRIFT_SHOWN: usize = 8;

/// `major.minor.patch` from `5.4.2`, `4.3.1-dev`, `5.0.0-rc1` (missing parts are 0).
#[must_use]
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut nums = v.trim().split(['.', '-', '+', '~']).map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    });
    let major = nums.next()?.parse().ok()?;
    let minor = nums.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let patch = nums.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

fn at_least(v: Option<(u32, u32, u32)>, floor: (u32, u32)) -> bool {
    v.is_some_and(|(a, b, _)| (a, b) >= floor)
}

fn podman_version(f: &CheckFacts) -> Option<(u32, u32, u32)> {
    match &f.podman.version {
        Some(Ok(v)) => parse_version(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
