//! The filesystem verdicts (P13–P18): passing and failing fixtures.

use super::*;
use crate::probe::verdict::filesystem::*;

#[test]
fn p13_to_p15_filesystems() {
    let ro = vec![
        mount("/", "/", "ro,relatime"),
        mount("/sys", "/", "ro,nosuid"),
        mount("/sys/fs/cgroup", "/", "ro,nosuid"),
    ];
    assert!(p13(&ro, crate::probe::Profile::Podman).pass);
    let mut rw = ro.clone();
    rw.push(mount("/sys", "/", "rw,nosuid"));
    assert!(
        !p13(&rw, crate::probe::Profile::Podman).pass,
        "the last mount at /sys is rw"
    );
    assert!(
        !p13(&ro[..1], crate::probe::Profile::Podman).pass,
        "missing /sys"
    );

    assert!(
        p14(
            &items(&[
                ("/probe-root", E(libc::EROFS)),
                ("/usr/probe", E(libc::EROFS))
            ]),
            crate::probe::Profile::Podman
        )
        .pass
    );
    assert!(
        !p14(
            &items(&[("/probe-root", Attempt::Ok)]),
            crate::probe::Profile::Podman
        )
        .pass
    );
    assert!(
        !p14(
            &items(&[("/probe-root", E(libc::EACCES))]),
            crate::probe::Profile::Podman
        )
        .pass,
        "exact errno"
    );

    let s = |p: &str, w: Attempt, o: &str| ScratchObs {
        path: p.into(),
        write: w,
        mount: Some(mount(p, "/", o)),
    };
    let good: Vec<ScratchObs> = ["/tmp", "/var/tmp", "/run", "/dev/shm"]
        .iter()
        .map(|p| s(p, Attempt::Ok, "rw,nosuid,nodev"))
        .collect();
    assert!(p15(&good, 0).pass);
    let mut bad = good.clone();
    bad[0] = s("/tmp", E(libc::EROFS), "rw,nosuid,nodev");
    assert!(!p15(&bad, 0).pass);
    // A non-root agent (a preset's uid) may not write root's /run; only /run, only EACCES,
    // and never root.
    let mut run_denied = good.clone();
    run_denied[2] = s("/run", E(libc::EACCES), "rw,nosuid,nodev");
    assert!(p15(&run_denied, 1000).pass);
    assert!(!p15(&run_denied, 0).pass);
    let mut tmp_denied = good.clone();
    tmp_denied[0] = s("/tmp", E(libc::EACCES), "rw,nosuid,nodev");
    assert!(
        !p15(&tmp_denied, 1000).pass,
        "/tmp stays the positive control"
    );
    let mut bad = good;
    bad[1] = s("/var/tmp", Attempt::Ok, "rw");
    assert!(!p15(&bad, 0).pass);
}

