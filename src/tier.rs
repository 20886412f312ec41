//! Isolation tiers as data, the tier floor and the tier gate.
//!
//! Owns: what each tier guarantees and what it does not (one table, read by `tier describe`,
//! the docs and `check` alike), the floor a legacy flag may raise, and the gate that refuses a
//! tier the host cannot provide. Pure: the fact "is a container runtime usable here?" is injected
//! by the caller, never looked up or defaulted here.

use std::fmt;

pub mod runsc;

use serde::{Deserialize, Serialize};

/// An isolation tier, ordered from weakest to strongest (`Direct < Worktree < Container <
/// Gvisor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// No isolation: the agent runs with the user's account in the project itself.
    Direct,
    /// Version isolation only: a git worktree; the agent still has the user's rights.
    Worktree,
    /// Rights isolation: a rootless Podman sandbox with the project mounted and nothing else.
    Container,
    /// `container`'s sandbox whose agent and gate run on gVisor's kernel (`runsc`), not the
    /// host's.
    Gvisor,
}

/// What a tier guarantees, stated as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TierFacts {
    /// The tier these facts describe.
    pub tier: Tier,
    /// The agent's changes land on their own branch/worktree, not in the user's checkout.
    pub isolates_versions: bool,
    /// The agent cannot use the user's rights (files, sockets, processes) beyond the project.
    pub isolates_rights: bool,
    /// The agent's network is restricted (egress only through the allowlist proxy).
    pub network_restricted: bool,
    /// One line: what the tier is.
    pub summary: &'static str,
    /// When to choose it.
    pub use_when: &'static str,
    /// What the gate judges the agent's work with (docs/gate.md).
    pub gate: &'static str,
    /// What the agent's network goes through, and what the proxy mints for it (docs/boundary.md).
    pub egress: &'static str,
    /// What it does not protect against (every tier states this, `container` too).
    pub does_not_protect_against: &'static [&'static str],
}

