//! Plain backend: `.service` units that run the same podman commands Quadlet would generate,
//! for hosts without Quadlet (podman < 5.0, e.g. Debian 12's 4.3). Same topology, same
//! hardening, same labels; the network units also remove their network when stopped (what
//! `NetworkDeleteOnStop=` does on podman ≥ 5.5, field report B12). The host tiers' units are
//! `host_units`'s. Pure.

use super::common::{
    HEADER, cpus_arg, health_cmd_json, label_flags, network_role, runtime_unit as file, v,
};
use super::escape::exec_word;
use super::ini::UnitFile;
use super::plan::{
    ContainerPlan, Net, NetworkPlan, RunPlan, STOP_TIMEOUT_S, UNIT_STOP_TIMEOUT_S, VolumeMount,
    VolumePlan,
};
use super::{RenderError, RenderedFile};
use crate::naming::{self, RunNames};
use crate::tier::runsc::OciRuntime;

const PODMAN: &str = "/usr/bin/podman";

fn cmd(podman: &str, args: &[String]) -> String {
    let mut line = exec_word(podman);
    for a in args {
        line.push(' ');
        line.push_str(&exec_word(a));
    }
    line
}

/// Renders the plan's topology (networks, pod, volumes, containers) as plain systemd units.
///
/// # Errors
/// [`RenderError`] when a value cannot be carried in a unit file.
pub fn render(plan: &RunPlan) -> Result<Vec<RenderedFile>, RenderError> {
    let mut files = Vec::new();
    for n in &plan.networks {
        files.push(network_unit(plan, n)?);
    }
    if let (Some(pod), Some(internal)) = (&plan.pod, plan.networks.first()) {
        files.push(pod_unit(plan, pod, internal));
    }
    for vol in &plan.volumes {
        files.push(volume_unit(plan, vol)?);
    }
    for c in &plan.containers {
        files.push(container(plan, c)?);
    }
    Ok(files)
}

/// A oneshot that creates the labelled volume and removes it when stopped (what the network
/// units do for networks).
fn volume_unit(plan: &RunPlan, vol: &VolumePlan) -> Result<RenderedFile, RenderError> {
    let mut args = label_flags(plan, "volume");
    args.push(vol.stem.clone());
    object_unit(
        plan,
        "volume",
        &vol.stem,
        args,
        naming::volume_unit(&vol.stem),
    )
}

/// A oneshot that runs `podman KIND create ARGS…` and `podman KIND rm --force NAME`
/// when stopped, for the run's networks and volumes (the plain backend's stand-in for
/// Quadlet's `-network`/`-volume` services).
fn object_unit(
    plan: &RunPlan,
    kind: &str,
    name: &str,
    create_args: Vec<String>,
    unit_name: String,
) -> Result<RenderedFile, RenderError> {
    let podman_s = PODMAN.to_string();
    let mut u = UnitFile::new(HEADER);
    u.section("Unit")
        .add(
            "Description",
            v("run", &format!("cyclix run {} {kind} {name}", plan.run_id))?,
        )
        .add("RequiresMountsFor", "%t/containers");
    // No `--ignore`: podman 4.3 (Debian 12) has it on neither `network create` nor `volume
    // create` ("Error: unknown flag: --ignore", seen on the bookworm testbed). The name is
    // the run's own, so one that exists already is a leftover and the start fails closed.
    let mut args = vec![kind.to_string(), "create".into()];
    args.extend(create_args);
    u.section("Service")
        .add("Type", "oneshot")
        .add("RemainAfterExit", "yes")
        .add("ExecStart", cmd(&podman_s, &args))
        .add(
            "ExecStop",
            cmd(
                &podman_s,
                &[
                    kind.to_string(),
                    "rm".into(),
                    "--force".into(),
                    name.to_string(),
                ],
            ),
        )
        .add(
            "TimeoutStartSec",
            super::plan::START_TIMEOUT_LOCAL_S.to_string(),
        )
        .add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string())
        .add("SyslogIdentifier", "%N")
        .add("Restart", "no");
    Ok(file(unit_name, &u))
}

/// The readiness wait of a container with a health check: podman < 5 has no
/// `--sdnotify=healthy`, so the unit's `ExecStartPost=` runs the check (`podman healthcheck
/// run`) after the start period, every interval, at most `retries` times; the start job
/// completes only once it passed, and fails (stopping the container) when it never does.
fn health_wait(name: &str, h: &crate::spec::Health) -> String {
    const SCRIPT: &str = "sleep \"$4\"; i=0; until /usr/bin/podman healthcheck run \"$1\" >/dev/null; do i=$((i+1)); if [ \"$i\" -ge \"$2\" ]; then echo \"cyclix: the health check of $1 failed $2 times\" >&2; exit 1; fi; sleep \"$3\"; done";
    let args = [
        "-c".to_string(),
        SCRIPT.to_string(),
        "health-wait".into(),
        name.to_string(),
        h.retries.to_string(),
        h.interval_s.to_string(),
        h.start_period_s.to_string(),
    ];
    cmd("/bin/sh", &args)
}

