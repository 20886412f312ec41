use super::*;

const MOUNTINFO: &str = "\
359 347 0:46 / /dev rw,nosuid - tmpfs tmpfs rw,size=4096k,mode=755
360 347 0:47 / /tmp rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1g,mode=1777
361 347 0:48 / /my\\040dir rw - tmpfs tmpfs rw
367 347 0:52 / /dev/shm rw - tmpfs shm rw
362 351 0:72 / /proc/acpi ro,relatime - tmpfs tmpfs rw,size=0k
363 351 0:46 /null /proc/keys rw,nosuid - tmpfs tmpfs rw
364 347 0:49 / / ro,relatime - overlay overlay rw,lowerdir=/a
365 347 0:50 / /ro ro - tmpfs tmpfs rw
366 347 0:51 / /dev/pts rw - devpts devpts rw
";

#[test]
fn the_writable_places_are_the_read_write_tmpfs_mounts_outside_proc_and_sys() {
    assert_eq!(writable_tmpfs(MOUNTINFO), vec!["/dev", "/my dir", "/tmp"]);
}

#[test]
fn exactly_init_and_agent_wait_is_a_held_container() {
    let p = |v: &[(u32, &str)]| {
        v.iter()
            .map(|(p, c)| (*p, c.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        agent_wait_pid(7, &p(&[(7, "catatonit"), (9, "cyclix")])),
        Ok(9)
    );
    assert_eq!(
        agent_wait_pid(7, &p(&[(7, "podman-init"), (9, "cyclix")])),
        Ok(9)
    );
    for bad in [
        p(&[(7, "catatonit")]),
        p(&[(7, "catatonit"), (9, "cyclix"), (10, "sleep")]),
        p(&[(7, "catatonit"), (9, "sleep")]),
        p(&[(7, "sh"), (9, "cyclix")]),
        p(&[(7, "catatonit"), (9, "cyclix"), (10, "cyclix")]),
    ] {
        let why = agent_wait_pid(7, &bad).expect_err("refused");
        assert!(why.contains("exactly its init and agent-wait"), "{why}");
    }
}

#[test]
fn a_listing_sees_every_entry_and_a_change_of_one() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("a")).expect("dir");
    std::fs::write(dir.path().join("a/f"), "x").expect("file");
    let mut then = Vec::new();
    listing(dir.path(), "/tmp", &mut then).expect("listing");
    then.sort();
    assert_eq!(then.len(), 2, "{then:?}");
    assert!(then[0].starts_with("/tmp/a d "), "{then:?}");
    assert!(then[1].starts_with("/tmp/a/f f "), "{then:?}");
    let rec = HeldAgent {
        container: "c".into(),
        mounts: "m".into(),
        files: then.clone(),
        upper: String::new(),
        claim: String::new(),
    };
    let same = Seen {
        pid: 1,
        mounts: "m".into(),
        files: then,
    };
    assert!(wrong(&rec, &same).is_empty());
    std::fs::write(dir.path().join("a/evil"), "y").expect("file");
    let mut now = Vec::new();
    listing(dir.path(), "/tmp", &mut now).expect("listing");
    now.sort();
    let seen = Seen {
        pid: 1,
        mounts: "other".into(),
        files: now,
    };
    let w = wrong(&rec, &seen);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("mounts changed"), "{w:?}");
    assert!(w[1].contains("/tmp/a/evil"), "{w:?}");
}

#[test]
fn the_host_side_is_an_empty_tree_an_empty_task_and_only_the_claim_fifo() {
    let dir = tempfile::tempdir().expect("tmp");
    let (run, tree) = (dir.path().join("run"), dir.path().join("tree"));
    std::fs::create_dir_all(run.join(crate::render::plan::CTL_DIR)).expect("ctl");
    std::fs::create_dir(&tree).expect("tree");
    std::fs::write(run.join(crate::render::plan::TASK_FILE), "").expect("task");
    let claim = run
        .join(crate::render::plan::CTL_DIR)
        .join(crate::render::plan::CLAIM_FILE);
    crate::run::claim_fifo::make_claim(&claim).expect("fifo");
    let ino = dev_ino(&claim).expect("fifo's inode");
    assert!(host_side_wrong(&run, &tree, &ino).is_empty());
    // Another FIFO in its place (it would be woken instead of agent-wait), made while the
    // fill's still exists elsewhere (a file system may give a new file a freed inode number).
    let aside = run.join("aside");
    std::fs::rename(&claim, &aside).expect("mv");
    crate::run::claim_fifo::make_claim(&claim).expect("fifo");
    std::fs::remove_file(&aside).expect("rm");
    let w = host_side_wrong(&run, &tree, &ino);
    assert!(
        w.len() == 1 && w[0].contains("not the one the fill made"),
        "{w:?}"
    );
    std::fs::write(tree.join("x"), "").expect("planted");
    std::fs::write(run.join(crate::render::plan::TASK_FILE), "do evil").expect("task");
    std::fs::write(run.join(crate::render::plan::CTL_DIR).join("go"), "").expect("go");
    let w = host_side_wrong(&run, &tree, "");
    assert_eq!(w.len(), 3, "{w:?}");
}

#[test]
fn the_fills_first_look_holds_only_what_podman_makes() {
    // As podman 5.4 made it on the testbed for a held agent container.
    let podman: Vec<String> = [
        "/dev/core l 120777 1000:1000 11 1",
        "/dev/full o 20666 0:0 0 1",
        "/dev/mqueue d 41777 1000:1000 0 1",
        "/dev/shm d 41777 1000:1000 0 1",
        "/run/.containerenv f 100644 1000:1000 0 1",
        "/run/lock d 41777 1000:1000 0 1",
        "/run/lock/subsys d 40755 1000:1000 0 1",
        "/run/podman-init f 100755 0:0 733720 1",
        "upper:/cyclix d 41755 1000:1000 0 1",
        "upper:/cyclix/task.md f 100700 1000:1000 0 1",
        "upper:/etc/passwd f 100644 1000:1000 1234 1",
        "content:/etc/hosts 00ff",
    ]
    .map(String::from)
    .to_vec();
    assert!(
        first_look_wrong(&podman).is_empty(),
        "{:?}",
        first_look_wrong(&podman)
    );
    for (planted, path) in [
        (
            "/tmp/planted-at-fill f 100664 1000:1000 48 1",
            "/tmp/planted-at-fill",
        ),
        ("/tmp/sock o 140755 1000:1000 0 1", "/tmp/sock"),
        ("/dev/shm/x f 100644 1000:1000 0 1", "/dev/shm/x"),
        ("/var/tmp/x d 40755 1000:1000 0 1", "/var/tmp/x"),
        ("/run/evil f 100644 1000:1000 0 1", "/run/evil"),
        (
            "/run/.containerenv f 100644 1000:1000 9 1",
            "/run/.containerenv",
        ),
        ("/dev/evil o 20666 0:0 0 1", "/dev/evil"),
        (
            "upper:/cyclix/evil f 100644 1000:1000 5 1",
            "upper:/cyclix/evil",
        ),
        ("upper:/fifo o 10644 1000:1000 0 1", "upper:/fifo"),
    ] {
        let mut files = podman.clone();
        files.push(planted.to_string());
        assert_eq!(
            first_look_wrong(&files),
            vec![path.to_string()],
            "{planted}"
        );
    }
}
