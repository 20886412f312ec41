//! The one list of probes: per probe its id, its title, the function that runs it and whether
//! the leak watch re-runs it. The suite runs them in this order; `--only` and the watch select
//! from it by id.
//!
//! A new probe is one entry here plus its pair in one family: `observe::FAMILY::pN` (the
//! effectful observation, `fn(&Context) -> Judged`) handing what it saw to
//! `verdict::FAMILY::pN` (pure, table-tested). The entry names the observe function only: each
//! verdict takes its own observation type, so the pair is composed in the observe function,
//! where the observation is made.

use super::Context;
use super::observe::{
    credentials, dns, escape, filesystem, kernel, network, privilege, processes, proxy, sockets,
};
use super::verdict::Judged;

/// A probe: observes and judges.
pub type ProbeFn = fn(&Context) -> Judged;

/// One probe of the suite.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    /// `P1` … `P24`, `N1` … `N16`, `E1`: the id of its JSON line, of `--only` and of records.
    pub id: &'static str,
    /// What it checks, in a few words (security-cases §2; `docs/probe-suite.md` has the table).
    pub title: &'static str,
    /// Observes and judges.
    pub run: ProbeFn,
    /// Re-run while the agent works: the leak watch (security-cases §2, the ★ rows).
    pub watch: bool,
    /// Talks to the run's proxy or its resolver (the proxy's lookups go there too): the suite
    /// runs these one after the other on one thread, beside the others, so they never queue
    /// at the proxy or the resolver against each other and each one's deadline measures its
    /// own answer (N5 of a report-only run timed out behind N7's lookups when all ran at once).
    pub via_proxy: bool,
}

impl Probe {
    /// A probe the leak watch does not re-run.
    #[must_use]
    pub const fn new(id: &'static str, title: &'static str, run: ProbeFn) -> Probe {
        Probe {
            id,
            title,
            run,
            watch: false,
            via_proxy: false,
        }
    }

    /// The same probe, in the proxy's lane ([`Probe::via_proxy`]).
    #[must_use]
    pub const fn proxied(self) -> Probe {
        Probe {
            via_proxy: true,
            ..self
        }
    }

    /// The same probe, re-run by the leak watch.
    #[must_use]
    pub const fn watched(self) -> Probe {
        Probe {
            watch: true,
            ..self
        }
    }
}

/// Every probe in run order.
#[rustfmt::skip]
pub const PROBES: &[Probe] = &[
    Probe::new("P1",  "no capabilities",                               privilege::p1).watched(),
    Probe::new("P2",  "no_new_privs is set",                           privilege::p2).watched(),
    Probe::new("P3",  "a seccomp filter is on",                        privilege::p3).watched(),
    Probe::new("P4",  "LSM confinement",                               privilege::p4),
    Probe::new("P5",  "the user namespace maps to the host user",      privilege::p5),
    Probe::new("P6",  "a setuid binary gains nothing",                 privilege::p6),
    Probe::new("P7",  "dangerous syscalls are refused",                privilege::p7),
    Probe::new("P8",  "mounts are refused",                            privilege::p8),
    Probe::new("P9",  "a nested user namespace yields nothing",        privilege::p9),
    Probe::new("P10", "no host devices; mknod refused",                kernel::p10),
    Probe::new("P11", "masked /proc and /sys paths",                   kernel::p11),
    Probe::new("P12", "kernel knobs are not writable",                 kernel::p12),
    Probe::new("P13", "/, /sys and the cgroupfs are read-only",        filesystem::p13),
    Probe::new("P14", "the root filesystem is not writable",           filesystem::p14),
    Probe::new("P15", "scratch space is writable, nosuid,nodev",       filesystem::p15),
    Probe::new("P16", "the project is writable, ours, nosuid,nodev",   filesystem::p16),
    Probe::new("P17", "the user's git dir is not there",               filesystem::p17),
    Probe::new("P18", "only expected mounts",                          filesystem::p18).watched(),
    Probe::new("P19", "no engine, bus or agent socket",                sockets::p19).watched(),
    Probe::new("P20", "private namespaces, few pids, init as pid 1",   processes::p20).watched(),
    Probe::new("P21", "a private cgroup with the spec's limits",       processes::p21).watched(),
    Probe::new("P22", "no host secret in any environment",             credentials::p22).watched(),
    Probe::new("P23", "no readable key",                               credentials::p23),
    Probe::new("P24", "the kernel log and symbols are hidden",         kernel::p24),
    Probe::new("P25", "whose kernel the agent talks to",               kernel::p25),
    Probe::new("N1",  "one interface in the subnet, no default route", network::n1).watched(),
    Probe::new("N2",  "no direct IPv4 egress",                         network::n2),
    Probe::new("N3",  "no direct IPv6 egress",                         network::n3),
    Probe::new("N4",  "no direct cloud metadata",                      network::n4),
    Probe::new("N5",  "metadata is denied through the proxy",          proxy::n5).proxied(),
    Probe::new("N6",  "the gateway and the host refuse",               network::n6),
    Probe::new("N7",  "the resolver answers only the run's names",     dns::n7).proxied(),
    Probe::new("N8",  "the allowed host through the proxy",            proxy::n8).proxied(),
    Probe::new("N9",  "denied hosts and ports",                        proxy::n9).proxied(),
    Probe::new("N10", "IP literals and their encodings are denied",    proxy::n10).proxied(),
    Probe::new("N11", "the proxy itself, rebinding names denied",      proxy::n11).proxied(),
    Probe::new("N12", "look-alike names are denied",                   proxy::n12).proxied(),
    Probe::new("N13", "a smuggled Host is decided on the URI",         proxy::n13).proxied(),
    Probe::new("N14", "redirects are not followed",                    proxy::n14).proxied(),
    Probe::new("N15", "raw sockets, netlink changes, ping refused",    network::n15),
    Probe::new("N16", "the proxy variables point at the proxy",        proxy::n16).watched(),
    Probe::new("N17", "a tunnel carries TLS for its own name",         proxy::n17).proxied(),
    Probe::new("E1",  "escape attempts fail",                          escape::e1),
];

