//! `cyclix init TENANT --repo PATH [--preset P]`: writes a commented spec that validates, with
//! a `# yaml-language-server: $schema=…` line pointing at the schema `cyclix install` writes
//! (issue 18, item 3), or at the Debian package's when it is installed. Nothing is written unless the text validates; an existing spec is never
//! replaced.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};

use super::spec_file::{schema_named, spec_context};
use crate::context::{HostEnv, path_str};
use crate::exit::Outcome;

/// The image the starter spec's script agent and gate use (`cyclix images build` makes it).
const STARTER_IMAGE: &str = "localhost/cyclix-agent-python:latest";

/// `cyclix init`.
///
/// # Errors
/// A bad tenant name or preset, a repository git cannot read, an existing spec, a starter that
/// does not validate (a repository path a mount cannot carry), or I/O.
pub fn run(env: &HostEnv, tenant: &str, repo: &Path, preset: &str) -> Result<Outcome> {
    super::tenant::check_name(tenant)?;
    if !crate::agents::presets::PRESETS.contains(&preset) {
        return Err(crate::exit::input(format!(
            "--preset `{}`: unknown preset; one of: {}",
            preset.escape_debug(),
            crate::agents::presets::PRESETS.join(", ")
        )));
    }
    let repo =
        std::path::absolute(repo).with_context(|| format!("resolving {}", repo.display()))?;
    let git = crate::git::Git::new(&repo);
    let base = match git.current_branch() {
        Ok(Some(b)) => b,
        Ok(None) => git
            .rev_parse_commit("HEAD")
            .map_err(|e| crate::exit::input(format!("--repo {}: {e}", repo.display())))?,
        Err(e) => {
            return Err(crate::exit::input(format!(
                "--repo {}: not a git repository git can read ({e}); fix: give the project's work tree",
                repo.display()
            )));
        }
    };
    let path = env.layout().tenant_spec(tenant);
    let python = is_python(&repo);
    let schema = schema_named(env);
    let text = starter(tenant, &path_str(&repo), &base, preset, &schema, python);
    let file = path.display().to_string();
    if let Err(e) = crate::spec::parse(&text, &spec_context(&file, env)) {
        return Err(crate::exit::input(format!(
            "the spec for this repository would not validate (nothing written):\n{e}"
        )));
    }
    if path.exists() {
        return Err(crate::exit::input(format!(
            "{file} exists; fix: edit it, or remove it first (`cyclix init` never replaces a spec)"
        )));
    }
    let dir = path
        .parent()
        .context("invariant: a spec path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {file}"))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {file}"))?;
    crate::outln!("wrote {file} (check it: cyclix spec validate {file})");
    if !schema.exists() {
        crate::outln!(
            "note: the schema it names is written by `cyclix install` ({})",
            schema.display()
        );
    }
    Ok(Outcome::Ok)
}

/// Files whose presence at the top of a repository makes it a Python project for the
/// starter spec (`PyPA`'s project files and pytest's configuration files).
const PYTHON_MARKERS: &[&str] = &[
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "pytest.ini",
    "tox.ini",
    "noxfile.py",
];

/// The paths the starter protects in a Python project (docs/gate.md): the test directories
/// and files, and every file that configures pytest or the package.
pub const PYTHON_PROTECTED: &str = r#"[tests/, test/, "**/test_*.py", "**/*_test.py", "**/conftest.py", pytest.ini, .pytest.ini, pytest.toml, .pytest.toml, tox.ini, setup.cfg, pyproject.toml, noxfile.py]"#;

/// The starter's pytest gate for a Python project: pytest and Python's own modules imported
/// before the work tree joins the end of `sys.path`, the per-test results at
/// `$CYCLIX_RESULTS` (docs/gate.md).
pub const PYTHON_GATE: &str = r#"[python3, -P, -c, "import os, sys; os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'; import pytest; sys.path.append('.'); sys.exit(pytest.main(sys.argv[1:] + ['--junitxml=' + os.environ['CYCLIX_RESULTS']]))", -q, -p, "no:cacheprovider", --import-mode=importlib, --continue-on-collection-errors]"#;

/// Whether the work tree `repo` looks like a Python project: one of [`PYTHON_MARKERS`] at its
/// top, or a `.py` file there or in `tests/`.
fn is_python(repo: &Path) -> bool {
    let has_py = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                Path::new(&e.file_name())
                    .extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("py"))
            })
        })
    };
    PYTHON_MARKERS.iter().any(|m| repo.join(m).is_file())
        || has_py(repo)
        || has_py(&repo.join("tests"))
}

