//! Networks: creating a run's internal network and listing who is attached to one.

use super::{PODMAN_QUERY_DEADLINE, Podman, Result, check_name, parse_network_containers};

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

    /// Names of the containers attached to network `name` (`podman network inspect`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn network_containers(&self, name: &str) -> Result<Vec<String>> {
        check_name("network", name)?;
        self.query(
            &["network", "inspect", "--format", "json", "--", name],
            &format!("inspecting network {name}"),
            parse_network_containers,
        )
    }
}
