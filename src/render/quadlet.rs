//! Quadlet backend: one `.network`/`.pod`/`.container` file per object of the plan, for the
//! user generator (podman-systemd.unit(5), podman 5.4 as on Debian trixie).
//!
//! Rules kept here (field reports): concrete per-run files only, no `%` specifiers in
//! cross-references (B02, B04); cross-references by Quadlet file name (`Pod=X.pod`,
//! `Network=X.network`, B03); no `[Install]` on per-run units (B05); explicit start/stop
//! budgets with `StopTimeout=` below `TimeoutStopSec=` (B06); `DefaultDependencies=false` so
//! an on-demand run never waits for the system's network-online target (B07). Pure.

use super::common::{
    HEADER, cpus_arg, esc_err, health_cmd_json, label_flags, labels, network_role, quoted_pair, v,
};
use super::escape;
use super::ini::{Section, UnitFile};
use super::plan::{
    ContainerPlan, Net, NetworkPlan, RunPlan, STOP_TIMEOUT_S, UNIT_STOP_TIMEOUT_S, VolumePlan,
};
use super::{Dest, RenderError, RenderedFile};
use crate::naming::{self, network_file, pod_file, volume_file};

/// The `[Quadlet]` section every file ends with, and the file for `Dest::Quadlet`.
fn finish(mut u: UnitFile, name: String) -> RenderedFile {
    u.section("Quadlet").add("DefaultDependencies", "false");
    RenderedFile {
        dest: Dest::Quadlet,
        name,
        contents: u.to_text(),
    }
}

/// The `[Service]` budgets of the generated pod and volume oneshots, and `Restart=no`: a
/// part of the sandbox that died stays dead (Quadlet's `.pod` default is
/// `Restart=on-failure`, podman-systemd.unit(5); a restarted pod is a new network namespace
/// the probes never saw — issue 20, item 1).
fn object_budgets(u: &mut UnitFile) {
    u.section("Service")
        .add(
            "TimeoutStartSec",
            super::plan::START_TIMEOUT_LOCAL_S.to_string(),
        )
        .add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string())
        .add("Restart", "no");
}

/// The run's labels of role `role` as `Label=` entries.
fn label_entries(
    s: &mut super::ini::Section<'_>,
    plan: &RunPlan,
    role: &str,
) -> Result<(), RenderError> {
    for (k, val) in labels(plan, role) {
        s.add("Label", v("tenant", &format!("{k}={val}"))?);
    }
    Ok(())
}

/// Renders the plan's topology (networks, pod, volumes, containers) as Quadlet files; the
/// host tiers' units are `host_units`'s.
///
/// # Errors
/// [`RenderError`] when a value cannot be carried by Quadlet (see `escape`).
pub fn render(plan: &RunPlan) -> Result<Vec<RenderedFile>, RenderError> {
    let mut files = Vec::new();
    for n in &plan.networks {
        files.push(network(plan, n)?);
    }
    if let (Some(pod_stem), Some(internal)) = (&plan.pod, plan.networks.first()) {
        files.push(pod(plan, pod_stem, internal));
        files.push(pod_restart_dropin(pod_stem));
    }
    for vol in &plan.volumes {
        files.push(volume(plan, vol)?);
    }
    for c in &plan.containers {
        files.push(container(plan, c)?);
    }
    Ok(files)
}

fn network(plan: &RunPlan, n: &NetworkPlan) -> Result<RenderedFile, RenderError> {
    let mut u = UnitFile::new(HEADER);
    u.section("Unit").add(
        "Description",
        v(
            "run",
            &format!("cyclix run {} network {}", plan.run_id, n.name),
        )?,
    );
    let mut s = u.section("Network");
    s.add("NetworkName", n.name.clone());
    if n.internal {
        s.add("Internal", "true");
    }
    if let Some(sub) = &n.subnet {
        s.add("Subnet", sub.clone());
    }
    if let Some(range) = &n.ip_range {
        s.add("IPRange", range.clone());
    }
    label_entries(&mut s, plan, network_role(n.internal))?;
    // A oneshot's default, stated: no unit of a run is ever restarted (issue 20, item 1).
    u.section("Service").add("Restart", "no");
    Ok(finish(u, network_file(&n.stem)))
}

/// Quadlet (podman 5.4) writes `Restart=on-failure` into the pod's generated service and drops
/// the `Restart=` of the `.pod` file's `[Service]` section (measured with `quadlet --dryrun`;
/// `.container`, `.network` and `.volume` keep theirs). A systemd drop-in in the runtime unit
/// directory is applied after the generated unit (systemd.unit(5), "drop-in"), so this one
/// makes the pod `Restart=no` after all (issue 20, item 1).
fn pod_restart_dropin(pod: &str) -> RenderedFile {
    let mut u = UnitFile::new(HEADER);
    u.section("Service").add("Restart", "no");
    super::common::runtime_unit(
        format!("{}.d/{POD_RESTART_DROPIN}", naming::pod_unit(pod)),
        &u,
    )
}

