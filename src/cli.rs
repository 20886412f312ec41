//! Command-line types (clap derive). Pure data: no I/O, no environment reads beyond clap's own.
//!
//! Hidden verb: `cyclix probe [--only ID,...] --context FILE` runs the boundary probe suite
//! inside an agent container (`cyclix::probe`); it is not in `--help` because only cyclix
//! itself runs it, through `podman exec`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod docs;
mod kube;
pub mod unit;

pub use kube::{ClusterKind, ExportCommand, KubeArgs, KubeRender, KubeRunArgs};

use crate::render::Backend;
use crate::tier::Tier;

/// cyclix: run AI coding agents in self-testing rootless-Podman sandboxes under the systemd
/// user manager.
#[derive(Debug, Parser)]
#[command(name = "cyclix", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v debug, -vv trace). `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// The verb.
    #[command(subcommand)]
    pub command: Command,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with tenant spec files.
    #[command(subcommand)]
    Spec(SpecCommand),
    /// Render the units and files of one run (nothing is installed or started).
    Render(RenderArgs),
    /// Show the isolation tiers and what each does and does not protect against.
    #[command(subcommand)]
    Tier(TierCommand),
    /// Run one run of TENANT on Kubernetes (the CronJob's runner, or by hand): create its
    /// objects, wait for the agent, gate and collector Jobs, import the run branch, delete
    /// everything of the run (docs/kubernetes.md).
    KubeRun(KubeRunArgs),
    /// A tenant's warm pool of environments (`pool:` in its spec; docs/pool.md).
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Export one run of a tenant for another platform (nothing is installed or started).
    #[command(subcommand)]
    Export(ExportCommand),
    /// Talk to the systemd user manager directly (plumbing): reload, start, stop, show, ...
    Unit(unit::UnitArgs),
    /// Run one task for TENANT now, in this process (what `cyclix-run@TENANT.service` executes).
    Run {
        /// The tenant (its spec is `~/.config/cyclix/tenants/TENANT.yaml`).
        tenant: String,
        /// Use this spec file instead.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Use this run id instead of a new one (`[a-z0-9][a-z0-9-]*`, at most 48 characters;
        /// refused if anything of that run exists).
        #[arg(long)]
        run_id: Option<String>,
        /// Unit flavour [default: Quadlet where podman ≥ 5 and its generator are installed,
        /// else plain units].
        #[arg(long, value_enum)]
        backend: Option<Backend>,
        /// How long to wait for podman's storage lock before the run creates anything, e.g.
        /// `60s`, `2m` (at most 1h). A holder that stays that long is named (pid, command
        /// line) and the run fails with nothing created.
        #[arg(long, env = "CYCLIX_STORAGE_LOCK_WAIT", default_value = "60s", value_parser = lock_wait)]
        storage_lock_wait: std::time::Duration,
    },
    /// Build cyclix's images (egress proxy, Python agent, `PostgreSQL`, git) with podman.
    #[command(subcommand)]
    Images(ImagesCommand),
    /// The embedded demo tenant.
    #[command(subcommand)]
    Demo(DemoCommand),
    /// What the egress proxy refused a tenant's agent, and the allowlist that would allow it.
    #[command(subcommand)]
    Egress(EgressCommand),
    /// Install the unit templates and enable the timers of scheduled tenants.
    Install {
        /// Only this tenant's timer (default: every tenant in `~/.config/cyclix/tenants/`).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Start a run of TENANT under the user manager (`cyclix-run@TENANT.service`) and wait for it.
    Start {
        /// The tenant.
        tenant: String,
        /// How long to wait for the run to finish, in seconds.
        #[arg(long, default_value_t = 3600)]
        wait_s: u64,
    },
    /// What `cyclix-run@TENANT.timer` runs when it fires: start the run, or, while one is
    /// active, record the skipped trigger (`skips.jsonl`, shown by `cyclix status`).
    Tick {
        /// The tenant.
        tenant: String,
    },
    /// Stop TENANT's running run (teardown still runs).
    Stop {
        /// The tenant.
        tenant: String,
    },
    /// Pause TENANT's schedule: stop and disable its timer; `cyclix install` keeps it off until
    /// `cyclix resume TENANT`. A run in progress goes on; runs started by hand are not refused.
    Pause {
        /// The tenant.
        tenant: String,
    },
    /// Undo `cyclix pause TENANT` and install its timer again (when its spec has a schedule).
    Resume {
        /// The tenant.
        tenant: String,
    },
    /// Show TENANT's run unit, a run in progress (id, phase, time in it), timer and last run
    /// record; with no TENANT, one line per tenant.
    Status {
        /// The tenant (default: every tenant, one line each).
        tenant: Option<String>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Is this host able to run cyclix? Checks podman, Quadlet, the user manager, linger,
    /// sub-ids, cgroups, networking and images, then proves it with a throwaway container.
    /// Exit 0: no check failed; 1: a check failed; 2: cyclix failed.
    Check {
        /// Only the fast checks (no `podman info`, no outcome test).
        #[arg(long)]
        quick: bool,
        /// JSON on stdout (schema `cyclix-check/1`, see docs/verbs.md).
        #[arg(long)]
        json: bool,
        /// Check only this tenant (its spec and tier gate, its images).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Render N distinct tenants' unit sets in this process and print the wall time as JSON
    /// (hidden: `bench/run` uses it).
    #[command(hide = true)]
    BenchRender {
        /// How many tenants.
        #[arg(long, default_value_t = 1000)]
        tenants: usize,
    },
    /// Make a run's private repository of REPO at BASE in OUT (which must not exist) and print
    /// the wall time as JSON (hidden: `bench/prepare-repo` uses it).
    #[command(hide = true)]
    BenchPrivateRepo {
        /// The user's repository.
        #[arg(long)]
        repo: PathBuf,
        /// The base revision.
        #[arg(long, default_value = "HEAD")]
        base: String,
        /// Where the private repository goes.
        #[arg(long)]
        out: PathBuf,
    },
    /// Inside the agent container: wait until cyclix proved the boundary, then exec the agent.
    #[command(hide = true)]
    AgentWait {
        /// The file whose appearance means "go".
        #[arg(long, required_unless_present = "probe", conflicts_with = "probe")]
        go: Option<PathBuf>,
        /// Instead of waiting for a go file, run the probe suite here with this context (JSON,
        /// `cyclix::probe::Context`; `cyclix export kube` puts it in the run's ConfigMap) and
        /// start the agent only when every probe passed (the Kubernetes profile, issue 17).
        #[arg(long, value_name = "CONTEXT")]
        probe: Option<PathBuf>,
        /// With `--go`: run the probe suite here, once the host opens this FIFO's read end,
        /// and hand the report over it before waiting for the go file (the context is
        /// `probe.json` beside it).
        #[arg(long, value_name = "FIFO", conflicts_with = "probe")]
        report: Option<PathBuf>,
        /// Give up (the agent never starts) after this many seconds.
        #[arg(long)]
        timeout_s: u64,
        /// With `--go`: first wait, blocked in `open(2)` and without a clock, until the host
        /// opens this FIFO for writing (the run that claims a pooled environment, issue 33);
        /// the `--timeout-s` wait for the go begins then.
        #[arg(long, value_name = "FIFO", conflicts_with = "probe")]
        claim: Option<PathBuf>,
        /// With `--go`: after the go, read the agent's variables from this FIFO, where the
        /// host writes them (`cyclix::run::handover`); the agent never starts without them.
        #[arg(long, value_name = "FIFO", conflicts_with = "probe", requires = "vars")]
        handover: Option<PathBuf>,
        /// The names of the variables the hand-over must carry, comma-separated: exactly
        /// these, each once.
        #[arg(
            long,
            value_name = "NAMES",
            value_delimiter = ',',
            requires = "handover"
        )]
        vars: Vec<String>,
        /// A file the agent gets as its standard input (a preset CLI's task).
        #[arg(long)]
        stdin: Option<PathBuf>,
        /// The agent's argv.
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Run the boundary probe suite INSIDE an agent container (hidden: cyclix runs it with
    /// `podman exec` before the agent starts; see `cyclix::probe`).
    #[command(hide = true)]
    Probe(ProbeArgs),
    /// The escape drill: one run of TENANT per escape, its task replaced by a prompt asking the
    /// agent to try exactly that escape (read a planted key, write outside, write a hook into
    /// the repository, kill a host process, reach host sockets, send the canary out, misuse
    /// the placeholder key); the verdict reads the host, never the model's words. Exit 0: every
    /// applicable escape attempted and refused; 1: one got through or was not attempted.
    Drill {
        /// The tenant.
        tenant: String,
        /// The model the drill's runs ask for (recorded in each run's record as `model`).
        #[arg(long)]
        model: Option<String>,
        /// JSON (schema `cyclix-drill/1`).
        #[arg(long)]
        json: bool,
        /// Only this escape (repeatable): ssh-key, write-outside, repo-hook, kill-sentinel,
        /// host-sockets, canary-out, placeholder-elsewhere.
        #[arg(long, value_name = "ESCAPE")]
        only: Vec<String>,
    },
    /// List what cyclix left on this host (containers, pods, networks, volumes, secrets, unit
    /// files, worktrees, run dirs), each tied to its run; never deletes anything.
    Leftovers {
        /// JSON (schema `cyclix-leftovers/1`).
        #[arg(long)]
        json: bool,
    },
    /// Build two environments of TENANT from one commit at the same time, prove each with the
    /// probes, run the gate's quick suite (`gate.quick`, default `gate.command`) in each and in
    /// a reference over a clean checkout, tear everything down and compare. Exit 0: identical
    /// results, no shared name, nothing left; 1: a difference, a failed probe, a build error,
    /// a shared name or a leftover; 2: cyclix failed.
    Twin {
        /// The tenant.
        tenant: String,
        /// Use this spec file instead of `~/.config/cyclix/tenants/TENANT.yaml`.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Unit flavour [default: as for `run`].
        #[arg(long, value_enum)]
        backend: Option<Backend>,
        /// JSON (schema `cyclix-twin/1`).
        #[arg(long)]
        json: bool,
        /// Run the twin only when a setup path (`setup:`, the files `build:` names,
        /// `.cyclix/`) differs between REV and `--at`; otherwise print "setup unchanged" and
        /// exit 0 (for CI: docs/ci/).
        #[arg(long, value_name = "REV")]
        if_setup_changed: Option<String>,
        /// With --if-setup-changed: the revision to compare with and to run the twin at
        /// [default: HEAD of the tenant's repository].
        #[arg(long, value_name = "REV", requires = "if_setup_changed")]
        at: Option<String>,
    },
    /// Show what the agent and the gate of a run printed (redacted; `-f` follows a run).
    Logs {
        /// The tenant.
        tenant: String,
        /// The run (its id, as `cyclix status` names it); default: the run in progress, else
        /// the last one.
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// Then print every line as it is written, until the run ends.
        #[arg(short = 'f', long)]
        follow: bool,
        /// How many lines of each of the agent's and the gate's output (0: all).
        #[arg(short = 'n', long, default_value_t = 200)]
        lines: u32,
        /// A preset CLI's JSON events as it wrote them (default: its messages, tool calls and
        /// results, one per line).
        #[arg(long)]
        raw: bool,
    },
    // Issue 18 (items 2, 3, 5, 7): init, completions, runs, uninstall.
    /// Write a commented, valid spec for TENANT at `~/.config/cyclix/tenants/TENANT.yaml` for
    /// the git repository REPO (refused if the file exists; nothing is written unless it
    /// validates).
    Init {
        /// The tenant's name (a-z, 0-9, `-`).
        tenant: String,
        /// The project's git repository.
        #[arg(long)]
        repo: PathBuf,
        /// The agent CLI preset: claude-code, codex, aider, gemini-cli or script.
        #[arg(long, default_value = "script")]
        preset: String,
    },
    /// Print the shell completion script (verbs, options and tenant names, completed by this
    /// binary): `cyclix completions bash > ~/.local/share/bash-completion/completions/cyclix`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: String,
    },
    /// The run history from the records: when, result, duration, branch, cause; newest first.
    Runs {
        /// Only this tenant (default: every tenant).
        tenant: Option<String>,
        /// JSON (schema `cyclix-runs/1`).
        #[arg(long, conflicts_with = "svg")]
        json: bool,
        /// Only the newest N runs (N >= 1; default: every run, or 20 with --svg).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        last: Option<u32>,
        /// Write the runs as a timeline of their phases to FILE, a self-contained SVG (one bar
        /// per phase, coloured by the run's result), instead of the list; `-`: to stdout. An
        /// existing FILE must be a regular file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// Remove old runs of TENANT (default: every tenant): their record, logs and run branch.
    /// Never the newest run, never a run in progress or awaiting convergence; a branch that is
    /// neither in `repo.base` nor pushed goes only with --keep-branches (beyond the newest N) or
    /// --force
    #[command(group(clap::ArgGroup::new("rule").required(true).args(["keep", "older_than"])))]
    Prune {
        /// Only this tenant (default: every tenant with records).
        tenant: Option<String>,
        /// Keep the newest N runs (N >= 1).
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Remove runs that started longer ago than D: days (`30d`) or a duration (`12h`).
        #[arg(long, value_name = "D")]
        older_than: Option<String>,
        /// Also delete run branches that are neither in `repo.base` nor pushed (the only copy).
        #[arg(long, conflicts_with = "keep_branches")]
        force: bool,
        /// Of the branches that are neither in `repo.base` nor pushed, keep the newest N (N >= 1);
        /// older ones go with their runs when the run left them so (e.g. nightly branches).
        #[arg(long, value_name = "N")]
        keep_branches: Option<usize>,
        /// Print what would go; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove what `cyclix install` installed: unit templates, timers and their drop-ins, man
    /// pages, completions and the spec schema (never records, branches or specs).
    Uninstall,
    /// Run the spec's `notify.command` with the latest run's summary as JSON on stdin (hidden:
    /// what `cyclix-notify@TENANT.service` runs through the run unit's `OnFailure=`).
    #[command(hide = true)]
    Notify {
        /// The tenant.
        tenant: String,
    },
    /// Write the files the Debian package ships besides the binary (unit templates, man pages,
    /// bash completion, spec schema) below DIR, for the package's binary (hidden: `scripts/deb`
    /// runs it).
    #[command(hide = true)]
    PackageTree {
        /// An empty or new directory: the package's root.
        dir: PathBuf,
        /// The binary the units and the completion name.
        #[arg(long, default_value = "/usr/bin/cyclix")]
        bin: String,
    },
}

/// `cyclix probe …`: the suite's own arguments, defined beside it ([`crate::probe::suite`]).
pub use crate::probe::suite::Args as ProbeArgs;

/// `cyclix images ...`
#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Build `localhost/cyclix-proxy:latest`, `localhost/cyclix-agent-python:latest`,
    /// `localhost/cyclix-postgres:latest` and `localhost/cyclix-git:latest`.
    Build {
        /// Build only this agent preset's image (`claude-code`, `codex`, `aider`, `gemini-cli`):
        /// `localhost/cyclix-agent-PRESET:VERSION`, offline, from the pinned packages of
        /// `images/agents/packages.lock` (fetch them with `scripts/fetch-agent-packages PRESET`).
        #[arg(long, value_name = "PRESET", conflicts_with = "tenant")]
        preset: Option<String>,
        /// Build the images TENANT's spec builds from the project's files (`build:`), from
        /// its base commit, ahead of its runs.
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
        /// The package cache (files at `DIR/ALGO/HEX`); inside the testbed
        /// `/opt/cyclix-packages`. Read only with --preset.
        #[arg(
            long,
            value_name = "DIR",
            env = "CYCLIX_PACKAGES",
            default_value = "/var/tmp/cyclix-packages"
        )]
        packages: std::path::PathBuf,
    },
}

