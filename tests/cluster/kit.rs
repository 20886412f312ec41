//! What the cluster tests share: `kubectl` with the suite's kubeconfig, a namespace per test
//! (deleted when the test ends, however it ends), a tenant spec and its repository, and
//! `cyclix` itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The kubeconfig the suite runs against; a test without one fails naming it.
pub fn kubeconfig() -> String {
    match std::env::var("KUBECONFIG") {
        Ok(k) if !k.is_empty() => k,
        _ => panic!(
            "KUBECONFIG is not set: the cluster suite runs against a real cluster; run it with `KUBECONFIG=PATH scripts/test-kube`"
        ),
    }
}

/// `kubectl ARGS` (stdin: `stdin`), its output; bounded by `--request-timeout` per call.
pub fn kubectl(args: &[&str], stdin: Option<&[u8]>) -> Output {
    use std::io::Write as _;
    let mut c = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig())
        .arg("--request-timeout=60s")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl (Debian: kubernetes-client)");
    if let Some(input) = stdin {
        c.stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("writing kubectl's stdin");
    }
    c.wait_with_output().expect("kubectl")
}

/// [`kubectl`] that must succeed; its stdout.
pub fn kubectl_ok(args: &[&str], stdin: Option<&[u8]>) -> String {
    let o = kubectl(args, stdin);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A namespace of one test (`cyclix-suite-NAME-RANDOM`), deleted on drop.
pub struct Namespace(pub String);

impl Namespace {
    /// A new namespace with `labels` (`key=value` each).
    pub fn new(name: &str, labels: &[&str]) -> Self {
        let n = format!("cyclix-suite-{name}-{}", random_suffix());
        kubectl_ok(&["create", "namespace", &n], None);
        if !labels.is_empty() {
            let mut args = vec!["label", "namespace", n.as_str()];
            args.extend(labels);
            kubectl_ok(&args, None);
        }
        Self(n)
    }

    /// `kubectl -n NS ARGS`.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut full = vec!["-n", self.0.as_str()];
        full.extend(args);
        kubectl(&full, stdin)
    }

    /// `kubectl -n NS ARGS`, which must succeed.
    pub fn kubectl_ok(&self, args: &[&str], stdin: Option<&[u8]>) -> String {
        let mut full = vec!["-n", self.0.as_str()];
        full.extend(args);
        kubectl_ok(&full, stdin)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false"], None);
    }
}

fn random_suffix() -> String {
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .expect("urandom");
    u32::from_be_bytes(b).to_string()
}

/// A run id no other test uses.
pub fn run_id(what: &str) -> String {
    format!("{what}-{}", random_suffix())
}

/// The images a whole run needs on the cluster's nodes (`CYCLIX_KUBE_RUNNER_IMAGE`,
/// `CYCLIX_KUBE_AGENT_IMAGE`; the defaults are `images/`' local builds, which `kind load
/// docker-image` puts on kind's nodes).
pub fn runner_image() -> String {
    std::env::var("CYCLIX_KUBE_RUNNER_IMAGE")
        .unwrap_or_else(|_| "localhost/cyclix-runner:latest".into())
}

/// See [`runner_image`].
pub fn agent_image() -> String {
    std::env::var("CYCLIX_KUBE_AGENT_IMAGE")
        .unwrap_or_else(|_| "localhost/cyclix-agent-python:latest".into())
}

/// A tenant's directory: `spec.yaml` (tenant `TENANT`, its repository `repo/` with one
/// commit on `main`), `agent` the agent's shell command, `extra` more spec lines.
pub struct Tenant {
    /// The directory (removed on drop).
    pub dir: tempfile::TempDir,
    /// The tenant's name.
    pub name: String,
}