/// The file name of the pod's `Restart=no` drop-in (in `POD-pod.service.d/`).
pub const POD_RESTART_DROPIN: &str = "10-cyclix-no-restart.conf";

fn pod(plan: &RunPlan, pod: &str, internal: &NetworkPlan) -> RenderedFile {
    let mut u = UnitFile::new(HEADER);
    u.section("Unit")
        .add("Description", format!("cyclix run {} pod", plan.run_id));
    let mut s = u.section("Pod");
    s.add("PodName", pod.to_string());
    s.add(
        "Network",
        format!("{}:ip={}", network_file(&internal.stem), plan.pod_ip),
    );
    // Fail DNS fast on the internal network: aardvark-dns does not forward there (N7).
    s.add("DNSOption", "timeout:1");
    s.add("DNSOption", "attempts:1");
    if let Some(userns) = &plan.pod_userns {
        s.add("UserNS", userns.clone());
    }
    let label_args: Vec<String> = label_flags(plan, "pod")
        .iter()
        .map(|f| escape::exec_word(f))
        .collect();
    s.add("PodmanArgs", label_args.join(" "));
    object_budgets(&mut u);
    finish(u, pod_file(pod))
}

fn volume(plan: &RunPlan, vol: &VolumePlan) -> Result<RenderedFile, RenderError> {
    let mut u = UnitFile::new(HEADER);
    u.section("Unit").add(
        "Description",
        format!("cyclix run {} volume {}", plan.run_id, vol.stem),
    );
    let mut s = u.section("Volume");
    s.add("VolumeName", vol.stem.clone());
    label_entries(&mut s, plan, "volume")?;
    object_budgets(&mut u);
    Ok(finish(u, volume_file(&vol.stem)))
}

/// The container's per-run volumes (`Volume=X.volume:PATH:nosuid,nodev`) and its health check
/// (`HealthCmd=` … `Notify=healthy`).
fn volumes_and_health(
    plan: &RunPlan,
    c: &ContainerPlan,
    s: &mut super::ini::Section<'_>,
) -> Result<(), RenderError> {
    for m in &c.volumes {
        let vol = &plan.volumes[m.volume];
        s.add(
            "Volume",
            v(
                &c.exec_key,
                &format!(
                    "{}:{}:{}",
                    volume_file(&vol.stem),
                    m.target,
                    super::plan::VolumeMount::OPTIONS
                ),
            )?,
        );
    }
    if let Some(h) = &c.health {
        let key = c.exec_key.replace(".command", ".health.command");
        // Quadlet copies the value into ExecStart= quoted but with `%` and `$` untouched (podman
        // 5.4.2, measured): `%` is escaped by `v`, `$` here, so systemd hands podman the argv
        // exactly (e2e_services runs a check with `${VAR}`, `%` and quotes).
        s.add(
            "HealthCmd",
            v(&key, &health_cmd_json(&h.command))?.replace('$', "$$"),
        );
        s.add("HealthInterval", format!("{}s", h.interval_s));
        s.add("HealthTimeout", format!("{}s", h.timeout_s));
        s.add("HealthRetries", h.retries.to_string());
        if h.start_period_s > 0 {
            s.add("HealthStartPeriod", format!("{}s", h.start_period_s));
        }
        // Unhealthy after `retries` failures: the container is killed, so the start job
        // fails at once instead of waiting out TimeoutStartSec=.
        s.add("HealthOnFailure", "kill");
        // The unit's start job completes only once the check passed (sd_notify READY=1 from
        // podman when the container turns healthy).
        s.add("Notify", "healthy");
    }
    Ok(())
}

/// `Entrypoint=` and `Exec=` of container `c` ([`ContainerPlan::entrypoint_and_args`]).
fn command(s: &mut Section<'_>, c: &ContainerPlan) -> Result<(), RenderError> {
    let (entrypoint, args) = c.entrypoint_and_args();
    if let Some(ep) = &entrypoint {
        // Quadlet passes the value on as one `--entrypoint` argument of ExecStart, whose
        // specifiers systemd expands: a `%` of the argv is written `%%`.
        s.add("Entrypoint", ep.replace('%', "%%"));
    }
    let skipped = usize::from(entrypoint.is_some());
    if !args.is_empty() {
        let mut words = Vec::with_capacity(args.len());
        for (i, w) in args.iter().enumerate() {
            // Index the spec's argv, after cyclix's own wrapper words.
            let idx = (i + skipped).saturating_sub(c.exec_key_offset);
            words.push(
                escape::quadlet_exec_word(w)
                    .map_err(|e| esc_err(&format!("{}[{idx}]", c.exec_key), &e))?,
            );
        }
        s.add("Exec", words.join(" "));
    }
    Ok(())
}

