//! The single wrapper around `std::process::Command`: every child gets a deadline, its argv
//! is logged at debug level, its output is captured, and a failure carries the argv, the exit
//! status and the trimmed stderr. Secret values travel on stdin only, never in argv.
//! Nothing else in the crate calls `Command::new`.

mod stream;

pub use stream::{Streamed, run_streaming};

use std::io::{Read as _, Write as _};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A finished child.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status.
    pub status: ExitStatus,
    /// Captured stdout (lossy UTF-8).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8).
    pub stderr: String,
}

/// Why a child failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// It could not be started (missing binary, permissions).
    #[error("cannot run `{argv}`: {source}{hint}")]
    Spawn {
        /// The command line (for humans; never holds secrets).
        argv: String,
        /// The OS error.
        source: std::io::Error,
        /// A fix, e.g. "is podman installed and on $PATH?".
        hint: String,
    },
    /// It ran past its deadline and was killed (SIGKILL).
    #[error("`{argv}` did not finish within {after_ms} ms and was killed")]
    Deadline {
        /// The command line.
        argv: String,
        /// The deadline in milliseconds.
        after_ms: u128,
        /// The last lines it printed before it was killed, where they were kept
        /// ([`run_streaming`]); empty otherwise.
        tail: Vec<String>,
    },
    /// It was stopped by the run's stop (SIGTERM or SIGINT to cyclix) and killed (SIGKILL).
    #[error("`{argv}` was stopped (SIGTERM or SIGINT) and killed")]
    Stopped {
        /// The command line.
        argv: String,
    },
    /// It wrote more than its cap to its stdout file and was killed (SIGKILL).
    #[error("`{argv}` wrote more than {cap_bytes} bytes and was killed")]
    TooLarge {
        /// The command line.
        argv: String,
        /// The cap in bytes.
        cap_bytes: u64,
    },
    /// It exited non-zero.
    #[error("`{argv}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        argv: String,
        /// The exit status.
        status: ExitStatus,
        /// Trimmed stderr (last 2000 bytes).
        stderr: String,
        /// Captured stdout.
        stdout: String,
    },
}

fn show(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

fn trim_tail(s: &str) -> String {
    let t = s.trim();
    if t.len() > 2000 {
        let mut cut = t.len() - 2000;
        while !t.is_char_boundary(cut) {
            cut += 1;
        }
        format!("…{}", &t[cut..])
    } else {
        t.to_string()
    }
}

fn read_all(child: &mut Child) -> (String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_end(&mut err);
    }
    (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// Runs `program args…` with `stdin` fed to it, waits at most `deadline`, and returns its
/// output whatever the exit status.
///
/// # Errors
/// [`ProcessError::Spawn`] or [`ProcessError::Deadline`].
pub fn run_status(
    program: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
    deadline: Duration,
    hint: &str,
) -> Result<Output, ProcessError> {
    run_with(
        program,
        args,
        &Opts {
            stdin,
            deadline,
            hint,
            ..Opts::default()
        },
    )
}

/// Options of [`run_with`]: what [`run_status`] takes, plus the child's environment and where
/// its stdout goes.
#[derive(Debug, Clone, Copy)]
pub struct Opts<'a> {
    /// Bytes fed to the child's stdin (then closed); `None`: `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    /// How long the child may run before it is killed (SIGKILL).
    pub deadline: Duration,
    /// A fix appended to a spawn error ("is git installed?").
    pub hint: &'a str,
    /// Environment changes: `(NAME, Some(value))` sets, `(NAME, None)` removes; the rest of
    /// cyclix's environment is inherited.
    pub env: &'a [(&'a str, Option<&'a str>)],
    /// Names removed from the child's environment when they start with one of these prefixes
    /// (e.g. `GIT_`), before `env` is applied.
    pub env_remove_prefixes: &'a [&'a str],
    /// Write stdout to this file (created new, mode 0600) instead of capturing it, and kill the
    /// child once it has written more than the cap (bytes): [`ProcessError::TooLarge`].
    /// [`Output::stdout`] is then empty.
    pub stdout_file: Option<(&'a std::path::Path, u64)>,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Self {
            stdin: None,
            deadline: Duration::from_secs(30),
            hint: "",
            env: &[],
            env_remove_prefixes: &[],
            stdout_file: None,
        }
    }
}

/// Copies `from` to `to` until EOF or until more than `cap` bytes came; whether the cap was
/// passed.
fn copy_capped(from: &mut impl std::io::Read, to: &mut std::fs::File, cap: u64) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                total = total.saturating_add(n as u64);
                if total > cap {
                    return true;
                }
                if to.write_all(&buf[..n]).is_err() {
                    return false;
                }
            }
        }
    }
}

/// `program args…` with `opts`' stdin mode and environment changes; stdout and stderr piped.
fn command(program: &str, args: &[&str], opts: &Opts<'_>) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if opts.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !opts.env_remove_prefixes.is_empty() {
        for (k, _) in std::env::vars_os() {
            let name = k.to_string_lossy();
            if opts.env_remove_prefixes.iter().any(|p| name.starts_with(p)) {
                cmd.env_remove(&k);
            }
        }
    }
    for (k, v) in opts.env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