/// All tiers, weakest first. The single source of tier facts.
pub const TIERS: [TierFacts; 4] = [
    TierFacts {
        tier: Tier::Direct,
        isolates_versions: false,
        isolates_rights: false,
        network_restricted: false,
        summary: "no isolation: the agent runs as you, in your checkout, with your network",
        use_when: "only for an agent you would trust with your shell; must be set explicitly",
        gate: "the gate runs in your checkout on whatever the agent left there, its tests included: an agent can change the tests it is judged by (`gate.protected` needs tier container)",
        egress: "none: the agent's network is yours (no proxy, no allowlist)",
        does_not_protect_against: &[
            "anything: the agent can read and change every file you can, including ~/.ssh",
            "edits to your working tree, branches and .git/hooks",
            "changes to your repository's refs, config, hooks and worktrees: the record cannot prove the repository unchanged",
            "network access to any host, including cloud metadata and your LAN",
            "killing or tracing your other processes",
        ],
    },
    TierFacts {
        tier: Tier::Worktree,
        isolates_versions: true,
        isolates_rights: false,
        network_restricted: false,
        summary: "version isolation only: a git worktree on a run branch, same rights as you",
        use_when: "the agent is trusted but its changes must not touch your checkout",
        gate: "the gate runs in the agent's worktree on whatever it left there, its tests included: an agent can change the tests it is judged by (`gate.protected` needs tier container)",
        egress: "none: the agent's network is yours (no proxy, no allowlist)",
        does_not_protect_against: &[
            "reading or writing any file you can, outside the worktree too",
            "writing the shared .git (hooks, config) that your own git later runs",
            "changes to your repository's other refs: the record cannot prove the repository unchanged (only tier container keeps it out of reach)",
            "network access to any host",
            "killing or tracing your other processes",
        ],
    },
    TierFacts {
        tier: Tier::Container,
        isolates_versions: true,
        isolates_rights: true,
        network_restricted: true,
        summary: "rights isolation: rootless Podman, a private repository of the run (nothing of yours mounted), commits imported as a checked bundle; egress only via the allowlist proxy",
        use_when: "the default for any agent: untrusted code, prompts from others, scheduled runs",
        gate: "the gate runs with no network on the commits as imported, written out from your repository; with `gate.protected` every protected path (the tests and their configuration) is the base's, decided in your repository, and the base's tests are counted one by one on the base and on the agent's tree: one that ran at base and does not run now (deleted, skipped, deselected) ends the run gate_weakened",
        egress: "only through the run's proxy: allowlisted names on allowed ports; plain HTTP only to `egress.http_ports` (default: 80 when `egress.ports` has it); a CONNECT is spliced only when its ClientHello names the CONNECT host and the server answered with TLS (nothing decrypted). To answer a tunnel it cut with an error, the proxy signs a certificate with a certificate authority of the run's own: made when the proxy starts, its key only on the proxy's private tmpfs, gone with it; it is never given to the sandbox and nothing trusts it, so it cannot intercept anything",
        does_not_protect_against: &[
            "kernel or container-runtime exploits (the sandbox shares the host kernel)",
            "exfiltration to an allowed host: whatever it accepts (an upload, a request with the agent's own key) leaves; allowlist only the names the task needs",
            "what the agent puts in a tunnel's first flight to an allowed host:port whose service does not speak TLS: the server gets the ClientHello (its extensions can carry tens of KiB) and TLS records sent with it (at most 16 KiB) before the proxy sees it answer without TLS; allow only ports whose services speak TLS",
            "domain fronting through an allowed multi-tenant front: TLS whose SNI names the allowed host and whose encrypted Host names another site on the same CDN passes, since the proxy does not decrypt; allowlist the narrow names of services, never a CDN's shared front",
            "the agent's changes to the project itself: review the run branch before merging it",
            "a test made trivially true through the code under test, or code under test that subverts the test runner from inside its process (it runs there): the gate trusts the runner's JUnit report; run the runner before the work tree is on its import path (docs/gate.md)",
            "resource exhaustion where cgroup controllers are not delegated to the user manager",
            "a leaked secret in a process that overwrote its own environment: the leak watch scans /proc/PID/environ (from the host, every watch interval), which shows the memory the process holds there now, not what it was started with",
            "a leaked secret the agent re-encodes (base64, split, reversed, hashed) before printing or sending it: the leak watch matches watched values as written",
        ],
    },
    TierFacts {
        tier: Tier::Gvisor,
        isolates_versions: true,
        isolates_rights: true,
        network_restricted: true,
        summary: "tier container whose agent and gate run on gVisor's kernel (Debian's `runsc`, rootless): their system calls are served by gVisor's user-space kernel, not the host's; the same pod, proxy, allowlist, gate and proof",
        use_when: "the agent's code must not reach the host kernel's system call surface (kernel exploits); costs a slower start and slower file and process work (the bench's gVisor/container ratios)",
        gate: "as tier container (the gate runs the agent's code too, so it runs under runsc as well): no network, the commits as imported, `gate.protected` decided in your repository",
        egress: "as tier container: only through the run's proxy. runsc runs with `network=host`: the agent's sockets are the pod network namespace's, served by the host kernel's network stack (rootless runsc cannot run its own netstack there); the proxy and the services stay on the default runtime",
        does_not_protect_against: &[
            "a gVisor escape: a bug in gVisor's kernel (the Sentry) or its file proxy (the Gofer) reaches the host with the rights of your user's rootless sandbox",
            "the host kernel's network stack: with `network=host` the agent's sockets are host sockets in the pod's network namespace (what the proxy, the internal network and the probes bound)",
            "anything reachable through the proxy, a mount or a service: the same as tier container (exfiltration to an allowed host, the first flight of a tunnel, domain fronting through an allowed CDN name)",
            "the agent's changes to the project itself: review the run branch before merging it",
            "a test made trivially true through the code under test, or code that subverts the test runner from inside its process: the gate trusts the runner's JUnit report (docs/gate.md)",
            "resource exhaustion where cgroup controllers are not delegated to the user manager: runsc then runs with `ignore-cgroups` and sets no limits (the record and `cyclix check` say so)",
            "a leaked secret only the host-side environment scan would see: the host's /proc shows gVisor's processes (the Sentry, the Gofer), not the agent's, so only the leak watch's probes inside the sandbox read the agent's environments, beside the agent's code (docs/tiers.md); re-encoded values are not matched, as under tier container",
            "services and the proxy: they run on the default runtime, the host's kernel (they run images you chose, not the agent's code)",
        ],
    },
];