/// `cyclix pool ...`
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Destroy environments left half-made by a filler that died and ready ones that are dead
    /// (their proxy or pod unit not active), then fill TENANT's pool to its `size` once and
    /// exit (exit 1: the tenant cannot have a warm pool, or a fill failed).
    Fill {
        /// The tenant.
        tenant: String,
    },
    /// Keep TENANT's pool until SIGTERM (what `cyclix-pool@TENANT.service` runs): destroy
    /// half-made and dead environments, fill to `size`, refill after each claim, destroy
    /// environments idle past `max_idle`; with a schedule, fill only from `warm_before` before the timer's
    /// next elapse. Its state is in `$XDG_RUNTIME_DIR/cyclix/pool/TENANT/keeper.json`.
    Keep {
        /// The tenant.
        tenant: String,
    },
    /// Destroy TENANT's ready environments that are dead (their proxy or pod unit not active)
    /// or idle past its pool's `max_idle`; with `--all`, every ready one (after rebuilding an
    /// unpinned local image or changing a Quadlet drop-in: a ready environment keeps what it
    /// was made with; the keeper refills).
    Expire {
        /// The tenant.
        tenant: String,
        /// Every ready environment, idle or not.
        #[arg(long, conflicts_with = "now_ms")]
        all: bool,
        /// The time to judge idleness at, in ms since the Unix epoch (tests).
        #[arg(long, hide = true)]
        now_ms: Option<u128>,
    },
}

