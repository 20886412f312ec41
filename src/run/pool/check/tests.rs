use super::*;

const ENV: &str = "20261202t070000-e001";

fn container(name: &str, networks: &[&str], pod: Option<&str>, is_infra: bool) -> ContainerInfo {
    ContainerInfo {
        id: format!("id-{name}"),
        names: vec![name.to_string()],
        state: "running".into(),
        labels: crate::podman::Labels::default(),
        pod: pod.map(str::to_string),
        is_infra,
        networks: networks.iter().map(|n| (*n).to_string()).collect(),
        namespaces: Vec::new(),
        pid: None,
    }
}

/// What the fill leaves: the proxy on both networks, the infra on the internal one and in
/// the pod, and another run's objects beside them.
fn as_filled(n: &RunNames) -> Vec<ContainerInfo> {
    let (base, egress) = (n.base(), n.egress());
    vec![
        container(&n.proxy(), &[&base, &egress], None, false),
        container(&n.infra(), &[&base], Some("pod1"), true),
        container("cyclix-other-proxy", &["cyclix-other"], None, false),
        container("cyclix-other-agent", &[], Some("pod2"), false),
    ]
}

#[test]
fn the_environment_as_filled_passes_the_topology_check() {
    let n = RunNames::new(ENV);
    assert_eq!(
        topology_wrong(&n, &[], &as_filled(&n)),
        Vec::<String>::new()
    );
}

#[test]
fn a_stranger_on_either_network_or_in_the_pod_is_wrong() {
    let n = RunNames::new(ENV);
    let (base, egress) = (n.base(), n.egress());
    for (stranger, what) in [
        (container("intruder", &[&base], None, false), base.clone()),
        (
            container("intruder", &[&egress], None, false),
            egress.clone(),
        ),
        (
            container("lodger", &[], Some("pod1"), false),
            format!("pod {base} has the containers"),
        ),
    ] {
        let mut all = as_filled(&n);
        all.push(stranger);
        let wrong = topology_wrong(&n, &[], &all);
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(wrong[0].contains(&what), "{wrong:?}");
        assert!(
            wrong[0].contains("intruder") || wrong[0].contains("lodger"),
            "{wrong:?}"
        );
    }
}

#[test]
fn a_missing_proxy_or_infra_is_wrong() {
    let n = RunNames::new(ENV);
    let mut all = as_filled(&n);
    all.retain(|c| c.names[0] != n.infra());
    let wrong = topology_wrong(&n, &[], &all);
    assert!(
        wrong.iter().any(|w| w.contains("has no infra container")),
        "{wrong:?}"
    );
    let mut all = as_filled(&n);
    all.retain(|c| c.names[0] != n.proxy());
    assert_eq!(topology_wrong(&n, &[], &all).len(), 2);
}

#[allow(clippy::unnecessary_wraps)] // what a `podman top` look returns
fn procs(list: &[(u32, &str)]) -> anyhow::Result<Vec<(u32, String)>> {
    Ok(list.iter().map(|(p, c)| (*p, (*c).to_string())).collect())
}

#[test]
fn the_proxy_and_the_infra_as_filled_pass_and_a_stray_process_is_wrong() {
    let proxy = [
        (10, "catatonit"),
        (11, "squid"),
        (12, "cyclix-sni-eq"),
        (13, "security_file_c"),
    ];
    assert_eq!(
        processes_wrong("the proxy", procs(&proxy), PROXY_PROCESSES, None),
        None
    );
    assert_eq!(
        processes_wrong(
            "infra",
            procs(&[(20, "catatonit")]),
            INFRA_PROCESSES,
            Some(1)
        ),
        None
    );
    // A process left by a `podman exec` in either.
    let mut stray = proxy.to_vec();
    stray.push((13, "sleep"));
    let w = processes_wrong("the proxy", procs(&stray), PROXY_PROCESSES, None);
    assert!(
        w.as_deref().is_some_and(|w| w.contains("sleep (pid 13)")),
        "{w:?}"
    );
    let w = processes_wrong(
        "infra",
        procs(&[(20, "catatonit"), (21, "sh")]),
        INFRA_PROCESSES,
        Some(1),
    );
    assert!(
        w.as_deref().is_some_and(|w| w.contains("sh (pid 21)")),
        "{w:?}"
    );
    // A second catatonit in the infra container (an exec of its only binary) is one too many.
    let w = processes_wrong(
        "infra",
        procs(&[(20, "catatonit"), (22, "catatonit")]),
        INFRA_PROCESSES,
        Some(1),
    );
    assert!(
        w.as_deref().is_some_and(|w| w.contains("runs 2 processes")),
        "{w:?}"
    );
}

