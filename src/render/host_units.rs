//! The host units of the non-container tiers (`direct`, `worktree`): one plain `.service`
//! per host service of the plan, whichever backend was asked for (Quadlet has no unit kind
//! for a bare host command). Empty for a container plan. Pure.

use super::common::{HEADER, quoted_pair, runtime_unit, v};
use super::escape::exec_line;
use super::ini::UnitFile;
use super::plan::{HostServicePlan, RunPlan, UNIT_STOP_TIMEOUT_S};
use super::{RenderError, RenderedFile};
use crate::naming;

/// Renders the plan's host services (none for tier `container`).
///
/// # Errors
/// [`RenderError`] for an empty command or a value that cannot be carried in a unit file.
pub fn render(plan: &RunPlan) -> Result<Vec<RenderedFile>, RenderError> {
    plan.host_services.iter().map(host_service).collect()
}

fn host_service(h: &HostServicePlan) -> Result<RenderedFile, RenderError> {
    if h.exec.is_empty() {
        return Err(RenderError {
            key: h.exec_key.clone(),
            message: "an empty command cannot run on the host".into(),
        });
    }
    let mut u = UnitFile::new(HEADER);
    u.section("Unit")
        .add("Description", v("run", &h.description)?);
    let mut s = u.section("Service");
    s.add("Type", "exec");
    s.add("WorkingDirectory", v(&h.exec_key, &h.workdir)?);
    for (k, val) in &h.env {
        s.add("Environment", quoted_pair(&h.exec_key, k, val)?);
    }
    if let Some(f) = &h.env_file {
        s.add("EnvironmentFile", format!("-{}", v(&h.exec_key, f)?));
    }
    s.add("ExecStart", exec_line(&h.exec));
    let out = format!("append:{}", v(&h.exec_key, &h.log_file)?);
    s.add("StandardOutput", out.clone());
    s.add("StandardError", out);
    // The host tiers' limits are the user manager's (systemd.resource-control(5)); `cyclix run`
    // refuses a limit whose controller is not delegated (limits), so none is dropped.
    if let Some(m) = h.memory_bytes {
        s.add("MemoryMax", m.to_string());
    }
    if let Some(c) = h.cpu_millis {
        s.add("CPUQuota", cpu_quota(c));
    }
    if let Some(p) = h.pids {
        s.add("TasksMax", p.to_string());
    }
    s.add("RuntimeMaxSec", h.runtime_max_s.to_string());
    s.add("TimeoutStopSec", UNIT_STOP_TIMEOUT_S.to_string());
    s.add("Restart", "no");
    Ok(runtime_unit(naming::container_unit(&h.stem), &u))
}

/// `CPUQuota=` for thousandths of a CPU: `1500` → `150%`, `15` → `1.5%`.
fn cpu_quota(millis: u32) -> String {
    if millis.is_multiple_of(10) {
        format!("{}%", millis / 10)
    } else {
        format!("{}.{}%", millis / 10, millis % 10)
    }
}

#[cfg(test)]
mod tests;
