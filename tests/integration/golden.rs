//! Golden tests: `tests/golden/<case>/spec.yaml` → `tests/golden/<case>/expected/<backend>/<dest>/<file>`.
//! `UPDATE_GOLDEN=1 cargo test --test integration golden` rewrites the expected files.
//! A case may hold `expected-error.txt` instead: the exact diagnostics for a bad spec.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cyclix::render::{self, Backend, RenderedFile, RunContext};
use cyclix::spec::{self, Spec, SpecContext};

/// The fixed host facts every golden case renders with.
pub const RUN_ID: &str = "golden-1";
pub const HOME: &str = "/home/test";
pub const RUNTIME_DIR: &str = "/run/user/1000";
pub const CYCLIX_BIN: &str = "/usr/local/bin/cyclix";

pub fn golden_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

pub fn cases() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(golden_root())
        .expect("tests/golden exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("spec.yaml").is_file())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no golden cases found");
    v
}

pub fn spec_context() -> SpecContext {
    SpecContext {
        file: "spec.yaml".into(),
        home: HOME.into(),
        runtime_dir: RUNTIME_DIR.into(),
    }
}

pub fn run_context(spec: &Spec) -> RunContext {
    RunContext {
        gvisor: None,
        run_id: RUN_ID.into(),
        worktree: format!(
            "{HOME}/.local/share/cyclix/worktrees/{}/{RUN_ID}",
            spec.tenant
        ),
        run_dir: format!("{RUNTIME_DIR}/cyclix/runs/{RUN_ID}"),
        subnet_octet: 7,
        proxy_image: cyclix::images::PROXY_IMAGE.into(),
        cyclix_bin: CYCLIX_BIN.into(),
        service_ports: cyclix::render::plan::preview_ports(spec),
        placeholders: cyclix::render::plan::preview_placeholders(spec),
        setup_binds: Vec::new(),
        log_key: cyclix::render::plan::PREVIEW_LOG_KEY.to_string(),
        credentials_file: false,
        claim_wait_s: None,
    }
}

pub fn load(case: &Path) -> Result<Spec, spec::SpecError> {
    let text = std::fs::read_to_string(case.join("spec.yaml")).expect("read spec.yaml");
    spec::parse(&text, &spec_context())
}

/// Everything a case renders, keyed by `<backend>/<dest>/<name>`.
pub fn render_case(spec: &Spec) -> BTreeMap<String, String> {
    let run = run_context(spec);
    let mut out = BTreeMap::new();
    for (backend, dir) in [(Backend::Quadlet, "quadlet"), (Backend::Plain, "plain")] {
        let r = render::render(spec, &run, backend).unwrap_or_else(|e| panic!("render {dir}: {e}"));
        let mut files: Vec<RenderedFile> = r.files;
        files.extend(render::units::templates(CYCLIX_BIN).expect("templates"));
        files.extend(render::units::timer_dropin(spec).expect("dropin"));
        for f in files {
            out.insert(
                format!("{dir}/{}/{}", f.dest.dir_name(), f.name),
                f.contents,
            );
        }
    }
    out
}

/// The fixed options every golden case exports with (`cyclix export kube`).
pub fn kube_options(spec_text: &str) -> cyclix::render::kube::KubeOptions {
    cyclix::render::kube::KubeOptions {
        k8s_version: cyclix::render::kube::DEFAULT_K8S.into(),
        runner_image: "localhost/cyclix-runner:latest".into(),
        task: "The golden task.\n".into(),
        pod_cidr: "10.244.0.0/16".into(),
        work_size: "4Gi".into(),
        spec_text: spec_text.into(),
    }
}

