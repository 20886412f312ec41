use serde_json::json;

use super::*;

fn manifest(file: &str, kind: &str) -> Manifest {
    Manifest {
        file: file.into(),
        object: json!({ "kind": kind, "metadata": { "name": file } }),
    }
}

#[test]
fn the_export_splits_into_stages_in_apply_order_and_the_schedule_is_left_out() {
    let m = [
        manifest("run/proxy-configmap.yaml", "ConfigMap"),
        manifest("run/proxy-service.yaml", "Service"),
        manifest("run/proxy-deployment.yaml", "Deployment"),
        manifest("run/netpol-agent.yaml", "NetworkPolicy"),
        manifest("run/run-configmap.yaml", "ConfigMap"),
        manifest("run/work-pvc.yaml", "PersistentVolumeClaim"),
        manifest("run/agent-job.yaml", "Job"),
        manifest("run/gate-job.yaml", "Job"),
        manifest("run/collect-job.yaml", "Job"),
        manifest("schedule/cronjob.yaml", "CronJob"),
    ];
    let s = split(&m);
    let files = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        files(&s.proxy),
        [
            "run/proxy-configmap.yaml",
            "run/proxy-service.yaml",
            "run/proxy-deployment.yaml",
            "run/netpol-agent.yaml"
        ]
    );
    assert_eq!(
        files(&s.agent),
        [
            "run/run-configmap.yaml",
            "run/work-pvc.yaml",
            "run/agent-job.yaml"
        ]
    );
    assert_eq!(files(&s.gate), ["run/gate-job.yaml"]);
    assert_eq!(files(&s.collect), ["run/collect-job.yaml"]);
    let secrets = [
        json!({ "metadata": { "name": "c", "labels": { crate::naming::label::ROLE: "proxy" } } }),
        json!({ "metadata": { "name": "e", "labels": { crate::naming::label::ROLE: "agent" } } }),
    ];
    let (p, a) = split_secrets(&secrets);
    assert_eq!((p.len(), a.len()), (1, 1));
    assert_eq!(p[0]["metadata"]["name"], "c");
}

#[test]
fn the_agent_log_gives_the_probe_verdicts_and_a_missing_or_failed_probe_is_a_refusal() {
    let mut rec = RunRecord::new("t", "r", "kubernetes".into());
    let lines: Vec<String> = [
        r#"{"id":"P1","verdict":"PASS"}"#,
        r#"{"id":"N8","verdict":"FAIL"}"#,
        r#"{"summary":true,"pass":1,"fail":1}"#,
        "the agent does not start",
        // After the summary: the agent's own output, never a verdict.
        r#"{"id":"N8","verdict":"PASS"}"#,
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    read_agent_log(&lines, &mut rec);
    assert_eq!(rec.probes.len(), 2);
    assert_eq!(
        rec.agent_log,
        [
            "the agent does not start",
            r#"{"id":"N8","verdict":"PASS"}"#
        ]
    );
    assert!(probes_failed(&rec.probes));
    assert!(probes_failed(&[]), "no probe ran: not a pass");
    assert!(!probes_failed(&[json!({"id": "P1", "verdict": "PASS"})]));
}

/// A user repository with a base commit, and a bundle of one commit on it as the run branch.
fn repo_and_bundle(tmp: &Path) -> (std::path::PathBuf, String, Vec<u8>) {
    let user = tmp.join("u");
    let g = crate::git::Git::init_repo(&user, &[("a", "a\n")], "base").expect("repo");
    let base = g.rev_parse_commit("main").expect("base");
    let agent = tmp.join("agent");
    crate::git::private::create(&user, &agent, "cyclix/t/r", &base).expect("private");
    std::fs::write(agent.join("b"), "b\n").expect("write");
    let git = |args: &[&str]| {
        let mut full = vec![
            "-C",
            agent.to_str().expect("utf-8"),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@a",
        ];
        full.extend(args);
        let o = std::process::Command::new("git")
            .args(&full)
            .output()
            .expect("git");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["add", "b"]);
    git(&["commit", "-qm", "agent"]);
    let out = tmp.join("made.bundle");
    let range = format!("{base}..refs/heads/cyclix/t/r");
    git(&[
        "bundle",
        "create",
        "--quiet",
        out.to_str().expect("utf-8"),
        &range,
    ]);
    (user, base, std::fs::read(&out).expect("bundle"))
}

/// The collector's log of part `i` of `bundle` in parts of `part` bytes.
fn part_log(bundle: &[u8], i: usize, part: usize) -> String {
    use base64::Engine as _;
    let sha = crate::run::boundary::sha256_hex(bundle);
    let from = (i * part).min(bundle.len());
    let to = (from + part).min(bundle.len());
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bundle[from..to]);
    format!("{COLLECT_MARK} 0 {} {sha}\n{b64}\n", bundle.len())
}

/// Joins the parts' logs as the runner does; `Err`: why not.
fn join(logs: &[String], part: u64) -> std::result::Result<Vec<u8>, String> {
    let mut joined = Vec::new();
    let Collected::Part {
        size,
        sha256,
        bytes,
    } = read_collect_log(logs[0].as_bytes(), "b")
    else {
        return Err("no bundle".into());
    };
    let first = (size, sha256.as_str());
    join_part(
        &mut joined,
        0,
        part,
        first,
        Collected::Part {
            size,
            sha256: sha256.clone(),
            bytes,
        },
    )?;
    for (i, l) in logs.iter().enumerate().skip(1) {
        join_part(
            &mut joined,
            i as u64,
            part,
            first,
            read_collect_log(l.as_bytes(), "b"),
        )?;
    }
    Ok(joined)
}

