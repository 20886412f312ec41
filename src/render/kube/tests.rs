//! The Kubernetes backend's pure parts: versions, the cron form of a calendar, the probe
//! context, and what the export refuses.

use super::schedule::cron;
use super::*;

#[test]
fn versions_are_checked_against_the_supported_range() {
    assert_eq!(parse_version("1.29").expect("ok"), (1, 29));
    assert_eq!(parse_version("v1.37.2").expect("ok"), (1, 37));
    for bad in ["1.28", "1.38", "2.0", "1", "1.x", "", "1.30.1.2", "1.30.x"] {
        let e = parse_version(bad).expect_err(bad);
        assert_eq!(e.key, "--k8s-version");
        assert!(e.message.contains("1.29–1.37"), "{}", e.message);
    }
}

#[test]
fn calendars_with_a_cron_form_convert_and_others_are_refused() {
    for (cal, want) in [
        ("daily", "0 0 * * *"),
        ("hourly", "0 * * * *"),
        ("weekly", "0 0 * * 1"),
        ("*-*-* 02:00:00", "0 2 * * *"),
        ("Mon..Fri *-*-* 02:30", "30 2 * * 1-5"),
        ("Sat,Sun 9,17:0/15", "0/15 9,17 * * 6,0"),
        ("*-*-* *:*/10", "*/10 * * * *"),
        ("*-*-* 08..18:00", "0 8-18 * * *"),
    ] {
        assert_eq!(cron(cal).expect(cal), want, "{cal}");
    }
    for bad in [
        "2026-01-01 00:00",
        "*-*-* 25:00",
        "*-*-* 02:00:30",
        "quarterly",
        "*-*-* 02:00 UTC",
        "Mon",
    ] {
        let e = cron(bad).expect_err(bad);
        assert_eq!(e.key, "schedule.on_calendar");
    }
}

#[test]
fn the_probe_context_is_a_valid_kubernetes_profile_context() {
    let spec = crate::spec::parse(
        crate::demo::TENANT_YAML,
        &crate::spec::SpecContext {
            file: "demo".into(),
            home: "/home/t".into(),
            runtime_dir: "/run/user/1000".into(),
        },
    )
    .expect("demo spec");
    // As the Pod reads it: the JSON the ConfigMap carries, back into a probe context.
    let json = serde_json::to_string(&agent::probe_context(&spec)).expect("json");
    let ctx: crate::probe::Context = serde_json::from_str(&json).expect("a probe context");
    assert_eq!(ctx.profile, crate::probe::Profile::Kubernetes);
    assert!(
        ctx.proxy_url.is_empty(),
        "filled in the Pod from $HTTP_PROXY"
    );
    assert_eq!(ctx.denied_host, "denied.example");
}

/// The demo tenant's spec, its plan for run `t-1` and the export's options.
fn demo() -> (crate::spec::Spec, crate::render::plan::RunPlan, KubeOptions) {
    let spec = crate::spec::parse(
        crate::demo::TENANT_YAML,
        &crate::spec::SpecContext {
            file: "demo".into(),
            home: "/home/t".into(),
            runtime_dir: "/run/user/1000".into(),
        },
    )
    .expect("demo spec");
    let run = crate::render::RunContext {
        gvisor: None,
        run_id: "t-1".into(),
        worktree: "/home/t/w".into(),
        run_dir: "/run/user/1000/cyclix/runs/t-1".into(),
        subnet_octet: 7,
        proxy_image: crate::images::PROXY_IMAGE.into(),
        cyclix_bin: "/usr/local/bin/cyclix".into(),
        service_ports: vec![],
        placeholders: vec![],
        setup_binds: vec![],
        log_key: crate::render::plan::PREVIEW_LOG_KEY.to_string(),
        credentials_file: false,
        claim_wait_s: None,
    };
    let plan = crate::render::plan::plan(&spec, &run).expect("plan");
    let opts = KubeOptions {
        k8s_version: DEFAULT_K8S.into(),
        runner_image: "r".into(),
        task: "t".into(),
        pod_cidr: "0.0.0.0/0".into(),
        work_size: "4Gi".into(),
        spec_text: String::new(),
    };
    (spec, plan, opts)
}

