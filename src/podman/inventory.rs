//! The inventory and removal of a run's objects by label: containers, pods, networks, volumes.

use super::{
    ContainerInfo, NetworkInfo, PODMAN_REMOVE_DEADLINE, PodInfo, Podman, Result, VolumeInfo,
    check_name, parse_containers, parse_networks, parse_pods, parse_volumes,
};

impl Podman {
    /// All containers, running or not, carrying `label` (`key=value`, or a bare `key` for any
    /// value): `podman ps -a --filter label=LABEL --format json`.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn containers(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["ps", "--all", "--filter", &filter, "--format", "json"],
            &format!("listing containers labelled {label}"),
            parse_containers,
        )
    }

    /// Every container of the user (`podman ps --all --ns --format json`, infra containers
    /// included), with the namespaces of the running ones: one listing for a look at several
    /// networks, pods and shared namespaces at once (the claim's check of a warm environment,
    /// `run::pool::check`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn all_containers(&self) -> Result<Vec<ContainerInfo>> {
        self.query(
            &["ps", "--all", "--ns", "--format", "json"],
            "listing every container",
            parse_containers,
        )
    }

    /// Pods carrying `label` (`podman pod ps --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn pods(&self, label: &str) -> Result<Vec<PodInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["pod", "ps", "--filter", &filter, "--format", "json"],
            &format!("listing pods labelled {label}"),
            parse_pods,
        )
    }

    /// Networks carrying `label` (`podman network ls --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn networks(&self, label: &str) -> Result<Vec<NetworkInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["network", "ls", "--filter", &filter, "--format", "json"],
            &format!("listing networks labelled {label}"),
            parse_networks,
        )
    }

    /// Every network (`podman network ls --format json`), e.g. to find a free subnet.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn all_networks(&self) -> Result<Vec<NetworkInfo>> {
        self.query(
            &["network", "ls", "--format", "json"],
            "listing networks",
            parse_networks,
        )
    }

    /// Volumes carrying `label` (`podman volume ls --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn volumes(&self, label: &str) -> Result<Vec<VolumeInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["volume", "ls", "--filter", &filter, "--format", "json"],
            &format!("listing volumes labelled {label}"),
            parse_volumes,
        )
    }

    fn remove(&self, what: &'static str, base: &[&str], ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        for id in ids {
            check_name(what, id)?;
        }
        let mut args = base.to_vec();
        args.push("--");
        args.extend(ids.iter().map(String::as_str));
        self.run(&args, None, PODMAN_REMOVE_DEADLINE, || {
            format!("removing {what}s {}", ids.join(" "))
        })?;
        Ok(())
    }

    /// Removes everything carrying `label` (`key=value`) with one forced removal of its
    /// containers that lists nothing first: `podman rm --force --depend --ignore --volumes
    /// --time 0 --filter label=LABEL` (every labelled container, killed without a grace
    /// period; an infra container's `--depend` takes its pod and every container that joined
    /// the pod: measured on 5.4 and 4.3). The pods, networks and volumes of that label are
    /// listed side by side with it; a pod whose infra container was not among those removed
    /// (one made without an infra, or emptied by a removal that failed midway) is removed by
    /// id next (`podman pod rm --force`), then the networks and volumes by name, side by side
    /// (`podman network rm --force`, `podman volume rm --force`), so a container without the
    /// label still on one of them goes too (a prune would leave a network in use: measured).
    /// A run's forced removal before its units stop (issue 33 item 4): in the usual case two
    /// podman processes one after the other (the containers', then the networks' beside the
    /// volumes'), the listings beside the first.
    ///
    /// # Errors
    /// [`PodmanError::Command`] or [`PodmanError::Output`] of the first step that failed (every
    /// step is still tried whose input is known).
    pub fn rm_labelled(&self, label: &str) -> Result<()> {
        let filter = format!("label={label}");
        std::thread::scope(|s| {
            let pods = s.spawn(|| self.pods(label));
            let networks = s.spawn(|| self.networks(label));
            let volumes = s.spawn(|| self.volumes(label));
            let containers = self.run(
                &[
                    "rm",
                    "--force",
                    "--depend",
                    "--ignore",
                    "--volumes",
                    "--time",
                    "0",
                    "--filter",
                    &filter,
                ],
                None,
                PODMAN_REMOVE_DEADLINE,
                || format!("removing the containers labelled {label}"),
            );
            let removed: std::collections::BTreeSet<&str> = containers
                .as_ref()
                .map(|o| o.stdout.lines().map(str::trim).collect())
                .unwrap_or_default();
            let pods = rejoin(pods).map(|l| {
                l.into_iter()
                    .filter(|p| p.infra.as_deref().is_none_or(|i| !removed.contains(i)))
                    .map(|p| p.id)
                    .collect::<Vec<_>>()
            });
            let pods = pods.and_then(|p| self.rm_pods(&p));
            let networks = rejoin(networks).map(|l| l.into_iter().map(|n| n.name).collect());
            let volumes = rejoin(volumes).map(|l| l.into_iter().map(|v| v.name).collect());
            let vols = s.spawn(|| volumes.and_then(|v: Vec<String>| self.rm_volumes(&v)));
            let nets = networks.and_then(|n: Vec<String>| self.rm_networks(&n));
            let vols = rejoin(vols);
            containers?;
            pods?;
            nets?;
            vols
        })
    }

    /// Removes containers (ids or names) with their anonymous volumes, killing running ones
    /// without a grace period, and every container that depends on one (`podman rm --force
    /// --volumes --ignore --time 0 --depend`: one that joined its namespace with `container:`
    /// would block the removal; podman ≥ 4.1). Missing ones are fine. An infra container goes
    /// with its pod ([`Podman::rm_pods`]; podman refuses a container outside the pod that joins
    /// an infra's namespace).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_containers(&self, ids: &[String]) -> Result<()> {
        self.remove(
            "container",
            &[
                "rm",
                "--force",
                "--volumes",
                "--ignore",
                "--time",
                "0",
                "--depend",
            ],
            ids,
        )
    }

    /// Removes pods (ids or names) and their containers
    /// (`podman pod rm --force --ignore --time 0`). Missing ones are fine.
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_pods(&self, ids: &[String]) -> Result<()> {
        self.remove(
            "pod",
            &["pod", "rm", "--force", "--ignore", "--time", "0"],
            ids,
        )
    }

    /// Removes networks (ids or names) and any container still using them
    /// (`podman network rm --force`; exit 0 for missing names on 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_networks(&self, ids: &[String]) -> Result<()> {
        self.remove("network", &["network", "rm", "--force"], ids)
    }

    /// Removes volumes even if in use (`podman volume rm --force`; exit 0 for missing names on
    /// 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_volumes(&self, ids: &[String]) -> Result<()> {
        self.remove("volume", &["volume", "rm", "--force"], ids)
    }
}

/// A scoped thread's result; its panic goes on in the caller.
fn rejoin<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}