/// Creates `path` new with mode 0600.
fn new_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The general form of [`run_status`]: runs `program args…` with `opts`, waits at most
/// `opts.deadline`, and returns its output whatever the exit status.
///
/// # Errors
/// [`ProcessError::Spawn`] (also when the stdout file cannot be created),
/// [`ProcessError::Deadline`], [`ProcessError::TooLarge`].
pub fn run_with(program: &str, args: &[&str], opts: &Opts<'_>) -> Result<Output, ProcessError> {
    let shown = show(program, args);
    let deadline = opts.deadline;
    tracing::debug!(argv = %shown, deadline_ms = deadline.as_millis(), "running");
    let spawn_err = |source| ProcessError::Spawn {
        argv: shown.clone(),
        source,
        hint: opts.hint.to_string(),
    };
    let mut cmd = command(program, args, opts);
    let mut out_file = match opts.stdout_file {
        Some((path, cap)) => Some((new_private_file(path).map_err(spawn_err)?, cap)),
        None => None,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    if let (Some(data), Some(mut pipe)) = (opts.stdin, child.stdin.take()) {
        let _ = pipe.write_all(data);
    }
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (out_tx, out_rx) = std::sync::mpsc::channel();
    let (err_tx, err_rx) = std::sync::mpsc::channel();
    let too_large = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let too_large_w = std::sync::Arc::clone(&too_large);
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(o) = stdout.as_mut() {
            if let Some((f, cap)) = out_file.as_mut() {
                if copy_capped(o, f, *cap) {
                    too_large_w.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            } else {
                let _ = o.read_to_end(&mut b);
            }
        }
        let _ = out_tx.send(b);
    });
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.read_to_end(&mut b);
        }
        let _ = err_tx.send(b);
    });
    let start = Instant::now();
    let status = loop {
        if let Some((_, cap)) = opts.stdout_file
            && too_large.load(std::sync::atomic::Ordering::SeqCst)
        {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ProcessError::TooLarge {
                argv: shown,
                cap_bytes: cap,
            });
        }
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = read_all(&mut child);
                return Err(ProcessError::Deadline {
                    argv: shown,
                    after_ms: deadline.as_millis(),
                    tail: Vec::new(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => {
                return Err(ProcessError::Spawn {
                    argv: shown,
                    source,
                    hint: opts.hint.to_string(),
                });
            }
        }
    };
    // A grandchild that inherited the pipes (a daemonising helper) must not hold us past the
    // deadline: wait for the readers at most until it.
    let rest = deadline
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(100));
    let out = out_rx.recv_timeout(rest).unwrap_or_default();
    let err = err_rx.recv_timeout(rest).unwrap_or_default();
    if let Some((_, cap)) = opts.stdout_file
        && too_large.load(std::sync::atomic::Ordering::SeqCst)
    {
        return Err(ProcessError::TooLarge {
            argv: shown,
            cap_bytes: cap,
        });
    }
    Ok(Output {
        status,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    })
}

/// Replaces this process with a fresh image of its own binary (the path `/proc/self/exe`
/// points at: exec'ing `/proc/self/exe` itself would rename the process `exe`, and `comm` is
/// what `ps`, the journal and the run-unit checks (B11) see), the same argv (`argv[0]`
/// included) and pid, and the environment plus `env` (each overriding a variable of that
/// name). The values travel in the environment only, never in argv or a log. Returns only
/// when the exec failed (e.g. the binary was replaced meanwhile: its path then ends in
/// ` (deleted)`).
#[must_use]
pub fn reexec_self(env: &[(&str, &str)]) -> anyhow::Error {
    use std::os::unix::process::CommandExt as _;
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return anyhow::Error::new(e).context("finding cyclix's own binary (/proc/self/exe)");
        }
    };
    let mut args = std::env::args_os();
    let mut cmd = std::process::Command::new(&exe);
    if let Some(arg0) = args.next() {
        cmd.arg0(arg0);
    }
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    tracing::debug!(
        "re-executing {} with {} more variables",
        exe.display(),
        env.len()
    );
    anyhow::Error::new(cmd.exec()).context(format!("re-executing cyclix ({})", exe.display()))
}

/// [`run_status`], and a non-zero exit is an error.
///
/// # Errors
/// [`ProcessError`] for spawn failures, deadline and non-zero exit.
pub fn run(
    program: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
    deadline: Duration,
    hint: &str,
) -> Result<Output, ProcessError> {
    checked(
        program,
        args,
        run_status(program, args, stdin, deadline, hint)?,
    )
}

/// [`run_with`], and a non-zero exit is an error ([`ProcessError::Failed`]), as for [`run`].
///
/// # Errors
/// [`ProcessError`] for spawn failures, deadline, the stdout cap and non-zero exit.
pub fn run_with_ok(program: &str, args: &[&str], opts: &Opts<'_>) -> Result<Output, ProcessError> {
    checked(program, args, run_with(program, args, opts)?)
}

