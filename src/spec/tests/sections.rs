//! The other sections: the egress allowlist, schedules and limits, task, tier, repo and
//! services.

use super::*;

// --- §4 "Domain allowlist entries" ---

#[test]
fn allowlist_entries_are_checked_and_normalised() {
    use crate::spec::HostPattern::{Exact, Subdomains};
    let text = plus(
        "egress:\n  allow:\n    - \"https://x.com\"\n    - x.com/path\n    - \"*\"\n    - \"*x.com\"\n    - \"a.*.com\"\n    - 1.2.3.4\n    - \"[::1]\"\n    - \"\"\n    - \"x.com:22\"\n    - \"127.1\"\n    - \"0x7f000001\"\n    - \"2130706433\"\n    - 0177.0.0.1\n    - \"*.com\"\n    - localhost\n    - \"a_b.com\"\n",
    );
    let got = all(&text);
    let want: Vec<(usize, String, String)> = [
        (
            "egress.allow[0]",
            "`https://x.com` has a scheme; write the host name only",
        ),
        (
            "egress.allow[1]",
            "`x.com/path` has a path; write the host name only",
        ),
        ("egress.allow[2]", "a bare `*` would allow every host"),
        (
            "egress.allow[3]",
            "`*x.com`: `*` is allowed only as a leading `*.` (as in `*.example.com`)",
        ),
        (
            "egress.allow[4]",
            "`a.*.com`: `*` is allowed only as a leading `*.` (as in `*.example.com`)",
        ),
        (
            "egress.allow[5]",
            "`1.2.3.4` is an IP address; only host names are allowed",
        ),
        (
            "egress.allow[6]",
            "`[::1]` is an IP address; only host names are allowed",
        ),
        ("egress.allow[7]", "empty host"),
        (
            "egress.allow[8]",
            "`x.com:22` has a port; write the host name only and list ports in `egress.ports`",
        ),
        (
            "egress.allow[9]",
            "`127.1` is an IP address; only host names are allowed",
        ),
        (
            "egress.allow[10]",
            "`0x7f000001` is an IP address; only host names are allowed",
        ),
        (
            "egress.allow[11]",
            "`2130706433` is an IP address; only host names are allowed",
        ),
        (
            "egress.allow[12]",
            "`0177.0.0.1` is an IP address; only host names are allowed",
        ),
        (
            "egress.allow[13]",
            "`*.com` is too broad: it covers a whole top-level domain",
        ),
        (
            "egress.allow[14]",
            "`localhost` is a single-label name; write a fully qualified host name",
        ),
        ("egress.allow[15]", "`a_b.com` is not a valid host name"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (p, m))| {
        (
            15 + i,
            (*p).to_owned(),
            format!("invalid allowlist entry: {m}"),
        )
    })
    .collect();
    let got: Vec<(usize, String, String)> = got.into_iter().map(|(l, _, p, m)| (l, p, m)).collect();
    assert_eq!(got, want);
    let s = ok(&plus(
        "egress:\n  allow: [\"A.EXAMPLE.COM.\", \"*.Example.com\", тест.com, a.example.com, \"*.example.com\"]\n  ports: [8443, 443, 8443]\n  report_only: true\n",
    ));
    assert_eq!(
        s.egress.allow,
        vec![
            Exact("a.example.com".into()),
            Exact("xn--e1aybc.com".into()),
            Subdomains("example.com".into())
        ]
    );
    assert_eq!(s.egress.ports, vec![443, 8443]);
    assert!(s.egress.report_only);
    assert!(ok(&plus("egress:\n  allow: []\n")).egress.allow.is_empty());
}

