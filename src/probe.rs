//! The in-sandbox probe suite (security-cases §0, §2; issue 5 "the boundary"):
//! `cyclix probe [--only ID,...] [--context FILE]`, a hidden subcommand of the cyclix binary
//! that runs INSIDE the agent container before the agent starts. cyclix bind-mounts its own
//! binary read-only (e.g. at `/cyclix/bin/cyclix`) and runs it with `podman exec`; the host
//! writes the [`Context`] (JSON) with the facts the probes compare against.
//!
//! Output on stdout: one JSON line per probe,
//! `{"id":"P1","expect":"…","got":"…","verdict":"PASS"|"FAIL","detail":"…"}`, then
//! `{"summary":true,"pass":N,"fail":M,"wall_ms":T}`. Exit 0 when every probe passed, 1 otherwise.
//!
//! Rules (§0): each probe checks the effect, not the flag; PASS needs the exact errno or
//! status; a timeout is a FAIL ("dropped, not rejected"); a missing tool is a FAIL; every deny
//! check has a positive control. The probes run side by side, each on its own thread with a hard
//! deadline of [`PROBE_TIMEOUT`] (capped by [`SUITE_BUDGET`]); one that misses it FAILs.
//!
//! Layout: [`registry`] lists every probe (id, title, run function, leak watch); [`observe`]
//! does the effectful observations and [`verdict`] the pure judgement (table-driven tests),
//! both split by probe family; [`clients`] holds the low-level HTTP, DNS and rtnetlink clients,
//! [`sys`] the only `unsafe` syscalls.

pub mod clients;
pub mod observe;
pub mod profile;
pub mod registry;
pub mod suite;
pub mod sys;
pub mod verdict;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use profile::Profile;
pub use registry::{PROBES, Probe, ProbeFn};
pub use suite::{first_run, main, run_with, summary};

use verdict::Judged;

/// Whether `id` names a line the suite itself writes: a probe of [`PROBES`], the watch guard
/// `W0`, or `P0` (agent-wait's line for a context it could not use).
#[must_use]
pub fn is_suite_id(id: &str) -> bool {
    id == "W0" || id == "P0" || PROBES.iter().any(|p| p.id == id)
}

/// Hard deadline of one probe (§2: 2 s).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Budget of the whole suite (§2: 15 s).
pub const SUITE_BUDGET: Duration = Duration::from_secs(15);