#[test]
fn the_collectors_log_is_read_and_garbage_or_a_status_is_refused_with_its_reason() {
    let sha = "ab".repeat(32);
    for (text, outcome, why) in [
        (
            format!("{COLLECT_MARK} 0 5 {sha}\nnot base64!!\n"),
            "refused",
            "not base64",
        ),
        (
            format!("{COLLECT_MARK} 0 x {sha}\naGVsbG8=\n"),
            "refused",
            "not a number",
        ),
        (
            format!("{COLLECT_MARK} 0 5 xyz\naGVsbG8=\n"),
            "refused",
            "64 hex",
        ),
        // The old single-line form (no size, no digest) is not taken.
        (
            format!("{COLLECT_MARK} 0\naGVsbG8=\n"),
            "export-failed",
            "status `0`",
        ),
        (format!("{COLLECT_MARK} 4\n"), "no-commits", ""),
        (format!("{COLLECT_MARK} 3\n"), "branch-gone", "cyclix/t/r"),
        (format!("{COLLECT_MARK} 6\n"), "export-failed", "status `6`"),
        (
            "whatever\n".to_string(),
            "export-failed",
            "does not start with",
        ),
        // A forged status line ahead of the script's own (the attack review's F1), lines
        // after the part, an empty bundle: refused.
        (
            format!("{COLLECT_MARK} 0 5 {sha}\naGVsbG8=\n{COLLECT_MARK} 6\n"),
            "refused",
            "holds 3 lines",
        ),
        (
            format!("x\n{COLLECT_MARK} 0 5 {sha}\naGVsbG8=\n"),
            "export-failed",
            "does not start with",
        ),
        (
            format!("{COLLECT_MARK} 4\nmore\n"),
            "refused",
            "holds 2 lines where its script prints 1",
        ),
        (format!("{COLLECT_MARK} 0 0 {sha}\n\n"), "refused", "empty"),
    ] {
        match read_collect_log(text.as_bytes(), "cyclix/t/r") {
            Collected::Nothing { outcome: o, reason } => {
                assert_eq!(o, outcome, "{text}: {reason}");
                assert!(reason.contains(why), "{text}: {reason}");
            }
            c @ Collected::Part { .. } => panic!("{text}: {c:?}"),
        }
    }
    // Positive control: the status and the part, with and without a last newline.
    for text in [
        format!("{COLLECT_MARK} 0 5 {sha}\naGVs"),
        format!("{COLLECT_MARK} 0 5 {sha}\naGVs\n"),
    ] {
        assert_eq!(
            read_collect_log(text.as_bytes(), "b"),
            Collected::Part {
                size: 5,
                sha256: sha.clone(),
                bytes: b"hel".to_vec()
            }
        );
    }
}

#[test]
fn a_bundle_in_parts_is_joined_checked_and_imported_and_a_cut_or_foreign_part_is_refused() {
    use base64::Engine as _;
    let tmp = tempfile::tempdir().expect("tmp");
    let (user, base, bundle) = repo_and_bundle(tmp.path());
    let at = |n: &str| tmp.path().join(n);
    let part = 100usize;
    let n = bundle.len().div_ceil(part);
    assert!(n >= 3, "the test bundle is {} bytes", bundle.len());
    let logs: Vec<String> = (0..n).map(|i| part_log(&bundle, i, part)).collect();
    // A part cut short (a rotated log): refused, naming the part.
    let mut cut = logs.clone();
    cut[1] = cut[1].replacen(&cut[1].lines().nth(1).expect("b64")[..8], "", 1);
    let e = join(&cut, part as u64).expect_err("cut");
    assert!(
        e.contains("part 1 holds") && e.contains("containerLogMaxSize"),
        "{e}"
    );
    // A collector that made another bundle: refused.
    let mut other = logs.clone();
    let mut changed = bundle.clone();
    changed[150] ^= 1;
    other[2] = part_log(&changed, 2, part);
    let e = join(&other, part as u64).expect_err("other");
    assert!(e.contains("collector 2 made another bundle"), "{e}");
    // Parts that all agree but join to other bytes than the digest says: refused at the end.
    let sha = crate::run::boundary::sha256_hex(&bundle);
    let forged: Vec<String> = (0..n)
        .map(|i| {
            let from = i * part;
            let to = (from + part).min(changed.len());
            let b64 = base64::engine::general_purpose::STANDARD.encode(&changed[from..to]);
            format!("{COLLECT_MARK} 0 {} {sha}\n{b64}\n", bundle.len())
        })
        .collect();
    let e = join(&forged, part as u64).expect_err("forged");
    assert!(e.contains("joined parts have SHA-256"), "{e}");
    // A bundle that is no bundle: refused by the import's header check, no branch.
    let r = import_bundle(b"hello", &at("2"), &user, "cyclix/t/r", &base).expect("import");
    assert_eq!(r.outcome, "refused", "{r:?}");
    assert!(r.reason.contains("malformed"), "{r:?}");
    assert!(
        crate::git::Git::new(&user)
            .rev_parse_commit("cyclix/t/r")
            .is_err()
    );
    // Positive control: the parts join to the bundle, imported as the run branch.
    let joined = join(&logs, part as u64).expect("join");
    assert_eq!(joined, bundle);
    let r = import_bundle(&joined, &at("4"), &user, "cyclix/t/r", &base).expect("import");
    assert_eq!(r.outcome, "imported", "{r:?}");
    assert_eq!(
        crate::git::Git::new(&user)
            .rev_parse_commit("cyclix/t/r")
            .expect("branch"),
        r.tip
    );
}