/// Issue 31: plain HTTP only to the ports `egress.http_ports` lists (default 80 when allowed),
/// each of them one of `ports`.
#[test]
fn http_ports_default_to_80_and_must_be_allowed_ports() {
    assert_eq!(ok(&base()).egress.http_ports, Vec::<u16>::new());
    let s = ok(&plus("egress:\n  allow: [a.example]\n  ports: [443, 80]\n"));
    assert_eq!(s.egress.http_ports, vec![80]);
    let s = ok(&plus(
        "egress:\n  allow: [a.example]\n  ports: [443, 8443]\n",
    ));
    assert!(s.egress.http_ports.is_empty(), "{:?}", s.egress.http_ports);
    let s = ok(&plus(
        "egress:\n  allow: [a.example]\n  ports: [80, 8080]\n  http_ports: [8080]\n",
    ));
    assert_eq!(s.egress.http_ports, vec![8080]);
    let s = ok(&plus("egress:\n  ports: [80]\n  http_ports: []\n"));
    assert!(s.egress.http_ports.is_empty());
    let e = err(&plus(
        "egress:\n  ports: [443]\n  http_ports: [443, 8080, 0]\n",
    ));
    let got: Vec<(usize, usize, String, String)> = e
        .diagnostics
        .iter()
        .map(|x| {
            (
                x.line.unwrap_or(0),
                x.column.unwrap_or(0),
                x.path.clone(),
                x.message.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            d(
                15,
                21,
                "egress.http_ports[1]",
                "port 8080 takes plain HTTP but is not in `ports`"
            ),
            d(15, 27, "egress.http_ports[2]", "port `0` is out of range"),
        ],
        "{e}"
    );
    assert!(e.to_string().contains("add 8080 to egress.ports"), "{e}");
}

// --- §4 "Schedules and limits" ---

#[test]
fn schedules_and_resource_limits_are_bounded() {
    for (cal, want) in [
        (
            "*-*-* *:*:*/1",
            "`*-*-* *:*:*/1` runs more often than every 5 minutes",
        ),
        (
            "minutely",
            "`minutely` runs every minute; the shortest interval is 5 minutes",
        ),
        ("*:*", "`*:*` runs more often than every 5 minutes"),
        ("*:0/2", "`*:0/2` runs more often than every 5 minutes"),
        ("*:00,03", "`*:00,03` runs more often than every 5 minutes"),
        ("*:00,58", "`*:00,58` runs more often than every 5 minutes"),
        (
            "*-*-* 02:00..10",
            "`*-*-* 02:00..10` runs more often than every 5 minutes",
        ),
        ("", "the calendar expression is empty"),
        (
            "every day",
            "calendar expression `every day` is not supported",
        ),
        (
            "*-*-* 25:00",
            "calendar expression `*-*-* 25:00` is not supported",
        ),
    ] {
        let text = plus(&format!("schedule:\n  on_calendar: \"{cal}\"\n"));
        assert_eq!(one(&text), d(14, 16, "schedule.on_calendar", want), "{cal}");
    }
    for cal in [
        "daily",
        "hourly",
        "weekly",
        "*-*-* 02:00:00",
        "Mon..Fri 03:00",
        "Sat,Sun 10:30",
        "*:0/5",
        "*:00,30",
        "*-*-01 04:00 UTC",
        "2030-01-01 00:00:00",
    ] {
        let s = ok(&plus(&format!(
            "schedule:\n  on_calendar: \"{cal}\"\n  randomized_delay: 10m\n"
        )));
        let sch = s.schedule.expect("schedule");
        assert_eq!(
            (
                sch.on_calendar.as_str(),
                sch.persistent,
                sch.randomized_delay_s
            ),
            (cal, true, 600)
        );
    }
    let limits = with(
        "  command: [agent, --run]",
        "  command: [agent]\n  timeout: 5s\n  resources: {memory: \"-1\", cpus: 1e9, pids: 70000}",
    );
    assert_eq!(
        all(&limits),
        vec![
            d(10, 12, "agent.timeout", "duration `5s` is out of range"),
            d(
                11,
                23,
                "agent.resources.memory",
                "memory `-1` is not a size like `512M` or `2G`"
            ),
            d(
                11,
                35,
                "agent.resources.cpus",
                "`1e9` is not written as a plain decimal number"
            ),
            d(
                11,
                46,
                "agent.resources.pids",
                "pids `70000` is out of range"
            ),
        ]
    );
    let e = err(&limits);
    assert_eq!(
        e.diagnostics[0].hint.as_deref(),
        Some("use a duration from 10s to 24h")
    );
    assert_eq!(
        e.diagnostics[3].hint.as_deref(),
        Some("use a process limit from 16 to 65536")
    );
    let s = ok(&with(
        "  command: [agent, --run]",
        "  command: [agent]\n  timeout: 1h30m\n  resources: {memory: 512M, cpus: 0.01, pids: 16}",
    ));
    assert_eq!(s.agent.timeout_s, 5400);
    assert_eq!(s.agent.resources.memory_bytes, Some(512 << 20));
    assert_eq!(s.agent.resources.cpu_millis, Some(10));
    assert_eq!(s.agent.resources.pids, Some(16));
}

#[test]
fn task_has_exactly_one_of_text_and_file() {
    assert_eq!(
        one(&with("  text: do it", "  text: do it\n  file: /t.md")),
        d(7, 9, "task.file", "`task` has both `text` and `file`")
    );
    assert_eq!(
        one(&with("task:\n  text: do it", "task: {}")),
        d(5, 7, "task", "`task` needs `text` or `file`")
    );
    assert_eq!(
        one(&with("  text: do it", "  text: \"  \"")),
        d(6, 9, "task.text", "task text is empty")
    );
    assert_eq!(
        ok(&with("  text: do it", "  file: ~/t/./a.md")).task,
        crate::spec::Task::File("/home/u/t/a.md".into())
    );
}

#[test]
fn tier_repo_and_services_are_checked() {
    let e = err(&plus("tier: contianer\n"));
    assert_eq!(e.diagnostics[0].message, "unknown tier `contianer`");
    assert_eq!(
        e.diagnostics[0].hint.as_deref(),
        Some("did you mean `container`? tiers: direct, worktree, container, gvisor")
    );
    assert_eq!(
        ok(&plus("tier: worktree\n")).tier,
        crate::tier::Tier::Worktree
    );
    for (base, want) in [
        ("\"-x\"", "invalid base: `-x` starts with `-`"),
        ("a..b", "invalid base: `a..b` contains `..`"),
        ("\"a@{1}\"", "invalid base: `a@{1}` contains `@{`"),
        (
            "x.lock",
            "invalid base: component `x.lock` of `x.lock` ends with `.lock`",
        ),
        ("\"x/\"", "invalid base: `x/` has an empty path component"),
        (
            "\"a b\"",
            "invalid base: `a b` contains ` `, which git does not allow in a ref",
        ),
        (
            "\"a~1\"",
            "invalid base: `a~1` contains `~`, which git does not allow in a ref",
        ),
    ] {
        assert_eq!(
            one(&with("  base: main", &format!("  base: {base}"))),
            d(4, 9, "repo.base", want),
            "{base}"
        );
    }
    assert_eq!(
        ok(&with("  base: main", "  base: release/1.2")).repo.base,
        "release/1.2"
    );
    let services = plus(&format!(
        "services:\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", port: 5432 }}\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", port: 5432, env: [PGPASSWORD] }}\n  - {{ name: Cache, image: \"localhost/r@sha256:{DIGEST}\", port: 80 }}\n"
    ));
    let got: Vec<(usize, String, String)> = all(&services)
        .into_iter()
        .map(|(l, _, p, m)| (l, p, m))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                15,
                "services[1].name".to_owned(),
                "service `db` is defined twice (first at line 14)".to_owned()
            ),
            (
                15,
                "services[1].port".to_owned(),
                "port 5432 is already used by another service (line 14)".to_owned()
            ),
            (
                16,
                "services[2].name".to_owned(),
                "invalid service name: name `Cache` must start with a lowercase letter a-z"
                    .to_owned()
            ),
            (
                16,
                "services[2].port".to_owned(),
                "service port `80` is out of range".to_owned()
            ),
        ]
    );
}

