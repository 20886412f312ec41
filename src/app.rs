//! The orchestrator of the verbs: wires spec → render → output, and owns user-facing printing
//! on stdout. Business rules live in the pure modules; this file only sequences them.

pub mod agent_wait;
pub mod bench_cmd;
pub mod check_cmd;
pub mod leftovers_cmd;
pub mod ops;
pub mod tick_cmd;
pub mod twin_cmd;
pub mod unit_cmd;

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::Path;

use anyhow::{Context as _, Result};

use crate::cli::{Cli, Command, DemoCommand, ImagesCommand, RenderArgs, SpecCommand, TierCommand};
use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;
use crate::render::{self, Backend, RunContext};
use crate::spec::{self, MAX_SPEC_BYTES, Spec, SpecContext, SpecError};
use crate::tier::{TIERS, TierFacts};

/// Runs the verb.
///
/// # Errors
/// Only for failures of cyclix itself (I/O); findings are `Ok(Outcome::Findings)`.
pub fn run(cli: &Cli) -> Result<Outcome> {
    match &cli.command {
        Command::Spec(SpecCommand::Validate { file, json }) => spec_validate(file, *json),
        Command::Render(args) => render_cmd(args),
        Command::Run {
            tenant,
            spec,
            run_id,
            backend,
            storage_lock_wait,
        } => ops::run(
            tenant,
            spec.as_deref(),
            run_id.as_deref(),
            *backend,
            *storage_lock_wait,
        ),
        Command::Images(ImagesCommand::Build) => ops::images_build(),
        Command::Demo(DemoCommand::Setup) => ops::demo_setup(),
        Command::Install { tenant } => ops::install(tenant.as_deref()),
        Command::Start { tenant, wait_s } => {
            ops::start(tenant, std::time::Duration::from_secs(*wait_s))
        }
        Command::Stop { tenant } => ops::stop(tenant),
        Command::Tick { tenant } => tick_cmd::run(tenant),
        Command::Status { tenant, json } => ops::status(tenant, *json),
        Command::Logs { tenant, lines } => ops::logs(tenant, *lines),
        Command::Check {
            quick,
            json,
            tenant,
        } => check_cmd::run(*quick, *json, tenant.as_deref()),
        Command::AgentWait {
            go,
            timeout_s,
            argv,
        } => agent_wait::run(go, *timeout_s, argv),
        Command::BenchRender { tenants } => bench_cmd::run(*tenants),
        Command::BenchPrivateRepo { repo, base, out } => bench_cmd::private_repo(repo, base, out),
        Command::Probe(args) => Ok(if crate::probe::main(args)? {
            Outcome::Ok
        } else {
            Outcome::Findings
        }),
        Command::Leftovers { json } => leftovers_cmd::run(*json),
        Command::Twin {
            tenant,
            spec,
            backend,
            json,
        } => twin_cmd::run(tenant, spec.as_deref(), *backend, *json),
        Command::Unit(args) => {
            let code = unit_cmd::run(args)?;
            Ok(if code == std::process::ExitCode::SUCCESS {
                Outcome::Ok
            } else {
                Outcome::Findings
            })
        }
        Command::Tier(TierCommand::Describe { tier, json }) => {
            let facts: Vec<&TierFacts> = match tier {
                Some(t) => vec![t.facts()],
                None => TIERS.iter().collect(),
            };
            print_out(&if *json {
                format!("{}\n", serde_json::to_string_pretty(&facts)?)
            } else {
                tier_text(&facts)
            })?;
            Ok(Outcome::Ok)
        }
    }
}

fn print_out(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes()).context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

/// The human form of `tier describe`.
#[must_use]
pub fn tier_text(facts: &[&TierFacts]) -> String {
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mut s = String::new();
    for f in facts {
        let _ = writeln!(s, "{}: {}", f.tier, f.summary);
        let _ = writeln!(s, "  isolates versions:  {}", yn(f.isolates_versions));
        let _ = writeln!(s, "  isolates rights:    {}", yn(f.isolates_rights));
        let _ = writeln!(s, "  network restricted: {}", yn(f.network_restricted));
        let _ = writeln!(s, "  use when: {}", f.use_when);
        let _ = writeln!(s, "  does not protect against:");
        for d in f.does_not_protect_against {
            let _ = writeln!(s, "    - {d}");
        }
    }
    s
}

