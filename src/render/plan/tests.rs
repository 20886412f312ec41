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