#[test]
fn services_take_a_data_volume_a_health_check_and_an_optional_port() {
    let s = ok(&plus(&format!(
        "services:\n  - name: db\n    image: \"localhost/pg@sha256:{DIGEST}\"\n    data: /var/lib/postgresql//data/\n    health: {{ command: [pg_isready, -q] }}\n  - {{ name: cache, image: \"localhost/r@sha256:{DIGEST}\", port: 6380, health: {{ command: [\"true\"], interval: 2s, timeout: 1s, retries: 3, start_period: 1m }} }}\n"
    )));
    let db = &s.services[0];
    assert_eq!(db.port, None, "no port: cyclix picks one per run");
    assert_eq!(db.data.as_deref(), Some("/var/lib/postgresql/data"));
    assert_eq!(
        db.health,
        Some(crate::spec::Health {
            command: vec!["pg_isready".into(), "-q".into()],
            interval_s: 1,
            timeout_s: 5,
            retries: 30,
            start_period_s: 0,
        }),
        "the defaults"
    );
    assert_eq!(
        db.health.as_ref().map(crate::spec::Health::budget_s),
        Some(180)
    );
    let cache = &s.services[1];
    assert_eq!((cache.port, cache.data.as_deref()), (Some(6380), None));
    assert_eq!(
        cache
            .health
            .as_ref()
            .map(|h| (h.interval_s, h.timeout_s, h.retries, h.start_period_s)),
        Some((2, 1, 3, 60))
    );
    let svc = |line: &str| {
        plus(&format!(
            "services:\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", {line} }}\n"
        ))
    };
    for (line, path, message) in [
        (
            "data: /",
            "services[0].data",
            "data path `/` would hide the whole image",
        ),
        (
            "data: /tmp/pg",
            "services[0].data",
            "data path `/tmp/pg` is under /tmp, which the container runtime or cyclix owns",
        ),
        (
            "data: ~/pg",
            "services[0].data",
            "data path `~/pg` is not absolute",
        ),
        (
            "data: /a/../etc",
            "services[0].data",
            "`/a/../etc` contains a `..` component",
        ),
        (
            "env: [PGDATABASE]",
            "services[0].env[0]",
            "`PGDATABASE` is set by cyclix for every service",
        ),
        (
            "health: { command: [] }",
            "services[0].health.command",
            "`command` is empty",
        ),
        (
            "health: { command: [x], retries: 1001 }",
            "services[0].health.retries",
            "retries `1001` is out of range",
        ),
        (
            "health: { command: [x], retries: \"3\" }",
            "services[0].health.retries",
            "expected an integer, found string \"3\"",
        ),
        (
            "health: [pg_isready]",
            "services[0].health",
            "expected a mapping (`key: value` lines), found a sequence",
        ),
        (
            "port: 80",
            "services[0].port",
            "service port `80` is out of range",
        ),
    ] {
        let (_, _, p, m) = one(&svc(line));
        assert_eq!((p.as_str(), m.as_str()), (path, message), "{line}");
    }
}