/// The facts the host knows and the probes compare against (`--context FILE`, JSON written by
/// cyclix on the host before `podman exec`). Unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// The agent's proxy URL, exactly as in `$HTTP_PROXY` (`http://10.213.N.2:3128`).
    pub proxy_url: String,
    /// A DNS name the run's resolver must answer with the proxy's address (positive control of
    /// N7): the proxy container's name, `cyclix-RUN-proxy`.
    pub proxy_name: String,
    /// The run's internal subnet (`10.213.N.0/24`); the agent's only interface must be in it.
    pub subnet: String,
    /// The internal network's gateway (the bridge address, `10.213.N.1`), probed by N6.
    pub gateway_ip: String,
    /// An allowlisted host for the positive controls (`allowed.example`). Empty for a run whose
    /// allowlist is empty (deny-all): the positive control is then that the proxy answers a
    /// request at once with its own 403 (`X-Squid-Error`), which proves it is there and
    /// decides; nothing may be allowed.
    #[serde(default)]
    pub allowed_host: String,
    /// An allowlisted port of that host (`80`); unused when `allowed_host` is empty.
    #[serde(default)]
    pub allowed_port: u16,
    /// Every port of `egress.ports` (`[80, 8080]`): the deny probes try only ports outside it
    /// ([`Context::denied_ports`]), N17 tunnels to 443 when it is here. Empty (an older
    /// context): `allowed_port` alone.
    #[serde(default)]
    pub allowed_ports: Vec<u16>,
    /// `egress.http_ports` (`[80]`): the allowed ports plain HTTP may use; on the others the
    /// positive controls use `CONNECT` (issue 31). Absent (an older context): `[80]`.
    #[serde(default = "default_http_ports")]
    pub http_ports: Vec<u16>,
    /// A text the allowed host's `/` page contains (N13), e.g. `hello-from-allowed.example`;
    /// empty: any 200 counts.
    #[serde(default)]
    pub allowed_marker: String,
    /// A host that is not on the allowlist (`denied.example`).
    pub denied_host: String,
    /// A URL on an allowed host that answers with a redirect to the denied host (N14); `None`:
    /// only the follow-up request is checked.
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// Allowlisted names that resolve to private addresses (N11 rebinding checks).
    #[serde(default)]
    pub rebind_hosts: Vec<String>,
    /// The host's namespace inodes as `readlink /proc/self/ns/NAME` of the invoking user shows
    /// them (`"user": 4026531837`), for P5 and P20.
    pub host_namespaces: BTreeMap<String, u64>,
    /// The invoking host user's uid; the agent's uid must map to it (P5, P16).
    pub host_uid: u32,
    /// The uid a preset agent runs as (`agent.run_as`, issue 14). Then the pod's user
    /// namespace is podman's `keep-id:uid=U` namespace nested in the host user's rootless one,
    /// so `/proc/self/uid_map` maps U to uid 0 of that parent namespace, which is the host
    /// user (`user_namespaces(7)`: the second field is relative to the parent). `None`: the
    /// agent is root of the rootless namespace and its map names the host uid itself.
    #[serde(default)]
    pub agent_uid: Option<u32>,
    /// Variable names that must not appear in any environment (P22), e.g. a canary cyclix set
    /// in its own environment.
    #[serde(default)]
    pub forbidden_env_names: Vec<String>,
    /// sha256 (lowercase hex) of values that must not appear in any environment (P22).
    #[serde(default)]
    pub forbidden_env_sha256: Vec<String>,
    /// Those of [`Context::forbidden_env_names`] whose values are watched by sha256 (at least
    /// `run::boundary::MIN_VALUE_LEN` bytes): during the watch, such a name with another value
    /// is the agent's doing (recorded by P22, not a failure); any other forbidden name fails.
    #[serde(default)]
    pub value_watched_env_names: Vec<String>,
    /// Set by `cyclix probe --watch` (never read from the context file): the agent is running,
    /// so a variable in the sandbox may be its doing (P22).
    #[serde(skip)]
    pub watch: bool,
    /// Secret-looking names that are allowed (the spec's `agent.env` names).
    #[serde(default)]
    pub allowed_env_names: Vec<String>,
    /// The project directory inside (`/work`).
    #[serde(default = "default_workdir")]
    pub workdir: String,
    /// The user repository's git common dir as a host path: nothing of it may be visible in
    /// the sandbox (P17; the agent works in a private repository at `workdir`, issue 11).
    /// Empty: P17 fails (it has nothing to look for).
    #[serde(default)]
    pub git_dir: String,
    /// Further expected mount points (P18): the task file, the probe binary, `mounts:` targets.
    #[serde(default)]
    pub expected_binds: Vec<String>,
    /// The spec's `mounts:` (P18): a mount at one of these targets may come from below the
    /// host's home (its declared source, which `spec::mount_guard` allowed), and must be
    /// read-only when declared so. Any other mount from below `/home` still fails.
    #[serde(default)]
    pub declared_mounts: Vec<DeclaredMount>,
    /// The host's LSM (`apparmor`, `selinux`), `None` when the host has none (P4).
    #[serde(default)]
    pub lsm: Option<String>,
    /// The spec's resource limits (P21).
    #[serde(default)]
    pub limits: Limits,
    /// The expected `/proc/1/comm`: `podman-init` with `--init` (podman binds catatonit at
    /// `/run/podman-init`; measured on podman 5.4.2).
    #[serde(default = "default_init")]
    pub init_comm: String,
    /// The most processes the sandbox may show before the agent starts (P20).
    #[serde(default = "default_max_pids")]
    pub max_pids: usize,
    /// The only entries `NO_PROXY` may have (N16).
    #[serde(default = "default_no_proxy")]
    pub no_proxy_allowed: Vec<String>,
    /// The run's egress is report-only (`egress.report_only`): N9, N10, N12 and N13 then
    /// require an answer from the proxy instead of a deny.
    #[serde(default)]
    pub report_only: bool,
    /// The host tripwires E1 tries to reach (issue 5, escape attempts); the host checks their
    /// effect afterwards (`run::tripwire`). `None`: E1 fails (nothing to attempt).
    #[serde(default)]
    pub escape: Option<Escape>,
    /// Which sandbox is judged ([`Profile`]): `podman` (default) or `kubernetes`, where a
    /// drop within the probes' short deadline counts as denied for direct connections.
    #[serde(default)]
    pub profile: Profile,
    /// The host kernel's release (`uname -r` on the host), which P25 compares the agent's
    /// kernel with; empty when unknown (P25 then says so).
    #[serde(default)]
    pub host_kernel: String,
}