fn container(plan: &RunPlan, c: &ContainerPlan) -> Result<RenderedFile, RenderError> {
    let mut u = UnitFile::new(HEADER);
    let mut unit = u.section("Unit");
    unit.add("Description", v("run", &c.description)?);
    // The agent never starts without its work tree: the pod's start pulls its containers in,
    // and a pooled environment has no work tree until a run claims it (its agent unit was
    // left `failed` by every fill, issue 36). A condition that does not hold skips the start
    // (the unit stays inactive, not failed); the run's own start comes after its work tree.
    let agent = c
        .labels
        .iter()
        .any(|(k, val)| k == crate::naming::label::ROLE && val == "agent");
    if agent {
        for b in c
            .binds
            .iter()
            .filter(|b| b.target == super::plan::topology::WORKDIR)
        {
            unit.add("ConditionPathIsDirectory", v(&c.exec_key, &b.source)?);
        }
    }
    let mut s = u.section("Container");
    s.add("ContainerName", c.stem.clone());
    s.add("Image", v(&c.exec_key, &c.image)?);
    s.add("Pull", if c.pull_never { "never" } else { "missing" });
    match &c.net {
        Net::Pod => {
            if let Some(pod) = &plan.pod {
                s.add("Pod", pod_file(pod));
            }
        }
        Net::Networks(attach) => {
            for a in attach {
                let n = &plan.networks[a.network];
                match &a.ip {
                    Some(ip) => s.add("Network", format!("{}:ip={ip}", network_file(&n.stem))),
                    None => s.add("Network", network_file(&n.stem)),
                };
            }
        }
        Net::None => {
            s.add("Network", "none");
        }
    }
    // Hardening, stated (DESIGN.md): no capabilities, no privilege gain, read-only root,
    // catatonit as PID 1 so SIGTERM stops it at once (testbed NOTES "PID 1 and SIGTERM").
    s.add("DropCapability", "all");
    s.add("NoNewPrivileges", "true");
    s.add("ReadOnly", "true");
    s.add("RunInit", "true");
    if let Some(user) = &c.user {
        s.add("User", user.clone());
    }
    for t in &c.tmpfs {
        s.add("Tmpfs", t.clone());
    }
    for b in &c.binds {
        s.add("Mount", v(&c.exec_key, &b.mount_spec())?);
    }
    volumes_and_health(plan, c, &mut s)?;
    for (k, val) in &c.env {
        s.add("Environment", quoted_pair(&c.exec_key, k, val)?);
    }
    for (secret, var) in &c.secrets {
        s.add("Secret", format!("{secret},type=env,target={var}"));
    }
    for (secret, path) in &c.secret_files {
        s.add("Secret", secret_file(secret, path));
    }
    if let Some(w) = &c.workdir {
        s.add("WorkingDir", w.clone());
    }
    for (k, val) in &c.labels {
        s.add("Label", quoted_pair(&c.exec_key, k, val)?);
    }
    if let Some(p) = c.pids {
        s.add("PidsLimit", p.to_string());
    }
    if let Some(f) = &c.log_file {
        s.add("LogDriver", "k8s-file");
        s.add("LogOpt", format!("path={f}"));
        s.add("LogOpt", format!("max-size={}", super::plan::RAW_LOG_MAX));
    }
    let podman_args = podman_args(c)?;
    if !podman_args.is_empty() {
        s.add("PodmanArgs", podman_args.join(" "));
    }
    s.add("StopTimeout", STOP_TIMEOUT_S.to_string());
    if let Some(sig) = c.stop_signal {
        s.add("StopSignal", sig);
    }
    command(&mut s, c)?;
    let mut svc = u.section("Service");
    svc.add("TimeoutStartSec", c.start_timeout_s.to_string());
    svc.add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string());
    if let Some(max) = c.runtime_max_s {
        svc.add("RuntimeMaxSec", max.to_string());
    }
    svc.add("Restart", "no");
    Ok(finish(u, naming::container_file(&c.stem)))
}

/// The container's `PodmanArgs=` words: gVisor's runsc for the agent and the gate of tier
/// `gvisor` (podman's global `--runtime`/`--runtime-flag`, accepted after `run`), the memory
/// and CPU limits.
fn podman_args(c: &ContainerPlan) -> Result<Vec<String>, RenderError> {
    let mut args = Vec::new();
    if let Some(r) = &c.oci_runtime {
        for a in r.podman_args() {
            args.push(v(&c.exec_key, &a)?);
        }
    }
    if let Some(m) = c.memory_bytes {
        args.push(format!("--memory={m}"));
    }
    if let Some(cpu) = c.cpu_millis {
        args.push(cpus_arg(cpu));
    }
    Ok(args)
}

/// A secret mounted as a file: `NAME,type=mount,target=PATH,uid=U,gid=U,mode=0400` (podman
/// `--secret`, `Secret=`), owned by squid's user in the proxy image, readable by it only.
pub(crate) fn secret_file(secret: &str, path: &str) -> String {
    let uid = crate::render::proxy::credentials::PROXY_UID;
    format!("{secret},type=mount,target={path},uid={uid},gid={uid},mode=0400")
}
