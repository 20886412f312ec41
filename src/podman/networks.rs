//! Networks: creating a run's internal network and listing who is attached to one.

use super::{
    PODMAN_QUERY_DEADLINE, Podman, Result, check_name, parse_container_names,
    parse_network_containers,
};

impl Podman {
    /// Creates network `name` with `--internal` (no route out) and `labels`
    /// (`podman network create --internal --label K=V… -- NAME`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::BadName`].
    pub fn network_create_internal(&self, name: &str, labels: &[(&str, &str)]) -> Result<()> {
        check_name("network name", name)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args: Vec<&str> = vec!["network", "create", "--internal"];
        for l in &label_args {
            args.extend(["--label", l]);
        }
        args.extend(["--", name]);
        self.run(&args, None, PODMAN_QUERY_DEADLINE, || {
            format!("creating internal network {name}")
        })?;
        Ok(())
    }

    /// Names of the containers attached to network `name`, sorted (`podman network
    /// inspect`; podman < 5 does not list them there, so then `podman ps -a --filter
    /// network=NAME`, infra containers included).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn network_containers(&self, name: &str) -> Result<Vec<String>> {
        check_name("network", name)?;
        let listed = self.query(
            &["network", "inspect", "--format", "json", "--", name],
            &format!("inspecting network {name}"),
            parse_network_containers,
        )?;
        if let Some(names) = listed {
            return Ok(names);
        }
        let filter = format!("network={name}");
        self.query(
            &["ps", "-a", "--filter", &filter, "--format", "json"],
            &format!("listing the containers on network {name}"),
            parse_container_names,
        )
    }

    /// Names of the containers of pod `name` (its infra container included), sorted (`podman
    /// pod inspect`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn pod_containers(&self, name: &str) -> Result<Vec<String>> {
        check_name("pod", name)?;
        self.query(
            &["pod", "inspect", "--format", "json", "--", name],
            &format!("inspecting pod {name}"),
            super::output::parse_pod_containers,
        )
    }
}
