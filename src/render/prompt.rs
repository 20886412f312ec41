//! What a preset agent reads first (issue 14 item 2): the run's environment, put in front of
//! the task in the prompt its CLI is given — the tier and what it does not protect against,
//! the allowlist, the services and their addresses, how to run the tests, and that the
//! repository metadata and the setup files are not its to change. Pure, from the spec alone
//! (addresses chosen at run time are named by the variable that holds them).

use std::fmt::Write as _;

use crate::spec::{HostPattern, Spec};

/// The heading the task starts under, after the environment.
pub const TASK_HEADING: &str = "## Your task";

/// The prompt for `spec`'s preset agent: the environment, then `task` under
/// [`TASK_HEADING`]. Pure.
#[must_use]
pub fn compose(spec: &Spec, task: &str) -> String {
    let mut s = String::from(
        "## Where you are (written by cyclix, the sandbox you run in)\n\
         You run unattended, without confirmations, in a rootless Podman container (cyclix tier \
         `container`): its root file system is read-only, it has no capabilities, and its only \
         way out is an egress proxy with an allowlist. Writable: the work tree /work and /tmp.\n\
         What the tier does not protect against: anything you do inside /work and /tmp, \
         what you send to an allowed host, and the API budget (the host counts every request).\n",
    );
    let _ = writeln!(
        s,
        "- Work tree: /work, a private git repository at the run's base commit. Commit your \
         work there with git; commits are the result."
    );
    let hosts: Vec<String> = spec
        .egress
        .allow
        .iter()
        .map(|h| match h {
            HostPattern::Exact(n) => n.clone(),
            HostPattern::Subdomains(d) => format!("*.{d}"),
        })
        .collect();
    let ports: Vec<String> = spec.egress.ports.iter().map(u16::to_string).collect();
    if hosts.is_empty() {
        let _ = writeln!(
            s,
            "- Network: no host is allowed; every request is refused (403)."
        );
    } else {
        let _ = writeln!(
            s,
            "- Network: only through the proxy in $HTTPS_PROXY, to {} on port(s) {}; anything \
             else is refused (403, or 407 for a tunnel).",
            hosts.join(", "),
            ports.join(", ")
        );
    }
    for c in &spec.agent.credentials {
        let _ = writeln!(
            s,
            "- Model API: {} through ${} only; ${} holds a placeholder the proxy swaps for the \
             key, worthless anywhere else.",
            c.host, c.base_url_env, c.env
        );
    }
    for svc in &spec.services {
        let var = format!(
            "CYCLIX_SERVICE_{}",
            svc.name.to_ascii_uppercase().replace('-', "_")
        );
        let _ = writeln!(
            s,
            "- Service `{}`: at ${var} (HOST:PORT), its database in ${var}_DATABASE.",
            svc.name
        );
        if svc.worktree {
            let _ = writeln!(
                s,
                "  It runs this project from /work, read-only to it, as the files are while you \
                 work (whether it reloads a changed file is up to the app)."
            );
        }
    }
    let _ = writeln!(
        s,
        "- Tests: after you exit, the gate runs `{}` in /work with no network; run it yourself \
         before you commit.",
        spec.gate.command.join(" ")
    );
    if let Some(n) = spec.agent.preset.as_ref().and_then(|p| p.max_turns) {
        let _ = writeln!(s, "- Budget: at most {n} turns.");
    }
    let _ = writeln!(
        s,
        "- Not yours to change: the repository metadata (.git: hooks, config, refs other than \
         your commits) and the setup files (.cyclix/). Changes there are not delivered."
    );
    let _ = writeln!(s, "- The environment as JSON: $CYCLIX_CONTEXT.\n");
    s.push_str(TASK_HEADING);
    s.push('\n');
    s.push_str(task);
    if !task.ends_with('\n') {
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{SpecContext, parse};

    fn spec(extra: &str) -> Spec {
        let text = format!(
            "tenant: acme\nrepo: {{path: /home/u/p, base: main}}\ntask: {{text: t}}\nagent:\n  preset: claude-code\n  max_turns: 9\ngate: {{image: localhost/g, unpinned_local_image: true, command: [make, test]}}\n{extra}"
        );
        let ctx = SpecContext {
            file: "t.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1".into(),
        };
        parse(&text, &ctx).expect("valid")
    }

    #[test]
    fn the_environment_comes_first_then_the_task_untouched() {
        let s = spec(
            "egress: {allow: [pypi.org, \"*.pythonhosted.org\"]}\nservices: [{name: db-main, image: localhost/pg, unpinned_local_image: true, port: 5432}]\n",
        );
        let p = compose(&s, "Fix calc.\n```sh\nexit 1\n```\n");
        let (env, task) = p.split_once(TASK_HEADING).expect("heading");
        assert_eq!(
            task, "\nFix calc.\n```sh\nexit 1\n```\n",
            "the task is verbatim"
        );
        for want in [
            "tier `container`",
            "does not protect against",
            "pypi.org, *.pythonhosted.org on port(s) 443",
            "api.anthropic.com through $ANTHROPIC_BASE_URL",
            "$CYCLIX_SERVICE_DB_MAIN",
            "runs `make test`",
            "at most 9 turns",
            "(.git: hooks, config",
            ".cyclix/",
        ] {
            assert!(env.contains(want), "missing {want:?} in:\n{env}");
        }
        let none = compose(&spec(""), "x");
        assert!(none.contains("no host is allowed"), "{none}");
        assert!(!env.contains("It runs this project"), "{env}");
        let app = compose(
            &spec(
                "services: [{name: app, image: localhost/a, unpinned_local_image: true, worktree: read_only}]\n",
            ),
            "x",
        );
        assert!(
            app.contains("$CYCLIX_SERVICE_APP (HOST:PORT)")
                && app.contains("It runs this project from /work, read-only to it"),
            "{app}"
        );
    }

    #[test]
    fn the_spec_and_render_agree_on_where_the_task_is() {
        assert_eq!(
            crate::spec::SANDBOX_TASK_PATH,
            crate::render::plan::TASK_PATH
        );
    }
}