/// `cyclix egress ...`
#[derive(Debug, Subcommand)]
pub enum EgressCommand {
    /// The hosts the proxy refused TENANT's agent in its last runs (not on the allowlist), with
    /// counts, ports and the first URL, and the `egress.allow` entries that would allow them
    /// (checked like the spec's; never written: cyclix edits no spec).
    Suggest {
        /// The tenant.
        tenant: String,
        /// How many of its last runs to read.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// JSON (schema `cyclix-egress-suggest/1`).
        #[arg(long)]
        json: bool,
    },
}

/// `cyclix demo ...`
#[derive(Debug, Subcommand)]
pub enum DemoCommand {
    /// Create the demo project (a git repo whose test fails), its task and its tenant spec.
    Setup,
}

/// `cyclix spec ...`
#[derive(Debug, Subcommand)]
pub enum SpecCommand {
    /// Load and validate a spec; print every problem as `FILE:LINE:COL: KEY: message`.
    Validate {
        /// The spec file (YAML).
        file: PathBuf,
        /// Print the validated spec (or the diagnostics) as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of a spec (generated from the key tables; `cyclix install` writes
    /// it to `~/.local/share/cyclix/spec.schema.json` for editors).
    Schema,
}

/// `cyclix tier ...`
#[derive(Debug, Subcommand)]
pub enum TierCommand {
    /// Describe one tier, or all of them, from the same table `check` and the docs use.
    Describe {
        /// direct, worktree or container; all when omitted.
        tier: Option<Tier>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `cyclix render ...`
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("input").required(true).args(["spec", "demo"]))]
#[command(group = clap::ArgGroup::new("output").required(true).args(["out", "stdout"]))]
pub struct RenderArgs {
    /// The tenant spec file.
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Use the embedded demo tenant's spec instead of a file.
    #[arg(long)]
    pub demo: bool,
    /// The run id (`[a-z0-9][a-z0-9-]*`, at most 48 characters).
    #[arg(long)]
    pub run_id: String,
    /// Write the files below this directory (`quadlet/`, `units/`, `run/`, `user/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the files to stdout, each after a `# ==> DIR/NAME <==` line.
    #[arg(long)]
    pub stdout: bool,
    /// Unit flavour: Quadlet (podman ≥ 5) or plain services (podman < 5).
    #[arg(long, value_enum, default_value_t = Backend::Quadlet)]
    pub backend: Backend,
    /// Host path of the run's worktree [default: ~/.local/share/cyclix/worktrees/TENANT/RUN].
    #[arg(long)]
    pub worktree: Option<String>,
    /// Host path of the run's state directory [default: `$XDG_RUNTIME_DIR/cyclix/runs/RUN`].
    #[arg(long)]
    pub run_dir: Option<String>,
    /// Third octet of the run's internal subnet 10.213.N.0/24 [default: derived from the run id].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=254))]
    pub subnet_octet: Option<u8>,
    /// Absolute path of the cyclix binary written into the unit template [default: this binary].
    #[arg(long)]
    pub cyclix_bin: Option<String>,
}

impl clap::ValueEnum for Tier {
    fn value_variants<'a>() -> &'a [Self] {
        &[Tier::Direct, Tier::Worktree, Tier::Container, Tier::Gvisor]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// `--storage-lock-wait`: a duration as in the spec (`90s`, `2m`, `1h`), at most one hour.
fn lock_wait(s: &str) -> Result<std::time::Duration, String> {
    let secs = crate::spec::validate::duration_s(s)?;
    if secs > 3600 {
        return Err(format!("`{s}` is longer than 1h"));
    }
    Ok(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_storage_lock_wait_is_a_strict_duration_with_a_60s_default() {
        let wait = |extra: &[&str]| {
            let mut argv = vec!["cyclix", "run", "acme"];
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Run {
                    storage_lock_wait, ..
                }) => Ok(storage_lock_wait.as_secs()),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e.to_string()),
            }
        };
        assert_eq!(wait(&["--storage-lock-wait", "2m"]), Ok(120));
        assert_eq!(wait(&["--storage-lock-wait", "3s"]), Ok(3));
        for bad in ["60", "1h1s", "-1s", "5 s", "2h"] {
            assert!(wait(&["--storage-lock-wait", bad]).is_err(), "{bad}");
        }
        // The default (when CYCLIX_STORAGE_LOCK_WAIT is not set in the test's environment).
        if std::env::var_os("CYCLIX_STORAGE_LOCK_WAIT").is_none() {
            assert_eq!(wait(&[]), Ok(60));
        }
    }

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn render_needs_an_input_and_an_output() {
        assert!(Cli::try_parse_from(["cyclix", "render", "--run-id", "r1", "--stdout"]).is_err());
        assert!(Cli::try_parse_from(["cyclix", "render", "--demo", "--run-id", "r1"]).is_err());
        assert!(
            Cli::try_parse_from(["cyclix", "render", "--demo", "--run-id", "r1", "--stdout"])
                .is_ok()
        );
        assert!(
            Cli::try_parse_from([
                "cyclix",
                "render",
                "--demo",
                "--run-id",
                "r",
                "--stdout",
                "--subnet-octet",
                "255"
            ])
            .is_err()
        );
    }
}