impl Tenant {
    /// A tenant `name` whose agent runs `agent`; `extra` is appended to the spec.
    pub fn new(name: &str, agent: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let repo = dir.path().join("repo");
        let git = |args: &[&str]| {
            let o = Command::new("git").args(args).output().expect("git");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        git(&["init", "-q", "-b", "main", repo.to_str().expect("utf-8")]);
        std::fs::write(repo.join("README"), "suite\n").expect("write");
        git(&["-C", repo.to_str().expect("utf-8"), "add", "README"]);
        git(&[
            "-C",
            repo.to_str().expect("utf-8"),
            "-c",
            "user.name=s",
            "-c",
            "user.email=s@s",
            "commit",
            "-qm",
            "base",
        ]);
        let image = agent_image();
        let spec = format!(
            "tenant: {name}\n\
repo: {{ path: {repo}, base: main }}\n\
task: {{ text: \"commit a file\" }}\n\
agent:\n  image: {image}\n  unpinned_local_image: true\n  command: [sh, -c, '{agent}']\n  timeout: 2m\n\
gate:\n  image: {image}\n  unpinned_local_image: true\n  command: [sh, -c, 'test -f hello.txt']\n\
egress: {{ allow: [allowed.example], ports: [80] }}\n{extra}",
            repo = repo.display()
        );
        std::fs::write(dir.path().join("spec.yaml"), spec).expect("spec");
        Self {
            dir,
            name: name.to_string(),
        }
    }

    /// The spec file.
    pub fn spec(&self) -> PathBuf {
        self.dir.path().join("spec.yaml")
    }
}

/// `cyclix ARGS` (with the suite's kubeconfig and a private state directory), its output.
pub fn cyclix(args: &[&str], state: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .env("KUBECONFIG", kubeconfig())
        .env("XDG_STATE_HOME", state.join("state"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .args(args)
        .output()
        .expect("cyclix")
}

/// The exported objects of `tenant` for run `run` (`cyclix export kube --out`), as JSON,
/// by file (`run/…`, `schedule/…`): kubectl reads the YAML.
pub fn exported(tenant: &Tenant, run: &str) -> Vec<(String, Value)> {
    let out = tenant.dir.path().join(format!("export-{run}"));
    let o = cyclix(
        &[
            "export",
            "kube",
            &tenant.name,
            "--spec",
            tenant.spec().to_str().expect("utf-8"),
            "--run-id",
            run,
            "--out",
            out.to_str().expect("utf-8"),
        ],
        tenant.dir.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut v = Vec::new();
    for sub in ["run", "schedule"] {
        let Ok(rd) = std::fs::read_dir(out.join(sub)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.map(|e| e.expect("entry").path()).collect();
        files.sort();
        for f in files {
            let json = kubectl_ok(
                &[
                    "create",
                    "--dry-run=client",
                    "-o",
                    "json",
                    "-f",
                    f.to_str().expect("utf-8"),
                ],
                None,
            );
            let name = format!("{sub}/{}", f.file_name().expect("name").to_string_lossy());
            let mut o: Value = serde_json::from_str(&json).expect("json");
            // kubectl's client side puts in its context's namespace; the files have none.
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("namespace");
            }
            v.push((name, o));
        }
    }
    v
}

/// The record `cyclix kube-run` wrote for run `run` of `tenant`.
pub fn record(tenant: &Tenant, run: &str) -> Value {
    let p = tenant
        .dir
        .path()
        .join(format!("state/cyclix/runs/{}/{run}.json", tenant.name));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("record")
}

/// `cyclix kube-run` of `tenant` as run `run` in `ns` (kubectl adapter), its output.
pub fn kube_run(tenant: &Tenant, ns: &Namespace, run: &str) -> Output {
    cyclix(
        &[
            "kube-run",
            &tenant.name,
            "--spec",
            tenant.spec().to_str().expect("utf-8"),
            "--cluster",
            "kubectl",
            "--namespace",
            &ns.0,
            "--run-id",
            run,
            "--runner-image",
            &runner_image(),
        ],
        tenant.dir.path(),
    )
}

/// What of run `run` is left in `ns` (every kind a run makes, and Pods).
pub fn left(ns: &Namespace, run: &str) -> String {
    ns.kubectl_ok(
        &[
            "get",
            &format!("{},pods", cyclix::cluster::kubectl::RUN_KINDS),
            "-l",
            &format!("io.cyclix.run={run}"),
            "-o",
            "name",
        ],
        None,
    )
}