fn spec_context(file: &str, env: &HostEnv) -> SpecContext {
    SpecContext {
        file: file.to_string(),
        home: path_str(&env.home),
        runtime_dir: env
            .runtime_dir
            .as_deref()
            .map_or_else(|| "/run/user".to_string(), path_str),
    }
}

/// Reads a spec file with the size cap applied before parsing (security-cases §4).
///
/// # Errors
/// I/O failures (missing file, unreadable) as cyclix errors; an oversized or non-UTF-8 file is
/// returned as a spec finding.
pub fn read_spec_text(path: &Path) -> Result<std::result::Result<String, SpecError>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("opening spec {}", path.display()))?;
    let mut buf = Vec::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading spec {}", path.display()))?;
    let name = path.display().to_string();
    if buf.len() as u64 > MAX_SPEC_BYTES {
        return Ok(Err(SpecError::single(
            &name,
            format!("the file is larger than {MAX_SPEC_BYTES} bytes"),
            "a tenant spec is a few KiB; check that this is the right file",
        )));
    }
    match String::from_utf8(buf) {
        Ok(s) => Ok(Ok(s)),
        Err(e) => Ok(Err(SpecError::single(
            &name,
            format!(
                "the file is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
            "save the file as UTF-8 without a byte-order mark",
        ))),
    }
}

/// Loads and validates a spec: `Ok(Err(_))` for an invalid spec. Mount sources are also
/// checked against this host's protected paths and walked shallowly for git directories
/// (`host::mount_scan::SHALLOW`).
///
/// # Errors
/// I/O failures.
pub fn load_spec(path: &Path, env: &HostEnv) -> Result<std::result::Result<Spec, SpecError>> {
    Ok(load_spec_with_notes(path, env)?.0)
}

/// [`load_spec`] with the notes of the shallow mount walk (a walk that stopped at its bound
/// says so: `spec validate` prints them).
///
/// # Errors
/// I/O failures.
pub fn load_spec_with_notes(
    path: &Path,
    env: &HostEnv,
) -> Result<(std::result::Result<Spec, SpecError>, Vec<String>)> {
    let file = path.display().to_string();
    let spec = match read_spec_text(path)?
        .and_then(|text| spec::parse(&text, &spec_context(&file, env)))
    {
        Ok(s) => s,
        Err(e) => return Ok((Err(e), Vec::new())),
    };
    let found = crate::host::mount_scan::scan(&spec, env, &[], crate::host::mount_scan::SHALLOW);
    if found.diagnostics.is_empty() {
        Ok((Ok(spec), found.notes))
    } else {
        Ok((
            Err(SpecError {
                file,
                diagnostics: found.diagnostics,
            }),
            found.notes,
        ))
    }
}

fn report_spec_error(e: &SpecError, json: bool) -> Result<Outcome> {
    if json {
        print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&e.to_json())?
        ))?;
    }
    crate::stderr!("{e}");
    if !e.to_string().ends_with('\n') {
        crate::stderrln!();
    }
    Ok(Outcome::Findings)
}

fn spec_validate(file: &Path, json: bool) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let (loaded, notes) = load_spec_with_notes(file, &env)?;
    for note in notes {
        crate::stderrln!("{}: note: {note}", file.display());
    }
    let spec = match loaded {
        Ok(s) => s,
        Err(e) => return report_spec_error(&e, json),
    };
    // A spec is only valid if both backends can carry it (Quadlet refuses some argv words).
    let run = default_run_context(
        &spec,
        "validate",
        &env,
        None,
        None,
        None,
        "/usr/local/bin/cyclix",
    );
    for backend in [Backend::Quadlet, Backend::Plain] {
        if let Err(e) = render::render(&spec, &run, backend) {
            let err = SpecError::single(
                &file.display().to_string(),
                format!("{e} (while rendering for the {backend:?} backend)"),
                "change the value so the unit can carry it",
            );
            return report_spec_error(&err, json);
        }
    }
    if json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(&spec)?))?;
    } else {
        print_out(&format!(
            "{}: ok (tenant {}, tier {})\n",
            file.display(),
            spec.tenant,
            spec.tier
        ))?;
    }
    Ok(Outcome::Ok)
}

