//! The leak watch's canary (issue 13 item 3): a random value per run, in the environment of
//! cyclix's run process tree and nowhere else, watched by VALUE.
//!
//! `cyclix run` makes it before anything of the run exists: it reads [`RANDOM_BYTES`] bytes
//! from the kernel's CSPRNG (`/dev/urandom`, random(4): never blocks once the pool is
//! initialised, which it is long before a user manager runs) and re-executes itself
//! (`/proc/self/exe`, same pid, same argv) with [`VAR`] set to the value and [`FRESH_PID_VAR`]
//! set to its pid. Re-executing (rather than `setenv`) puts the value into the process's own
//! initial environment, so it is in `/proc/PID/environ` of cyclix itself and inherited by every
//! child (podman, conmon, their helpers): anything that copies one of those environments into
//! the sandbox carries it, and the host-side scan and P22 see it there by value. The value is
//! never written to a unit file, an argv, a log or a record; the probe context carries only its
//! sha256 ([`super::boundary::probe_context`]).
//!
//! A `CYCLIX_CANARY` already in the environment (an old template's `Environment=` line, a user's
//! shell) is replaced: only a process whose pid equals [`FRESH_PID_VAR`] is the re-executed
//! one, so two runs never share a canary, even a `cyclix run` started by another's child.

/// The variable that carries the canary.
pub const VAR: &str = "CYCLIX_CANARY";

/// Set with the canary to the pid that re-executed itself: the mark that [`VAR`] is this
/// process's own (a child has another pid). Not watched: its value is a pid, not a secret.
pub const FRESH_PID_VAR: &str = "CYCLIX_FRESH_PID";

/// How many random bytes make a canary (128 bits).
pub const RANDOM_BYTES: usize = 16;

/// The canary for `random`: `cyclix-canary-` and 32 lowercase hex digits. Pure.
#[must_use]
pub fn value(random: &[u8; RANDOM_BYTES]) -> String {
    use std::fmt::Write as _;
    random
        .iter()
        .fold(String::from("cyclix-canary-"), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Whether this process already carries its own fresh canary: [`VAR`] is set and
/// [`FRESH_PID_VAR`] names `pid`. Pure.
#[must_use]
pub fn is_fresh(canary: Option<&str>, fresh_pid: Option<&str>, pid: u32) -> bool {
    canary.is_some_and(|c| c.len() > "cyclix-canary-".len())
        && fresh_pid.and_then(|p| p.parse::<u32>().ok()) == Some(pid)
}

/// [`RANDOM_BYTES`] bytes from the kernel's CSPRNG (`/dev/urandom`).
///
/// # Errors
/// `/dev/urandom` cannot be opened or read.
pub fn random() -> anyhow::Result<[u8; RANDOM_BYTES]> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let mut b = [0u8; RANDOM_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading the run's canary from /dev/urandom")?;
    Ok(b)
}

/// Makes sure this `cyclix run` carries a fresh canary: returns when it does, else re-executes
/// the process with one (and does not return unless the exec failed).
///
/// # Errors
/// The random bytes cannot be read, or the exec failed.
pub fn ensure() -> anyhow::Result<()> {
    let (canary, fresh) = (
        crate::context::utf8_var(VAR),
        crate::context::utf8_var(FRESH_PID_VAR),
    );
    if is_fresh(canary.as_deref(), fresh.as_deref(), std::process::id()) {
        return Ok(());
    }
    let v = value(&random()?);
    let pid = std::process::id().to_string();
    Err(crate::process::reexec_self(&[
        (VAR, &v),
        (FRESH_PID_VAR, &pid),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_is_the_random_bytes_in_hex() {
        let v = value(&[0xab; RANDOM_BYTES]);
        assert_eq!(v, format!("cyclix-canary-{}", "ab".repeat(16)));
        assert_ne!(v, value(&[0xac; RANDOM_BYTES]));
        assert!(v.len() >= super::super::boundary::MIN_VALUE_LEN);
    }

    #[test]
    fn two_reads_of_the_csprng_differ() {
        let a = random().expect("urandom");
        let b = random().expect("urandom");
        assert_ne!(a, b, "128 random bits repeated");
    }

    #[test]
    fn only_the_re_executed_process_is_fresh() {
        let c = Some("cyclix-canary-00112233445566778899aabbccddeeff");
        assert!(is_fresh(c, Some("42"), 42));
        assert!(!is_fresh(c, Some("41"), 42), "inherited from a parent run");
        assert!(!is_fresh(c, None, 42), "set by a unit file or a shell");
        assert!(!is_fresh(None, Some("42"), 42));
        assert!(!is_fresh(Some("cyclix-canary-"), Some("42"), 42));
    }
}