/// One `mounts:` entry as the probes must find it (P18).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredMount {
    /// The mount point in the container (`/mnt/x`).
    pub target: String,
    /// The host path bound there (`/home/u/datasets/x`).
    pub source: String,
    /// Declared read-only: the mount must carry `ro`.
    pub read_only: bool,
}

/// Host paths and a host pid the sandbox must not reach (E1). Planted by cyclix per run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Escape {
    /// A fake private key in the host user's home (not mounted): reading it must fail.
    pub key: String,
    /// A host path outside the workdir: creating it must fail.
    pub outside: String,
    /// The host pid of a sentinel process: signalling it must fail (`ESRCH`: another pid
    /// namespace; `EPERM` also acceptable).
    pub sentinel_pid: i32,
    /// Host sockets that must not be reachable (user bus, podman socket): connecting must fail.
    pub sockets: Vec<String>,
}

/// The spec's `agent.resources` as the kernel should enforce them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `memory.max` in bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// `pids.max`.
    #[serde(default)]
    pub pids: Option<u64>,
    /// CPU in thousandths of a CPU (`cpu.max` = `millis*100 100000`).
    #[serde(default)]
    pub cpu_millis: Option<u32>,
}

/// Where the project directory appears in the agent's container (and the gate's): `/work`.
/// `render::plan::WORKDIR` is this.
pub const WORKDIR: &str = "/work";

fn default_workdir() -> String {
    WORKDIR.to_string()
}
fn default_init() -> String {
    "podman-init".into()
}
fn default_max_pids() -> usize {
    30
}
fn default_http_ports() -> Vec<u16> {
    vec![80]
}

fn default_no_proxy() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}