pub use crate::run::reserve::default_subnet_octet;

fn default_run_context(
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
            || {
                path_str(
                    &env.data_home
                        .join("cyclix/worktrees")
                        .join(&spec.tenant)
                        .join(run_id),
                )
            },
            str::to_string,
        ),
        run_dir: run_dir.map_or_else(|| format!("{runtime}/cyclix/runs/{run_id}"), str::to_string),
        subnet_octet: octet.unwrap_or_else(|| default_subnet_octet(run_id)),
        proxy_image: crate::images::PROXY_IMAGE.to_string(),
        cyclix_bin: cyclix_bin.to_string(),
        service_ports: crate::render::plan::preview_ports(spec),
    }
}

fn render_cmd(args: &RenderArgs) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let loaded = match &args.spec {
        Some(path) => load_spec(path, &env)?,
        None => spec::parse(
            crate::demo::TENANT_YAML,
            &spec_context("<embedded demo tenant.yaml>", &env),
        ),
    };
    let spec = match loaded {
        Ok(s) => s,
        Err(e) => return report_spec_error(&e, false),
    };
    if let Err(m) = spec::validate::run_id(&args.run_id) {
        crate::stderrln!("error: --run-id `{}`: {m}", args.run_id);
        return Ok(Outcome::Findings);
    }
    let bin = match &args.cyclix_bin {
        Some(b) => b.clone(),
        None => path_str(&current_exe()?),
    };
    let run = default_run_context(
        &spec,
        &args.run_id,
        &env,
        args.worktree.as_deref(),
        args.run_dir.as_deref(),
        args.subnet_octet,
        &bin,
    );
    let mut rendered = match render::render(&spec, &run, args.backend) {
        Ok(r) => r,
        Err(e) => {
            crate::stderrln!("error: cannot render the run: {e}");
            return Ok(Outcome::Findings);
        }
    };
    let templates = match render::units::templates(&bin) {
        Ok(t) => t,
        Err(e) => {
            crate::stderrln!("error: {e}");
            return Ok(Outcome::Findings);
        }
    };
    rendered.files.extend(templates);
    match render::units::timer_dropin(&spec) {
        Ok(Some(d)) => rendered.files.push(d),
        Ok(None) => {}
        Err(e) => {
            crate::stderrln!("error: {e}");
            return Ok(Outcome::Findings);
        }
    }
    for w in &rendered.warnings {
        tracing::warn!("{w}");
    }
    if args.stdout {
        let mut s = String::new();
        for f in &rendered.files {
            let _ = write!(
                s,
                "# ==> {}/{} <==\n{}\n",
                f.dest.dir_name(),
                f.name,
                f.contents
            );
        }
        print_out(&s)?;
    } else if let Some(out) = &args.out {
        write_tree(out, &rendered.files)?;
        crate::stderrln!(
            "wrote {} files below {}",
            rendered.files.len(),
            out.display()
        );
    }
    Ok(Outcome::Ok)
}

/// Writes rendered files below `root/<dest>/<name>`, each atomically (temp file + rename).
///
/// # Errors
/// I/O failures, naming the file.
pub fn write_tree(root: &Path, files: &[render::RenderedFile]) -> Result<()> {
    for f in files {
        let path = root.join(f.dest.dir_name()).join(&f.name);
        let dir = path
            .parent()
            .context("invariant: rendered files have a parent directory")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join(format!(".{}.tmp", f.name.replace('/', "_")));
        std::fs::write(&tmp, &f.contents).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("renaming into {}", path.display()))?;
    }
    Ok(())
}
