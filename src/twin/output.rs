//! The quick suite's output when it left no results file: normalised and digested
//! ([`output_digest`]), and told apart from a suite that could not start ([`cannot_start`]).
//! Pure.

use std::fmt::Write as _;

/// The digest the comparison falls back to without a results file: SHA-256 (hex) of the
/// suite's output lines after normalising what differs between runs without a difference in
/// results: podman's own event lines and conmon's warnings are dropped, empty lines too; every
/// run id in `run_ids` becomes `RUN`, and lines about the run's own units and containers
/// (`cyclix-RUN-…`, written by systemd and podman) are dropped; durations (`0.03s`, `12ms`, `1.5 s`) become `Ns`/`Nms`;
/// hex addresses (`0x7f3a…`) become `0xADDR`.
#[must_use]
pub fn output_digest(lines: &[String], run_ids: &[&str]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for line in normalise(lines, run_ids) {
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The normalised lines [`output_digest`] hashes.
#[must_use]
pub fn normalise(lines: &[String], run_ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<&str> = run_ids.iter().copied().filter(|i| !i.is_empty()).collect();
    ids.sort_by_key(|i| std::cmp::Reverse(i.len())); // longest first: `x-ref` before `x`
    lines
        .iter()
        .filter(|l| !l.contains(" UTC m=+") && !l.starts_with("conmon ") && !l.trim().is_empty())
        .map(|l| {
            let mut l = l.clone();
            for id in &ids {
                l = l.replace(id, "RUN");
            }
            let words: Vec<String> = l.split(' ').map(|w| random_names(&word(w))).collect();
            hex_addresses(&words.join(" "))
        })
        // The container id `podman run -d` prints.
        .filter(|l| !(l.len() == 64 && l.chars().all(|c| c.is_ascii_hexdigit())))
        // systemd's and podman's lines about the run's own units and containers
        // (`cyclix-RUN-gate.service: Consumed 1.2s CPU time`) are not the suite's output.
        .filter(|l| !l.contains("cyclix-RUN"))
        .collect()
}

fn word(w: &str) -> String {
    let core = w.trim_matches(|c: char| {
        matches!(
            c,
            '(' | ')' | ',' | ';' | ':' | '[' | ']' | '<' | '>' | '"' | '\''
        )
    });
    let (lead, rest) = w.split_at(w.find(core).unwrap_or(0));
    let tail = &rest[core.len()..];
    let is_num = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_digit() || c == '.')
            && s.chars().next().is_some_and(|c| c.is_ascii_digit())
    };
    let replaced = if let Some(n) = core.strip_suffix("ms").filter(|n| is_num(n)) {
        let _ = n;
        "Nms".to_string()
    } else if core.strip_suffix('s').is_some_and(is_num) {
        "Ns".to_string()
    } else {
        core.to_string()
    };
    format!("{lead}{replaced}{tail}")
}

/// Why the quick suite could not start at all, if so, from its exit status and output: `podman
/// run` exits 125 (podman failed), 126 (the command cannot be invoked) or 127 (not found);
/// under `--init` (cyclix's containers run catatonit as PID 1, Quadlet `RunInit=true`) a
/// command that cannot be executed makes catatonit print `failed to exec pid1` and exit 1.
#[must_use]
pub fn cannot_start(exit: i32, output: &[String]) -> Option<&'static str> {
    let catatonit = output
        .iter()
        .any(|l| l.contains("(catatonit:") && l.contains("failed to exec pid1"));
    match exit {
        125 => Some("podman failed to run the container"),
        126 => Some("the command cannot be invoked"),
        127 => Some("the command was not found"),
        _ if catatonit => {
            Some("the command could not be executed (catatonit: failed to exec pid1)")
        }
        _ => None,
    }
}

/// Known-random names in a word's path components: Python's `tempfile` names (`tmpk3j4_a9x`
/// → `tmpRANDOM`), `mktemp`'s (`tmp.AbC123xyz` → `tmp.RANDOM`), pytest's numbered base
/// directories (`pytest-12` → `pytest-N`, `popen-gw3` → `popen-gwN`).
fn random_names(w: &str) -> String {
    let random = |s: &str, min: usize| {
        s.len() >= min
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && s.chars()
                .any(|c| c.is_ascii_digit() || c == '_' || c.is_ascii_uppercase())
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    w.split('/')
        .map(|c| {
            if let Some(r) = c.strip_prefix("tmp.").filter(|r| random(r, 6)) {
                let _ = r;
                "tmp.RANDOM".to_string()
            } else if c.len() == 11 && c.strip_prefix("tmp").is_some_and(|r| random(r, 8)) {
                "tmpRANDOM".to_string()
            } else if c.strip_prefix("pytest-").is_some_and(digits) {
                "pytest-N".to_string()
            } else if c.strip_prefix("popen-gw").is_some_and(digits) {
                "popen-gwN".to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `0x` followed by hex digits (an address in a repr) becomes `0xADDR`.
fn hex_addresses(l: &str) -> String {
    let mut out = String::with_capacity(l.len());
    let mut rest = l;
    while let Some(i) = rest.find("0x") {
        let after = &rest[i + 2..];
        let n = after
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(after.len());
        out.push_str(&rest[..i]);
        if n == 0 {
            out.push_str("0x");
        } else {
            out.push_str("0xADDR");
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}
