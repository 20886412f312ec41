//! Mounts and host paths: prefix tricks, option injection, destinations, denied sources,
//! the project path and the task file.

use super::*;

// --- §4 "Prefix tricks" ---

#[test]
fn writable_mounts_must_be_inside_the_project_component_wise() {
    let cases = [
        (
            "{ source: /home/u/proj-evil, target: /mnt/a, read_only: false }",
            d(
                14,
                61,
                "mounts[0].read_only",
                "writable mount `/home/u/proj-evil` is outside the project `/home/u/proj`",
            ),
        ),
        (
            "{ source: /home, target: /mnt/a, read_only: false }",
            d(
                14,
                15,
                "mounts[0].source",
                "mount source `/home` contains your home directory `/home/u`, which no sandbox may see, read-only or not",
            ),
        ),
        (
            "{ source: /home/u/proj/../other, target: /mnt/a }",
            d(
                14,
                15,
                "mounts[0].source",
                "`/home/u/proj/../other` contains a `..` component",
            ),
        ),
        (
            "{ source: proj/x, target: /mnt/a }",
            d(14, 15, "mounts[0].source", "`proj/x` is a relative path"),
        ),
        (
            "{ source: \"~root/x\", target: /mnt/a }",
            d(
                14,
                15,
                "mounts[0].source",
                "`~root/x`: `~user` paths are not supported",
            ),
        ),
    ];
    for (entry, want) in cases {
        assert_eq!(
            one(&plus(&format!("mounts:\n  - {entry}\n"))),
            want,
            "{entry}"
        );
    }
    let s = ok(&plus(
        "mounts:\n  - { source: /srv/d//x/./y/, target: /mnt//a/./b, read_only: true }\n  - { source: \"~/data\", target: /mnt/c }\n",
    ));
    assert_eq!(
        s.mounts,
        vec![
            crate::spec::Mount {
                source: "/srv/d/x/y".into(),
                target: "/mnt/a/b".into(),
                read_only: true,
                source_line: 14,
                source_column: 15,
            },
            crate::spec::Mount {
                source: "/home/u/data".into(),
                target: "/mnt/c".into(),
                read_only: true,
                source_line: 15,
                source_column: 15,
            },
        ]
    );
    // Issue 11: the project itself is never mounted again, writable or not (it handed the
    // agent the user's git config and hooks); the agent has its checkout at /work.
    let got = one(&plus(
        "mounts:\n  - { source: /home/u/proj, target: /mnt/p, read_only: false }\n",
    ));
    assert!(got.3.contains("is the project repository"), "{got:?}");
    // Found by a newcomer trying to break it: the project's .git (its hooks run on the
    // host), podman's storage (other tenants' secrets), the tenants' env files, keys.
    for (source, want) in [
        ("/home/u/proj/.git", "is the project's git directory"),
        (
            "/home/u/proj/.git/hooks",
            "lies inside the project's git directory",
        ),
        (
            "/home/u/.local/share/containers",
            "lies inside your data directory",
        ),
        (
            "/home/u/.config/cyclix/tenants",
            "lies inside cyclix's configuration",
        ),
        ("/home/u/.ssh", "is your SSH keys"),
        (
            "/home/u/.local/state/cyclix/runs",
            "lies inside cyclix's state",
        ),
    ] {
        let got = one(&plus(&format!(
            "mounts:\n  - {{ source: {source}, target: /mnt/a }}\n"
        )));
        assert!(got.3.contains(want), "{source}: {got:?}");
    }
}

// --- §4 "podman -v option injection" ---

#[test]
fn mount_paths_with_option_characters_are_rejected() {
    for (source, target, want) in [
        (
            "\"/p:/dst\"",
            "/mnt/a",
            d(
                14,
                15,
                "mounts[0].source",
                "mount path `/p:/dst` contains `:`",
            ),
        ),
        (
            "\"/p,rw\"",
            "/mnt/a",
            d(
                14,
                15,
                "mounts[0].source",
                "mount path `/p,rw` contains `,`",
            ),
        ),
        (
            "/p",
            "\"/mnt/a:rw,z\"",
            d(
                14,
                27,
                "mounts[0].target",
                "mount path `/mnt/a:rw,z` contains `:`",
            ),
        ),
        (
            "/p",
            "/mnt/a=b",
            d(
                14,
                27,
                "mounts[0].target",
                "mount path `/mnt/a=b` contains `=`",
            ),
        ),
    ] {
        let text = plus(&format!(
            "mounts:\n  - {{ source: {source}, target: {target} }}\n"
        ));
        assert_eq!(one(&text), want, "{source} {target}");
    }
}

// --- §4 "Destination abuse" and denied sources ---