impl Tier {
    /// The tier's name as written in specs and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Direct => "direct",
            Tier::Worktree => "worktree",
            Tier::Container => "container",
            Tier::Gvisor => "gvisor",
        }
    }

    /// The tier's facts from [`TIERS`].
    #[must_use]
    pub fn facts(self) -> &'static TierFacts {
        match self {
            Tier::Direct => &TIERS[0],
            Tier::Worktree => &TIERS[1],
            Tier::Container => &TIERS[2],
            Tier::Gvisor => &TIERS[3],
        }
    }

    /// A Podman sandbox (`container` or `gvisor`): the pod, the proxy, the probes, the gate
    /// container. The host tiers (`direct`, `worktree`) are not.
    #[must_use]
    pub fn is_sandboxed(self) -> bool {
        self >= Tier::Container
    }

    /// Parses a tier name (`direct`, `worktree`, `container`, `gvisor`).
    #[must_use]
    pub fn parse(name: &str) -> Option<Tier> {
        TIERS.iter().map(|f| f.tier).find(|t| t.as_str() == name)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tier a run must provide: the configured tier, raised to `worktree` when the legacy
/// "worktree isolation" flag is set. The floor only ever raises: `effective >= configured`.
#[must_use]
pub fn floor(configured: Tier, legacy_worktree_isolation: bool) -> Tier {
    if legacy_worktree_isolation {
        configured.max(Tier::Worktree)
    } else {
        configured
    }
}

/// Why the gate refused a tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TierRefusal {
    /// `container` or `gvisor` was required and no container runtime is usable.
    #[error(
        "tier `{tier}` is configured but no usable container runtime was found ({reason}); \
         cyclix refuses rather than run with weaker isolation. Fix the runtime (`cyclix check` \
         shows what is missing) or set `tier: worktree` explicitly in the spec if version \
         isolation is enough"
    )]
    RuntimeUnusable {
        /// The tier that was required.
        tier: Tier,
        /// What the caller found (e.g. "podman not on PATH").
        reason: String,
    },
    /// `gvisor` was required and gVisor's `runsc` is not usable.
    #[error(
        "tier `gvisor` is configured but gVisor's runsc is not usable ({reason}); cyclix refuses \
         rather than run the agent on the host's kernel. Fix: install it (Debian: `apt install \
         runsc`; `cyclix check` proves it with a throwaway container), or set `tier: container` \
         explicitly in the spec if sharing the host's kernel is acceptable"
    )]
    GvisorUnusable {
        /// What the caller found (e.g. "runsc is not on $PATH").
        reason: String,
    },
}

/// The injected fact the gate decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// A rootless container runtime is usable.
    Usable,
    /// It is not, for the stated reason.
    Unusable(String),
}

/// The tier gate: returns the tier a run gets, which is always exactly `floor(configured,
/// legacy)`, or refuses. It never returns a weaker tier than required. `gvisor` is the fact
/// about gVisor's `runsc` (read only when the required tier is `gvisor`).
///
/// # Errors
/// [`TierRefusal::RuntimeUnusable`] when the required tier is `container` or `gvisor` and
/// `runtime` is [`Runtime::Unusable`]; [`TierRefusal::GvisorUnusable`] when it is `gvisor`
/// and `gvisor` is.
pub fn gate(
    configured: Tier,
    legacy_worktree_isolation: bool,
    runtime: &Runtime,
    gvisor: &Runtime,
) -> Result<Tier, TierRefusal> {
    let required = floor(configured, legacy_worktree_isolation);
    match (required, runtime, gvisor) {
        (t, Runtime::Unusable(reason), _) if t.is_sandboxed() => {
            Err(TierRefusal::RuntimeUnusable {
                tier: t,
                reason: reason.clone(),
            })
        }
        (Tier::Gvisor, _, Runtime::Unusable(reason)) => Err(TierRefusal::GvisorUnusable {
            reason: reason.clone(),
        }),
        _ => Ok(required),
    }
}

#[cfg(test)]
mod tests;
