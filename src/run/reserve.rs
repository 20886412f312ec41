//! Reservations a run holds among concurrent runs on this host: its subnet `10.213.N.0/24`
//! and its services' ports. Each is a file `$XDG_RUNTIME_DIR/cyclix/{subnets,ports}/N`
//! ([`crate::layout::Runtime::reservations`]) created exclusively and holding the run id; one
//! whose run dir is gone is stale and reclaimed.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};

use crate::layout;
pub use crate::layout::{PORTS_DIR, SUBNETS_DIR};

/// The third octet of the run's subnet when none is given: FNV-1a of the run id, in 1–254.
/// Deterministic, so `render` stays reproducible; the orchestrator picks a free one instead.
#[must_use]
pub fn default_subnet_octet(run_id: &str) -> u8 {
    let mut h: u32 = 0x811c_9dc5;
    for b in run_id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u8::try_from(h % 254).map_or(1, |v| v + 1)
}

/// Reserves the run's `10.213.N.0/24` among concurrent runs: podman only learns of the network
/// when its unit starts, so two runs that list the networks at the same time could pick the
/// same subnet (seen in parallel e2e runs: "subnet … is already used"). A reservation is a file
/// `RUNS_ROOT/../subnets/N` created exclusively and holding the run id; one whose run dir is
/// gone (a run that died, converged since) is stale and reclaimed. Returns the octet and the
/// file, which teardown removes.
///
/// # Errors
/// When no subnet is free, or on I/O failures.
pub fn reserve_subnet(runs_root: &Path, run_id: &str, used: &[String]) -> Result<(u8, PathBuf)> {
    let dir = layout::reservations_beside(runs_root, SUBNETS_DIR);
    let start = u16::from(default_subnet_octet(run_id));
    for i in 0..254u16 {
        let n = u8::try_from((start - 1 + i) % 254 + 1)
            .map_err(|_| anyhow!("invariant: octet fits in u8"))?;
        if used.iter().any(|u| u == &format!("10.213.{n}.0/24")) {
            continue;
        }
        if let Claim::Ours(file) = claim(runs_root, &dir, &n.to_string(), run_id, false)? {
            return Ok((n, file));
        }
    }
    bail!(
        "all 254 run subnets 10.213.1-254.0/24 are in use; remove stale networks (`podman network ls`, `cyclix leftovers`)"
    )
}

/// The subnet `10.213.N.0/24` reserved for `run_id` before the run began (by the fill of the
/// warm environment the run claimed): its reservation file must hold the run id.
///
/// # Errors
/// The reservation does not exist or holds another id.
pub fn held_subnet(runs_root: &Path, run_id: &str, n: u8) -> Result<u8> {
    let file = layout::reservations_beside(runs_root, SUBNETS_DIR).join(n.to_string());
    let owner = std::fs::read_to_string(&file)
        .with_context(|| format!("reading the reservation {}", file.display()))?;
    if owner.trim() != run_id {
        bail!(
            "the reservation {} holds `{}`, not this run's environment {run_id}",
            file.display(),
            owner.trim()
        );
    }
    Ok(n)
}

/// What claiming one reservation file gave.
enum Claim {
    /// Created, holding our run id.
    Ours(PathBuf),
    /// Held by this live run.
    Held(String),
}

/// Claims `DIR/NAME` for `run_id`: created exclusively and holding the run id; a file whose
/// run dir (`runs_root/OWNER`) is gone is stale (its run died and was converged) and is
/// reclaimed once. With `own_ok`, a file that holds `run_id` already is ours (ports: the fill
/// of a pooled environment reserved them under the id its claiming run takes).
fn claim(runs_root: &Path, dir: &Path, name: &str, run_id: &str, own_ok: bool) -> Result<Claim> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join(name);
    for attempt in 0..2 {
        match std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(&file)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, run_id.as_bytes())
                    .with_context(|| format!("writing {}", file.display()))?;
                return Ok(Claim::Ours(file));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner = std::fs::read_to_string(&file).unwrap_or_default();
                let owner = owner.trim().to_string();
                if own_ok && owner == run_id {
                    // Reserved by this run's id before: a pooled environment's fill, whose
                    // claiming run has its id (issue 16).
                    return Ok(Claim::Ours(file));
                }
                if attempt == 1 || owner.is_empty() || runs_root.join(&owner).exists() {
                    return Ok(Claim::Held(owner)); // held by a live run
                }
                let _ = std::fs::remove_file(&file); // stale: its run is gone
            }
            Err(e) => return Err(e).with_context(|| format!("reserving {}", file.display())),
        }
    }
    Ok(Claim::Held(String::new()))
}