#[test]
fn p16_under_keep_id_the_owner_maps_to_the_parent_root_and_we_are_the_presets_uid() {
    let mut c = ctx();
    c.agent_uid = Some(1000);
    let o = ProjectObs {
        cycle: Attempt::Ok,
        owner: Some(1000),
        own_euid: 1000,
        host_uid_of_owner: Some(0),
        mount: Some(mount("/work", "/home/u/wt", "rw,nosuid,nodev,relatime")),
    };
    assert!(p16(&o, &c).pass, "{:?}", p16(&o, &c));
    // The default map's answer (host uid itself) is wrong under keep-id, and so is root.
    assert!(
        !p16(
            &ProjectObs {
                host_uid_of_owner: Some(1000),
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p16(
            &ProjectObs {
                owner: Some(0),
                own_euid: 0,
                ..o
            },
            &c
        )
        .pass
    );
}

#[test]
fn p16_project_mount_owner_and_flags() {
    let c = ctx();
    let o = ProjectObs {
        cycle: Attempt::Ok,
        owner: Some(0),
        own_euid: 0,
        host_uid_of_owner: Some(1000),
        mount: Some(mount("/work", "/home/u/wt", "rw,nosuid,nodev,relatime")),
    };
    assert!(p16(&o, &c).pass);
    let measured = ProjectObs {
        mount: Some(mount("/work", "/home/u/wt", "rw,relatime")),
        ..o.clone()
    };
    let j = p16(&measured, &c);
    assert!(!j.pass && j.detail.contains("nosuid"), "{j:?}");
    assert!(
        !p16(
            &ProjectObs {
                host_uid_of_owner: Some(200_000),
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p16(
            &ProjectObs {
                cycle: E(libc::EROFS),
                ..o
            },
            &c
        )
        .pass
    );
}

#[test]
fn p17_p18_git_paths_and_mount_allowlist() {
    let absent = items(&[
        ("/home/u/p/.git", E(libc::ENOENT)),
        ("/home/u/p/.git/config", E(libc::ENOENT)),
        ("/home/u/p", E(libc::ENOENT)),
    ]);
    assert!(p17(&absent, &Attempt::Ok).pass);
    // The user's git dir visible at all (even read-only, EROFS on a write) is a FAIL.
    for seen in [Attempt::Ok, E(libc::EROFS), E(libc::EACCES)] {
        assert!(!p17(&items(&[("/home/u/p/.git", seen.clone())]), &Attempt::Ok).pass);
    }

    let c = ctx();
    let base = vec![
        mount("/", "/", "ro"),
        mount("/work", "/home/u/wt", "rw"),
        mount("/cyclix/task.md", "/cyclix/runs/r/task.md", "ro"),
        mount("/proc/keys", "/null", "ro"),
    ];
    assert!(p18(&base, &c).pass, "{:?}", p18(&base, &c));
    let mut git = base.clone();
    git.push(mount("/home/u/p/.git", "/home/u/p/.git", "ro"));
    assert!(
        !p18(&git, &c).pass,
        "the user's git dir mounted is unexpected"
    );
    let mut extra = base.clone();
    extra.push(mount("/run/user/1000/bus", "/run/user/1000/bus", "rw"));
    assert!(!p18(&extra, &c).pass);
    let mut leak = base.clone();
    leak.push(mount("/etc/hosts", "/home/u/.ssh/id_rsa", "ro"));
    assert!(
        !p18(&leak, &c).pass,
        "a host home path behind an allowed point"
    );
    assert!(!p18(&[], &c).pass, "no mountinfo");

    // Issue 11: a declared mount below /home passes (the README's `~/datasets/x`), also from
    // a separate /home file system; anything else at its target, or writable, fails naming it.
    for root in ["/home/u/datasets/x", "/u/datasets/x"] {
        let mut ok = base.clone();
        ok.push(mount("/mnt/x", root, "ro,nosuid"));
        assert!(p18(&ok, &c).pass, "{root}: {:?}", p18(&ok, &c));
    }
    for (point, root, opts, why) in [
        (
            "/mnt/x",
            "/home/u/.ssh",
            "ro",
            "/mnt/x <- /home/u/.ssh (the spec declares `/home/u/datasets/x` at /mnt/x, not this)",
        ),
        (
            "/mnt/x",
            "/home/u/datasets/x",
            "rw",
            "/mnt/x <- /home/u/datasets/x is writable (the spec declares it read_only)",
        ),
        (
            "/cyclix/task.md",
            "/home/u/datasets/x",
            "ro",
            "/cyclix/task.md <- /home/u/datasets/x (not a declared mount)",
        ),
    ] {
        let mut bad = base.clone();
        bad.push(mount(point, root, opts));
        let j = p18(&bad, &c);
        assert!(!j.pass, "{point} {root}");
        assert!(j.detail.contains(why), "{point} {root}: {:?}", j.detail);
        assert!(
            j.got.contains(why),
            "the summary names the mount: {:?}",
            j.got
        );
    }
}

#[test]
fn p18_accepts_podmans_keep_id_mounts_only_under_keep_id_read_only_and_from_userdata() {
    let mut k = ctx();
    k.agent_uid = Some(1000);
    let typed = |point: &str, root: &str, opts: &str, fstype: &str| Mount {
        fstype: fstype.into(),
        ..mount(point, root, opts)
    };
    let userdata = "/storage/overlay-containers/74cd/userdata";
    let keep_id = vec![
        mount("/", "/", "ro"),
        mount("/work", "/home/u/wt", "rw"),
        typed("/sys/block", "/block", "ro,nosuid,nodev,noexec", "sysfs"),
        typed("/sys/kernel", "/", "ro,relatime", "tmpfs"),
        typed(
            "/etc/passwd",
            &format!("{userdata}/passwd"),
            "ro,nosuid",
            "tmpfs",
        ),
        typed(
            "/etc/group",
            &format!("{userdata}/group"),
            "ro,nosuid",
            "tmpfs",
        ),
    ];
    assert!(p18(&keep_id, &k).pass, "{:?}", p18(&keep_id, &k));
    assert!(
        !p18(&keep_id, &ctx()).pass,
        "not without keep-id in the context"
    );
    let mut rw = keep_id.clone();
    rw[2] = typed("/sys/block", "/block", "rw,nosuid", "sysfs");
    assert!(!p18(&rw, &k).pass, "a writable sysfs subtree");
    let mut other = keep_id;
    other[4] = typed("/etc/passwd", "/home/u/passwd", "ro", "ext4");
    assert!(!p18(&other, &k).pass, "a passwd from anywhere else");
}

#[test]
fn p18_accepts_podman_4_masks_only_as_read_only_tmpfs() {
    let c = ctx();
    let base = vec![mount("/", "/", "ro")];
    let mask = |opts: &str, fstype: &str| Mount {
        fstype: fstype.into(),
        ..mount("/sys/dev/block", "/", opts)
    };
    let mut masked = base.clone();
    masked.push(mask("ro,relatime", "tmpfs"));
    assert!(p18(&masked, &c).pass, "{:?}", p18(&masked, &c));
    for (opts, fstype) in [("rw,relatime", "tmpfs"), ("ro,relatime", "sysfs")] {
        let mut other = base.clone();
        other.push(mask(opts, fstype));
        let j = p18(&other, &c);
        assert!(
            !j.pass && j.detail.contains("/sys/dev/block"),
            "{opts} {fstype}: {j:?}"
        );
    }
}
