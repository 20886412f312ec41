//! `cyclix completions SHELL`: the shell's registration script for `clap_complete`'s dynamic
//! completion (issue 18, item 2). The script calls this binary back with `COMPLETE=SHELL` at
//! each Tab, so the verbs and options are always this binary's, and the tenant names are read
//! from the spec directory (`~/.config/cyclix/tenants/*.yaml`) at that moment.

use anyhow::Result;
use clap::CommandFactory as _;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

use super::completion::{registration, tenant_names};
use crate::cli::Cli;
use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;

/// Whether `args` (the process's argv) is a call of the registration script: `cyclix` alone
/// (print the registration) or `cyclix -- WORDS` (complete WORDS). Only then does `main` honour
/// [`COMPLETE_VAR`]: inside the agent's container the image's `ENV` sets the environment of
/// `cyclix agent-wait … -- ARGV` and `cyclix probe`, and `COMPLETE` there would make them print
/// candidates (joined by the image's `_CLAP_IFS`: forged report lines in the Kubernetes agent's
/// log, which the runner reads the suite from) and exit without probing (`e2e_attacks_image_env_and_pool_service`). Pure.
pub fn is_completion_call<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> bool {
    args.into_iter().nth(1).is_none_or(|a| a == "--")
}

/// The clap command with tenant-name candidates on every `tenant` argument (what the
/// completion engine walks; `main` hands it to `CompleteEnv`).
#[must_use]
pub fn command() -> clap::Command {
    with_tenants(Cli::command())
}

fn with_tenants(mut cmd: clap::Command) -> clap::Command {
    if cmd.get_name() != "init" && cmd.get_arguments().any(|a| a.get_id() == "tenant") {
        cmd = cmd.mut_arg("tenant", |a| {
            a.add(ArgValueCandidates::new(tenant_candidates))
        });
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for s in subs {
        cmd = cmd.mut_subcommand(s, with_tenants);
    }
    cmd
}

/// The tenants with a spec file, sorted; none when `$HOME` is unknown or the directory is
/// missing (completion never fails loudly).
fn tenant_candidates() -> Vec<CompletionCandidate> {
    let Ok(env) = HostEnv::from_env() else {
        return Vec::new();
    };
    tenant_names(&env.layout().tenants_dir())
        .into_iter()
        .map(CompletionCandidate::new)
        .collect()
}

/// `cyclix completions SHELL`.
///
/// # Errors
/// An unknown shell, or stdout closed.
pub fn print(shell: &str) -> Result<Outcome> {
    let bin = path_str(&current_exe()?);
    super::print_out(&registration(shell, &bin)?)?;
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_registration_scripts_calls_complete() {
        let call = |a: &[&str]| is_completion_call(a.iter().map(std::ffi::OsString::from));
        assert!(call(&["cyclix"]));
        assert!(call(&["/usr/bin/cyclix", "--", "cyclix", "ru"]));
        assert!(!call(&[
            "/cyclix/bin/cyclix",
            "agent-wait",
            "--probe",
            "c",
            "--",
            "sh",
            "-c"
        ]));
        assert!(!call(&[
            "/cyclix/bin/cyclix",
            "probe",
            "--context",
            "c",
            "--watch"
        ]));
        assert!(!call(&["cyclix", "run", "t"]));
    }

    use super::*;

    #[test]
    fn an_unknown_shell_names_the_known_ones() {
        let e = registration("tcsh", "/usr/bin/cyclix").expect_err("tcsh");
        assert_eq!(
            e.to_string(),
            "unknown shell `tcsh`; one of: bash, elvish, fish, powershell, zsh"
        );
        let bash = registration("bash", "/opt/c y/cyclix").expect("bash");
        assert!(bash.contains("COMPLETE=\"bash\""), "{bash}");
        assert!(bash.contains("'/opt/c y/cyclix'"), "{bash}");
        assert!(bash.contains("-F _clap_complete_cyclix cyclix"), "{bash}");
    }

    #[test]
    fn tenant_names_are_the_valid_spec_stems() {
        let d = tempfile::tempdir().expect("tmp");
        for f in [
            "acme.yaml",
            "beta.yaml",
            "Bad Name.yaml",
            "notes.txt",
            "acme.env",
        ] {
            std::fs::write(d.path().join(f), "").expect("write");
        }
        assert_eq!(tenant_names(d.path()), ["acme", "beta"]);
        assert!(tenant_names(&d.path().join("missing")).is_empty());
    }

    #[test]
    fn every_tenant_argument_gets_candidates() {
        let mut cmd = command();
        cmd.build();
        let run = cmd.find_subcommand("run").expect("run");
        let tenant = run
            .get_arguments()
            .find(|a| a.get_id() == "tenant")
            .expect("tenant");
        assert!(tenant.get::<ArgValueCandidates>().is_some());
    }
}