/// The starter spec's text; `python`: the repository is a Python project (its gate runs
/// pytest that way and protects the tests).
#[must_use]
pub fn starter(
    tenant: &str,
    repo: &str,
    base: &str,
    preset: &str,
    schema: &Path,
    python: bool,
) -> String {
    let agent = if preset == "script" {
        format!(
            "agent:
  # A script agent: your own image and command. Or a CLI preset: `preset: claude-code`
  # (codex, aider, gemini-cli), see docs/agents.md.
  image: {STARTER_IMAGE}
  unpinned_local_image: true   # a local build; pin others as REGISTRY/NAME@sha256:…
  # argv, never a shell string. Until you replace it, a run fails with
  # 'starting the agent `replace-me-with-your-agent`: No such file or directory'.
  command: [replace-me-with-your-agent, /cyclix/task.md]
  timeout: 30m
"
        )
    } else {
        format!(
            "agent:
  # The {preset} CLI in cyclix's image of it (`cyclix images build --preset {preset}`); its API
  # key goes in ~/.config/cyclix/tenants/{tenant}.env (mode 0600), see docs/agents.md.
  preset: {preset}
  timeout: 30m
"
        )
    };
    let gate = if python {
        format!(
            "  # pytest with per-test results at $CYCLIX_RESULTS, imported before the work tree
  # joins the end of sys.path (a `pytest.py` of the agent's cannot stand in for it); the
  # work tree is read-only to it.
  command: {PYTHON_GATE}
  # The gate takes these from the base commit whatever the agent did to them, and counts the
  # base's tests on the base and on the agent's tree (docs/gate.md).
  protected: {PYTHON_PROTECTED}
"
        )
    } else {
        "  # The starter image has Python and pytest (no make); the work tree is read-only to it.
  command: [python3, -m, pytest, -q, -p, 'no:cacheprovider']
  # The tests and their configuration as the base has them, whatever the agent did to them
  # (docs/gate.md): list them, and have the command write JUnit XML to $CYCLIX_RESULTS.
  # protected: [tests/]
"
        .to_string()
    };
    format!(
        "# yaml-language-server: $schema=file://{schema}
# The cyclix tenant `{tenant}`, written by `cyclix init`. Every key: docs/spec.md.
# Check it with `cyclix spec validate` after each change; run it with `cyclix start {tenant}`.
tenant: {tenant}
repo:
  path: {repo}
  base: {base}   # the branch, tag or commit each run starts from
# container (default): the agent works in a private copy of the repository, in a sandbox;
# gvisor: the same sandbox, the agent on gVisor's kernel (needs runsc; docs/tiers.md).
tier: container
task:
  text: |
    Describe the change you want here: what to do, how to know it is done.
{agent}gate:
  # The tests that decide whether the agent's commits are kept (exit 0 = kept).
  image: {STARTER_IMAGE}
  unpinned_local_image: true
{gate}  timeout: 30m
egress:
  # Hosts the sandbox may reach (a preset's API host is added for it); nothing else.
  allow: []
  ports: [443]
",
        schema = schema.display(),
        repo = yaml_scalar(repo),
    )
}

/// `s` as a YAML plain scalar when it is safe as one, else double-quoted with escapes.
fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-~".contains(c))
        && !s.starts_with(['-', '.'])
        && (!s.starts_with('~') || s.starts_with("~/"));
    if plain {
        s.to_owned()
    } else {
        format!("{s:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SpecContext;

    fn ctx() -> SpecContext {
        SpecContext {
            file: "acme.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1000".into(),
        }
    }

    #[test]
    fn a_python_project_gets_the_protected_pytest_gate_and_others_a_hint() {
        let tmp = tempfile::tempdir().expect("tmp");
        assert!(!is_python(tmp.path()));
        std::fs::create_dir(tmp.path().join("tests")).expect("tests");
        std::fs::write(tmp.path().join("tests/test_x.py"), "").expect("w");
        assert!(is_python(tmp.path()));
        let schema = Path::new("/s.json");
        let spec = |python| {
            crate::spec::parse(
                &starter("acme", "/r", "main", "script", schema, python),
                &ctx(),
            )
            .expect("valid")
        };
        let py = spec(true);
        assert!(py.gate.protected.iter().any(|p| p == "**/conftest.py"));
        assert!(py.gate.command.iter().any(|a| a.contains("CYCLIX_RESULTS")));
        assert!(spec(false).gate.protected.is_empty());
        assert!(starter("acme", "/r", "main", "script", schema, false).contains("# protected:"));
    }

    #[test]
    fn every_preset_starter_validates_and_names_the_schema() {
        for (preset, python) in crate::agents::presets::PRESETS
            .iter()
            .flat_map(|p| [(p, true), (p, false)])
        {
            for repo in ["/srv/acme", "/srv/my project \"x\" #1"] {
                let text = starter(
                    "acme",
                    repo,
                    "main",
                    preset,
                    Path::new("/home/u/.local/share/cyclix/spec.schema.json"),
                    python,
                );
                assert!(text.starts_with(
                    "# yaml-language-server: $schema=file:///home/u/.local/share/cyclix/spec.schema.json\n"
                ));
                let spec = crate::spec::parse(&text, &ctx())
                    .unwrap_or_else(|e| panic!("{preset} {repo}: {e}\n{text}"));
                assert_eq!(spec.tenant, "acme");
                assert_eq!(spec.repo.path, repo);
            }
        }
    }
}
