use super::*;
use crate::spec::{SpecContext, SpecError, parse};

const HEAD: &str = "tenant: t\nrepo: { path: /home/u/proj, base: main }\ntask: { text: x }\n\
    agent: { image: localhost/a, unpinned_local_image: true, command: [a] }\n\
    gate: { image: localhost/a, unpinned_local_image: true, command: [b] }\n";

fn ctx() -> SpecContext {
    SpecContext {
        file: "t.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    }
}

fn with_mount(entry: &str) -> String {
    format!("{HEAD}mounts:\n  - {{ target: /mnt/a, source: \"/srv/ok\" }}\n  - {entry}\n")
}

fn refuse(entry: &str) -> String {
    let e: SpecError = parse(&with_mount(entry), &ctx()).expect_err(entry);
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    e.to_string()
}

/// Every refused class: the error names `FILE:LINE:COL`, the key, the protected path and a fix.
#[test]
fn every_protected_class_is_refused_at_validate_time() {
    let col = "  - { source: ".len() + 1;
    for (source, read_only, want) in [
        (
            "/home/u/proj",
            "false",
            "is the project repository `/home/u/proj`",
        ),
        (
            "/home/u/proj",
            "true",
            "is the project repository `/home/u/proj`",
        ),
        (
            "/home/u/proj/src/data",
            "true",
            "lies inside the project repository",
        ),
        ("/home/u", "true", "is your home directory `/home/u`"),
        ("~", "true", "is your home directory `/home/u`"),
        ("/home", "true", "contains your home directory `/home/u`"),
        ("/", "true", "contains your home directory `/home/u`"),
        ("~/.ssh", "true", "is your SSH keys `/home/u/.ssh`"),
        ("~/.ssh/id_ed25519", "true", "lies inside your SSH keys"),
        ("~/.gnupg", "true", "is your GnuPG keys"),
        (
            "~/.gitconfig",
            "true",
            "is your git configuration `/home/u/.gitconfig`",
        ),
        (
            "~/.config/git",
            "true",
            "is your git configuration `/home/u/.config/git`",
        ),
        ("~/.config", "true", "is your configuration directory"),
        (
            "~/.config/cyclix/tenants",
            "true",
            "lies inside cyclix's configuration",
        ),
        ("~/.local/share", "true", "is your data directory"),
        (
            "~/.local/share/containers/storage",
            "true",
            "lies inside your data directory",
        ),
        ("~/.local", "true", "contains your data directory"),
        (
            "~/.local/state/cyclix",
            "true",
            "is cyclix's state (run records)",
        ),
        ("~/.local/state", "true", "is your state directory"),
        (
            "~/.bash_history",
            "true",
            "is a shell history `/home/u/.bash_history`",
        ),
        ("~/.zsh_history", "true", "is a shell history"),
        ("~/.python_history", "true", "is a shell history"),
        (
            "~/.local/share/fish/fish_history",
            "true",
            "is a shell history",
        ),
        (
            "/home/u/src/other/.git",
            "true",
            "is a git directory `/home/u/src/other/.git`",
        ),
        (
            "/srv/x/.git/objects",
            "true",
            "lies inside a git directory `/srv/x/.git`",
        ),
    ] {
        let e = refuse(&format!(
            "{{ source: \"{source}\", target: /mnt/b, read_only: {read_only} }}"
        ));
        let pos = format!("t.yaml:8:{col}: mounts[1].source: mount source `");
        assert!(e.starts_with(&pos), "{source}: {e}");
        assert!(e.contains(want), "{source}: {e}");
        assert!(e.contains("\n  fix: "), "{source}: {e}");
    }
}

#[test]
fn the_project_fix_says_the_agent_has_a_checkout_already() {
    let e = refuse("{ source: /home/u/proj, target: /mnt/b, read_only: false }");
    assert!(
        e.contains("fix: remove this mount: the agent already works on a private checkout"),
        "{e}"
    );
    let e = refuse("{ source: ~/.ssh, target: /mnt/b }");
    assert!(e.contains("fix: mount a directory that holds only the data the agent needs, outside `/home/u/.ssh`"), "{e}");
}

#[test]
fn plain_data_directories_are_accepted() {
    for source in [
        "~/datasets/x",
        "/srv/data",
        "/home/u/proj-data",
        "/home/u/.configs",
    ] {
        let text = with_mount(&format!("{{ source: \"{source}\", target: /mnt/b }}"));
        let spec = parse(&text, &ctx()).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(spec.mounts.len(), 2);
        assert_eq!(
            (spec.mounts[1].source_line, spec.mounts[1].source_column),
            (8, 15)
        );
    }
}

#[test]
fn relations_are_component_wise() {
    let p = home_paths("/home/u");
    assert!(conflict("/home/u/datasets/x", &p).is_none());
    assert!(conflict("/home/u/.sshkeys", &p).is_none());
    assert!(conflict("/home/uu", &p).is_none());
    let c = conflict("/home/u/.local/share/fish/fish_history", &p).expect("hit");
    assert_eq!(
        (c.relation, c.protected.what.as_str()),
        (Relation::Is, "a shell history")
    );
    let c = conflict("/home/u/.local/share/fish", &p).expect("hit");
    assert_eq!(c.relation, Relation::Inside, "the deepest enclosing path");
    assert_eq!(c.protected.path, "/home/u/.local/share");
    let c = conflict("/home", &p).expect("hit");
    assert_eq!(
        (c.relation, c.protected.path.as_str()),
        (Relation::Contains, "/home/u")
    );
}

#[test]
fn podman_storage_from_facts_is_refused() {
    let spec = parse(
        &with_mount("{ source: /var/lib/pod/storage/overlay, target: /mnt/b }"),
        &ctx(),
    )
    .expect("validate cannot know podman's storage");
    let protected = podman_paths("/var/lib/pod//storage/", "/run/pod", "");
    assert_eq!(protected.len(), 2);
    let d = refusals(&spec, &protected);
    assert_eq!(d.len(), 1);
    let text = SpecError {
        file: "t.yaml".into(),
        diagnostics: d,
    }
    .to_string();
    assert!(text.starts_with("t.yaml:8:15: mounts[1].source: mount source `/var/lib/pod/storage/overlay` lies inside podman's storage (graph root, with its secrets) `/var/lib/pod/storage`"), "{text}");
    assert!(text.contains("\n  fix: mount a directory"), "{text}");
    assert!(refusals(&spec, &podman_paths("/other", "", "")).is_empty());
}

#[test]
fn cyclix_directories_follow_xdg() {
    let p = cyclix_paths("/x/cfg", "/x/data", "/x/state", Some("/run/user/7"));
    let c = conflict("/x/state/cyclix/runs/t", &p).expect("state dir");
    assert_eq!(c.protected.what, "cyclix's state (run records)");
    assert!(conflict("/x/data", &p).is_some_and(|c| c.relation == Relation::Contains));
    assert!(conflict("/x/data2", &p).is_none());
}