/// `out` if it exited 0, else [`ProcessError::Failed`] naming `program args…`.
fn checked(program: &str, args: &[&str], out: Output) -> Result<Output, ProcessError> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(ProcessError::Failed {
            argv: show(program, args),
            status: out.status,
            stderr: trim_tail(&out.stderr),
            stdout: out.stdout,
        })
    }
}

/// Replaces the current process with `argv` (`execvp`), its standard input `stdin` when
/// given and `env` added to its environment: used inside the agent container to hand over to
/// the agent once the boundary is proven. Returns only on failure.
#[must_use]
pub fn exec_replace(
    argv: &[String],
    stdin: Option<std::fs::File>,
    env: &[(String, Vec<u8>)],
) -> std::io::Error {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::process::CommandExt as _;
    let Some((program, rest)) = argv.split_first() else {
        return std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty argv");
    };
    // The argv only: `env`'s values are secrets.
    tracing::debug!(argv = %argv.join(" "), "exec");
    let mut cmd = Command::new(program);
    cmd.args(rest);
    for (k, v) in env {
        cmd.env(k, std::ffi::OsStr::from_bytes(v));
    }
    if let Some(f) = stdin {
        cmd.stdin(f);
    }
    cmd.exec()
}

/// Starts `sleep SECS` as a host process the sandbox must not be able to signal (the escape
/// sentinel), named `name` in its `argv[0]` (so a sentinel whose cyclix died is found by the
/// run's id in `/proc/PID/cmdline`); the caller kills and reaps it.
///
/// # Errors
/// The OS cannot start `sleep`.
pub fn spawn_sentinel(secs: u64, name: &str) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt as _;
    Command::new("sleep")
        .arg0(name)
        .arg(secs.to_string())
        // Nothing of cyclix's environment (a tenant's variables, the canary) lives on in it.
        .env_clear()
        .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Writes `text` to `path` as an executable script (mode 0755) **from a child process**, for
/// tests that run stand-ins of git, podman or kubectl: a file this process held open for
/// writing while another thread forked would make the script's exec fail with `ETXTBSY`
/// until that fork's own exec (the descriptor is copied into the child). The child's
/// descriptor is never in this process's table.
///
/// # Panics
/// When the script cannot be written.
#[cfg(test)]
pub(crate) fn write_executable(path: &std::path::Path, text: &str) {
    let p = path.to_string_lossy();
    run(
        "sh",
        &["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh", &p],
        Some(text.as_bytes()),
        Duration::from_secs(60),
        "",
    )
    .expect("writing an executable script");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let o = run_status(
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            None,
            Duration::from_secs(5),
            "",
        )
        .expect("runs");
        assert_eq!(o.stdout, "out\n");
        assert_eq!(o.stderr, "err\n");
        assert_eq!(o.status.code(), Some(3));
        let e = run(
            "sh",
            &["-c", "echo boom >&2; exit 4"],
            None,
            Duration::from_secs(5),
            "",
        )
        .expect_err("fails");
        assert!(
            e.to_string().contains("boom") && e.to_string().contains("sh -c"),
            "{e}"
        );
    }

    #[test]
    fn stdin_carries_data_not_argv() {
        let o = run("cat", &[], Some(b"s3cret"), Duration::from_secs(5), "").expect("runs");
        assert_eq!(o.stdout, "s3cret");
    }

    #[test]
    fn deadline_kills_the_child() {
        let e = run("sleep", &["10"], None, Duration::from_millis(200), "").expect_err("deadline");
        // Killed at its deadline: a child that ran its course would have exited 0.
        assert!(matches!(e, ProcessError::Deadline { .. }), "{e}");
    }

    #[test]
    fn env_is_set_removed_and_stdout_capped_into_a_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let o = run_with(
            "sh",
            &["-c", "echo \"${CYCLIX_T_SET:-unset} ${HOME:-nohome}\""],
            &Opts {
                env: &[("CYCLIX_T_SET", Some("v")), ("HOME", None)],
                deadline: Duration::from_secs(5),
                ..Opts::default()
            },
        )
        .expect("runs");
        assert_eq!(o.stdout, "v nohome\n");
        let small = dir.path().join("small");
        let o = run_with(
            "sh",
            &["-c", "printf abc"],
            &Opts {
                stdout_file: Some((&small, 10)),
                deadline: Duration::from_secs(5),
                ..Opts::default()
            },
        )
        .expect("runs");
        assert!(o.status.success() && o.stdout.is_empty());
        assert_eq!(std::fs::read(&small).expect("file"), b"abc");
        let big = dir.path().join("big");
        let e = run_with(
            "sh",
            &["-c", "head -c 300000 /dev/zero; sleep 10"],
            &Opts {
                stdout_file: Some((&big, 100_000)),
                deadline: Duration::from_secs(20),
                ..Opts::default()
            },
        )
        .expect_err("cap");
        assert!(matches!(e, ProcessError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn missing_binary_names_the_fix() {
        let e = run(
            "/nonexistent/podman",
            &["ps"],
            None,
            Duration::from_secs(1),
            " (is podman installed?)",
        )
        .expect_err("spawn");
        assert!(e.to_string().contains("is podman installed?"), "{e}");
    }
}
