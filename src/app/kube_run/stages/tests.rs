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

#[test]
fn the_collectors_log_is_imported_and_garbage_or_a_status_is_refused_with_its_reason() {
    use base64::Engine as _;
    let tmp = tempfile::tempdir().expect("tmp");
    let (user, base, bundle) = repo_and_bundle(tmp.path());
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bundle);
    let at = |n: &str| tmp.path().join(n);
    // Garbage where the bundle should be: refused, no branch.
    let r = import_log(
        format!("{COLLECT_MARK} 0\nnot base64!!\n").as_bytes(),
        &at("1"),
        &user,
        "cyclix/t/r",
        &base,
    )
    .expect("import");
    assert_eq!(r.outcome, "refused", "{r:?}");
    assert!(r.reason.contains("not base64"), "{r:?}");
    // Valid base64 of bytes that are no bundle: refused by the header check.
    let junk = base64::engine::general_purpose::STANDARD.encode(b"hello");
    let r = import_log(
        format!("{COLLECT_MARK} 0\n{junk}\n").as_bytes(),
        &at("2"),
        &user,
        "cyclix/t/r",
        &base,
    )
    .expect("import");
    assert_eq!(r.outcome, "refused", "{r:?}");
    assert!(r.reason.contains("malformed"), "{r:?}");
    assert!(
        crate::git::Git::new(&user)
            .rev_parse_commit("cyclix/t/r")
            .is_err()
    );
    // Statuses without a bundle, and no status line at all.
    for (text, outcome) in [
        (format!("{COLLECT_MARK} 4\n"), "no-commits"),
        (format!("{COLLECT_MARK} 3\n"), "branch-gone"),
        (format!("{COLLECT_MARK} 6\n"), "export-failed"),
        ("whatever\n".to_string(), "export-failed"),
    ] {
        let r = import_log(text.as_bytes(), &at("3"), &user, "cyclix/t/r", &base).expect("import");
        assert_eq!(r.outcome, outcome, "{text}: {r:?}");
    }
    // Positive control: the real bundle, after lines of noise, is imported as the run branch.
    let r = import_log(
        format!("noise\n{COLLECT_MARK} 0\n{b64}\n").as_bytes(),
        &at("4"),
        &user,
        "cyclix/t/r",
        &base,
    )
    .expect("import");
    assert_eq!(r.outcome, "imported", "{r:?}");
    assert_eq!(
        crate::git::Git::new(&user)
            .rev_parse_commit("cyclix/t/r")
            .expect("branch"),
        r.tip
    );
}
