//! The host half of the boundary: what the pre-agent probe run must show, the leak watch's
//! list of host secrets (by name and by value) and the pure decisions over probe reports and
//! sandbox environments. The probes themselves run inside the agent container (`probe`).

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Probes re-run while the agent works (security-cases §2, the ★ rows): the registry's
/// watched entries (`probe::registry`).
pub const WATCH_PROBES: &[&str] = &crate::probe::registry::WATCH;

/// Names of host variables the sandbox must never see, besides the ones cyclix did not hand
/// over on purpose: anything that looks like a credential or reaches a host service.
pub const SECRET_NAME_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "API_KEY",
    "PRIVATE_KEY",
    "AWS_",
    "GITHUB_",
    "GH_",
    "SSH_AUTH_SOCK",
    "DBUS_SESSION_BUS_ADDRESS",
    "CYCLIX_CANARY",
];

/// Values shorter than this are watched by name only (a 3-byte value would match by chance).
pub const MIN_VALUE_LEN: usize = 8;

/// A host variable the sandbox must not see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// Its name.
    pub name: String,
    /// Its value (kept in memory only; the probe context carries its sha256).
    pub value: Vec<u8>,
}

/// From cyclix's own environment: every variable whose name carries a [`SECRET_NAME_MARKERS`]
/// entry, except those the spec hands over (`handed`).
#[must_use]
pub fn watch_list(env: &[(String, Vec<u8>)], handed: &[String]) -> Vec<Watched> {
    env.iter()
        .filter(|(n, _)| !handed.contains(n))
        .filter(|(n, _)| {
            let up = n.to_ascii_uppercase();
            SECRET_NAME_MARKERS.iter().any(|m| up.contains(m))
        })
        .map(|(n, v)| Watched {
            name: n.clone(),
            value: v.clone(),
        })
        .collect()
}

/// The leak watch's entries for `agent.credentials` values (`(env, value)`): watched by
/// VALUE only. The sandbox holds the credential's variable with a placeholder by design, so
/// the entry's name is a label (`ENV (credential value)`) no variable can be named by
/// accident; a real value found anywhere in a sandbox environment fails the run.
pub fn credential_watch<'a>(values: impl Iterator<Item = &'a (String, Vec<u8>)>) -> Vec<Watched> {
    values
        .map(|(n, v)| Watched {
            name: format!("{n} (credential value)"),
            value: v.clone(),
        })
        .collect()
}

/// Lowercase hex sha256 of `v`.
#[must_use]
pub fn sha256_hex(v: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(v)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Host facts the probe context needs (gathered by the caller: I/O).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `(kind, readlink of /proc/self/ns/KIND)` of the invoking user.
    pub namespaces: Vec<(String, String)>,
    /// The invoking user's uid.
    pub uid: u32,
    /// The host's LSM (`apparmor`, `selinux`) or `None`.
    pub lsm: Option<String>,
    /// Host sockets the sandbox must not reach (user bus, podman socket).
    pub sockets: Vec<String>,
    /// The host kernel's release (`uname -r`), for P25.
    pub kernel: String,
}

/// The record's notice of a tier-`gvisor` run: what the host-side looks cannot see there.
pub const GVISOR_NO_HOST_SCAN: &str = "tier gvisor: the host's /proc shows gVisor's own processes (runsc), not the agent's, so the host-side scan of the sandbox's environments (the leak watch's second look) is not made; the leak watch's probes read the sandbox's /proc inside it, and the sandbox's processes are listed by gVisor's kernel (`runsc ps`)";

