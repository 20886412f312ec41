//! Table tests of the shared value rules.

use super::calendar::{calendar, calendar_field};
use super::durations::{duration_s, show_duration};
use super::env::env_name;
use super::hosts::host_pattern;
use super::images::image_name;
use super::names::{git_ref, run_id, tenant_name};
use super::paths::{is_within, normalize_path};
use super::sizes::{cpu_millis, memory};
use crate::spec::HostPattern;

#[test]
fn tenant_name_table() {
    for ok in ["a", "acme", "a1", "a-b", "a-1-b", &"a".repeat(31)] {
        assert_eq!(tenant_name(ok), Ok(()), "{ok}");
    }
    for (bad, msg) in [
        ("", "name is empty"),
        ("1a", "name `1a` must start with a lowercase letter a-z"),
        ("a-", "name `a-` must not end with `-`"),
        ("A", "name `A` must start with a lowercase letter a-z"),
        (
            "aB",
            "name `aB` contains `B`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "a_b",
            "name `a_b` contains `_`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "a\nb",
            "name `a\nb` contains `\n`; only a-z, 0-9 and `-` are allowed",
        ),
    ] {
        assert_eq!(tenant_name(bad), Err(msg.to_owned()), "{bad}");
    }
    assert_eq!(
        tenant_name(&"a".repeat(32)),
        Err(format!(
            "name `{}` is 32 characters long; the limit is 31",
            "a".repeat(32)
        ))
    );
}

#[test]
fn run_id_table() {
    for ok in ["0", "a", "20260101-0200-abcd", &"9".repeat(48)] {
        assert_eq!(run_id(ok), Ok(()), "{ok}");
    }
    for (bad, msg) in [
        ("", "run id is empty"),
        ("-a", "run id `-a` must start with a-z or 0-9"),
        ("a-", "run id `a-` must not end with `-`"),
        ("a--b", "run id `a--b` must not contain `--`"),
        (
            "a.b",
            "run id `a.b` contains `.`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "A",
            "run id `A` contains `A`; only a-z, 0-9 and `-` are allowed",
        ),
    ] {
        assert_eq!(run_id(bad), Err(msg.to_owned()), "{bad}");
    }
    assert!(run_id(&"a".repeat(49)).is_err());
}