fn container(plan: &RunPlan, c: &ContainerPlan) -> Result<RenderedFile, RenderError> {
    let (deps, args) = run_args(plan, c);
    let cid = "--cidfile=%t/%N.cid";
    let mut u = UnitFile::new(HEADER);
    let mut unit = u.section("Unit");
    unit.add("Description", v("run", &c.description)?);
    for d in &deps {
        unit.add("BindsTo", d.clone());
        unit.add("After", d.clone());
    }
    unit.add("RequiresMountsFor", "%t/containers");
    // `args` starts with `run`; the cid file (a specifier of ours, written raw) follows it.
    let run_line = format!(
        "{} \"run\" {cid} {}",
        exec_word(PODMAN),
        args.iter()
            .skip(1)
            .map(|a| exec_word(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let rm = format!("{PODMAN} rm -v -f -i {cid}");
    let mut s = u.section("Service");
    s.add("Type", "notify")
        .add("NotifyAccess", "all")
        .add("Environment", "PODMAN_SYSTEMD_UNIT=%n")
        .add("KillMode", "mixed")
        .add("Delegate", "yes")
        .add("ExecStart", run_line)
        .add("ExecStop", rm.clone())
        .add("ExecStopPost", format!("-{rm}"))
        .add("SyslogIdentifier", "%N")
        .add("TimeoutStartSec", c.start_timeout_s.to_string())
        .add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string());
    if c.log_file.is_some() {
        // The agent's and the gate's output goes to their log file, which cyclix reads,
        // redacts and forwards (issue 19 item 7); the attached `podman run` would relay the
        // same output raw to the journal, so its streams go nowhere. (systemd.exec(5)
        // `StandardOutput=null`.)
        s.add("StandardOutput", "null").add("StandardError", "null");
    }
    if let Some(h) = &c.health {
        s.add("ExecStartPost", health_wait(&c.stem, h));
    }
    if let Some(max) = c.runtime_max_s {
        s.add("RuntimeMaxSec", max.to_string());
    }
    s.add("Restart", "no");
    Ok(file(naming::container_unit(&c.stem), &u))
}

fn network_unit(plan: &RunPlan, n: &NetworkPlan) -> Result<RenderedFile, RenderError> {
    let mut args = Vec::new();
    if n.internal {
        args.push("--internal".into());
        // No aardvark-dns on the internal network: aardvark-dns 1.4 (podman 4.3, Debian 12)
        // forwards a name it does not know to the host's resolvers even from an `--internal`
        // network (measured on the bookworm testbed, issue 18): a DNS channel out. The run's
        // one name there, the proxy's, comes from the pod's `/etc/hosts` (`--add-host`), and
        // the agent reaches the proxy by its address anyway (`HTTP_PROXY`). `--disable-dns`:
        // podman-network-create(1) "Disables the DNS plugin for this network".
        args.push("--disable-dns".into());
    }
    if let Some(s) = &n.subnet {
        args.push(format!("--subnet={s}"));
    }
    if let Some(r) = &n.ip_range {
        args.push(format!("--ip-range={r}"));
    }
    // With `--disable-dns` netavark 1.4 puts no gateway address on an internal bridge unless
    // one is given (measured: connects to `.1` then hang on ARP, N6 times out).
    if let Some(g) = n.gateway.as_ref().filter(|_| n.internal) {
        args.push(format!("--gateway={g}"));
    }
    args.extend(label_flags(plan, network_role(n.internal)));
    args.push(n.name.clone());
    object_unit(
        plan,
        "network",
        &n.name,
        args,
        naming::network_unit(&n.stem),
    )
}

fn pod_unit(plan: &RunPlan, pod: &str, internal: &NetworkPlan) -> RenderedFile {
    let net_unit = naming::network_unit(&internal.stem);
    let mut u = UnitFile::new(HEADER);
    u.section("Unit")
        .add("Description", format!("cyclix run {} pod", plan.run_id))
        .add("Wants", net_unit.clone())
        .add("After", net_unit)
        .add("RequiresMountsFor", "%t/containers");
    let infra = RunNames::new(&plan.run_id).infra();
    let mut create = vec![
        "pod".to_string(),
        "create".into(),
        "--pod-id-file=%t/%N.pod-id".into(),
        "--exit-policy=stop".into(),
        "--replace".into(),
        format!("--network={}:ip={}", internal.name, plan.pod_ip),
        "--dns-option=timeout:1".into(),
        "--dns-option=attempts:1".into(),
        // The internal network has no DNS (`--disable-dns`, see `network_unit`): the proxy's
        // name for N7 and the agent, in every pod container's `/etc/hosts`
        // (podman-pod-create(1) `--add-host=host:ip`).
        format!(
            "--add-host={}:{}",
            RunNames::new(&plan.run_id).proxy(),
            plan.proxy_ip
        ),
        format!("--infra-name={infra}"),
    ];
    if let Some(userns) = &plan.pod_userns {
        create.push(format!("--userns={userns}"));
    }
    create.extend(label_flags(plan, "pod"));
    create.push(pod.to_string());
    // `%t`/`%N` are cyclix's own specifiers: written raw, never from user data.
    let raw = |args: &[&str]| {
        std::iter::once(PODMAN)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let create_line = std::iter::once(exec_word(PODMAN))
        .chain(create.iter().map(|a| {
            if a.contains("%t/%N") {
                a.clone()
            } else {
                exec_word(a)
            }
        }))
        .collect::<Vec<_>>()
        .join(" ");
    // Not Quadlet's `Type=forking` + `PIDFile=` (the infra conmon's pid): the infra conmon
    // lives outside the unit's cgroup (in the pod's, or the scope podman 4.3 may move itself
    // to: see `run_args`), and systemd 252 (Debian 12) refuses a main PID outside
    // the unit's cgroup from a PID file not owned by root ("New main PID … does not belong to
    // service, and PID file is not owned by root. Refusing.", seen on the bookworm testbed).
    // The main process is `podman wait` on the infra container instead: the unit stays
    // active exactly while the infra container runs, so the units bound to it stop with it.
    u.section("Service")
        .add("Type", "exec")
        .add("ExecStartPre", create_line)
        .add(
            "ExecStartPre",
            raw(&["pod", "start", "--pod-id-file=%t/%N.pod-id"]),
        )
        .add("ExecStart", cmd(PODMAN, &["wait".to_string(), infra]))
        .add(
            "ExecStop",
            raw(&[
                "pod",
                "stop",
                "--pod-id-file=%t/%N.pod-id",
                "--ignore",
                &format!("--time={STOP_TIMEOUT_S}"),
            ]),
        )
        .add(
            "ExecStopPost",
            raw(&[
                "pod",
                "rm",
                "--pod-id-file=%t/%N.pod-id",
                "--ignore",
                "--force",
            ]),
        )
        .add(
            "TimeoutStartSec",
            super::plan::START_TIMEOUT_LOCAL_S.to_string(),
        )
        .add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string())
        .add("Environment", "PODMAN_SYSTEMD_UNIT=%n")
        .add("SyslogIdentifier", "%N")
        // A pod that died stays dead: a new one is a network namespace the probes never saw
        // (issue 20, item 1).
        .add("Restart", "no");
    file(naming::pod_unit(pod), &u)
}

/// The `podman run` arguments for `c` (after `podman`), and the units it binds to.
/// The `podman run` of container `c` in the foreground, for a caller that runs it directly
/// instead of through a unit (`cyclix twin`'s reference gate): `(flags, image, argv)` for
/// `podman run --rm FLAGS -- IMAGE ARGV`. The same name, networking, hardening, mounts,
/// environment and labels as the unit's, without the unit's readiness (`--sdnotify`) and
/// cgroup (`--cgroups=split`) flags.
#[must_use]
pub fn foreground_args(plan: &RunPlan, c: &ContainerPlan) -> (Vec<String>, String, Vec<String>) {
    let (_, args) = run_args(plan, c);
    let rest = c.entrypoint_and_args().1.to_vec();
    let tail = 1 + rest.len(); // image + argv after the entrypoint
    let flags = args[..args.len() - tail]
        .iter()
        .filter(|a| {
            !matches!(
                a.as_str(),
                "run" | "--rm" | "--sdnotify=conmon" | "--cgroups=split" | "--log-driver=none"
            )
        })
        .cloned()
        .collect();
    (flags, c.image.clone(), rest)
}

/// The agent's and the gate's output into a file cyclix reads (podman-run(1) `--log-driver`,
/// `--log-opt`; [`super::plan::ContainerPlan::log_file`]).
/// Every other container's output reaches the journal once, through the attached `podman
/// run` (`--log-driver=none`, see [`run_args`]).
fn log_args(c: &ContainerPlan) -> Vec<String> {
    c.log_file.as_ref().map_or_else(
        || vec!["--log-driver=none".into()],
        |f| {
            vec![
                "--log-driver=k8s-file".into(),
                format!("--log-opt=path={f}"),
                format!("--log-opt=max-size={}", super::plan::RAW_LOG_MAX),
            ]
        },
    )
}

/// `[--entrypoint=["ARGV0"]] IMAGE ARGS…` ([`ContainerPlan::entrypoint_and_args`]).
fn push_command(args: &mut Vec<String>, c: &ContainerPlan) {
    let (entrypoint, rest) = c.entrypoint_and_args();
    if let Some(ep) = entrypoint {
        args.push(format!("--entrypoint={ep}"));
    }
    args.push(c.image.clone());
    args.extend(rest.iter().cloned());
}

fn run_args(plan: &RunPlan, c: &ContainerPlan) -> (Vec<String>, Vec<String>) {
    let mut deps: Vec<String> = Vec::new();
    let mut args: Vec<String> = vec![
        "run".into(),
        format!("--name={}", c.stem),
        "--rm".into(),
        "--cgroups=split".into(),
        "--sdnotify=conmon".into(),
    ];
    // No `-d`, unlike Quadlet: `podman run` stays in the foreground as the unit's main
    // process. Rootless podman 4.3 moves itself to a `podman-PID.scope` when any line of
    // /proc/self/cgroup names a cgroup it does not own (a host with a cgroup v1 hierarchy
    // mounted, as the bookworm testbed's), so conmon runs outside the unit; systemd 252 then
    // refuses conmon as the main PID ("New main PID … does not belong to service,
    // refusing") and a detached `podman run` exiting would end the unit at once. conmon's
    // READY=1 is still accepted (start = container running); the exit status is the
    // container's either way. The container's output reaches the unit's journal once,
    // through the attached `podman run` (`--log-driver=none`: conmon's journald copy would
    // repeat every line where conmon is in the unit's cgroup, and name another unit where
    // it is not).
    match &c.net {
        Net::Pod => {
            if let Some(pod) = &plan.pod {
                deps.push(naming::pod_unit(pod));
                args.push(format!("--pod={pod}"));
            }
        }
        Net::Networks(attach) => {
            for a in attach {
                let n = &plan.networks[a.network];
                deps.push(naming::network_unit(&n.stem));
                args.push(match &a.ip {
                    Some(ip) => format!("--network={}:ip={ip}", n.name),
                    None => format!("--network={}", n.name),
                });
            }
        }
        Net::None => args.push("--network=none".into()),
    }
    args.push(
        if c.pull_never {
            "--pull=never"
        } else {
            "--pull=missing"
        }
        .into(),
    );
    // gVisor's runsc for the agent and the gate of tier `gvisor` (podman(1) `--runtime`,
    // `--runtime-flag`: global options, accepted after `run`).
    args.extend(c.oci_runtime.iter().flat_map(OciRuntime::podman_args));
    args.extend([
        "--cap-drop=all".into(),
        "--security-opt=no-new-privileges".into(),
        "--read-only".into(),
        "--init".into(),
    ]);
    args.extend(c.user.iter().map(|u| format!("--user={u}")));
    for t in &c.tmpfs {
        args.push(format!("--tmpfs={t}"));
    }
    for b in &c.binds {
        args.push(format!("--mount={}", b.mount_spec()));
    }
    for m in &c.volumes {
        let vol = &plan.volumes[m.volume];
        deps.push(naming::volume_unit(&vol.stem));
        args.push(format!(
            "--volume={}:{}:{}",
            vol.stem,
            m.target,
            VolumeMount::OPTIONS
        ));
    }
    if let Some(h) = &c.health {
        args.push(format!("--health-cmd={}", health_cmd_json(&h.command)));
        // The unit's ExecStartPost= drives the checks (`health_wait`): no timer of podman's.
        args.push("--health-interval=disable".into());
        args.push(format!("--health-timeout={}s", h.timeout_s));
        args.push(format!("--health-retries={}", h.retries));
    }
    for (k, val) in &c.env {
        args.push(format!("--env={k}={val}"));
    }
    for (secret, var) in &c.secrets {
        args.push(format!("--secret={secret},type=env,target={var}"));
    }
    for (secret, path) in &c.secret_files {
        args.push(format!(
            "--secret={}",
            super::quadlet::secret_file(secret, path)
        ));
    }
    if let Some(w) = &c.workdir {
        args.push(format!("--workdir={w}"));
    }
    for (k, val) in &c.labels {
        args.push(format!("--label={k}={val}"));
    }
    if let Some(p) = c.pids {
        args.push(format!("--pids-limit={p}"));
    }
    args.extend(log_args(c));
    if let Some(m) = c.memory_bytes {
        args.push(format!("--memory={m}"));
    }
    if let Some(cpu) = c.cpu_millis {
        args.push(cpus_arg(cpu));
    }
    args.push(format!("--stop-timeout={STOP_TIMEOUT_S}"));
    if let Some(sig) = c.stop_signal {
        args.push(format!("--stop-signal={sig}"));
    }
    push_command(&mut args, c);
    (deps, args)
}
