//! cyclix's own settings for this host (not a tenant's): `$XDG_CONFIG_HOME/cyclix/config.yaml`
//! (`CYCLIX_CONFIG` names another file). Read with the same strict YAML decoder as a tenant
//! spec (closed keys, strict types, the file, line and column, a fix for every problem).
//!
//! ```yaml
//! max_runs: 4          # runs at once on this host, all tenants together (default: 2 per core)
//! queue_timeout: 6h    # how long a run over the limit waits for its turn (default 6h)
//! metrics_textfile: /var/lib/cyclix-metrics/cyclix.prom   # Prometheus metrics (default: off)
//! ```
//!
//! Issue 16, item 4: twenty tenants' timers at 02:00 must not start twenty runs at once on a
//! 2-core host. A run over the limit waits (bounded by `queue_timeout`, recorded as its
//! `queue` phase) instead of starting (`run::capacity`).

use super::keys::{Key, Kind, StrKind};
use super::rules::durations::bounded_duration;
use super::rules::sizes::decimal_int;
use super::{Diagnostic, SpecError, yaml};

/// The bounds of `max_runs`.
pub const MAX_RUNS_RANGE: (u32, u32) = (1, 256);
/// `queue_timeout`'s bounds and default, in seconds (0 s to 24 h, default 6 h): a timer's
/// nightly batch of a dozen tenants at a few runs at once fits in 6 h; 0 s refuses a run over
/// the limit at once.
pub const QUEUE_TIMEOUT: (u64, u64, u64) = (0, 24 * 3600, 6 * 3600);
/// The largest config file read, in bytes.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;

/// The keys of `config.yaml`.
pub(crate) const KEYS: &[Key] = &[
    Key::optional(
        "max_runs",
        Kind::Integer,
        "runs at once on this host, all tenants together (1-256; default 2 per core)",
    ),
    Key::optional(
        "queue_timeout",
        Kind::Str(StrKind::Duration),
        "how long a run over max_runs waits for its turn before it fails (0s-24h, default 6h)",
    ),
    Key::optional(
        "metrics_textfile",
        Kind::Str(StrKind::Line),
        "the file cyclix writes its Prometheus metrics to after every run and keeper pass, for \
         node_exporter's textfile collector (an absolute path ending in .prom; default: none, \
         no metrics written)",
    ),
];

/// The longest `metrics_textfile` path accepted, in bytes (`PATH_MAX` is 4096).
pub const MAX_METRICS_PATH: usize = 1024;

/// The host's settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// `max_runs` as written; `None` = the default from the core count ([`default_max_runs`]).
    pub max_runs: Option<u32>,
    /// `queue_timeout` in seconds.
    pub queue_timeout_s: u64,
    /// `metrics_textfile`: where the metrics go (`crate::metrics`); `None` = none written.
    pub metrics_textfile: Option<String>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            max_runs: None,
            queue_timeout_s: QUEUE_TIMEOUT.2,
            metrics_textfile: None,
        }
    }
}

impl HostConfig {
    /// The limit in force: `max_runs`, else [`default_max_runs`] of `cores`.
    #[must_use]
    pub fn max_runs_for(&self, cores: usize) -> u32 {
        self.max_runs.unwrap_or_else(|| default_max_runs(cores))
    }
}

/// The default limit: two runs per core, at least 2 and at most 64. A run mostly waits on the
/// model's API and its gate; two per core keeps a 2-core host at 4 runs at once (issue 16).
#[must_use]
pub fn default_max_runs(cores: usize) -> u32 {
    u32::try_from(cores.saturating_mul(2))
        .unwrap_or(u32::MAX)
        .clamp(2, 64)
}

/// Parses `config.yaml`'s text; an empty file (or one of only comments) is the defaults.
///
/// # Errors
/// A [`SpecError`] for `file` with one diagnostic per problem (unknown key with the nearest
/// one, wrong type, out of range), each with a fix.
pub fn parse(text: &str, file: &str) -> Result<HostConfig, SpecError> {
    let fail = |mut diagnostics: Vec<Diagnostic>| {
        diagnostics.sort_by_key(|d| (d.line.is_none(), d.line, d.column));
        SpecError {
            file: file.to_string(),
            diagnostics,
        }
    };
    if text.len() > MAX_CONFIG_BYTES {
        return Err(SpecError::single(
            file,
            format!(
                "file is {} bytes, larger than {MAX_CONFIG_BYTES}",
                text.len()
            ),
            "cyclix's config holds three keys: max_runs, queue_timeout and metrics_textfile",
        ));
    }
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(HostConfig::default());
    }
    let root = yaml::read(text).map_err(fail)?;
    let mut d = yaml::Decoder { out: Vec::new() };
    let Some(f) = d.mapping(&root, "", KEYS) else {
        return Err(fail(d.out));
    };
    let max_runs = d.number(&f, "max_runs");
    let queue_timeout = d.string(&f, "queue_timeout");
    let metrics = d.string(&f, "metrics_textfile");
    let mut out = d.out;
    let max_runs = max_runs.and_then(|m| {
        let (lo, hi) = MAX_RUNS_RANGE;
        let n = decimal_int(&m.value)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (lo..=hi).contains(n));
        if n.is_none() {
            out.push(
                m.diag(format!("max_runs `{}` is out of range", m.value))
                    .hint(format!(
                        "use a number of runs from {lo} to {hi}, or leave the key out for 2 per core"
                    )),
            );
        }
        n
    });
    let queue_timeout_s = bounded_duration(queue_timeout.as_ref(), QUEUE_TIMEOUT, &mut out);
    let metrics_textfile = metrics.and_then(|m| match metrics_path_problem(&m.value) {
        None => Some(m.value),
        Some(problem) => {
            out.push(
                m.diag(format!("metrics_textfile `{}` {problem}", m.value))
                    .hint(
                        "name the file node_exporter's textfile collector reads, an absolute \
                         path ending in .prom in a directory this user may write \
                         (metrics_textfile: /var/lib/cyclix-metrics/cyclix.prom), or leave \
                         the key out for no metrics",
                    ),
            );
            None
        }
    });
    match queue_timeout_s {
        Some(queue_timeout_s) if out.is_empty() => Ok(HostConfig {
            max_runs,
            queue_timeout_s,
            metrics_textfile,
        }),
        _ => Err(fail(out)),
    }
}