#[test]
fn a_container_not_running_or_not_listed_is_wrong() {
    let w = processes_wrong("the proxy", procs(&[]), PROXY_PROCESSES, None);
    assert!(
        w.as_deref().is_some_and(|w| w.contains("runs nothing")),
        "{w:?}"
    );
    let w = processes_wrong(
        "the proxy",
        Err(anyhow::anyhow!("no such container")),
        PROXY_PROCESSES,
        None,
    );
    assert!(
        w.as_deref()
            .is_some_and(|w| w.contains("cannot be listed: no such container")),
        "{w:?}"
    );
}

#[test]
fn pooled_services_belong_in_the_pod_and_must_be_running() {
    let n = RunNames::new(ENV);
    let db = n.service("db");
    let mut all = as_filled(&n);
    all.push(container(&db, &[], Some("pod1"), false));
    assert_eq!(topology_wrong(&n, &[&db], &all), Vec::<String>::new());
    // Positive control: the same pod without the service in the fill's list is wrong.
    assert_eq!(topology_wrong(&n, &[], &all).len(), 1);
    // Gone from the pod, or stopped.
    let mut gone = as_filled(&n);
    gone.retain(|c| c.names[0] != db);
    let w = topology_wrong(&n, &[&db], &gone);
    assert!(w.len() == 1 && w[0].contains("has the containers"), "{w:?}");
    if let Some(c) = all.iter_mut().find(|c| c.names[0] == db) {
        c.state = "exited".into();
    }
    let w = topology_wrong(&n, &[&db], &all);
    assert!(w.len() == 1 && w[0].contains("are not running"), "{w:?}");
}

#[test]
fn a_pooled_service_may_run_what_it_ran_at_the_fill_and_a_passing_health_check() {
    let p = crate::run::pool::PooledService {
        container: "cyclix-e-svc-db".into(),
        processes: vec!["catatonit".into(), "postgres".into()],
        executables: None,
    };
    let fill = [(1, "catatonit"), (2, "postgres"), (3, "postgres")];
    let never = || -> anyhow::Result<Vec<(u32, String)>> { panic!("no second look") };
    let no_exe = |_| -> std::io::Result<String> { panic!("no executables recorded") };
    assert_eq!(
        service_processes_wrong(&p, procs(&fill), never, no_exe),
        None
    );
    // A health check's command in the first look, gone in the second.
    let with_check = [(1, "catatonit"), (2, "postgres"), (9, "pg_isready")];
    assert_eq!(
        service_processes_wrong(&p, procs(&with_check), || procs(&fill), no_exe),
        None
    );
    // A process left there is in both looks.
    let left = [(1, "catatonit"), (2, "postgres"), (9, "sleep")];
    let w = service_processes_wrong(&p, procs(&left), || procs(&left), no_exe).expect("left");
    assert!(
        w.contains("sleep (pid 9)") && w.contains("cyclix-e-svc-db"),
        "{w}"
    );
    // Nothing running, or no listing, fails at once.
    assert!(
        service_processes_wrong(&p, procs(&[]), never, no_exe)
            .is_some_and(|w| w.contains("runs nothing"))
    );
    assert!(
        service_processes_wrong(&p, Err(anyhow::anyhow!("gone")), never, no_exe)
            .is_some_and(|w| w.contains("cannot be listed"))
    );
}

/// A copy of another program named like the service's (`cp /bin/sleep /tmp/postgres`): its name
/// the fill saw there, its executable not; one that cannot be looked at is refused too.
#[test]
fn a_pooled_service_may_not_run_another_executable_under_a_name_it_ran() {
    let p = crate::run::pool::PooledService {
        container: "cyclix-e-svc-db".into(),
        processes: vec!["catatonit".into(), "postgres".into()],
        executables: Some(vec!["62:7".into(), "136:1980".into()]),
    };
    let exe = |pid: u32| -> std::io::Result<String> {
        match pid {
            1 => Ok("62:7".into()),
            2 | 3 => Ok("136:1980".into()),
            9 => Ok("88:42".into()),
            _ => Err(std::io::Error::from_raw_os_error(libc::EACCES)),
        }
    };
    let never = || -> anyhow::Result<Vec<(u32, String)>> { panic!("no second look") };
    let fill = [(1, "catatonit"), (2, "postgres"), (3, "postgres")];
    assert_eq!(service_processes_wrong(&p, procs(&fill), never, exe), None);
    let left = [(1, "catatonit"), (2, "postgres"), (9, "postgres")];
    let w = service_processes_wrong(&p, procs(&left), || procs(&left), exe).expect("left");
    assert!(
        w.contains("postgres (pid 9, executable 88:42)")
            && w.contains("not an executable the fill saw"),
        "{w}"
    );
    let hidden = [(1, "catatonit"), (2, "postgres"), (5, "postgres")];
    let w = service_processes_wrong(&p, procs(&hidden), || procs(&hidden), exe).expect("hidden");
    assert!(w.contains("pid 5, executable unreadable"), "{w}");
    // Gone by the second look (a backend that ended): nothing wrong.
    assert_eq!(
        service_processes_wrong(&p, procs(&left), || procs(&fill), exe),
        None
    );
}