#[test]
fn a_worktree_service_takes_only_read_only_and_no_secret() {
    let svc = |line: &str| {
        plus(&format!(
            "services:\n  - {{ name: app, image: \"localhost/a@sha256:{DIGEST}\", {line} }}\n"
        ))
    };
    assert!(ok(&svc("worktree: read_only")).services[0].worktree);
    assert!(!ok(&svc("port: 5432")).services[0].worktree);
    for (line, path, message) in [
        (
            "worktree: read_write",
            "services[0].worktree",
            "worktree `read_write` is not a mode cyclix offers",
        ),
        (
            "worktree: read_only, env: [APP_TOKEN]",
            "services[0].env[0]",
            "service `app` runs the work tree, which the agent writes, so it may not hold the secret `APP_TOKEN`",
        ),
    ] {
        let (_, _, p, m) = one(&svc(line));
        assert_eq!((p.as_str(), m.as_str()), (path, message), "{line}");
    }
}

#[test]
fn tier_gvisor_parses_and_has_no_warm_pool_yet() {
    assert_eq!(ok(&plus("tier: gvisor\n")).tier, crate::tier::Tier::Gvisor);
    let e = err(&plus("tier: gvisor\npool: {size: 1}\n"));
    assert!(
        e.diagnostics[0]
            .message
            .contains("tier `gvisor` has no warm pool yet"),
        "{e}"
    );
    // Control: the same pool under tier container is valid.
    assert!(
        ok(&plus("tier: container\npool: {size: 1}\n"))
            .pool
            .is_some()
    );
}
