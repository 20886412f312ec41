//! Retrying a call through a blink of the user manager (issue 20 item 2).

use std::time::{Duration, Instant};

use crate::systemd::Error;

/// First pause before a transient D-Bus error is retried; doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest pause between two retries of a transient D-Bus error.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Runs `f` (one whole call: connect to its proxy, ask, read) again after a transient
/// D-Bus error ([`Error::is_transient`]: the user manager re-executing) until it succeeds,
/// fails otherwise, or `timeout` from now would pass during the next pause; then the last
/// error is returned. Every call `f` makes has its own deadline. Only for operations that
/// are safe to repeat: reads, `LoadUnit`, `Reload`, `ResetFailed`, and jobs in mode
/// `replace` (a start or stop queued twice merges into one job).
pub(super) fn retrying<T>(timeout: Duration, f: impl Fn() -> Result<T, Error>) -> Result<T, Error> {
    let end = Instant::now() + timeout;
    let mut pause = RETRY_FIRST;
    loop {
        match f() {
            Err(e) if e.is_transient() && Instant::now() + pause < end => {
                tracing::warn!(
                    "the user manager did not answer ({e}); retrying in {} ms within the deadline",
                    pause.as_millis()
                );
                std::thread::sleep(pause);
                pause = (pause * 2).min(RETRY_MAX);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systemd::Op;
    use std::cell::Cell;

    fn no_reply() -> Error {
        Error::Dbus {
            op: Op::Status,
            unit: "u.service".into(),
            message: "org.freedesktop.DBus.Error.NoReply: Message recipient disconnected".into(),
        }
    }

    #[test]
    fn a_blink_is_ridden_out_and_anything_else_returns_at_once() {
        let n = Cell::new(0);
        let got = retrying(Duration::from_secs(5), || {
            n.set(n.get() + 1);
            if n.get() < 3 {
                Err(no_reply())
            } else {
                Ok(n.get())
            }
        });
        assert_eq!(got.ok(), Some(3));
        let n = Cell::new(0);
        let got: Result<(), Error> = retrying(Duration::from_secs(5), || {
            n.set(n.get() + 1);
            Err(Error::NoSuchUnit { unit: "u".into() })
        });
        assert!(matches!(got, Err(Error::NoSuchUnit { .. })));
        assert_eq!(n.get(), 1, "not retried");
        // A manager that never comes back: asked again until the deadline, then the last
        // error (that the call returns at all is the deadline's doing; how soon is the
        // machine's load, never asserted).
        let n = Cell::new(0);
        let got: Result<(), Error> = retrying(Duration::from_millis(300), || {
            n.set(n.get() + 1);
            Err(no_reply())
        });
        assert!(got.is_err_and(|e| e.is_transient()));
        assert!(n.get() >= 1, "asked at least once");
    }
}