#[test]
fn version_out_of_range_and_unusable_options_are_refused_before_anything_renders() {
    let (mut spec, plan, opts) = demo();
    // The demo protects its tests: the Kubernetes gate cannot carry that (yet), so it is
    // refused, never dropped.
    let refused = render(&spec, &plan, &opts).expect_err("gate.protected is refused");
    assert_eq!(refused.key, "gate.protected", "{refused:?}");
    spec.gate.protected.clear();
    let ok = render(&spec, &plan, &opts).expect("renders");
    assert!(
        ok.not_enforced
            .iter()
            .any(|n| n.contains("--pod-cidr 0.0.0.0/0"))
    );
    for (field, opts) in [
        (
            "--k8s-version",
            KubeOptions {
                k8s_version: "1.20".into(),
                ..opts.clone()
            },
        ),
        (
            "--pod-cidr",
            KubeOptions {
                pod_cidr: "all; http_access allow all".into(),
                ..opts.clone()
            },
        ),
        (
            "--work-size",
            KubeOptions {
                work_size: "lots".into(),
                ..opts.clone()
            },
        ),
    ] {
        let e = render(&spec, &plan, &opts).expect_err(field);
        assert_eq!(e.key, field);
    }
}

#[test]
fn the_repository_parts_and_the_collector_parts_are_rendered_in_order() {
    let (mut spec, plan, opts) = demo();
    spec.gate.protected.clear();
    let export = render(&spec, &plan, &opts).expect("renders");
    let find = |file: &str| {
        export
            .manifests
            .iter()
            .find(|m| m.file == file)
            .map(|m| m.object.clone())
            .expect(file)
    };
    let names = KubeNames(crate::naming::RunNames::new("t-1"));
    let mut job = find("run/agent-job.yaml");
    let branch = crate::naming::branch(&plan.tenant, "t-1");
    agent::set_repo_parts(&mut job, &names, &branch, &opts, 3).expect("parts");
    let pod = &job["spec"]["template"]["spec"];
    let step = pod["initContainers"]
        .as_array()
        .expect("init")
        .iter()
        .find(|c| c["name"] == "repo")
        .expect("repo step");
    let argv: Vec<&str> = step["command"]
        .as_array()
        .expect("argv")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    // The branch, then the parts in order: the script joins `$@` as given.
    assert_eq!(
        argv[3..],
        [
            "clone",
            branch.as_str(),
            "/cyclix/repo/0/repo.bundle",
            "/cyclix/repo/1/repo.bundle",
            "/cyclix/repo/2/repo.bundle"
        ]
    );
    let maps: Vec<&str> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["configMap"]["name"].as_str())
        .filter(|n| n.contains("-repo"))
        .collect();
    assert_eq!(
        maps,
        ["cyclix-t-1-repo", "cyclix-t-1-repo-1", "cyclix-t-1-repo-2"]
    );
    // Again with one part: no volume of the three is left behind.
    agent::set_repo_parts(&mut job, &names, &branch, &opts, 1).expect("parts");
    let volumes = job["spec"]["template"]["spec"]["volumes"].to_string();
    assert!(
        !volumes.contains("repo-1") && volumes.contains("bundle-join"),
        "{volumes}"
    );
    assert_eq!(agent::repo_parts(0), 1);
    assert_eq!(agent::repo_parts(agent::REPO_PART_MAX), 1);
    assert_eq!(agent::repo_parts(agent::REPO_PART_MAX + 1), 2);
    // The collector of part 2: its own name, the same script and branch, part 2.
    let collect = find("run/collect-job.yaml");
    let part = gate::collect_part_job(&collect, &names, 2).expect("part");
    assert_eq!(part["metadata"]["name"], "cyclix-t-1-collect-2");
    let c = part["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .expect("argv");
    let c0 = collect["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array()
        .expect("argv");
    assert_eq!(c[5], "2");
    assert_eq!(c0[5], "0");
    assert_eq!((&c[..5], &c[6]), (&c0[..5], &c0[6]));
    assert_eq!(c[6], gate::COLLECT_PART.to_string());
    // Not a collector: refused.
    assert!(gate::collect_part_job(&find("run/gate-job.yaml"), &names, 1).is_err());
    assert!(
        agent::set_repo_parts(&mut find("run/gate-job.yaml"), &names, &branch, &opts, 2).is_err()
    );
}

#[test]
fn tier_gvisor_has_no_kubernetes_form_and_the_refusal_names_the_runtime_class_way() {
    let (mut spec, mut plan, opts) = demo();
    spec.gate.protected.clear();
    plan.tier = crate::tier::Tier::Gvisor;
    let refused = render(&spec, &plan, &opts).expect_err("gvisor is refused");
    assert_eq!(refused.key, "tier");
    assert!(
        refused.message.contains("agent.runtime_class: gvisor"),
        "{refused}"
    );
    // Control: the same spec in tier container renders.
    plan.tier = crate::tier::Tier::Container;
    assert!(render(&spec, &plan, &opts).is_ok());
}
