//! The Kubernetes gate's export step judges the objects the collector bundles (the second
//! attack review of issue 34): an agent that adds a pack whose hand-made index names clean
//! content under the id of its real content, behind a multi-pack-index its own config turns
//! off, showed a *local* clone (which copies the object store as it lies) the clean content,
//! while the collector (and the host's import, which checks every object) got the real one.
//! The exported step clones `--no-local` with `transfer.fsckObjects=true`: every object goes
//! through index-pack and is checked against its id. Host git, the exported argv as rendered;
//! the positive control is the same argv as it was (a local clone), which sees the lie.

use std::path::Path;
use std::process::Command;

use super::kube_export::kube_case;

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=a", "-c", "user.email=a@a"])
        .args(args)
        .output()
        .expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `idx` (a version-2 pack index of one object) rewritten to name `id` for that object.
fn lying_index(idx: &Path, id: &str) {
    let d = std::fs::read(idx).expect("idx");
    assert_eq!(&d[..8], b"\xfftOc\0\0\0\x02");
    let fan = 8 + 255 * 4;
    assert_eq!(&d[fan..fan + 4], &[0, 0, 0, 1], "one object");
    let at = 8 + 256 * 4;
    let rest = &d[at + 20..d.len() - 20]; // CRC, offset, the pack's checksum
    let id: Vec<u8> = (0..20)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    let mut body = d[..8].to_vec();
    for i in 0..=255u8 {
        body.extend_from_slice(&u32::from(i >= id[0]).to_be_bytes());
    }
    body.extend_from_slice(&id);
    body.extend_from_slice(rest);
    let tmp = idx.with_extension("body");
    std::fs::write(&tmp, &body).expect("write");
    let sum = Command::new("sha1sum").arg(&tmp).output().expect("sha1sum");
    let hex = String::from_utf8_lossy(&sum.stdout);
    let sum: Vec<u8> = (0..20)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    body.extend_from_slice(&sum);
    std::fs::remove_file(&tmp).expect("rm");
    let mut perm = std::fs::metadata(idx).expect("meta").permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(idx, perm).expect("chmod");
    std::fs::write(idx, body).expect("idx");
}

/// The agent's repository: `payload.sh` is `echo EVIL` on `main`; a second pack holds `echo
/// all good` under EVIL's id, behind a multi-pack-index the repository's config turns off.
fn hostile_repo(root: &Path) -> std::path::PathBuf {
    let r = root.join("repo");
    std::fs::create_dir(&r).expect("mkdir");
    git(&r, &["init", "-q", "-b", "main"]);
    git(&r, &["commit", "-q", "--allow-empty", "-m", "base"]);
    std::fs::write(r.join("payload.sh"), "echo EVIL\n").expect("write");
    git(&r, &["add", "payload.sh"]);
    git(&r, &["commit", "-qm", "payload"]);
    // The run branch the exported step clones (the golden `kube` case's).
    git(&r, &["branch", "cyclix/kubeco/golden-1"]);
    git(&r, &["repack", "-q", "-a", "-d"]);
    let evil = git(&r, &["rev-parse", "HEAD:payload.sh"]);
    std::fs::write(root.join("clean"), "echo all good\n").expect("write");
    let clean = git(
        &r,
        &[
            "hash-object",
            "-w",
            root.join("clean").to_str().expect("utf-8"),
        ],
    );
    let pack = {
        let o = Command::new("sh")
            .current_dir(&r)
            .args([
                "-c",
                &format!("echo {clean} | git pack-objects -q .git/objects/pack/fake"),
            ])
            .output()
            .expect("pack-objects");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    lying_index(&r.join(format!(".git/objects/pack/fake-{pack}.idx")), &evil);
    std::fs::remove_file(r.join(format!(".git/objects/{}/{}", &clean[..2], &clean[2..])))
        .expect("the clean loose object");
    let o = Command::new("sh")
        .current_dir(&r)
        .args([
            "-c",
            &format!("echo fake-{pack}.idx | git multi-pack-index write --stdin-packs && git config core.multiPackIndex false"),
        ])
        .output()
        .expect("midx");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    r
}

/// Runs the gate's export step `argv` with its `/repo` and `/tree` at `repo` and `tree`;
/// `payload.sh` as the gate would see it, or the clone's refusal.
fn export(argv: &[String], repo: &Path, tree: &Path) -> String {
    let mapped: Vec<String> = argv[1..]
        .iter()
        .map(|a| match a.as_str() {
            "/repo" => repo.display().to_string(),
            "/tree" => tree.display().to_string(),
            _ => a.clone(),
        })
        .collect();
    let o = Command::new(&argv[0])
        .args(&mapped)
        .output()
        .expect("git clone");
    if o.status.success() {
        std::fs::read_to_string(tree.join("payload.sh")).unwrap_or_default()
    } else {
        format!("refused: {}", String::from_utf8_lossy(&o.stderr))
    }
}

#[test]
fn the_gates_export_sees_the_objects_the_collector_bundles_not_a_lying_index() {
    let tmp = tempfile::tempdir().expect("tmp");
    let repo = hostile_repo(tmp.path());
    let e = kube_case();
    let gate = e
        .manifests
        .iter()
        .find(|m| m.file == "run/gate-job.yaml")
        .expect("gate Job");
    let argv: Vec<String> = gate.object["spec"]["template"]["spec"]["initContainers"][0]["command"]
        .as_array()
        .expect("the export step's argv")
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    assert!(argv.contains(&"--no-local".to_string()), "{argv:?}");
    // As rendered: the real content (what the collector bundles and the import checks).
    let seen = export(&argv, &repo, &tmp.path().join("tree"));
    assert_eq!(seen, "echo EVIL\n", "{seen}");
    // Positive control: the step as it was (a local clone, no object check) sees the lie.
    let mut old = argv.clone();
    let fsck = old
        .iter()
        .position(|a| a == "transfer.fsckObjects=true")
        .expect("the object check");
    old.drain(fsck - 1..=fsck);
    for a in &mut old {
        if a == "--no-local" {
            "--no-hardlinks".clone_into(a);
        }
    }
    let seen = export(&old, &repo, &tmp.path().join("tree-old"));
    assert_eq!(seen, "echo all good\n", "{old:?}: {seen}");
}
