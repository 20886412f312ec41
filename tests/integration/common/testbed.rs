//! The testbed harness: drives `testbed/testbed.sh` (a Debian trixie system booted with
//! systemd-nspawn: systemd 257 as PID 1, user `cyx` (uid 1000) with a lingering user manager,
//! rootless Podman 5.4 + Quadlet). See `testbed/README.md` and `../shared/testbed/NOTES.md`.
//!
//! The flavour follows the test binary: the `bookworm` binary (`tests/bookworm/`) gets the
//! bookworm flavour (`TB_SUITE=bookworm`: systemd 252, podman 4.3.1, no Quadlet), with its own
//! cache and machine (`TB_BOOKWORM_DIR`, default `/var/tmp/cyclix-tb-bookworm`;
//! `TB_BOOKWORM_MACHINE`, default `cyclix-tb-bookworm`), so one `cargo test` never points both
//! flavours at the same `TB_DIR`/`TB_MACHINE`. Every other binary gets trixie.
//!
//! Inside, the project root is bound read-only at [`Testbed::src`] (`/src`), so the host-built
//! `cyclix` binary and the golden fixtures run there unchanged. The script must run as root;
//! a testbed that cannot come up is a test FAILURE, never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// Where the project root appears inside the testbed (`testbed.sh` binds it read-only).
const SRC_INSIDE: &str = "/src";

/// A running testbed, reached through `testbed/testbed.sh` (verbs `user`, `root`).
pub struct Testbed {
    /// Absolute path of `testbed/testbed.sh` in this checkout.
    script: PathBuf,
    /// [`SRC_INSIDE`]; kept per instance so accessors read it from `self`.
    src: &'static str,
}

/// The outcome of the one `testbed.sh up` per test process: the testbed, or the failure text
/// every test that asks for it panics with (so later tests fail fast instead of retrying).
static TESTBED: OnceLock<Result<Testbed, String>> = OnceLock::new();

/// The environment `testbed.sh` gets in this test binary: none for trixie; for the `bookworm`
/// binary (its file name is `bookworm-HASH`) the flavour, its own cache and machine, and no
/// agent-package fetch (its subset runs no agent preset).
fn flavour_env() -> Vec<(&'static str, String)> {
    let bookworm = std::env::current_exe().ok().is_some_and(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("bookworm-") || n == "bookworm")
    });
    if !bookworm {
        return Vec::new();
    }
    let var = |k: &str, default: &str| std::env::var(k).unwrap_or_else(|_| default.to_string());
    vec![
        ("TB_SUITE", "bookworm".to_string()),
        (
            "TB_DIR",
            var("TB_BOOKWORM_DIR", "/var/tmp/cyclix-tb-bookworm"),
        ),
        (
            "TB_MACHINE",
            var("TB_BOOKWORM_MACHINE", "cyclix-tb-bookworm"),
        ),
        ("TB_AGENT_PACKAGES", String::new()),
    ]
}