/// The run-independent part of the probe context (`ctl/probe.json`): what the probes inside
/// the agent container must find, [`crate::probe::Context::for_spec`] with this host's facts
/// (namespaces, uid, LSM), the watched variables, the expected mounts and the limits. The
/// per-run fields (proxy, subnet, git dir, escape targets) are filled by
/// [`complete_context`]. Secret values never go in: only their sha256.
#[must_use]
pub fn probe_context(
    spec: &crate::spec::Spec,
    watched: &[Watched],
    host: &HostFacts,
) -> crate::probe::Context {
    let mut c = crate::probe::Context::for_spec(spec);
    c.host_namespaces = host
        .namespaces
        .iter()
        .filter_map(|(k, v)| ns_inode(v).map(|n| (k.clone(), n)))
        .collect();
    c.host_uid = host.uid;
    c.agent_uid = spec.agent.run_as;
    c.forbidden_env_names = watched.iter().map(|w| w.name.clone()).collect();
    c.forbidden_env_sha256 = watched
        .iter()
        .filter(|w| w.value.len() >= MIN_VALUE_LEN)
        .map(|w| sha256_hex(&w.value))
        .collect();
    c.value_watched_env_names = value_watched_names(watched);
    c.expected_binds = vec![
        crate::render::plan::TASK_PATH.to_string(),
        crate::render::plan::CONTEXT_PATH.to_string(),
        crate::render::plan::CYCLIX_BIN_PATH.to_string(),
        crate::render::plan::CTL_PATH.to_string(),
    ];
    c.expected_binds
        .extend(spec.mounts.iter().map(|m| m.target.clone()));
    c.declared_mounts = spec
        .mounts
        .iter()
        .map(|m| crate::probe::DeclaredMount {
            target: m.target.clone(),
            source: m.source.clone(),
            read_only: m.read_only,
        })
        .collect();
    c.lsm.clone_from(&host.lsm);
    c.host_kernel.clone_from(&host.kernel);
    if spec.tier == crate::tier::Tier::Gvisor {
        c.profile = crate::probe::Profile::Gvisor;
        c.expected_binds
            .push(crate::render::plan::REPORT_DIR_PATH.to_string());
    }
    c.limits = crate::probe::Limits {
        memory_bytes: spec.agent.resources.memory_bytes,
        pids: spec.agent.resources.pids.map(u64::from),
        cpu_millis: spec.agent.resources.cpu_millis,
    };
    c
}

/// The watched names whose values are checked (P22 records such a name with another value as
/// the agent's doing instead of failing): those of at least [`MIN_VALUE_LEN`] bytes. Pure.
#[must_use]
pub fn value_watched_names(watched: &[Watched]) -> Vec<String> {
    watched
        .iter()
        .filter(|w| w.value.len() >= MIN_VALUE_LEN)
        .map(|w| w.name.clone())
        .collect()
}

/// The per-run fields of the probe context.
pub fn complete_context(
    ctx: &mut crate::probe::Context,
    run_id: &str,
    octet: u8,
    git_dir: &std::path::Path,
    escape: crate::probe::Escape,
) {
    ctx.proxy_url = format!(
        "http://10.213.{octet}.2:{}",
        crate::render::plan::PROXY_PORT
    );
    ctx.proxy_name = crate::naming::RunNames::new(run_id).proxy();
    ctx.subnet = format!("10.213.{octet}.0/24");
    ctx.gateway_ip = format!("10.213.{octet}.1");
    // With credentials the agent's NO_PROXY lists the proxy (`render::plan::agent`).
    ctx.no_proxy_allowed.push(format!("10.213.{octet}.2"));
    ctx.git_dir = git_dir.display().to_string();
    ctx.escape = Some(escape);
}

/// The inode of a namespace link target such as `net:[4026531840]`.
fn ns_inode(link: &str) -> Option<u64> {
    link.split_once(":[")?.1.strip_suffix(']')?.parse().ok()
}

/// Field report B16: the run's internal network must hold exactly the agent pod's infra
/// container and the proxy. Returns one finding per stranger (and for a missing proxy). Pure.
#[must_use]
pub fn network_strangers(network: &str, members: &[String]) -> Vec<String> {
    let expected = [format!("{network}-infra"), format!("{network}-proxy")];
    let mut out: Vec<String> = members
        .iter()
        .filter(|m| !expected.contains(m))
        .map(|m| format!("B16: container {m} is on the run's internal network {network} (only the agent pod and the proxy may be)"))
        .collect();
    if !members.iter().any(|m| m == &expected[1]) {
        out.push(format!(
            "B16: the proxy {} is not on the run's internal network {network}",
            expected[1]
        ));
    }
    out
}

