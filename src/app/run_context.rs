//! The run context a verb renders with when no run exists (`render`, `spec render`,
//! `export kube`, `bench-render`): the layout's paths for a run id, preview ports and
//! placeholders, the subnet octet the run id picks.

use std::path::PathBuf;

use super::default_subnet_octet;
use crate::context::{HostEnv, path_str};
use crate::render::RunContext;
use crate::spec::Spec;

/// The context of run `run_id` of `spec` on this host: `worktree`, `run_dir` and `octet`
/// when given, else where a run would have them; `cyclix_bin` as mounted into the agent.
pub(crate) fn default_run_context(
    spec: &Spec,
    run_id: &str,
    env: &HostEnv,
    worktree: Option<&str>,
    run_dir: Option<&str>,
    octet: Option<u8>,
    cyclix_bin: &str,
) -> RunContext {
    let runtime = env
        .runtime_dir
        .as_deref()
        .map_or_else(|| "/run/user/unknown".to_string(), path_str);
    RunContext {
        run_id: run_id.to_string(),
        worktree: worktree.map_or_else(
            || path_str(&env.layout().worktree(&spec.tenant, run_id)),
            str::to_string,
        ),
        run_dir: run_dir.map_or_else(
            || {
                let runtime = crate::layout::Runtime(PathBuf::from(&runtime));
                path_str(&runtime.run_dir(run_id))
            },
            str::to_string,
        ),
        subnet_octet: octet.unwrap_or_else(|| default_subnet_octet(run_id)),
        proxy_image: crate::images::PROXY_IMAGE.to_string(),
        cyclix_bin: cyclix_bin.to_string(),
        service_ports: crate::render::plan::preview_ports(spec),
        placeholders: crate::render::plan::preview_placeholders(spec),
        setup_binds: Vec::new(),
        log_key: crate::render::plan::PREVIEW_LOG_KEY.to_string(),
        credentials_file: false,
        claim_wait_s: None,
        // A preview names runsc as podman finds it (`tier::runsc::OciRuntime::preview`); a run
        // renders with what `host::facts::gvisor::look` found.
        gvisor: (crate::tier::floor(spec.tier, spec.legacy_worktree_isolation)
            == crate::tier::Tier::Gvisor)
            .then(crate::tier::runsc::OciRuntime::preview),
    }
}