impl Context {
    /// The probe context of a run of `spec` as every backend starts it (podman's
    /// `run::boundary::probe_context`, Kubernetes' `render::kube::agent::probe_context`): the
    /// allowlist's first exact host and port for the positive controls, every allowed port, a
    /// denied host that is not on the allowlist, the allowed variable names, the workdir,
    /// report-only. The host's facts, the per-run fields and the profile are the backend's to
    /// set, field by field.
    #[must_use]
    pub fn for_spec(spec: &crate::spec::Spec) -> Self {
        use crate::spec::HostPattern;
        let allowed = spec.egress.allow.iter().find_map(|h| match h {
            HostPattern::Exact(h) => Some(h.clone()),
            HostPattern::Subdomains(_) => None,
        });
        let denied = ["denied.example", "cyclix-denied.invalid"]
            .into_iter()
            .find(|d| {
                !spec
                    .egress
                    .allow
                    .iter()
                    .any(|h| matches!(h, HostPattern::Exact(x) if x == d))
            })
            .unwrap_or("cyclix-denied.invalid");
        Context {
            proxy_url: String::new(),
            proxy_name: String::new(),
            subnet: String::new(),
            gateway_ip: String::new(),
            allowed_port: if allowed.is_some() {
                spec.egress.ports.first().copied().unwrap_or(443)
            } else {
                0
            },
            allowed_host: allowed.unwrap_or_default(),
            allowed_ports: spec.egress.ports.clone(),
            http_ports: spec.egress.http_ports.clone(),
            allowed_marker: String::new(),
            denied_host: denied.to_string(),
            redirect_url: None,
            rebind_hosts: Vec::new(),
            host_namespaces: BTreeMap::new(),
            host_uid: 0,
            agent_uid: None,
            forbidden_env_names: Vec::new(),
            forbidden_env_sha256: Vec::new(),
            value_watched_env_names: Vec::new(),
            watch: false,
            allowed_env_names: spec
                .agent
                .env
                .iter()
                .chain(spec.agent.credentials.iter().map(|c| &c.env))
                .cloned()
                .collect(),
            workdir: default_workdir(),
            git_dir: String::new(),
            expected_binds: Vec::new(),
            declared_mounts: Vec::new(),
            lsm: None,
            limits: Limits::default(),
            init_comm: default_init(),
            max_pids: default_max_pids(),
            no_proxy_allowed: default_no_proxy(),
            report_only: spec.egress.report_only,
            escape: None,
            profile: Profile::default(),
            host_kernel: String::new(),
        }
    }

    /// The uid the host user has in the parent of the agent's user namespace, which the
    /// agent's uid must map to in `/proc/self/uid_map` (P5, P16): 0 under keep-id (the host
    /// user's rootless namespace), else [`Context::host_uid`].
    #[must_use]
    pub fn parent_uid(&self) -> u32 {
        if self.agent_uid.is_some() {
            0
        } else {
            self.host_uid
        }
    }

    /// Whether the proxy relays plain HTTP to `port` ([`Context::http_ports`]).
    #[must_use]
    pub fn takes_plain_http(&self, port: u16) -> bool {
        self.http_ports.contains(&port)
    }

    /// The spec's allowed ports: [`Context::allowed_ports`], or `allowed_port` alone when that
    /// list is empty (and nothing for a deny-all run without either).
    #[must_use]
    pub fn allowed_ports(&self) -> Vec<u16> {
        if self.allowed_ports.is_empty() && self.allowed_port != 0 {
            vec![self.allowed_port]
        } else {
            self.allowed_ports.clone()
        }
    }

    /// `n` ports the spec does not allow, for the deny probes (N9): the usual suspects first
    /// (22 SSH, 8080 HTTP-alt, 25 SMTP, 3306, 5432, 6379, 8443), then the lowest free ports
    /// from 1 up, so any set of allowed ports leaves `n` to try (65535 ports, at most
    /// `egress.ports` of them allowed).
    #[must_use]
    pub fn denied_ports(&self, n: usize) -> Vec<u16> {
        let allowed = self.allowed_ports();
        [22, 8080, 25, 3306, 5432, 6379, 8443]
            .into_iter()
            .chain(1..=u16::MAX)
            .filter(|p| !allowed.contains(p))
            .fold(Vec::new(), |mut out, p| {
                if out.len() < n && !out.contains(&p) {
                    out.push(p);
                }
                out
            })
    }

    /// The proxy's IP address from [`Context::proxy_url`].
    #[must_use]
    pub fn proxy_ip(&self) -> Option<String> {
        self.proxy_addr().map(|(h, _)| h)
    }

    /// The proxy's (host, port) from [`Context::proxy_url`] (`http://HOST:PORT`).
    #[must_use]
    pub fn proxy_addr(&self) -> Option<(String, u16)> {
        let rest = self
            .proxy_url
            .strip_prefix("http://")?
            .trim_end_matches('/');
        let (h, p) = rest.rsplit_once(':')?;
        Some((h.to_string(), p.parse().ok()?))
    }
}

