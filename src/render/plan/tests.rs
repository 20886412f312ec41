//! The plan's unit tests.
use super::*;
use crate::spec::SpecContext;

fn spec(services: &str) -> Spec {
    let yaml = format!(
        "tenant: shop\nrepo: {{path: /home/u/shop, base: main}}\ntask: {{text: x}}\n\
         agent: {{image: localhost/a, unpinned_local_image: true, command: [agent]}}\n\
         gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n{services}"
    );
    let ctx = SpecContext {
        file: "t.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    crate::spec::parse(&yaml, &ctx).expect("spec")
}

fn run(spec: &Spec, ports: Vec<u16>) -> RunContext {
    RunContext {
        gvisor: None,
        run_id: "20261130t140126-a979".into(),
        worktree: "/w".into(),
        run_dir: "/run/user/1000/cyclix/runs/r".into(),
        subnet_octet: 9,
        proxy_image: "localhost/p".into(),
        cyclix_bin: "/usr/bin/cyclix".into(),
        placeholders: crate::render::plan::preview_placeholders(spec),
        setup_binds: Vec::new(),
        log_key: crate::render::plan::PREVIEW_LOG_KEY.to_string(),
        credentials_file: false,
        claim_wait_s: None,
        service_ports: if ports.is_empty() {
            preview_ports(spec)
        } else {
            ports
        },
    }
}

#[test]
fn preview_ports_keep_fixed_ones_and_never_hand_out_a_fixed_one_twice() {
    let s = spec(
        "services:\n  - {name: a, image: localhost/x, unpinned_local_image: true}\n  - {name: b, image: localhost/x, unpinned_local_image: true, port: 20001}\n  - {name: c, image: localhost/x, unpinned_local_image: true}\n",
    );
    assert_eq!(preview_ports(&s), [20_000, 20_001, 20_002]);
}

#[test]
fn a_service_gets_its_volume_health_env_and_a_place_in_the_context_file() {
    let s = spec(
        "services:\n  - {name: my-db, image: localhost/pg, unpinned_local_image: true, data: /var/lib/pg, health: {command: [pg_isready], retries: 2, interval: 1s, timeout: 1s}}\n",
    );
    let p = plan(&s, &run(&s, vec![23_456])).expect("plan");
    let db = "cyclix_shop_20261130t140126_a979";
    let stem = "cyclix-20261130t140126-a979-svc-my-db";
    assert_eq!(
        p.volumes,
        [VolumePlan {
            stem: format!("{stem}-data")
        }]
    );
    let svc = p
        .containers
        .iter()
        .find(|c| c.stem == stem)
        .expect("service");
    assert_eq!(
        svc.volumes,
        [VolumeMount {
            volume: 0,
            target: "/var/lib/pg".into()
        }]
    );
    assert_eq!(svc.start_timeout_s, START_TIMEOUT_LOCAL_S + 4);
    let env = |c: &ContainerPlan, k: &str| {
        c.env
            .iter()
            .find(|(n, _)| n == k)
            .map_or_else(|| panic!("{k} not set"), |(_, v)| v.clone())
    };
    for (k, v) in [
        ("CYCLIX_PORT", "23456"),
        ("PGPORT", "23456"),
        ("CYCLIX_DATABASE", db),
        ("PGDATABASE", db),
        ("POSTGRES_DB", db),
        ("PGDATA", "/var/lib/pg"),
        ("CYCLIX_DATA", "/var/lib/pg"),
    ] {
        assert_eq!(env(svc, k), v, "{k}");
    }
    let agent = p
        .containers
        .iter()
        .find(|c| c.stem.ends_with("-agent"))
        .expect("agent");
    assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB"), "127.0.0.1:23456");
    assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB_PORT"), "23456");
    assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB_DATABASE"), db);
    assert_eq!(env(agent, "CYCLIX_CONTEXT"), CONTEXT_PATH);
    assert!(
        agent
            .binds
            .iter()
            .any(|b| b.target == CONTEXT_PATH && b.read_only)
    );
    // The volume's unit is stopped with the run, after the pod and before the networks.
    let all = &p.units.all;
    let pos = |u: &str| {
        all.iter()
            .position(|x| x == u)
            .unwrap_or_else(|| panic!("{u}"))
    };
    let vol = format!("{stem}-data-volume.service");
    assert!(pos("cyclix-20261130t140126-a979-pod.service") < pos(&vol));
    assert!(pos(&vol) < pos("cyclix-20261130t140126-a979-network.service"));
    let ctx: serde_json::Value = serde_json::from_str(&context_json(&p)).expect("json");
    assert_eq!(
        ctx["services"][0],
        serde_json::json!({"name": "my-db", "host": "127.0.0.1", "port": 23456,
            "address": "127.0.0.1:23456", "database": db, "env": "CYCLIX_SERVICE_MY_DB"})
    );
    assert_eq!(ctx["task"], TASK_PATH);
    // The ports must match the services.
    let e = plan(&s, &run(&s, vec![1, 2])).expect_err("two ports for one service");
    assert_eq!(e.key, "run.service_ports");
}

#[test]
fn host_tiers_get_a_context_file_with_host_paths_and_no_services() {
    let mut s = spec("tier: worktree\n");
    s.tier = Tier::Worktree;
    let p = plan(&s, &run(&s, Vec::new())).expect("plan");
    let ctx: serde_json::Value = serde_json::from_str(&context_json(&p)).expect("json");
    assert_eq!(ctx["task"], "/run/user/1000/cyclix/runs/r/task.md");
    assert_eq!(ctx["workdir"], "/w");
    assert_eq!(ctx["services"], serde_json::json!([]));
    assert_eq!(ctx["proxy"], serde_json::Value::Null);
}

#[test]
fn a_worktree_service_runs_the_work_tree_read_only_and_the_others_see_none() {
    let s = spec(
        "services:\n  - {name: app, image: localhost/x, unpinned_local_image: true, worktree: read_only, command: [python3, -m, http.server]}\n  - {name: db, image: localhost/pg, unpinned_local_image: true}\n",
    );
    let p = plan(&s, &run(&s, vec![20_000, 20_001])).expect("plan");
    let svc = |name: &str| {
        p.containers
            .iter()
            .find(|c| c.stem.ends_with(&format!("-svc-{name}")))
            .expect("service")
    };
    assert_eq!(
        svc("app").binds,
        [Bind {
            source: "/w".into(),
            target: WORKDIR.into(),
            read_only: true
        }]
    );
    assert_eq!(svc("app").workdir.as_deref(), Some(WORKDIR));
    assert!(svc("db").binds.is_empty(), "{:?}", svc("db").binds);
    assert_eq!(svc("db").workdir, None);
    let ctx: serde_json::Value = serde_json::from_str(&context_json(&p)).expect("json");
    assert_eq!(ctx["services"][0]["worktree"], WORKDIR);
    assert_eq!(ctx["services"][1].get("worktree"), None);
}

#[test]
fn tier_gvisor_puts_runsc_on_the_agent_and_the_gates_only_and_never_renders_without_it() {
    let mut s = spec(
        "tier: gvisor\nservices:\n  - {name: db, image: localhost/x, unpinned_local_image: true}\n",
    );
    s.gate.protected = vec!["tests/".into()];
    let runsc = crate::tier::runsc::OciRuntime {
        path: "/usr/bin/runsc".into(),
        version: "0.0~20240729.0".into(),
        flags: vec!["network=host".into(), "host-fifo=open".into()],
    };
    let mut r = run(&s, Vec::new());
    // Fail closed: a tier-gvisor plan without runsc is refused, never run on the default runtime.
    let err = plan(&s, &r).expect_err("no runsc");
    assert_eq!(err.key, "run.gvisor");
    r.gvisor = Some(runsc.clone());
    let p = plan(&s, &r).expect("plan");
    let on_runsc: Vec<(&str, bool)> = p
        .containers
        .iter()
        .map(|c| {
            (
                c.stem.rsplit('-').next().unwrap_or(""),
                c.oci_runtime.is_some(),
            )
        })
        .collect();
    assert_eq!(
        on_runsc,
        [
            ("proxy", false),
            ("db", false),
            ("agent", true),
            ("gate", true),
            ("base", true)
        ]
    );
    // The report FIFO has its own writable directory there; the control directory stays
    // read-only.
    let agent = p
        .containers
        .iter()
        .find(|c| c.stem.ends_with("-agent"))
        .expect("agent");
    assert!(
        agent
            .binds
            .iter()
            .any(|b| b.target == REPORT_DIR_PATH && !b.read_only)
    );
    assert!(
        agent
            .binds
            .iter()
            .any(|b| b.target == CTL_PATH && b.read_only)
    );
    assert!(
        agent
            .exec
            .contains(&format!("{REPORT_DIR_PATH}/{REPORT_FILE}"))
    );
    // Both backends carry it: Quadlet's PodmanArgs, the plain unit's `podman run`.
    for backend in [
        crate::render::Backend::Quadlet,
        crate::render::Backend::Plain,
    ] {
        let files = crate::render::render_plan(&s, &p, backend).expect("render");
        let agent_file = files
            .files
            .iter()
            .find(|f| f.name.contains("-agent."))
            .expect("agent file");
        assert!(
            agent_file.contents.contains("--runtime=/usr/bin/runsc")
                && agent_file.contents.contains("--runtime-flag=network=host"),
            "{backend:?}: {}",
            agent_file.contents
        );
        let proxy_file = files
            .files
            .iter()
            .find(|f| f.name.contains("-proxy."))
            .expect("proxy file");
        assert!(
            !proxy_file.contents.contains("--runtime"),
            "{}",
            proxy_file.contents
        );
    }
    // Tier container: nothing of runsc, even when a runtime is at hand.
    s.tier = crate::tier::Tier::Container;
    let p = plan(&s, &r).expect("plan");
    assert!(p.containers.iter().all(|c| c.oci_runtime.is_none()));
}