#[test]
fn env_name_table() {
    for ok in [
        "A",
        "_",
        "ANTHROPIC_API_KEY",
        "A1",
        "PATHS",
        "HOMEDIR",
        "LD",
        "CYCLIX",
    ] {
        assert_eq!(env_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "1A",
        "a",
        "A-B",
        "A B",
        "A=B",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "HOME",
        "CYCLIX_X",
        "HTTP_PROXY",
        "http_proxy",
        "Https_Proxy",
        "NO_PROXY",
        "ALL_PROXY",
        "ftp_proxy",
        "É",
    ] {
        assert!(env_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn host_pattern_table() {
    use HostPattern::{Exact, Subdomains};
    for (input, want) in [
        ("pypi.org", Exact("pypi.org".into())),
        ("PyPI.Org.", Exact("pypi.org".into())),
        ("*.pythonhosted.org", Subdomains("pythonhosted.org".into())),
        ("*.A.Example.COM.", Subdomains("a.example.com".into())),
        ("тест.com", Exact("xn--e1aybc.com".into())),
        ("bücher.example", Exact("xn--bcher-kva.example".into())),
        ("a-b.c0.io", Exact("a-b.c0.io".into())),
        ("1.2.3.example.com", Exact("1.2.3.example.com".into())),
    ] {
        assert_eq!(host_pattern(input), Ok(want), "{input}");
    }
    for bad in [
        "",
        "*",
        "*.",
        "http://x.com",
        "x.com/",
        "u@x.com",
        "x.com:443",
        "[::1]",
        "::1",
        "*x.com",
        "a.*.com",
        "x.*",
        "1.2.3.4",
        "127.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "1.2.3.0x4",
        "localhost",
        "*.com",
        "x..com",
        ".x.com",
        "x.com..",
        "-x.com",
        "x-.com",
        "a_b.com",
        "a b.com",
        "x.com\n",
        &format!("{}.com", "a".repeat(64)),
    ] {
        assert!(
            host_pattern(bad).is_err(),
            "{bad:?} accepted as {:?}",
            host_pattern(bad)
        );
    }
}

#[test]
fn duration_table() {
    for (input, secs) in [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1h30m15s", 5415),
        ("1h15s", 3615),
        ("0s", 0),
        ("90m", 5400),
    ] {
        assert_eq!(duration_s(input), Ok(secs), "{input}");
    }
    for bad in [
        "", "90", "1m1h", "1h1h", "s", "1d", "1.5h", "-1s", " 1s", "1s ", "1H", "1h 30m",
    ] {
        assert!(duration_s(bad).is_err(), "{bad}");
    }
    assert_eq!(
        duration_s("90"),
        Err("`90` has no unit; add one: `90s`, `90m` or `90h`".to_owned())
    );
    assert!(duration_s("99999999999999999999h").is_err());
    assert_eq!(show_duration(90), "1m30s");
    assert_eq!(show_duration(86_400), "24h");
}

#[test]
fn memory_and_cpu_tables() {
    for (input, bytes) in [
        ("16M", 16 << 20),
        ("512M", 512 << 20),
        ("2G", 2 << 30),
        ("1T", 1 << 40),
        ("16384K", 16 << 20),
    ] {
        assert_eq!(memory(input), Ok(bytes), "{input}");
    }
    for bad in [
        "15M",
        "2T",
        "0G",
        "-1G",
        "1.5G",
        "2g",
        "2GB",
        "G",
        "2",
        "",
        "99999999999999999999T",
    ] {
        assert!(memory(bad).is_err(), "{bad}");
    }
    for (input, millis) in [
        ("0.01", 10),
        ("0.5", 500),
        ("1.5", 1500),
        ("2", 2000),
        ("256", 256_000),
        ("1.250", 1250),
        ("0.010", 10),
    ] {
        assert_eq!(cpu_millis(input), Ok(millis), "{input}");
    }
    for bad in [
        "0",
        "0.009",
        "0.0001",
        "256.001",
        "-1",
        "1e9",
        "1.",
        ".5",
        "",
        "1.2345",
        "4294967296",
    ] {
        assert!(cpu_millis(bad).is_err(), "{bad}");
    }
}

#[test]
fn git_ref_table() {
    for ok in [
        "main",
        "release/1.2",
        "feature/x-y",
        "v1.0",
        "abc1234",
        &"f".repeat(64),
        "a@b",
    ] {
        assert_eq!(git_ref(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "-main",
        "@",
        "a..b",
        "a@{1}",
        "a/",
        "/a",
        "a//b",
        "a.",
        ".a",
        "a/.b",
        "a.lock",
        "a/b.lock/c",
        "a b",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[",
        "a\\b",
        "a\u{7f}",
    ] {
        assert!(git_ref(bad).is_err(), "{bad}");
    }
}

#[test]
fn calendar_table() {
    for ok in [
        "daily",
        "Daily",
        "hourly",
        "weekly",
        "monthly",
        "*-*-* 02:00:00",
        "*-*-* 02:00",
        "Mon..Fri 03:00",
        "mon,wed,fri 12:00",
        "Saturday 08:00",
        "*-*-01 04:00 UTC",
        "*-*-* *:0/5",
        "*-*-* *:00,05,10",
        "*:0/15",
        "2030-01-01",
        "Mon",
        "*-*-* 02:00 Europe/Berlin",
    ] {
        assert_eq!(calendar(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        " ",
        "minutely",
        "*:*:*",
        "*-*-* *:*:*/1",
        "*:*",
        "*:0/4",
        "*:00,04",
        "*:00,56",
        "*-*-* 02:00:*",
        "*-*-* 02:00:00,30",
        "*-*-* 02:00..03",
        "*-*-* 24:00",
        "*-*-* 02:60",
        "*-13-* 02:00",
        "Funday 02:00",
        "02:00 02:00",
        "*-*-* 02:00:00.5",
        "every day",
        "now",
        "*-*-*\n02:00",
        "*-*-* 02:00/0",
        "10..5:00",
    ] {
        assert!(calendar(bad).is_err(), "{bad:?}");
    }
    assert_eq!(calendar_field("*/20", 0, 59), Some(vec![0, 20, 40]));
    assert_eq!(calendar_field("5/20", 0, 59), Some(vec![5, 25, 45]));
    assert_eq!(calendar_field("1..3,10", 0, 59), Some(vec![1, 2, 3, 10]));
    assert_eq!(calendar_field("60", 0, 59), None);
}

#[test]
fn paths_normalise_component_wise() {
    for (input, want) in [
        ("/a/b", "/a/b"),
        ("/a//b/./c/", "/a/b/c"),
        ("/", "/"),
        ("~", "/home/u"),
        ("~/x", "/home/u/x"),
        ("~//x/.", "/home/u/x"),
    ] {
        assert_eq!(
            normalize_path(input, Some("/home/u")),
            Ok(want.to_owned()),
            "{input}"
        );
    }
    for bad in ["a", "./a", "../a", "/a/../b", "/a/..", "~u/x", ""] {
        assert!(normalize_path(bad, Some("/home/u")).is_err(), "{bad}");
    }
    assert!(normalize_path("~/x", None).is_err());
    assert!(is_within("/p/proj", "/p/proj"));
    assert!(is_within("/p/proj/x", "/p/proj"));
    assert!(!is_within("/p/proj-evil", "/p/proj"));
    assert!(!is_within("/project-secrets", "/project"));
    assert!(!is_within("/p", "/p/proj"));
    assert!(is_within("/anything", "/"));
}

#[test]
fn image_name_table() {
    for ok in [
        "ghcr.io/acme/agent",
        "localhost/x",
        "localhost:5000/a/b:tag",
        "alpine",
        "docker.io/library/postgres:16",
        "a_b/c.d-e",
    ] {
        assert_eq!(image_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "Ghcr.io",
        "ghcr.io/Acme/x",
        "x:",
        "x:-tag",
        "a//b",
        "a/b/",
        "/a",
        "a b",
        "a/b:c:d",
        "a/-b",
        "a\n",
    ] {
        assert!(image_name(bad).is_err(), "{bad:?}");
    }
}

/// Issue 18, item 8: wildcards over a public suffix (`psl`'s copy of the list, ICANN and
/// private sections) are refused with the suffix named; a wildcard one level below is fine.
#[test]
fn a_wildcard_over_a_public_suffix_is_refused() {
    assert_eq!(
        host_pattern("*.co.uk"),
        Err("`*.co.uk` is too broad: `co.uk` is a public suffix (Public Suffix List), so anyone can register a name below it".into())
    );
    assert_eq!(
        host_pattern("*.GitHub.io."),
        Err("`*.GitHub.io.` is too broad: `github.io` is a public suffix (Public Suffix List), so anyone can register a name below it".into())
    );
    assert_eq!(
        host_pattern("*.com"),
        Err("`*.com` is too broad: it covers a whole top-level domain".into())
    );
    for ok in ["*.bbc.co.uk", "*.acme.github.io", "*.example.com", "co.uk"] {
        assert!(host_pattern(ok).is_ok(), "{ok}: {:?}", host_pattern(ok));
    }
}

/// Issue 18, item 8: host sockets and session plumbing are refused with the reason.
#[test]
fn session_and_socket_variables_are_refused() {
    for name in [
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "WAYLAND_DISPLAY",
        "DISPLAY",
        "NOTIFY_SOCKET",
        "CONTAINER_HOST",
    ] {
        assert_eq!(
            env_name(name),
            Err(format!(
                "`{name}` is not allowed: it names a host socket or the user's session, which the sandbox must not reach"
            )),
        );
    }
    assert_eq!(env_name("SSH_KEY_NAME"), Ok(()));
}