/// What is wrong with `p` as `metrics_textfile`, `None` when nothing: an absolute path (no
/// `~`: the units and the shell see the same file), no `.`/`..` components or empty ones, no
/// control characters, a file name ending in `.prom` (the textfile collector reads only
/// those) that is not hidden (cyclix's temporary files there start with a dot).
#[must_use]
// `.prom` exactly: the collector's glob is `*.prom`, case and all.
#[allow(clippy::case_sensitive_file_extension_comparisons)]
pub fn metrics_path_problem(p: &str) -> Option<&'static str> {
    if p.len() > MAX_METRICS_PATH {
        return Some("is longer than 1024 bytes");
    }
    if p.chars().any(char::is_control) {
        return Some("holds a control character");
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Some("is not an absolute path");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    if parts
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Some("has an empty, `.` or `..` component");
    }
    let name = parts.last().copied().unwrap_or_default();
    if !name.ends_with(".prom") || name.len() == ".prom".len() {
        return Some(
            "does not name a file ending in .prom (the textfile collector reads only those)",
        );
    }
    if name.starts_with('.') {
        return Some("names a hidden file (its name starts with a dot)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "config.yaml")
            .expect_err("must fail")
            .to_string()
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(parse("", "c").expect("ok"), HostConfig::default());
        assert_eq!(
            parse("# nothing\n\n", "c").expect("ok"),
            HostConfig::default()
        );
        let c = parse("max_runs: 3\nqueue_timeout: 90s\n", "c").expect("ok");
        assert_eq!(c.max_runs, Some(3));
        assert_eq!(c.queue_timeout_s, 90);
        assert_eq!(c.max_runs_for(16), 3);
        assert_eq!(HostConfig::default().max_runs_for(2), 4);
    }

    #[test]
    fn default_limit_is_two_per_core_within_bounds() {
        assert_eq!(default_max_runs(0), 2);
        assert_eq!(default_max_runs(1), 2);
        assert_eq!(default_max_runs(2), 4);
        assert_eq!(default_max_runs(8), 16);
        assert_eq!(default_max_runs(1000), 64);
    }

    #[test]
    fn bad_input_names_line_key_and_fix() {
        let e = err("max_run: 3\n");
        assert!(e.contains("config.yaml:1") && e.contains("max_run"), "{e}");
        assert!(e.contains("max_runs"), "nearest key suggested: {e}");
        let e = err("max_runs: 0\n");
        assert!(
            e.contains("config.yaml:1") && e.contains("out of range"),
            "{e}"
        );
        assert!(e.contains("fix:"), "{e}");
        let e = err("max_runs: \"4\"\n");
        assert!(e.contains("max_runs"), "{e}");
        let e = err("queue_timeout: 2d\n");
        assert!(
            e.contains("config.yaml:1") && e.contains("queue_timeout"),
            "{e}"
        );
        let e = err("queue_timeout: 25h\n");
        assert!(e.contains("out of range"), "{e}");
        let e = err("- 1\n");
        assert!(e.contains("mapping"), "{e}");
    }

    #[test]
    fn metrics_textfile_is_off_by_default_and_validated() {
        assert_eq!(HostConfig::default().metrics_textfile, None);
        let c = parse(
            "metrics_textfile: /var/lib/cyclix-metrics/cyclix.prom\n",
            "c",
        )
        .expect("ok");
        assert_eq!(
            c.metrics_textfile.as_deref(),
            Some("/var/lib/cyclix-metrics/cyclix.prom")
        );
        for (bad, why) in [
            ("metrics.prom", "not an absolute path"),
            ("~/m/cyclix.prom", "not an absolute path"),
            ("/var/lib/m/cyclix.txt", "ending in .prom"),
            ("/var/lib/m/.prom", "ending in .prom"),
            ("/var/lib/m/", "ending in .prom"),
            ("/var/lib/m/.cyclix.prom", "hidden"),
            ("/var/lib/../m/cyclix.prom", "`..`"),
            ("/var//m/cyclix.prom", "empty"),
        ] {
            let e = err(&format!("max_runs: 2\nmetrics_textfile: \"{bad}\"\n"));
            assert!(
                e.contains("config.yaml:2") && e.contains("metrics_textfile") && e.contains(why),
                "{bad}: {e}"
            );
            assert!(e.contains("fix:") && e.contains(".prom"), "{e}");
        }
        let e = err("metrics_textfile: [a]\n");
        assert!(e.contains("metrics_textfile"), "{e}");
        let e = err("metrics_file: /x/y.prom\n");
        assert!(e.contains("metrics_textfile"), "nearest key suggested: {e}");
        assert!(metrics_path_problem("/a/b\u{7}.prom").is_some());
        assert!(metrics_path_problem(&format!("/{}.prom", "a".repeat(2000))).is_some());
    }
}