/// One process's environment as seen from the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessEnv {
    /// Host pid.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// `NAME=VALUE` entries.
    pub vars: Vec<(String, Vec<u8>)>,
    /// Why `/proc/PID/environ` of this live process could not be read from the host (e.g.
    /// `EACCES`); `None` when it was read. The host user owns the container's user namespace,
    /// so this should never happen: a process the scan cannot see is a finding.
    pub unreadable: Option<String>,
}

/// The findings of the host-side scan before the agent runs ([`sightings`] with nothing in the
/// sandbox yet the agent's doing): every sighting of a watched variable, by value or by name,
/// fails. Pure.
#[must_use]
pub fn leaks(procs: &[ProcessEnv], watched: &[Watched]) -> Vec<String> {
    sightings(procs, watched, false).leaks
}

/// What the host-side scan saw of the watched variables (issue 13 item 3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sightings {
    /// Findings that fail the run: `pid P (comm): the value of host variable W is in VAR`, or
    /// `pid P (comm): variable W is set` where the name alone decides.
    pub leaks: Vec<String>,
    /// Variables merely named like a watched one, with another value, set while the agent ran:
    /// the agent's doing (it can `export CYCLIX_CANARY=x`), recorded, not a leak.
    pub named: Vec<String>,
}

/// Looks for the watched variables in the sandbox's processes. A watched VALUE anywhere (in
/// any variable, as a substring) is a leak. A variable merely NAMED like a watched one is a
/// leak only where no value check decides: before the agent runs (`agent_running` false:
/// nothing in the sandbox is the agent's doing yet) or when the watched value is shorter than
/// [`MIN_VALUE_LEN`] (watched by name only); otherwise it is recorded in
/// [`Sightings::named`]. Pure.
#[must_use]
pub fn sightings(procs: &[ProcessEnv], watched: &[Watched], agent_running: bool) -> Sightings {
    let mut out = Sightings::default();
    for p in procs {
        if let Some(why) = &p.unreadable {
            out.leaks.push(format!(
                "pid {} ({}): its environment cannot be read from the host ({why}): the leak watch cannot see it",
                p.pid, p.comm
            ));
        }
        for (name, value) in &p.vars {
            for w in watched {
                let by_value = w.value.len() >= MIN_VALUE_LEN;
                if by_value && contains(value, &w.value) {
                    out.leaks.push(format!(
                        "pid {} ({}): the value of host variable {} is in {name}",
                        p.pid, p.comm, w.name
                    ));
                } else if name == &w.name && (!by_value || !agent_running) {
                    out.leaks.push(format!(
                        "pid {} ({}): variable {name} is set",
                        p.pid, p.comm
                    ));
                } else if name == &w.name {
                    out.named.push(format!(
                        "pid {} ({}): variable {name} is set, not to the watched value (the agent's doing)",
                        p.pid, p.comm
                    ));
                }
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The first cause of a refusal whose positive controls failed because the allowlisted host
/// they reach (`ctx.allowed_host`) did not answer through the proxy: N8 or N13 (the requests
/// for that host) failed with squid's 502/503/504 or no answer in time, or a deny probe's
/// control ("the allowed host gave …") did. The boundary held there; the host is unreachable
/// from this machine (a name that does not resolve, a port that does not answer). Names the
/// host, the probes and what they got, and the fix (issue 32 item 3: such a run ended
/// `probe_refused` in lines that never named the host). `None` for a deny-all run or when no
/// such probe failed.
#[must_use]
pub fn unanswered_allowed(ctx: &crate::probe::Context, probes: &[Value]) -> Option<String> {
    if ctx.allowed_host.is_empty() {
        return None;
    }
    let unanswered = |got: &str| {
        got.contains("timeout")
            || [" 502", " 503", " 504"].iter().any(|c| got.contains(c))
            || ["502", "503", "504"].iter().any(|c| got.starts_with(c))
    };
    let seen: Vec<String> = probes
        .iter()
        .filter(|p| p["verdict"] == "FAIL")
        .filter_map(|p| {
            let id = p["id"].as_str()?;
            let got = p["got"].as_str().unwrap_or_default();
            let detail = p["detail"].as_str().unwrap_or_default();
            let control = detail
                .split_once("positive control failed: the allowed host gave ")
                .map(|(_, g)| g);
            match (id, control) {
                ("N8" | "N13", _) if unanswered(got) => Some(format!("{id}: {got}")),
                (_, Some(g)) if unanswered(g) => Some(format!("{id}'s control: {g}")),
                _ => None,
            }
        })
        .collect();
    let first = seen.first()?;
    let target = format!("{}:{}", ctx.allowed_host, ctx.allowed_port);
    // "Held" only when every failed probe is one of these (attack review): another failure
    // is a refusal of its own.
    let failed = probes.iter().filter(|p| p["verdict"] == "FAIL").count();
    let held = if failed == seen.len() {
        "the sandbox's boundary held, but its positive controls need"
    } else {
        "other probes failed too (see REFUSED); these positive controls need"
    };
    Some(format!(
        "the allowlisted {target} did not answer through the proxy during the probes ({first}{}): \
         {held} {target} reachable from this machine (a name that does not resolve, a port \
         that does not answer); check it from this host, or take it off `egress.allow`",
        if seen.len() > 1 {
            format!(", and {} more", seen.len() - 1)
        } else {
            String::new()
        }
    ))
}

/// A probe run's report, parsed: the probe lines (JSON objects with `id` and `verdict`), and
/// whether it proves the boundary (exit 0, a summary line, at least one probe, every verdict
/// `PASS`, and the report's shape as the suite writes it: [`shape`]), and one line per failed
/// probe, `ID: expected …, got … (detail)` (the detail, the probe's reason, only when it gave
/// one), then one per fault of the shape. Lines that are not JSON objects are ignored. Pure.
#[must_use]
pub fn judge(exit: i32, stdout: &str) -> (Vec<Value>, bool, Vec<String>) {
    let mut probes = Vec::new();
    let mut summaries: Vec<(usize, Value)> = Vec::new();
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        if !v.is_object() {
            continue;
        }
        if v.get("summary").and_then(Value::as_bool) == Some(true) {
            summaries.push((probes.len(), v));
        } else if v.get("id").is_some() {
            probes.push(v);
        }
    }
    let summary = !summaries.is_empty();
    let faults = shape(&probes, &summaries);
    let mut failed: Vec<String> = probes
        .iter()
        .filter(|p| p.get("verdict").and_then(Value::as_str) != Some("PASS"))
        .map(|p| {
            let field = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("?");
            let why = p.get("detail").and_then(Value::as_str).unwrap_or("").trim();
            let line = format!(
                "{}: expected {}, got {}",
                field("id"),
                field("expect"),
                field("got")
            );
            if why.is_empty() {
                line
            } else {
                format!("{line} ({why})")
            }
        })
        .collect();
    failed.extend(faults);
    let ok = exit == 0 && summary && !probes.is_empty() && failed.is_empty();
    (probes, ok, failed)
}

/// What is wrong with a report's shape, beyond its verdicts: the suite writes each probe of its
/// own once, then one summary whose counts are its lines'. A line the suite did not write (an
/// image process that got at the report's descriptor) can only be added, and added lines show
/// as: a probe id twice, an id the suite does not have, a second summary, a probe line after
/// the summary, or a summary whose counts are not the lines' (which would also make
/// [`crate::run::report_fifo::exit_of`] read another exit). Each is a refusal (fail closed).
/// `summaries`: each summary with the number of probe lines before it. Pure.
fn shape(probes: &[Value], summaries: &[(usize, Value)]) -> Vec<String> {
    let mut faults = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for id in probes
        .iter()
        .map(|p| p.get("id").and_then(Value::as_str).unwrap_or("?"))
    {
        if seen.contains(&id) {
            faults.push(format!(
                "report: probe {id} appears twice (a line the suite did not write)"
            ));
        } else if !crate::probe::is_suite_id(id) {
            faults.push(format!(
                "report: `{id}` is no probe of the suite (a line the suite did not write)"
            ));
        }
        seen.push(id);
    }
    if summaries.len() > 1 {
        faults.push(format!(
            "report: {} summary lines, the suite writes one",
            summaries.len()
        ));
    }
    if let Some((before, sum)) = summaries.first() {
        if *before != probes.len() {
            faults.push(format!(
                "report: {} probe line(s) after the summary",
                probes.len() - before
            ));
        }
        // A summary without its counts is no `Summary` to `exit_of` (it reads no exit from
        // it); one with counts must count these lines.
        let pass = probes.iter().filter(|p| p["verdict"] == "PASS").count();
        let fail = probes.len() - pass;
        let count = |k: &str| sum.get(k).and_then(Value::as_u64);
        if let (Some(p), Some(f)) = (count("pass"), count("fail"))
            && (u64::try_from(pass).ok() != Some(p) || u64::try_from(fail).ok() != Some(f))
        {
            faults.push(format!(
                "report: the summary counts {p} PASS and {f} FAIL, its lines {pass} and {fail}"
            ));
        }
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_list_takes_credentials_not_handed_over() {
        let env = vec![
            ("GITHUB_TOKEN".to_string(), b"ghp_x".to_vec()),
            ("API_KEY".to_string(), b"handed".to_vec()),
            ("PATH".to_string(), b"/usr/bin".to_vec()),
            ("CYCLIX_CANARY".to_string(), b"canary-123456".to_vec()),
        ];
        let w = watch_list(&env, &["API_KEY".to_string()]);
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["GITHUB_TOKEN", "CYCLIX_CANARY"]);
    }

    #[test]
    fn leaks_are_found_by_name_and_by_value() {
        let watched = vec![Watched {
            name: "CYCLIX_CANARY".into(),
            value: b"canary-123456".to_vec(),
        }];
        let clean = ProcessEnv {
            pid: 7,
            comm: "sh".into(),
            vars: vec![("HOME".into(), b"/tmp".to_vec())],
            unreadable: None,
        };
        assert!(leaks(std::slice::from_ref(&clean), &watched).is_empty());
        let by_name = ProcessEnv {
            vars: vec![("CYCLIX_CANARY".into(), b"x".to_vec())],
            ..clean.clone()
        };
        assert_eq!(
            leaks(&[by_name], &watched),
            ["pid 7 (sh): variable CYCLIX_CANARY is set"]
        );
        let by_value = ProcessEnv {
            vars: vec![("X".into(), b"pre-canary-123456-post".to_vec())],
            ..clean
        };
        assert_eq!(
            leaks(&[by_value], &watched),
            ["pid 7 (sh): the value of host variable CYCLIX_CANARY is in X"]
        );
    }

    #[test]
    fn a_name_alone_is_the_agents_doing_unless_no_value_check_decides() {
        let watched = vec![
            Watched {
                name: "CYCLIX_CANARY".into(),
                value: b"cyclix-canary-0123456789".to_vec(),
            },
            Watched {
                name: "GH_PIN".into(),
                value: b"1234".to_vec(),
            },
        ];
        let p = |vars: Vec<(&str, &[u8])>| ProcessEnv {
            pid: 9,
            comm: "python3".into(),
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
            unreadable: None,
        };
        let hidden = ProcessEnv {
            unreadable: Some("EACCES".into()),
            ..p(vec![])
        };
        assert_eq!(
            sightings(&[hidden], &watched, true).leaks,
            [
                "pid 9 (python3): its environment cannot be read from the host (EACCES): the leak watch cannot see it"
            ]
        );
        let named = p(vec![("CYCLIX_CANARY", b"x")]);
        let s = sightings(std::slice::from_ref(&named), &watched, true);
        assert!(s.leaks.is_empty(), "{s:?}");
        assert_eq!(
            s.named,
            [
                "pid 9 (python3): variable CYCLIX_CANARY is set, not to the watched value (the agent's doing)"
            ]
        );
        assert_eq!(
            sightings(&[named], &watched, false).leaks,
            ["pid 9 (python3): variable CYCLIX_CANARY is set"],
            "before the agent runs a name alone fails"
        );
        let value = p(vec![("CYCLIX_CANARY", b"cyclix-canary-0123456789")]);
        let s = sightings(&[value], &watched, true);
        assert_eq!(
            (s.leaks.len(), s.named.len()),
            (1, 0),
            "the watched value under its own name is a leak: {s:?}"
        );
        let short = p(vec![("GH_PIN", b"9999")]);
        assert_eq!(
            sightings(&[short], &watched, true).leaks,
            ["pid 9 (python3): variable GH_PIN is set"],
            "a value too short to check: the name alone fails"
        );
        assert_eq!(value_watched_names(&watched), ["CYCLIX_CANARY"]);
    }

    #[test]
    fn a_report_proves_the_boundary_only_when_complete_and_all_pass() {
        let pass =
            "{\"id\":\"P1\",\"verdict\":\"PASS\"}\n{\"summary\":true,\"pass\":1,\"fail\":0}\n";
        assert!(judge(0, pass).1);
        assert!(!judge(1, pass).1, "a non-zero exit refuses");
        assert!(
            !judge(0, "{\"id\":\"P1\",\"verdict\":\"PASS\"}\n").1,
            "no summary: cut short"
        );
        assert!(!judge(0, "{\"summary\":true}\n").1, "no probe ran");
        let fail = "{\"id\":\"N2\",\"expect\":\"ENETUNREACH\",\"got\":\"TIMEOUT\",\"verdict\":\"FAIL\"}\n{\"summary\":true}\n";
        let (probes, ok, failed) = judge(0, fail);
        assert!(!ok);
        assert_eq!(probes.len(), 1);
        assert_eq!(failed, ["N2: expected ENETUNREACH, got TIMEOUT"]);
        let why = "{\"id\":\"P19\",\"expect\":\"no socket\",\"got\":\"0 sockets\",\"verdict\":\"FAIL\",\"detail\":\"the file walk did not finish within its budget\"}\n{\"summary\":true}\n";
        assert_eq!(
            judge(0, why).2,
            [
                "P19: expected no socket, got 0 sockets (the file walk did not finish within its budget)"
            ],
            "the probe's reason is part of the refusal"
        );
    }

    #[test]
    fn added_lines_break_the_reports_shape_and_refuse_it() {
        let p1 = "{\"id\":\"P1\",\"verdict\":\"PASS\"}";
        let n2 = "{\"id\":\"N2\",\"verdict\":\"PASS\"}";
        let sum = |p: u32, f: u32| format!("{{\"summary\":true,\"pass\":{p},\"fail\":{f}}}");
        // Positive control: the suite's own shape proves.
        let good = format!("{p1}\n{n2}\n{}\n", sum(2, 0));
        assert!(judge(0, &good).1, "{:?}", judge(0, &good).2);
        let refused = |report: &str, want: &str| {
            let (_, ok, why) = judge(0, report);
            assert!(!ok, "{report}");
            assert!(why.iter().any(|w| w.contains(want)), "{want}: {why:?}");
        };
        refused(
            &format!("{p1}\n{p1}\n{n2}\n{}\n", sum(3, 0)),
            "P1 appears twice",
        );
        refused(
            &format!(
                "{p1}\n{{\"id\":\"X9\",\"verdict\":\"PASS\"}}\n{}\n",
                sum(2, 0)
            ),
            "`X9` is no probe of the suite",
        );
        refused(
            &format!("{p1}\n{}\n{n2}\n{}\n", sum(1, 0), sum(2, 0)),
            "2 summary lines",
        );
        refused(
            &format!("{p1}\n{}\n{n2}\n", sum(2, 0)),
            "1 probe line(s) after the summary",
        );
        // An injected summary that counts a failing line as passed.
        let n2_fail = "{\"id\":\"N2\",\"verdict\":\"FAIL\"}";
        refused(
            &format!("{p1}\n{n2_fail}\n{}\n", sum(2, 0)),
            "the summary counts 2 PASS and 0 FAIL, its lines 1 and 1",
        );
    }

    #[test]
    fn only_the_pod_and_the_proxy_may_be_on_the_internal_network() {
        let ok = vec!["cyclix-r1-infra".to_string(), "cyclix-r1-proxy".to_string()];
        assert!(network_strangers("cyclix-r1", &ok).is_empty());
        let mut bad = ok.clone();
        bad.push("intruder".into());
        assert_eq!(network_strangers("cyclix-r1", &bad).len(), 1);
        assert_eq!(
            network_strangers("cyclix-r1", &ok[..1]).len(),
            1,
            "a missing proxy is a finding"
        );
    }

    #[test]
    fn the_probe_context_matches_the_probe_schema() {
        let yaml = "tenant: a\nrepo: {path: /home/u/p, base: main}\ntask: {text: x}\n\
                    agent: {image: localhost/a, unpinned_local_image: true, command: [a], env: [API_KEY]}\n\
                    gate: {image: localhost/a, unpinned_local_image: true, command: [b]}\n\
                    egress: {allow: [allowed.example], ports: [80]}\n";
        let ctx = crate::spec::SpecContext {
            file: "t".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1".into(),
        };
        let spec = crate::spec::parse(yaml, &ctx).expect("spec");
        let host = HostFacts {
            kernel: "6.1.0-test".into(),
            namespaces: vec![("net".into(), "net:[4026531840]".into())],
            uid: 1000,
            lsm: None,
            sockets: vec![],
        };
        let watched = vec![Watched {
            name: "CYCLIX_CANARY".into(),
            value: b"canary-0123456789".to_vec(),
        }];
        let mut c = probe_context(&spec, &watched, &host);
        assert_eq!(
            (
                c.allowed_host.as_str(),
                c.allowed_port,
                c.denied_host.as_str()
            ),
            ("allowed.example", 80, "denied.example")
        );
        assert_eq!(c.host_namespaces.get("net"), Some(&4_026_531_840));
        assert_eq!(c.forbidden_env_sha256, [sha256_hex(b"canary-0123456789")]);
        assert!(
            !serde_json::to_string(&c)
                .expect("json")
                .contains("canary-0123456789"),
            "a value went in clear"
        );
        let esc = crate::probe::Escape {
            key: "/k".into(),
            outside: "/o".into(),
            sentinel_pid: 4242,
            sockets: vec![],
        };
        complete_context(&mut c, "r1", 7, std::path::Path::new("/home/u/p/.git"), esc);
        assert_eq!(c.proxy_url, "http://10.213.7.2:3128");
        let back: crate::probe::Context =
            serde_json::from_str(&serde_json::to_string(&c).expect("json")).expect("round trip");
        assert_eq!(back, c);
    }

    #[test]
    fn podman_and_kubernetes_build_the_probe_context_from_one_builder() {
        let yaml = "tenant: a\nrepo: {path: /home/u/p, base: main}\ntask: {text: x}\n\
                    agent: {image: localhost/a, unpinned_local_image: true, command: [a], env: [API_KEY]}\n\
                    gate: {image: localhost/a, unpinned_local_image: true, command: [b]}\n\
                    egress: {allow: [denied.example, \"*.pkg.example\", allowed.example], ports: [443, 8443], report_only: true}\n";
        let ctx = crate::spec::SpecContext {
            file: "t".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1".into(),
        };
        let spec = crate::spec::parse(yaml, &ctx).expect("spec");
        let host = HostFacts {
            kernel: "6.1.0-test".into(),
            namespaces: vec![("user".into(), "user:[4026531837]".into())],
            uid: 1000,
            lsm: Some("apparmor".into()),
            sockets: vec![],
        };
        let podman = probe_context(&spec, &[], &host);
        let kube = crate::render::kube::agent::probe_context(&spec);
        // What the spec decides is the same on both backends: taken from the one builder.
        let shared = |c: &crate::probe::Context| {
            (
                c.allowed_host.clone(),
                c.allowed_port,
                c.allowed_ports.clone(),
                c.denied_host.clone(),
                c.allowed_env_names.clone(),
                c.workdir.clone(),
                c.report_only,
            )
        };
        // The Kubernetes agent carries one name more: git's `safe.directory` pair for the
        // work volume (`render::kube::agent::work_safe_env`).
        let mut kube = kube;
        assert_eq!(
            kube.allowed_env_names.pop().as_deref(),
            Some("GIT_CONFIG_KEY_0")
        );
        assert_eq!(shared(&podman), shared(&kube));
        assert_eq!(
            shared(&podman),
            (
                "allowed.example".to_string(),
                443,
                vec![443, 8443],
                "cyclix-denied.invalid".to_string(),
                vec!["API_KEY".to_string()],
                "/work".to_string(),
                true
            ),
            "the first exact host; a denied host off the allowlist"
        );
        // What differs is each backend's own: the host's facts on podman, the Pod on Kubernetes.
        assert_eq!(podman.profile, crate::probe::Profile::Podman);
        assert_eq!(kube.profile, crate::probe::Profile::Kubernetes);
        assert_eq!(podman.host_namespaces.get("user"), Some(&4_026_531_837));
        assert!(kube.host_namespaces.is_empty());
        assert_eq!(podman.lsm.as_deref(), Some("apparmor"));
        assert_eq!(kube.lsm, None);
        assert_eq!(podman.expected_binds.len(), 4);
        assert!(kube.expected_binds.is_empty());
        assert_eq!(crate::probe::WORKDIR, crate::render::plan::WORKDIR);
    }

    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn an_unanswered_allowlisted_host_is_named_once_with_its_probes_and_a_fix() {
        let mut ctx: crate::probe::Context = serde_json::from_value(serde_json::json!({
            "proxy_url": "http://10.213.7.2:3128", "proxy_name": "p", "subnet": "10.213.7.0/24",
            "gateway_ip": "10.213.7.1", "allowed_host": "gone.example", "allowed_port": 80,
            "denied_host": "denied.example", "host_namespaces": {}, "host_uid": 1000
        }))
        .expect("context");
        let p = |id: &str, got: &str, detail: &str| serde_json::json!({"id": id, "verdict": "FAIL", "got": got, "detail": detail});
        let probes = vec![
            p(
                "N5",
                "CONNECT x=407 control=timeout",
                "positive control failed: the allowed host gave timeout",
            ),
            p("N8", "timeout", "dropped, not rejected"),
            p("N13", "503 (ERR_DNS_FAIL 0)", ""),
        ];
        let c = unanswered_allowed(&ctx, &probes).expect("a cause");
        assert!(
            c.starts_with("the allowlisted gone.example:80 did not answer through the proxy")
                && c.contains("N5's control: timeout, and 2 more")
                && c.contains("`egress.allow`"),
            "{c}"
        );
        // Positive control: a refusal for other reasons (a deny that let a request through)
        // names no host.
        let other = vec![p(
            "N9",
            "GET http://denied.example/=200 control=200",
            "not denied",
        )];
        assert_eq!(unanswered_allowed(&ctx, &other), None);
        // Beside a real failure the cause does not say the boundary held.
        let mixed: Vec<_> = probes.iter().cloned().chain(other).collect();
        let c = unanswered_allowed(&ctx, &mixed).expect("a cause");
        assert!(
            !c.contains("held") && c.contains("other probes failed too"),
            "{c}"
        );
        // A deny-all run has no allowlisted host to blame.
        ctx.allowed_host.clear();
        assert_eq!(unanswered_allowed(&ctx, &probes), None);
    }
}
