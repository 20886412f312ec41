//! Secrets: values travel on podman's stdin (`podman secret create NAME -`), never in argv;
//! removal treats `no such secret` as success.

use super::{PODMAN_QUERY_DEADLINE, Podman, PodmanError, Result, check_name, parse_secret_names};
use crate::process::ProcessError;

impl Podman {
    /// Creates podman secret `name` holding `value`, with `labels`
    /// (`podman secret create --label K=V… -- NAME -`, the value on stdin, never in argv). An
    /// existing secret of that name is an error (no `--replace`: names carry the run id).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (e.g. `secret name in use`), [`PodmanError::BadName`].
    pub fn secret_create(&self, name: &str, value: &[u8], labels: &[(&str, &str)]) -> Result<()> {
        check_name("secret name", name)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args: Vec<&str> = vec!["secret", "create"];
        for l in &label_args {
            args.extend(["--label", l]);
        }
        args.extend(["--", name, "-"]);
        self.run(&args, Some(value), PODMAN_QUERY_DEADLINE, || {
            format!("creating secret {name}")
        })?;
        Ok(())
    }

    /// Removes secret `name` (`podman secret rm -- NAME`). Returns `false` when it did not exist
    /// (podman 5.4: exit 125, `no such secret`), so teardown can call it twice.
    ///
    /// # Errors
    /// [`PodmanError::Command`] for other failures.
    pub fn secret_rm(&self, name: &str) -> Result<bool> {
        check_name("secret name", name)?;
        match self.run(
            &["secret", "rm", "--", name],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("removing secret {name}"),
        ) {
            Ok(_) => Ok(true),
            Err(PodmanError::Command {
                source: ProcessError::Failed { ref stderr, .. },
                ..
            }) if stderr.contains("no such secret") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The names of the secrets starting with `name_prefix`, in podman's order
    /// (`podman secret ls --format '{{json .}}'`; `secret ls` has no label filter in 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn secrets(&self, name_prefix: &str) -> Result<Vec<String>> {
        let mut names = self.query(
            &["secret", "ls", "--format", "{{json .}}"],
            "listing podman secrets",
            parse_secret_names,
        )?;
        names.retain(|n| n.starts_with(name_prefix));
        Ok(names)
    }
}