#[test]
fn a_container_that_joined_a_namespace_of_the_environment_is_wrong() {
    let n = RunNames::new(ENV);
    let ns = |c: &mut ContainerInfo, list: &[(&str, &str)]| {
        c.namespaces = list
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
    };
    let mut all = as_filled(&n);
    ns(
        &mut all[0],
        &[("Ipc", "11"), ("Net", "12"), ("Pidns", "13"), ("Uts", "14")],
    );
    ns(
        &mut all[1],
        &[("Ipc", "21"), ("Net", "22"), ("Pidns", "23"), ("Uts", "24")],
    );
    ns(
        &mut all[2],
        &[("Ipc", "31"), ("Net", "32"), ("Pidns", "33"), ("Uts", "34")],
    );
    // A pooled service shares the infra's network, IPC and UTS namespaces: the pod's way.
    let db = n.service("db");
    let mut svc = container(&db, &[], Some("pod1"), false);
    ns(
        &mut svc,
        &[("Ipc", "21"), ("Net", "22"), ("Pidns", "43"), ("Uts", "24")],
    );
    all.push(svc);
    assert_eq!(topology_wrong(&n, &[&db], &all), Vec::<String>::new());
    // Joined to the proxy's network, or to the pooled service's processes: on no network and
    // in no pod, only the shared inode shows it.
    for (kind, inode, of) in [("Net", "12", n.proxy()), ("Pidns", "43", db.clone())] {
        let mut spy = container("spy", &[], None, false);
        ns(&mut spy, &[(kind, inode)]);
        let mut with = all.clone();
        with.push(spy);
        let w = topology_wrong(&n, &[&db], &with);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("container spy shares the") && w[0].contains(kind) && w[0].contains(&of),
            "{w:?}"
        );
    }
}

fn ns(pid: u32, pidns: &str, net: &str) -> crate::run::procs::Namespaces {
    crate::run::procs::Namespaces {
        pid,
        pid_ns: format!("pid:[{pidns}]"),
        net_ns: Some(format!("net:[{net}]")),
    }
}

#[test]
fn a_process_that_stays_in_the_proxys_network_namespace_from_outside_is_wrong() {
    let n = RunNames::new(ENV);
    let mut listing = as_filled(&n);
    listing[0].namespaces = vec![("Net".into(), "70".into()), ("Pidns".into(), "7".into())];
    listing[1].namespaces = vec![("Net".into(), "80".into()), ("Pidns".into(), "8".into())];
    let held = net_namespaces(&listing, &[&n.proxy(), &n.infra(), "cyclix-gone"]);
    assert_eq!(
        held,
        vec![(n.proxy(), "70".to_string()), (n.infra(), "80".to_string())],
        "a container not listed holds none"
    );
    let members: std::collections::BTreeSet<u32> = [10, 11, 20].into_iter().collect();
    let first = [
        ns(10, "7", "70"),
        ns(11, "7", "70"),
        ns(20, "8", "80"),
        ns(30, "1", "70"), // nsenter -U -n into the proxy's, from a unit of its own
        ns(31, "1", "80"), // a health check's `crun exec`, gone at the second look
        ns(32, "1", "1"),
    ];
    let again = || {
        let scan = vec![ns(10, "7", "70"), ns(20, "8", "80"), ns(30, "1", "70")];
        (Ok(scan), [10, 20].into_iter().collect())
    };
    // Another spy in the proxy's namespace at the second look (re-entered under a new pid):
    // wrong all the same; a stranger only in the pod's at the second look was not there first.
    let renewed = || {
        let scan = vec![ns(10, "7", "70"), ns(40, "1", "70"), ns(41, "1", "90")];
        (Ok(scan), [10, 20].into_iter().collect())
    };
    let held3 = [
        held.clone(),
        vec![("cyclix-x".to_string(), "90".to_string())],
    ]
    .concat();
    let wrong = net_strangers_wrong(&held3, &first, &members, renewed, |p| format!("comm{p}"));
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(wrong[0].starts_with("comm40 (pid 40)"), "{wrong:?}");
    let wrong = net_strangers_wrong(&held, &first, &members, again, |p| format!("comm{p}"));
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].starts_with(&format!(
            "comm30 (pid 30) is in the network namespace of {}",
            n.proxy()
        )),
        "{wrong:?}"
    );
    // Nothing outside: no second look at all.
    let clean = [ns(10, "7", "70"), ns(20, "8", "80"), ns(32, "1", "1")];
    let none = net_strangers_wrong(
        &held,
        &clean,
        &members,
        || panic!("no second look when the first found nobody"),
        |_| String::new(),
    );
    assert!(none.is_empty(), "{none:?}");
    // A second look that cannot be made: wrong (fail closed).
    let failed = net_strangers_wrong(
        &held,
        &first,
        &members,
        || {
            (
                Err(std::io::Error::other("gone")),
                std::collections::BTreeSet::new(),
            )
        },
        |_| String::new(),
    );
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("cannot be looked at again"),
        "{failed:?}"
    );
}
