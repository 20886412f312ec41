//! The orchestrator of the verbs: wires spec → render → output, and owns user-facing printing
//! on stdout. Business rules live in the pure modules; this file only dispatches, one file per
//! verb below `app/` (`tenant.rs` loads a tenant and builds its run inputs, `spec_file.rs` reads
//! spec files, `clock.rs` names and prints time).

pub mod agent_wait;
pub mod bench_cmd;
pub mod check_cmd;
pub mod clock;
pub mod completion;
pub mod completions_cmd;
pub mod current_run;
pub mod demo_cmd;
pub mod drill_cmd;
pub mod egress_cmd;
pub mod export_cmd;
pub mod history;
pub mod host_config;
pub mod image_builds;
pub mod images_cmd;
pub mod init_cmd;
pub mod install_cmd;
pub mod installer;
pub mod kube_export;
pub mod kube_run;
pub mod launch;
pub mod leftovers_cmd;
pub mod logs_cmd;
pub mod metrics;
pub mod notify_cmd;
pub mod package_cmd;
pub mod pause_cmd;
pub mod plant;
pub mod pool_cmd;
pub mod pool_ops;
pub mod prune_cmd;
pub mod render_cmd;
pub mod run_cmd;
pub mod run_context;
pub mod run_output;
pub mod runs_cmd;
pub mod schedule;
pub mod spec_cmd;
pub mod spec_file;
pub mod start_cmd;
pub mod status_cmd;
pub mod stop_cmd;
pub mod tenant;
pub mod tick_cmd;
pub mod tier_cmd;
pub mod twin_cmd;
pub mod uninstall_cmd;
pub mod unit_cmd;

use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::cli::{
    Cli, Command, DemoCommand, EgressCommand, ExportCommand, ImagesCommand, SpecCommand,
    TierCommand,
};
use crate::context::HostEnv;
use crate::exit::Outcome;

/// Runs the verb.
///
/// `$HOME` and the XDG directories ([`HostEnv`]) are read here, once, for the verbs that need
/// them, and passed down; the others (`unit`, `probe`, `agent-wait`, `tier`, `images`,
/// `bench-private-repo`) run without `$HOME`.
///
/// # Errors
/// Only for failures of cyclix itself (I/O); findings are `Ok(Outcome::Findings)`.
pub fn run(cli: &Cli) -> Result<Outcome> {
    let env = HostEnv::from_env;
    match &cli.command {
        Command::Spec(SpecCommand::Validate { file, json }) => spec_cmd::run(&env()?, file, *json),
        Command::Render(args) => render_cmd::run(&env()?, args),
        Command::Run {
            tenant,
            spec,
            run_id,
            backend,
            storage_lock_wait,
        } => run_cmd::run(
            &env()?,
            tenant,
            spec.as_deref(),
            run_id.as_deref(),
            *backend,
            *storage_lock_wait,
        ),
        Command::Images(ImagesCommand::Build {
            preset,
            tenant,
            packages,
        }) => images_cmd::dispatch(preset.as_deref(), tenant.as_deref(), packages, env),
        Command::Demo(DemoCommand::Setup) => demo_cmd::run(&env()?),
        Command::Egress(EgressCommand::Suggest { tenant, runs, json }) => {
            egress_cmd::suggest(&env()?, tenant, *runs, *json)
        }
        Command::Pool(cmd) => pool_cmd::dispatch(&env()?, cmd),
        Command::Install { tenant } => install_cmd::run(&env()?, tenant.as_deref()),
        Command::Start { tenant, wait_s } => {
            start_cmd::run(&env()?, tenant, Duration::from_secs(*wait_s))
        }
        Command::Stop { tenant } => stop_cmd::run(&env()?, tenant),
        Command::Pause { tenant } => pause_cmd::pause(&env()?, tenant),
        Command::Resume { tenant } => pause_cmd::resume(&env()?, tenant),
        Command::Tick { tenant } => tick_cmd::run(&env()?, tenant),
        Command::Status { tenant, json } => status_cmd::run(&env()?, tenant.as_deref(), *json),
        Command::Logs {
            tenant,
            run,
            follow,
            lines,
            raw,
        } => {
            // The tenant's name is judged before `$HOME` is needed.
            tenant::check_name(tenant)?;
            logs_cmd::run(&env()?, tenant, run.as_deref(), *follow, *lines, *raw)
        }
        Command::Check {
            quick,
            json,
            tenant,
        } => check_cmd::run(&env()?, *quick, *json, tenant.as_deref()),
        c @ Command::AgentWait { .. } => agent_wait::from_command(c),
        Command::BenchRender { tenants } => bench_cmd::run(&env()?, *tenants),
        Command::BenchPrivateRepo { repo, base, out } => bench_cmd::private_repo(repo, base, out),
        Command::Probe(args) => Ok(Outcome::from_passed(crate::probe::main(args)?)),
        Command::Leftovers { json } => leftovers_cmd::run(&env()?, *json),
        Command::Drill {
            tenant,
            model,
            json,
            only,
        } => drill_cmd::run(&env()?, tenant, model.as_deref(), *json, only),
        cmd @ Command::Twin { .. } => twin_cmd::dispatch(&env()?, cmd),
        Command::Unit(args) => unit_cmd::run(args),
        Command::Tier(TierCommand::Describe { tier, json }) => tier_cmd::run(*tier, *json),
        Command::Export(ExportCommand::Kube(args)) => export_cmd::run(&env()?, args),
        Command::KubeRun(args) => kube_run::run(&env()?, args),
        // Issue 18.
        Command::Spec(SpecCommand::Schema) => {
            print_out(&crate::spec::schema::json_schema_text())?;
            Ok(Outcome::Ok)
        }
        Command::Init {
            tenant,
            repo,
            preset,
        } => init_cmd::run(&env()?, tenant, repo, preset),
        Command::Completions { shell } => completions_cmd::print(shell),
        Command::Runs {
            tenant,
            json,
            last,
            svg,
        } => runs_cmd::run(&env()?, tenant.as_deref(), *json, svg.as_deref(), *last),
        cmd @ Command::Prune { .. } => prune_cmd::dispatch(&env()?, cmd),
        Command::Uninstall => uninstall_cmd::run(&env()?),
        Command::Notify { tenant } => notify_cmd::run(&env()?, tenant),
        Command::PackageTree { dir, bin } => package_cmd::run(dir, bin),
    }
}

fn print_out(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes()).context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

pub use crate::run::reserve::default_subnet_octet;