#[test]
#[allow(clippy::too_many_lines)] // tables
fn mount_targets_stay_under_mnt_and_sources_avoid_host_internals() {
    for (target, want) in [
        ("/proc", "mount target `/proc` is not under /mnt/"),
        (
            "/sys/fs/cgroup",
            "mount target `/sys/fs/cgroup` is not under /mnt/",
        ),
        ("/", "mount target `/` is not under /mnt/"),
        (
            "/etc/resolv.conf",
            "mount target `/etc/resolv.conf` is not under /mnt/",
        ),
        ("/mnt", "mount target `/mnt` is not under /mnt/"),
        ("/mnt/..", "`/mnt/..` contains a `..` component"),
        ("mnt/x", "`mnt/x` is a relative path"),
        ("~/x", "`~/x`: `~` is not allowed here"),
    ] {
        let text = plus(&format!(
            "mounts:\n  - {{ source: /data, target: \"{target}\" }}\n"
        ));
        assert_eq!(one(&text), d(14, 30, "mounts[0].target", want), "{target}");
    }
    let overlap = plus(
        "mounts:\n  - { source: /a, target: /mnt/x }\n  - { source: /b, target: /mnt/x/y }\n  - { source: /c, target: /mnt/x }\n",
    );
    assert_eq!(
        all(&overlap),
        vec![
            d(
                15,
                27,
                "mounts[1].target",
                "mount target `/mnt/x/y` overlaps `/mnt/x` (line 14)"
            ),
            d(
                16,
                27,
                "mounts[2].target",
                "mount target `/mnt/x` overlaps `/mnt/x` (line 14)"
            ),
        ]
    );
    for (source, want) in [
        (
            "/proc/self",
            "mount source `/proc/self` is under /proc, which is never mounted into a sandbox",
        ),
        (
            "/sys",
            "mount source `/sys` is under /sys, which is never mounted into a sandbox",
        ),
        (
            "/dev/sda",
            "mount source `/dev/sda` is under /dev, which is never mounted into a sandbox",
        ),
        (
            "/run/podman",
            "mount source `/run/podman` is under /run, which is never mounted into a sandbox",
        ),
        (
            "/var/run/docker.sock",
            "mount source `/var/run/docker.sock` is under /var/run, which is never mounted into a sandbox",
        ),
        (
            "/tmp/xdg/podman",
            "mount source `/tmp/xdg/podman` is under /tmp/xdg, which is never mounted into a sandbox",
        ),
        (
            "/srv/podman/podman.sock",
            "mount source `/srv/podman/podman.sock` looks like a container-engine socket; mounting it hands over the host, even read-only",
        ),
        (
            "/home/u/vm/desktop/docker.SOCK",
            "mount source `/home/u/vm/desktop/docker.SOCK` looks like a container-engine socket; mounting it hands over the host, even read-only",
        ),
        (
            "/",
            "mount source `/` contains your home directory `/home/u`, which no sandbox may see, read-only or not",
        ),
        (
            "~",
            "mount source `/home/u` is your home directory `/home/u`, which no sandbox may see, read-only or not",
        ),
    ] {
        let text = plus(&format!(
            "mounts:\n  - {{ source: \"{source}\", target: /mnt/x }}\n"
        ));
        let c = SpecContext {
            runtime_dir: "/tmp/xdg".into(),
            ..ctx()
        };
        let e = parse(&text, &c).expect_err("must refuse");
        assert_eq!(e.diagnostics.len(), 1, "{e}");
        let got = &e.diagnostics[0];
        assert_eq!(
            (
                got.line,
                got.column,
                got.path.as_str(),
                got.message.as_str()
            ),
            (Some(14), Some(15), "mounts[0].source", want),
            "{source}"
        );
    }
}

#[test]
fn project_path_and_task_file_avoid_host_internals() {
    for (path, want) in [
        (
            "/",
            "project path `/` would expose your whole home directory (~/.ssh included)",
        ),
        (
            "\"~\"",
            "project path `/home/u` would expose your whole home directory (~/.ssh included)",
        ),
        (
            "/proc/1/root",
            "project path `/proc/1/root` is under /proc, which is never mounted into a sandbox",
        ),
        (
            "/run/user/1000/x",
            "project path `/run/user/1000/x` is under /run, which is never mounted into a sandbox",
        ),
        ("\"/p:/q\"", "mount path `/p:/q` contains `:`"),
    ] {
        assert_eq!(
            one(&with("  path: /home/u/proj", &format!("  path: {path}"))),
            d(3, 9, "repo.path", want),
            "{path}"
        );
    }
    assert_eq!(
        one(&with("  text: do it", "  file: /proc/self/environ")),
        d(
            6,
            9,
            "task.file",
            "task file `/proc/self/environ` is under /proc"
        )
    );
}