/// PASS or FAIL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The expected errno/status was seen.
    Pass,
    /// Anything else.
    Fail,
}

/// One probe's JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// `P1` … `P24`, `N1` … `N17`, `E1`.
    pub id: String,
    /// What the probe expected.
    pub expect: String,
    /// What it saw.
    pub got: String,
    /// PASS/FAIL.
    pub verdict: Verdict,
    /// Why (policy decisions included).
    pub detail: String,
    /// Wall time of the probe in ms.
    pub ms: u64,
}

/// The final JSON line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Always `true` (tells the line apart from the probe lines).
    pub summary: bool,
    /// PASS count.
    pub pass: usize,
    /// FAIL count.
    pub fail: usize,
    /// Wall time of the suite in ms (the wait for the proxy included).
    pub wall_ms: u64,
    /// How long the suite waited for the proxy to accept a connection before its probes ran
    /// ([`suite::wait_for_proxy`]), in ms; absent in a watch round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_wait_ms: Option<u64>,
}

/// Errors before any probe runs.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// `--only` named an unknown probe.
    #[error("unknown probe id `{0}` in --only; use P1–P25, N1–N17 or E1")]
    UnknownId(String),
}

/// Runs the selected probes (all when `only` is empty) with [`PROBE_TIMEOUT`] and
/// [`SUITE_BUDGET`]; see [`run_with`].
///
/// # Errors
/// [`ProbeError::UnknownId`] for an id in `only` that is not a probe.
pub fn run(ctx: &Context, only: &[String]) -> Result<Vec<ProbeResult>, ProbeError> {
    run_with(PROBES, ctx, only, PROBE_TIMEOUT, SUITE_BUDGET)
}