/// Reserves the port of each of `spec`'s services among concurrent runs, so no two runs on
/// this host ever share one (issue 6: "two runs at once never share a port"): a fixed `port`
/// is reserved as written (held by another live run: an error naming it and the fix); the
/// others are picked from [`crate::render::plan::PICKED_PORTS`], starting at a point derived
/// from the run id. Reservations are files `RUNS_ROOT/../ports/PORT` holding the run id, as
/// for subnets ([`reserve_subnet`]); every file created is pushed to `files` (teardown removes
/// them) even when a later one fails.
///
/// # Errors
/// A fixed port held by another run, no free port left, or I/O failures.
pub fn reserve_ports(
    runs_root: &Path,
    run_id: &str,
    services: &[crate::spec::Service],
    files: &mut Vec<PathBuf>,
) -> Result<Vec<u16>> {
    let dir = layout::reservations_beside(runs_root, PORTS_DIR);
    let (lo, hi) = crate::render::plan::PICKED_PORTS;
    let span = u32::from(hi - lo) + 1;
    let fixed: Vec<u16> = services.iter().filter_map(|s| s.port).collect();
    let mut ports = Vec::new();
    // Fixed ports first, so a picked one never takes a port the spec names.
    let mut by_index: Vec<Option<u16>> = vec![None; services.len()];
    for (i, s) in services.iter().enumerate() {
        let Some(p) = s.port else { continue };
        match claim(runs_root, &dir, &p.to_string(), run_id, true)? {
            Claim::Ours(f) => files.push(f),
            Claim::Held(owner) => bail!(
                "services[{i}] ({}): port {p} is held by run {owner}, which is running now; \
                 remove `port` from the service so cyclix picks a free one per run, or wait for that run",
                s.name
            ),
        }
        by_index[i] = Some(p);
    }
    let start = u32::from(default_subnet_octet(run_id)) * 37 % span;
    let mut k = 0u32;
    for (i, s) in services.iter().enumerate() {
        if s.port.is_some() {
            continue;
        }
        loop {
            if k >= span {
                bail!(
                    "services[{i}] ({}): all ports {lo}-{hi} are reserved by running runs; \
                     see `cyclix leftovers` for reservations of runs that are gone",
                    s.name
                );
            }
            let p = u16::try_from(u32::from(lo) + (start + k) % span)
                .map_err(|_| anyhow!("invariant: port fits in u16"))?;
            k += 1;
            if fixed.contains(&p) {
                continue;
            }
            if let Claim::Ours(f) = claim(runs_root, &dir, &p.to_string(), run_id, true)? {
                files.push(f);
                by_index[i] = Some(p);
                break;
            }
        }
    }
    for p in by_index {
        ports.push(p.context("invariant: every service got a port")?);
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service `name` of a local image, with `port` fixed or not.
    fn service(name: &str, port: Option<u16>) -> crate::spec::Service {
        crate::spec::Service {
            name: name.into(),
            image: crate::spec::Image::UnpinnedLocal {
                reference: "localhost/pg".into(),
            },
            command: Vec::new(),
            env: Vec::new(),
            port,
            data: None,
            health: None,
            worktree: false,
        }
    }

    #[test]
    fn the_same_run_id_finds_the_ports_it_reserved_and_another_does_not() {
        let dir = tempfile::tempdir().expect("tmp");
        let runs = dir.path().join("runs");
        let env = "20261202t070000-e001";
        std::fs::create_dir_all(runs.join(env)).expect("the environment's run dir");
        let services = [service("db", None), service("app", Some(24000))];
        let fill = reserve_ports(&runs, env, &services, &mut Vec::new()).expect("fill");
        let claim = reserve_ports(&runs, env, &services, &mut Vec::new()).expect("claim");
        assert_eq!(fill, claim, "the claiming run renders the fill's ports");
        // Control: another live run gets another picked port and is refused the fixed one.
        std::fs::create_dir_all(runs.join("20261202t070000-e002")).expect("run dir");
        let e = reserve_ports(&runs, "20261202t070000-e002", &services, &mut Vec::new())
            .expect_err("the fixed port is held");
        assert!(e.to_string().contains(&format!("held by run {env}")), "{e}");
        let other = reserve_ports(
            &runs,
            "20261202t070000-e002",
            &services[..1],
            &mut Vec::new(),
        )
        .expect("a picked port");
        assert_ne!(other[0], fill[0]);
    }

    #[test]
    fn concurrent_runs_never_reserve_the_same_port_and_a_held_fixed_port_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let runs = dir.path().join("runs");
        let svc = |port: Option<u16>| service("db", port);
        let mut seen = std::collections::BTreeSet::new();
        let mut files = Vec::new();
        for i in 0..50 {
            let id = format!("r{i}");
            std::fs::create_dir_all(runs.join(&id)).expect("run dir");
            // Same run id seed for all: every run prefers the same first port.
            let got =
                reserve_ports(&runs, &id, &[svc(None), svc(None)], &mut files).expect("reserve");
            for p in got {
                assert!(seen.insert(p), "port {p} handed out twice");
            }
        }
        assert_eq!(files.len(), 100);
        // A fixed port held by a live run is refused, naming the holder and the fix.
        let mut f1 = Vec::new();
        std::fs::create_dir_all(runs.join("a")).expect("a");
        std::fs::create_dir_all(runs.join("b")).expect("b");
        reserve_ports(&runs, "a", &[svc(Some(5432))], &mut f1).expect("first");
        let mut f2 = Vec::new();
        let e = reserve_ports(&runs, "b", &[svc(Some(5432))], &mut f2).expect_err("held");
        assert_eq!(
            e.to_string(),
            "services[0] (db): port 5432 is held by run a, which is running now; remove `port` from the service so cyclix picks a free one per run, or wait for that run"
        );
        assert!(f2.is_empty());
        // Once its run is gone (converged), the reservation is stale and reclaimed.
        std::fs::remove_dir_all(runs.join("a")).expect("rm");
        assert_eq!(
            reserve_ports(&runs, "b", &[svc(Some(5432))], &mut f2).expect("reclaimed"),
            [5432]
        );
    }

    #[test]
    fn concurrent_runs_never_reserve_the_same_subnet_and_stale_reservations_are_reclaimed() {
        let dir = tempfile::tempdir().expect("tmp");
        let runs = dir.path().join("runs");
        for id in ["a1", "a2", "a3"] {
            std::fs::create_dir_all(runs.join(id)).expect("run dir");
        }
        // Same preferred octet for all: the run id decides it, so force a collision with one id.
        let (n1, f1) = reserve_subnet(&runs, "a1", &[]).expect("first");
        std::fs::create_dir_all(runs.join("a1-twin")).expect("dir");
        let (n2, _) = reserve_subnet(&runs, "a1", &[]).expect("second with the same preference");
        assert_ne!(n1, n2, "two live runs got one subnet");
        // A reservation whose run dir is gone is stale and reclaimed.
        std::fs::write(&f1, "gone-run").expect("stale owner");
        let (n3, _) = reserve_subnet(&runs, "a1", &[]).expect("reclaim");
        assert_eq!(n3, n1);
        let used: Vec<String> = (1..=254).map(|n| format!("10.213.{n}.0/24")).collect();
        assert!(reserve_subnet(&runs, "a2", &used).is_err());
    }
}