/// The ids the leak watch re-runs while the agent works, in run order.
pub const WATCH: [&str; watch_count()] = watch_ids();

const fn watch_count() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < PROBES.len() {
        if PROBES[i].watch {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn watch_ids() -> [&'static str; watch_count()] {
    let mut out = [""; watch_count()];
    let (mut i, mut n) = (0, 0);
    while i < PROBES.len() {
        if PROBES[i].watch {
            out[n] = PROBES[i].id;
            n += 1;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_their_order_and_the_watch_are_as_recorded() {
        let ids: Vec<&str> = PROBES.iter().map(|p| p.id).collect();
        let want: Vec<String> = (1..=25)
            .map(|i| format!("P{i}"))
            .chain((1..=17).map(|i| format!("N{i}")))
            .chain(["E1".to_string()])
            .collect();
        assert_eq!(
            ids, want,
            "records and the e2e tests read these ids in this order"
        );
        assert_eq!(
            WATCH,
            [
                "P1", "P2", "P3", "P18", "P19", "P20", "P21", "P22", "N1", "N16"
            ]
        );
        assert!(PROBES.iter().all(|p| !p.title.is_empty()));
    }

    /// The verdicts stay pure: no verdict file names I/O (the list of the architecture test).
    #[test]
    fn the_verdict_files_do_no_io() {
        let files = [
            ("verdict.rs", include_str!("verdict.rs")),
            ("credentials.rs", include_str!("verdict/credentials.rs")),
            ("dns.rs", include_str!("verdict/dns.rs")),
            ("escape.rs", include_str!("verdict/escape.rs")),
            ("filesystem.rs", include_str!("verdict/filesystem.rs")),
            ("kernel.rs", include_str!("verdict/kernel.rs")),
            ("network.rs", include_str!("verdict/network.rs")),
            ("privilege.rs", include_str!("verdict/privilege.rs")),
            ("processes.rs", include_str!("verdict/processes.rs")),
            ("proxy.rs", include_str!("verdict/proxy.rs")),
            ("sockets.rs", include_str!("verdict/sockets.rs")),
        ];
        let forbidden = ["fs", "process", "env", "net"]
            .map(|m| format!("std::{m}"))
            .into_iter()
            .chain(["zbus".to_string(), "Command::new".to_string()]);
        let forbidden: Vec<String> = forbidden.collect();
        let mut hits = Vec::new();
        for (name, text) in files {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                hits.extend(
                    forbidden
                        .iter()
                        .filter(|f| code.contains(f.as_str()))
                        .map(|f| format!("verdict/{name}:{}: {f}", n + 1)),
                );
            }
        }
        assert!(hits.is_empty(), "verdicts must stay pure: {hits:?}");
    }
}