/// The JSON line of probe `id`, judged `j`, which took `took`.
pub(crate) fn result(id: &str, j: Judged, took: Duration) -> ProbeResult {
    ProbeResult {
        id: id.to_string(),
        expect: j.expect,
        got: j.got,
        verdict: if j.pass { Verdict::Pass } else { Verdict::Fail },
        detail: j.detail,
        ms: ms(took),
    }
}

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ctx() -> Context {
        serde_json::from_str(
            r#"{"proxy_url":"http://10.213.7.2:3128","proxy_name":"cyclix-r-proxy",
                "subnet":"10.213.7.0/24","gateway_ip":"10.213.7.1",
                "allowed_host":"allowed.example","allowed_port":80,"denied_host":"denied.example",
                "host_namespaces":{"user":4026531837},"host_uid":1000}"#,
        )
        .expect("a minimal context parses")
    }

    fn pass(_: &Context) -> Judged {
        Judged {
            expect: "x".into(),
            got: "x".into(),
            pass: true,
            detail: String::new(),
        }
    }

    fn hang(c: &Context) -> Judged {
        std::thread::sleep(Duration::from_millis(400));
        pass(c)
    }

    const FAKE: &[Probe] = &[
        Probe::new("A", "a", pass),
        Probe::new("B", "b", hang),
        Probe::new("C", "c", pass),
        Probe::new("D", "d", pass),
    ];

    /// Each marked probe's own start and end (its name, when it began, when it returned):
    /// the scheduling tests judge order and overlap from these, never from a clock bound.
    type Marks = std::sync::Mutex<Vec<(&'static str, Instant, Instant)>>;

    /// A probe that sleeps 400 ms between two marks in `log`.
    fn marked(log: &Marks, name: &'static str, c: &Context) -> Judged {
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(400));
        log.lock()
            .expect("marks")
            .push((name, start, Instant::now()));
        pass(c)
    }

    /// The (start, end) of `name` in `log`.
    fn span(log: &Marks, name: &str) -> (Instant, Instant) {
        let marks = log.lock().expect("marks");
        let m = marks.iter().find(|m| m.0 == name);
        let (_, start, end) = m.unwrap_or_else(|| panic!("{name} left no marks"));
        (*start, *end)
    }

    /// Whether two spans overlap.
    fn overlap(a: (Instant, Instant), b: (Instant, Instant)) -> bool {
        a.0 < b.1 && b.0 < a.1
    }

    #[test]
    fn context_defaults_and_unknown_keys() {
        let c = ctx();
        assert_eq!(c.workdir, "/work");
        assert_eq!(c.init_comm, "podman-init");
        assert_eq!(c.proxy_addr(), Some(("10.213.7.2".into(), 3128)));
        assert_eq!(c.lsm, None);
        let bad = r#"{"proxy_url":"x","bogus":1}"#;
        assert!(serde_json::from_str::<Context>(bad).is_err());
    }

    #[test]
    fn a_probe_over_its_deadline_fails_and_the_others_still_run() {
        // B outlasts its deadline by waiting for the test (at most 60 s), whatever the load.
        static RELEASE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        fn held(c: &Context) -> Judged {
            let until = Instant::now() + Duration::from_secs(60);
            while !RELEASE.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            pass(c)
        }
        const HELD: &[Probe] = &[
            Probe::new("A", "a", pass),
            Probe::new("B", "b", held),
            Probe::new("C", "c", pass),
            Probe::new("D", "d", pass),
        ];
        let r = run_with(
            HELD,
            &ctx(),
            &[],
            Duration::from_secs(2),
            Duration::from_secs(120),
        )
        .expect("known ids");
        RELEASE.store(true, std::sync::atomic::Ordering::SeqCst);
        let v: Vec<(&str, Verdict)> = r.iter().map(|r| (r.id.as_str(), r.verdict)).collect();
        assert_eq!(
            v,
            [
                ("A", Verdict::Pass),
                ("B", Verdict::Fail),
                ("C", Verdict::Pass),
                ("D", Verdict::Pass)
            ]
        );
        assert!(r[1].detail.contains("dropped, not rejected"), "{:?}", r[1]);
        assert_eq!(summary(&r, Duration::ZERO).fail, 1);
    }

    #[test]
    fn the_suite_budget_caps_every_deadline_and_the_probes_run_side_by_side() {
        // B waits until the test lets it go (at most 60 s): if the suite waited for it, the
        // suite would only return once B gave up, and B says which it was.
        static RELEASE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        static ENDED_BY: std::sync::Mutex<Option<&str>> = std::sync::Mutex::new(None);
        fn held(c: &Context) -> Judged {
            let until = Instant::now() + Duration::from_secs(60);
            while !RELEASE.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            let by = if RELEASE.load(std::sync::atomic::Ordering::SeqCst) {
                "release"
            } else {
                "timeout"
            };
            *ENDED_BY.lock().expect("lock") = Some(by);
            pass(c)
        }
        const HELD: &[Probe] = &[
            Probe::new("A", "a", pass),
            Probe::new("B", "b", held),
            Probe::new("C", "c", pass),
            Probe::new("D", "d", pass),
        ];
        let r = run_with(
            HELD,
            &ctx(),
            &[],
            Duration::from_secs(120),
            Duration::from_millis(150),
        )
        .expect("known ids");
        assert_eq!(
            *ENDED_BY.lock().expect("lock"),
            None,
            "the suite waited for the hanging probe"
        );
        RELEASE.store(true, std::sync::atomic::Ordering::SeqCst);
        let v: Vec<(&str, Verdict)> = r.iter().map(|r| (r.id.as_str(), r.verdict)).collect();
        assert_eq!(
            v,
            [
                ("A", Verdict::Pass),
                ("B", Verdict::Fail),
                ("C", Verdict::Pass),
                ("D", Verdict::Pass)
            ],
            "B is cut at the budget; C and D, started beside it, pass"
        );
        assert!(r[1].detail.contains("within 150 ms"), "{:?}", r[1]);
    }

    #[test]
    fn two_slow_probes_take_the_time_of_one() {
        static LOG: Marks = std::sync::Mutex::new(Vec::new());
        fn a(c: &Context) -> Judged {
            marked(&LOG, "A", c)
        }
        fn b(c: &Context) -> Judged {
            marked(&LOG, "B", c)
        }
        const SLOW: &[Probe] = &[Probe::new("A", "a", a), Probe::new("B", "b", b)];
        let r = run_with(
            SLOW,
            &ctx(),
            &[],
            Duration::from_secs(60),
            Duration::from_secs(120),
        )
        .expect("known ids");
        assert!(r.iter().all(|r| r.verdict == Verdict::Pass), "{r:?}");
        assert!(
            overlap(span(&LOG, "A"), span(&LOG, "B")),
            "two slow probes ran one after the other"
        );
        assert!(
            r.iter().all(|r| r.ms >= 400),
            "each probe's own time: {r:?}"
        );
    }

    #[test]
    fn the_proxy_lane_runs_one_at_a_time_beside_the_others_and_stops_at_the_budget() {
        const LANE: &[Probe] = &[
            Probe::new("A", "a", hang).proxied(),
            Probe::new("B", "b", hang).proxied(),
            Probe::new("C", "c", hang),
        ];
        static LOG: Marks = std::sync::Mutex::new(Vec::new());
        fn a(c: &Context) -> Judged {
            marked(&LOG, "A", c)
        }
        fn b(c: &Context) -> Judged {
            marked(&LOG, "B", c)
        }
        fn c_(c: &Context) -> Judged {
            marked(&LOG, "C", c)
        }
        const MARKED: &[Probe] = &[
            Probe::new("A", "a", a).proxied(),
            Probe::new("B", "b", b).proxied(),
            Probe::new("C", "c", c_),
        ];
        let r = run_with(
            MARKED,
            &ctx(),
            &[],
            Duration::from_secs(60),
            Duration::from_secs(120),
        )
        .expect("known ids");
        assert!(r.iter().all(|r| r.verdict == Verdict::Pass), "{r:?}");
        let (sa, sb, sc) = (span(&LOG, "A"), span(&LOG, "B"), span(&LOG, "C"));
        assert!(!overlap(sa, sb), "the proxied probes A and B ran at once");
        assert!(
            overlap(sc, sa) || overlap(sc, sb),
            "C ran beside neither of the lane's probes"
        );
        // A budget of 300 ms: A is cut at it, B never starts; C (beside) is cut too.
        let r = run_with(
            LANE,
            &ctx(),
            &[],
            Duration::from_secs(2),
            Duration::from_millis(300),
        )
        .expect("known ids");
        assert_eq!(r[0].verdict, Verdict::Fail);
        assert!(r[0].detail.contains("dropped, not rejected"), "{:?}", r[0]);
        assert_eq!(
            (r[1].verdict, r[1].got.as_str()),
            (Verdict::Fail, "not run"),
            "{:?}",
            r[1]
        );
        assert_eq!(r[2].verdict, Verdict::Fail, "{:?}", r[2]);
    }

    #[test]
    fn only_selects_and_rejects_unknown_ids() {
        let r = run_with(
            FAKE,
            &ctx(),
            &["c".into(), "A".into()],
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .expect("known ids");
        assert_eq!(
            r.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["A", "C"]
        );
        assert!(matches!(
            run_with(
                FAKE,
                &ctx(),
                &["P99".into()],
                Duration::from_secs(1),
                Duration::from_secs(1)
            ),
            Err(ProbeError::UnknownId(_))
        ));
        assert_eq!(PROBES.len(), 43, "P1–P25, N1–N17 and E1");
    }
}
