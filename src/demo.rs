//! The embedded demo tenant: a tiny Python project whose test fails, the task that asks for a
//! fix, and the tenant spec that runs it (`demo/` in the source tree).
//!
//! Owns: the file contents, compiled into the binary with `include_str!`, so `cyclix demo` can
//! lay the tenant out on any host. Pure: writing the files (under
//! `~/.local/share/cyclix/demo/`, where `TENANT_YAML` points) is the caller's job.
//!
//! The agent that fixes the project is the scripted `cyclix-demo-agent`
//! (`images/agent/cyclix-demo-agent`, installed in the agent image by `Containerfile.python`);
//! it needs no model and no network, which matches the spec's empty egress allowlist.

/// The demo tenant's spec (`demo/tenant.yaml`): tenant `demo`, repo
/// `~/.local/share/cyclix/demo/project` at `main`, task file `~/.local/share/cyclix/demo/task.md`,
/// tier `container`, agent and gate image `localhost/cyclix-agent-python:latest` (unpinned,
/// loudly), egress deny-all, timeouts 5 min each, no schedule.
pub const TENANT_YAML: &str = include_str!("../demo/tenant.yaml");

/// The task prompt (`demo/task.md`): fix the failing test and commit.
pub const TASK: &str = include_str!("../demo/task.md");

/// The demo project's files (`demo/project/`): relative path (with `/` separators) and contents.
/// The caller writes them, initialises a git repository and commits them on `main`.
const PROJECT_FILES: &[(&str, &str)] = &[
    (".gitignore", include_str!("../demo/project/.gitignore")),
    ("README.md", include_str!("../demo/project/README.md")),
    (
        "calc/__init__.py",
        include_str!("../demo/project/calc/__init__.py"),
    ),
    (
        "tests/test_calc.py",
        include_str!("../demo/project/tests/test_calc.py"),
    ),
];

/// The demo project's files as `(relative path, contents)` pairs, in a fixed order.
#[must_use]
pub fn project_files() -> &'static [(&'static str, &'static str)] {
    PROJECT_FILES
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every regular file under `dir`, relative, skipping what the project's .gitignore lists.
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read demo dir") {
            let entry = entry.expect("dir entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "__pycache__" || name == ".pytest_cache" {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("below root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }

    #[test]
    fn embedded_files_match_the_demo_directory() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/project");
        let mut on_disk = Vec::new();
        walk(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = project_files()
            .iter()
            .map(|(p, _)| (*p).to_owned())
            .collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        for (path, contents) in project_files() {
            let disk = std::fs::read_to_string(root.join(path)).expect("read demo file");
            assert_eq!(&disk, contents, "{path}");
        }
    }

    #[test]
    fn the_project_carries_the_bug_the_agent_fixes() {
        let (_, calc) = project_files()
            .iter()
            .find(|(p, _)| *p == "calc/__init__.py")
            .expect("calc module");
        let subtract = calc
            .split("def subtract(a, b):")
            .nth(1)
            .expect("subtract defined");
        let body = subtract.split("\ndef ").next().expect("body");
        assert!(body.contains("return a + b"), "{body}");
    }

    #[test]
    fn the_demo_gate_writes_junit_to_the_results_path_and_protects_its_tests() {
        let ctx = crate::spec::SpecContext {
            file: "demo/tenant.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1000".into(),
        };
        let spec = crate::spec::parse(TENANT_YAML, &ctx).expect("the demo spec is valid");
        let quick = spec.gate.quick_argv().join(" ");
        assert!(quick.contains("pytest"), "{quick}");
        assert!(
            quick.contains(&format!(
                "'--junitxml=' + os.environ['{}']",
                crate::twin::RESULTS_ENV
            )),
            "{quick}"
        );
        // pytest first, the work tree last on sys.path (docs/gate.md).
        assert!(quick.starts_with(
            "python3 -P -c import os, sys; os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'; \
             import pytest; sys.path.append('.')"
        ));
        assert!(
            quick.ends_with("--import-mode=importlib --continue-on-collection-errors"),
            "{quick}"
        );
        // `cyclix run`'s gate is the same suite, counted against the base's
        // (`gate.protected`: docs/gate.md).
        assert_eq!(spec.gate.quick_argv(), spec.gate.command.as_slice());
        assert!(spec.gate.protected.iter().any(|p| p == "tests/"));
        assert!(spec.gate.protected.iter().any(|p| p == "**/conftest.py"));
    }

    #[test]
    fn tenant_spec_names_the_demo_paths_and_denies_egress() {
        assert!(TENANT_YAML.contains("tenant: demo\n"));
        assert!(TENANT_YAML.contains("path: ~/.local/share/cyclix/demo/project\n"));
        assert!(TENANT_YAML.contains("file: ~/.local/share/cyclix/demo/task.md\n"));
        assert!(TENANT_YAML.contains("allow: []\n"));
        assert!(TENANT_YAML.contains("command: [cyclix-demo-agent]\n"));
        assert!(TASK.contains("test_subtract"));
    }
}