/// A case's Kubernetes export, keyed by `kube/<file>`; a spec the export refuses gives
/// `kube/error.txt` with the message.
pub fn render_kube_case(spec: &Spec, spec_text: &str) -> BTreeMap<String, String> {
    let run = run_context(spec);
    let mut out = BTreeMap::new();
    let export = render::plan::plan(spec, &run)
        .and_then(|plan| render::kube::render(spec, &plan, &kube_options(spec_text)));
    match export {
        Ok(e) => {
            for m in &e.manifests {
                out.insert(format!("kube/{}", m.file), m.yaml().expect("yaml"));
            }
        }
        Err(e) => {
            out.insert("kube/error.txt".into(), format!("{e}\n"));
        }
    }
    out
}

fn read_tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read_to_string(&p).expect("read expected"));
            }
        }
    }
    out
}

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

#[test]
fn golden_cases_render_exactly() {
    let mut failures = Vec::new();
    for case in cases() {
        let name = case
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let expected_dir = case.join("expected");
        let err_file = case.join("expected-error.txt");
        match load(&case) {
            Err(e) => {
                let got = e.to_string();
                if update() {
                    std::fs::write(&err_file, &got).expect("write");
                } else if std::fs::read_to_string(&err_file).ok().as_deref() != Some(got.as_str()) {
                    failures.push(format!(
                        "{name}: spec error differs or is unexpected:\n{got}"
                    ));
                }
            }
            Ok(spec) => {
                let mut got = render_case(&spec);
                let text = std::fs::read_to_string(case.join("spec.yaml")).expect("read spec.yaml");
                got.extend(render_kube_case(&spec, &text));
                if update() {
                    let _ = std::fs::remove_dir_all(&expected_dir);
                    for (rel, text) in &got {
                        let p = expected_dir.join(rel);
                        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                        std::fs::write(&p, text).expect("write");
                    }
                    continue;
                }
                let want = read_tree(&expected_dir);
                for k in want
                    .keys()
                    .chain(got.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                {
                    match (want.get(k), got.get(k)) {
                        (Some(a), Some(b)) if a == b => {}
                        (Some(a), Some(b)) => failures.push(format!(
                            "{name}/{k} differs:\n--- expected\n{a}\n--- got\n{b}"
                        )),
                        (None, Some(_)) => {
                            failures.push(format!("{name}/{k}: rendered but not expected"));
                        }
                        (Some(_), None) => {
                            failures.push(format!("{name}/{k}: expected but not rendered"));
                        }
                        (None, None) => {}
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches (UPDATE_GOLDEN=1 rewrites):\n{}",
        failures.join("\n\n")
    );
}

/// Issue 20, item 1: no unit of a run is ever restarted (a restarted pod is a network
/// namespace the probes never saw). Every per-run unit file of every golden case, both
/// backends, states `Restart=no`.
#[test]
fn every_run_unit_of_every_case_has_restart_no() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seen = 0;
    for (name, text) in read_tree(&root) {
        let per_run = name.contains("/expected/")
            && (name.contains("/quadlet/quadlet/") || name.contains("/units/"));
        let unit = [".container", ".pod", ".network", ".volume", ".service"]
            .iter()
            .any(|x| name.ends_with(x));
        if per_run && unit {
            seen += 1;
            assert!(
                text.lines().any(|l| l == "Restart=no"),
                "{name} has no Restart=no:\n{text}"
            );
        }
    }
    assert!(
        seen > 20,
        "only {seen} per-run unit files found under {}",
        root.display()
    );
    // Quadlet overrides a `.pod`'s own `Restart=` (podman 5.4): each pod needs its drop-in.
    let tree = read_tree(&root);
    for name in tree.keys().filter(|n| n.ends_with(".pod")) {
        let stem = name
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".pod"))
            .unwrap_or_default();
        let case = name.split("/quadlet/quadlet/").next().unwrap_or_default();
        let dropin = format!("{case}/quadlet/units/{stem}-pod.service.d/10-cyclix-no-restart.conf");
        assert!(
            tree.get(&dropin)
                .is_some_and(|t| t.lines().any(|l| l == "Restart=no")),
            "{name}: no {dropin} with Restart=no"
        );
    }
}