impl Testbed {
    /// Brings the testbed up once per test process and returns it.
    ///
    /// Runs `testbed/testbed.sh up`, which is idempotent and serialised by a flock, so
    /// concurrent test processes share one machine. Warm (cached rootfs) this takes about
    /// 5 s; the first `up` on a machine builds the cache (about 1 min, needs network).
    ///
    /// # Panics
    /// If the testbed cannot come up (not root, build or boot failure, or a machine already
    /// running with another checkout at `/src`). The message carries the script's log and a
    /// fix. A missing testbed is a failure, never a skip.
    pub fn get() -> &'static Testbed {
        let state = TESTBED.get_or_init(|| {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/testbed.sh");
            let out = Command::new(&script)
                .arg("up")
                .envs(flavour_env())
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("running `{} up`: {e}", script.display()))?;
            if out.status.success() {
                Ok(Testbed {
                    script,
                    src: SRC_INSIDE,
                })
            } else {
                Err(format!(
                    "`{} up` exited with {}\n--- stdout ---\n{}--- stderr ---\n{}",
                    script.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                ))
            }
        });
        match state {
            Ok(testbed) => testbed,
            Err(why) => panic!(
                "the testbed did not come up (a missing testbed is a FAILURE, not a skip): {why}\n\
                 fix: run the tests as root (`sudo scripts/test`), or run \
                 `sudo testbed/testbed.sh up` by hand and read its log; if another checkout's \
                 testbed is running, `sudo testbed/testbed.sh down` first"
            ),
        }
    }

    /// Runs `argv` as `cyx` (uid 1000) inside, as a transient unit of cyx's systemd user
    /// manager (`systemd-run -M cyx@ --user --wait --pipe`): `XDG_RUNTIME_DIR` and the user bus
    /// are set, the working directory is `/home/cyx`. stdin is `/dev/null`; stdout, stderr and
    /// the exit status are those of `argv`.
    ///
    /// # Panics
    /// If `testbed.sh` cannot be spawned at all.
    #[must_use]
    pub fn user(&self, argv: &[&str]) -> Output {
        self.run("user", argv)
    }

    /// Runs `script` with `bash -c` as `cyx`; see [`Testbed::user`].
    ///
    /// # Panics
    /// If `testbed.sh` cannot be spawned at all.
    #[must_use]
    pub fn user_sh(&self, script: &str) -> Output {
        self.run("user", &["bash", "-c", script])
    }

    /// Runs `script` with `bash -c` as root inside, as a transient system service of the
    /// testbed's PID 1 (working directory `/`); I/O rules as in [`Testbed::user`].
    ///
    /// # Panics
    /// If `testbed.sh` cannot be spawned at all.
    #[must_use]
    pub fn root_sh(&self, script: &str) -> Output {
        self.run("root", &["bash", "-c", script])
    }

    /// Where the project root appears inside the testbed: `"/src"` (read-only).
    #[must_use]
    pub fn src(&self) -> &str {
        self.src
    }

    /// The host-built `cyclix` binary (`CARGO_BIN_EXE_cyclix`) as seen inside, e.g.
    /// `/src/target/debug/cyclix`.
    ///
    /// # Panics
    /// If cargo's target directory is outside the project root (`CARGO_TARGET_DIR` elsewhere),
    /// since only the project root is bound inside.
    #[must_use]
    pub fn cyclix_bin(&self) -> String {
        let bin = Path::new(env!("CARGO_BIN_EXE_cyclix"));
        let rel = bin
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or_else(|_| {
                panic!(
                    "the cyclix binary {} is outside the project root {}, which is all the \
                     testbed sees; fix: unset CARGO_TARGET_DIR",
                    bin.display(),
                    env!("CARGO_MANIFEST_DIR")
                )
            });
        format!("{}/{}", self.src, rel.display())
    }

    fn run(&self, verb: &str, argv: &[&str]) -> Output {
        Command::new(&self.script)
            .arg(verb)
            .args(argv)
            .envs(flavour_env())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running `{} {verb} {argv:?}`: {e}", self.script.display()))
    }
}

/// Asserts that `out` exited 0 and returns its stdout (lossy UTF-8). `what` names the
/// command in the panic message, which also carries the exit status, stdout and stderr.
///
/// # Panics
/// If the command did not exit 0.
pub fn expect_success(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: exited with {}\n--- stdout ---\n{stdout}--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Tests that change state every run can see (e.g. a key in the testbed user's keyring, which
/// every `podman exec` inherits: probe P23) hold this exclusively; tests that run cyclix hold it
/// shared, so they never overlap such a change.
static STATE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A shared hold on the testbed's user-visible state (see [`exclusive`]).
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    STATE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The exclusive hold: no test that runs cyclix runs meanwhile.
pub fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    STATE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where `testbed.sh up` binds the host's agent package cache (`$CYCLIX_PACKAGES`, default
/// `/var/tmp/cyclix-packages`, filled by `scripts/fetch-agent-packages` on the host).
pub const PACKAGES_INSIDE: &str = "/opt/cyclix-packages";

/// The image of agent preset `preset` (`claude-code`, `codex`) on the testbed, built at most
/// once per testbed boot: `cyclix images build --preset PRESET --packages /opt/cyclix-packages`
/// runs only when the tag ([`cyclix::images::agents::preset_image`]) is not in cyx's podman
/// storage, which is a tmpfs that every `testbed.sh down` drops (so a changed Containerfile is
/// picked up after `down`). The base images are built first (`cyclix images build`) when
/// `localhost/cyclix-agent-python:latest` is missing. Cold: about 15 s per preset.
///
/// # Panics
/// An unknown preset, or a failed build (the message carries cyclix's output).
pub fn preset_image(preset: &str) -> String {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let tag = cyclix::images::agents::preset_image(preset)
        .unwrap_or_else(|| panic!("preset {preset} has no image"));
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if built.contains(&tag) {
        return tag;
    }
    let tb = Testbed::get();
    let c = tb.cyclix_bin();
    let python = cyclix::images::AGENT_PYTHON_IMAGE;
    expect_success(
        &tb.user_sh(&format!(
            "set -e; podman image exists {tag} && exit 0; \
             podman image exists {python} || {c} images build >/dev/null; \
             {c} images build --preset {preset} --packages {PACKAGES_INSIDE}"
        )),
        &format!("build the {preset} preset image"),
    );
    built.push(tag.clone());
    tag
}
