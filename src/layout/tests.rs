//! `layout`'s unit tests.

use super::*;

fn layout() -> Layout {
    Layout {
        config_home: "/h/.config".into(),
        data_home: "/h/.local/share".into(),
        state_home: "/h/.local/state".into(),
        runtime_dir: Some("/run/user/1000".into()),
    }
}

#[test]
fn paths_are_where_the_readme_says() {
    let l = layout();
    assert_eq!(
        l.tenant_spec("acme"),
        Path::new("/h/.config/cyclix/tenants/acme.yaml")
    );
    assert_eq!(
        l.tenant_env("acme"),
        Path::new("/h/.config/cyclix/tenants/acme.env")
    );
    assert_eq!(
        l.records_dir("acme"),
        Path::new("/h/.local/state/cyclix/runs/acme")
    );
    assert_eq!(
        l.worktree("acme", "r1"),
        Path::new("/h/.local/share/cyclix/worktrees/acme/r1")
    );
    let rt = l.runtime().expect("runtime");
    assert_eq!(
        rt.quadlet_dir(),
        Path::new("/run/user/1000/containers/systemd")
    );
    assert_eq!(rt.units_dir(), Path::new("/run/user/1000/systemd/user"));
    assert_eq!(rt.run_dir("r1"), Path::new("/run/user/1000/cyclix/runs/r1"));
    assert_eq!(
        rt.tenant_lock("acme"),
        Path::new("/run/user/1000/cyclix/locks/acme.lock")
    );
    assert_eq!(
        reservations_beside(&rt.runs_root(), SUBNETS_DIR),
        rt.reservations(SUBNETS_DIR)
    );
    assert_eq!(
        gate_tree(&l.worktree("acme", "r1")),
        Path::new("/h/.local/share/cyclix/worktrees/acme/r1.gate")
    );
}

#[test]
fn run_files_parse_back() {
    let dir = Path::new("/s/acme");
    let f = RunFiles::new(dir, "20261130t124702-4efb");
    for (p, kind) in [
        (f.record(), "json"),
        (f.marker(), "running"),
        (f.phase(), "phase"),
        (f.import_dir(), "import"),
        (f.uncommitted_diff(), "uncommitted.diff"),
    ] {
        let name = p.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(
            parse_run_file(name),
            Some(("20261130t124702-4efb", kind)),
            "{name}"
        );
    }
    assert_eq!(parse_run_file("latest.json"), None);
    assert_eq!(parse_run_file("skips.jsonl"), None);
    assert_eq!(parse_run_file(".json"), None);
}
