//! The pure decisions of a delivery: which touched paths are held, what the secret scan finds
//! in the delivered patches, where the run starts on a fixed branch, and what `git push
//! --porcelain` said. No I/O: the effectful half (`run::phases::deliver`) gathers the facts and acts.
//!
//! Everything scanned here comes from the sandbox and is treated as an adversary's data: the
//! scan works on the raw bytes of the whole patch text, so no crafted header, marker or
//! encoding hides a value from it; the structure (file headers) is used only to say *where* a
//! hit was, never *whether* it counts.

pub use crate::run::record::SecretHit;

/// Paths held by default (same forms as `delivery.allow_paths`): CI definitions, automation
/// that runs on checkout or on a developer's machine, and attributes/submodules that change
/// what git runs or fetches for whoever clones the branch.
pub const DEFAULT_HELD: &[&str] = &[
    ".github/",
    ".gitlab-ci.yml",
    ".gitlab/",
    ".circleci/",
    ".travis.yml",
    ".buildkite/",
    "azure-pipelines.yml",
    "Jenkinsfile",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".husky/",
    ".vscode/",
    ".devcontainer/",
    ".gitmodules",
    "**/.envrc",
    "**/.gitattributes",
    // Further CI systems and tools that run code or fetch from a URL on checkout or build.
    ".drone.yml",
    ".gitea/",
    ".forgejo/",
    ".woodpecker/",
    ".woodpecker.yml",
    "bitbucket-pipelines.yml",
    ".idea/",
    "**/.lfsconfig",
    ".cargo/",
    "**/.npmrc",
    "lefthook.yml",
    ".lefthook.yml",
    "mise.toml",
    ".mise.toml",
    // Agent CLIs' project configuration (issue 14): read by the next agent that opens the
    // repository, often on a developer's machine with their rights. Claude Code runs hooks
    // and MCP servers from `.claude/settings.json` and `.mcp.json`; Gemini CLI MCP servers from
    // `.gemini/settings.json`; aider loads `.aider.conf.yml` and `.env` from the git root (a
    // planted `OPENAI_API_BASE` sends the next run's key elsewhere); the instruction files
    // steer what the next agent does. At any depth: each CLI reads them in the directory it
    // starts in and around it, not only at the git root (Claude Code: `.claude/settings.json`
    // of its start directory, every `CLAUDE.md`/`CLAUDE.local.md` above it and, lazily, below
    // it; Codex: `AGENTS.override.md` or `AGENTS.md` in each directory from the git root
    // down, developers.openai.com/codex/guides/agents-md; Gemini CLI: `GEMINI.md` likewise).
    "**/.claude/",
    "**/.mcp.json",
    "**/.codex/",
    "**/.gemini/",
    "**/.aider.conf.yml",
    // aider's model settings (`extra_params` such as `api_base`) from the same places.
    "**/.aider.model.settings.yml",
    "**/.aider.model.metadata.json",
    "**/.env",
    "**/CLAUDE.md",
    "**/CLAUDE.local.md",
    "**/AGENTS.md",
    "**/AGENTS.override.md",
    "**/GEMINI.md",
];

/// Shortest secret value (bytes) the scan looks for: shorter ones match too much by chance.
pub const MIN_SECRET_LEN: usize = 8;

/// Whether `path` (repository-relative, `/`-separated) is covered by `pattern`: `dir/` covers
/// the directory, everything below it, and the path `dir` itself whatever its type (a symlink
/// or gitlink named `.husky` pointing elsewhere is as held as the directory), `**/name` a
/// component `name` at any depth (and everything below it), anything else the exact path and,
/// when it is a directory, what is below it. Compared ASCII case-insensitively: a `.VSCode/`
/// takes effect on a case-insensitive checkout (macOS, Windows).
#[must_use]
pub fn covers(pattern: &str, path: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let path = path.to_ascii_lowercase();
    let (pattern, path) = (pattern.as_str(), path.as_str());
    if let Some(name) = pattern.strip_prefix("**/") {
        let name = name.trim_end_matches('/');
        let comps: Vec<&str> = path.split('/').collect();
        return comps.contains(&name);
    }
    if let Some(dir) = pattern.strip_suffix('/') {
        return path == dir
            || path
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'));
    }
    path == pattern
        || path
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The touched paths a delivery must not carry: covered by [`DEFAULT_HELD`] or `extra`, and
/// not by `allow`. Sorted, without duplicates.
#[must_use]
pub fn held_paths(touched: &[String], extra: &[String], allow: &[String]) -> Vec<String> {
    let mut held: Vec<String> = touched
        .iter()
        .filter(|p| {
            let held =
                DEFAULT_HELD.iter().any(|h| covers(h, p)) || extra.iter().any(|h| covers(h, p));
            held && !allow.iter().any(|a| covers(a, p))
        })
        .cloned()
        .collect();
    held.sort();
    held.dedup();
    held
}

/// The setup paths a delivery must not carry (issue 15, item 2): the run's `changed` setup
/// paths, or none when `allow` (`delivery.allow_setup_changes`).
#[must_use]
pub fn setup_held(changed: &[String], allow: bool) -> Vec<String> {
    if allow { Vec::new() } else { changed.to_vec() }
}

/// The protected paths (`gate.protected`) a delivery must not carry: the run's `changed`
/// ones that no `allow` pattern (`delivery.allow_paths`) covers. The gate ran the base's
/// versions of them, so what the run changed there was never judged (docs/gate.md).
#[must_use]
pub fn protected_held(changed: &[String], allow: &[String]) -> Vec<String> {
    let mut held: Vec<String> = changed
        .iter()
        .filter(|p| !allow.iter().any(|a| covers(a, p)))
        .cloned()
        .collect();
    held.sort();
    held.dedup();
    held
}

/// Why a delivery is held, one clause per reason joined with `; `: the held paths (`held`),
/// the setup paths (`setup`), the protected paths (`protected`) the run changed, each with the
/// key that would deliver them, and each secret hit. `None`: nothing holds it.
#[must_use]
pub fn hold_reasons(
    held: &[String],
    setup: &[String],
    protected: &[String],
    secrets: &[SecretHit],
) -> Option<String> {
    let mut why = Vec::new();
    if !held.is_empty() {
        why.push(format!(
            "touches {} (list them in `delivery.allow_paths` to deliver them)",
            held.join(", ")
        ));
    }
    if !setup.is_empty() {
        why.push(format!(
            "changes the setup paths {} (set `delivery.allow_setup_changes: true` to deliver them)",
            setup.join(", ")
        ));
    }
    if !protected.is_empty() {
        why.push(format!(
            "changes the protected paths {} (the gate ran the base's versions; list them in `delivery.allow_paths` to deliver them)",
            protected.join(", ")
        ));
    }
    for h in secrets {
        why.push(format!("{} in {}", h.kind, h.file));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// `a` and `b` together, sorted, without duplicates.
#[must_use]
pub fn merged(a: &[String], b: &[String]) -> Vec<String> {
    let mut all: Vec<String> = a.iter().chain(b).cloned().collect();
    all.sort();
    all.dedup();
    all
}

/// Formats recognised without knowing a value: (kind, literal prefix, minimum length of the
/// token after the prefix, the token's alphabet).
type KeyFormat = (&'static str, &'static [u8], usize, fn(u8) -> bool);

const KEY_FORMATS: &[KeyFormat] = &[
    ("AWS access key id", b"AKIA", 16, is_upper_digit),
    ("AWS access key id", b"ASIA", 16, is_upper_digit),
    ("GitHub token", b"ghp_", 30, is_token),
    ("GitHub token", b"gho_", 30, is_token),
    ("GitHub token", b"ghs_", 30, is_token),
    ("GitHub token", b"ghu_", 30, is_token),
    ("GitHub token", b"github_pat_", 30, is_token),
    ("GitLab token", b"glpat-", 20, is_token),
    ("Anthropic API key", b"sk-ant-", 20, is_token),
    ("OpenAI API key", b"sk-proj-", 20, is_token),
    ("Slack token", b"xoxb-", 10, is_token),
    ("Slack token", b"xoxp-", 10, is_token),
    ("Slack token", b"xoxa-", 10, is_token),
    ("Google API key", b"AIza", 35, is_token),
];

fn is_upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Every start offset of `needle` in `hay`.
fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let first = needle.first().copied();
    (0..hay.len().saturating_sub(needle.len().saturating_sub(1))).filter(move |&i| {
        first.is_some()
            && hay.get(i).copied() == first
            && hay.get(i..i + needle.len()) == Some(needle)
    })
}

/// The forms of a secret value the scan looks for: the value itself, each of its lines of at
/// least [`MIN_SECRET_LEN`] bytes (a patch prefixes every line with `+`), its lowercase hex
/// and its base64 at the three alignments (edge characters that depend on neighbours cut).
fn value_forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = vec![value.to_vec()];
    for line in value.split(|b| *b == b'\n') {
        if line.len() >= MIN_SECRET_LEN && line.len() < value.len() {
            forms.push(line.to_vec());
        }
    }
    forms.push(
        value
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect(),
    );
    for shift in 0..3 {
        let mut padded = vec![0u8; shift];
        padded.extend_from_slice(value);
        let enc = base64(&padded);
        // Characters touched by the padding bytes or by the unknown byte after the value.
        let skip = [0, 2, 3][shift];
        let tail_exact = (padded.len() / 3) * 4;
        if let Some(core) = enc.get(skip..tail_exact)
            && core.len() >= MIN_SECRET_LEN
        {
            forms.push(core.to_vec());
        }
    }
    forms
}

/// Lowercase hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn base64(data: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
    out
}

/// The locations (file or commit message) `patch` names, by offset: each `+++ b/PATH`
/// header, each `diff --git` header's `b/` side (for a deletion or a binary file) and each
/// commit marker (`\x01cyclix-commit SHA`). Attribution only: a crafted header can mislead
/// it, never hide a hit.
fn headers(patch: &[u8]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (start, line) in lines_with_offsets(patch) {
        let name = if let Some(p) = line.strip_prefix(b"+++ b/") {
            Some(String::from_utf8_lossy(p).into_owned())
        } else if let Some(p) = line.strip_prefix(b"diff --git ") {
            let s = String::from_utf8_lossy(p).into_owned();
            Some(
                s.rsplit_once(" b/")
                    .map_or(s.clone(), |(_, b)| b.to_owned()),
            )
        } else {
            line.strip_prefix(COMMIT_MARKER)
                .map(|sha| format!("commit {} message", String::from_utf8_lossy(sha).trim()))
        };
        if let Some(n) = name {
            out.push((start, n));
        }
    }
    out
}

/// The location in effect at byte `at` (the last header before it).
fn location(headers: &[(usize, String)], at: usize) -> String {
    let i = headers.partition_point(|(start, _)| *start <= at);
    i.checked_sub(1)
        .and_then(|i| headers.get(i))
        .map_or_else(|| "the delivered diff".to_owned(), |(_, n)| n.clone())
}

/// Most hits a scan reports (one per file and kind); more are summed up in one entry.
pub const MAX_HITS: usize = 100;

/// The marker the patch text has before each commit's message (`git log --format`).
pub const COMMIT_MARKER: &[u8] = b"\x01cyclix-commit ";

fn lines_with_offsets(text: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut start = 0;
    text.split(|b| *b == b'\n').map(move |l| {
        let s = start;
        start += l.len() + 1;
        (s, l)
    })
}

/// Scans `patch` (the delivered diff and every delivered commit's message and patch, as
/// bytes) for the `secrets` (the kind a hit is reported as, e.g. `value of secret NAME`, and
/// the value; values shorter than [`MIN_SECRET_LEN`] are skipped)
/// and for [`KEY_FORMATS`] and PEM private keys. One hit per (file, kind), sorted.
#[must_use]
pub fn scan(patch: &[u8], secrets: &[(&str, &[u8])]) -> Vec<SecretHit> {
    let mut hits = Vec::new();
    for (kind, value) in secrets {
        if value.len() < MIN_SECRET_LEN {
            continue;
        }
        for form in value_forms(value) {
            for at in find_all(patch, &form) {
                hits.push((at, (*kind).to_owned()));
            }
        }
    }
    for at in find_all(patch, b"-----BEGIN ") {
        let rest = patch
            .get(at..(at + 80).min(patch.len()))
            .unwrap_or_default();
        let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
        if find_all(line, b"PRIVATE KEY-----").next().is_some() {
            hits.push((at, "private key".to_owned()));
        }
    }
    for (kind, prefix, min, alphabet) in KEY_FORMATS {
        for at in find_all(patch, prefix) {
            let after = patch.get(at + prefix.len()..).unwrap_or_default();
            let n = after.iter().take_while(|b| alphabet(**b)).count();
            let boundary = at == 0 || patch.get(at - 1).is_none_or(|b| !is_token(*b));
            if n >= *min && boundary {
                hits.push((at, (*kind).to_owned()));
            }
        }
    }
    let heads = headers(patch);
    let mut out: Vec<SecretHit> = hits
        .into_iter()
        .map(|(at, kind)| SecretHit {
            file: location(&heads, at),
            kind,
        })
        .collect();
    out.sort();
    out.dedup();
    if out.len() > MAX_HITS {
        let more = out.len() - MAX_HITS;
        out.truncate(MAX_HITS);
        out.push(SecretHit {
            file: format!("{more} more"),
            kind: "further hits".to_owned(),
        });
    }
    out
}

/// Where a run on `branch` starts, from the remote tip read at prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPoint {
    /// The branch does not exist on the remote: start from the spec's base; the push must
    /// create it (lease "must not exist").
    New,
    /// The remote tip contains the base: start from the tip; the push must find it unmoved.
    FastForward(String),
    /// The remote tip does not contain the base: refused.
    Diverged {
        /// The remote tip.
        tip: String,
    },
}

/// The start point for a remote tip (`None`: absent) and whether the base is its ancestor.
#[must_use]
pub fn start_point(tip: Option<&str>, base_is_ancestor: bool) -> StartPoint {
    match tip {
        None => StartPoint::New,
        Some(t) if base_is_ancestor => StartPoint::FastForward(t.to_owned()),
        Some(t) => StartPoint::Diverged { tip: t.to_owned() },
    }
}

/// What `git push --porcelain` reported for the one ref pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// The ref was created or updated (or already was at the tip).
    Pushed,
    /// Refused: git's lease or fast-forward check (`[rejected] (stale info)`, …) or the
    /// remote's policy (`[remote rejected] (… hook declined)`); the reason as git gave it.
    Refused(String),
    /// The push did not get through: git never talked to the remote (gone, unreachable), or
    /// the remote could not store it (`[remote rejected] (unpacker error)`, `(failed to update
    /// ref)`, `[remote failure]`); the reason as git gave it.
    Failed(String),
}

/// Reads `git push --porcelain` output for the ref `dst` (`refs/heads/BRANCH`): its status
/// line is `FLAG \t FROM:TO \t SUMMARY`; flag ` `, `+`, `*` or `=` is success, `!` a
/// rejection: `[rejected]` is git's own lease or fast-forward check, `[remote rejected]` the
/// remote's answer — a refusal when a hook declined it or the remote refused the content (its
/// fsck, a size limit, a quota: the agent's objects), else (`unpacker error`, `failed to update
/// ref`, …) the remote could not write it — and `[remote failure]` a remote that did not
/// answer. No line for `dst` (git failed before it talked to the remote) is a failure
/// carrying `stderr`'s last line, and so is a success flag with a failed exit status.
#[must_use]
pub fn push_outcome(exit_ok: bool, porcelain: &str, stderr: &str, dst: &str) -> PushOutcome {
    let line = porcelain.lines().find_map(|l| {
        let mut parts = l.splitn(3, '\t');
        let flag = parts.next()?;
        let refs = parts.next()?;
        let summary = parts.next().unwrap_or("");
        (refs.rsplit_once(':').map(|(_, to)| to) == Some(dst)).then_some((flag, summary.trim()))
    });
    let last_err = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .trim()
        .to_owned();
    match line {
        Some((flag, _)) if exit_ok && matches!(flag, " " | "+" | "*" | "=") => PushOutcome::Pushed,
        Some(("!", summary)) if summary.starts_with("[rejected]") => {
            PushOutcome::Refused(summary.to_owned())
        }
        Some(("!", summary))
            if summary.starts_with("[remote rejected]")
                && (summary.contains("declined") || refuses_content(stderr)) =>
        {
            PushOutcome::Refused(format!("{summary} ({last_err})"))
        }
        Some((_, summary)) => PushOutcome::Failed(format!("{summary} ({last_err})")),
        None => PushOutcome::Failed(last_err),
    }
}

/// Whether the remote's words in `stderr` refuse the pushed content itself (its fsck, its size
/// limits: `receive.maxInputSize`, a quota): the agent's objects, a finding, not a remote that
/// cannot write.
fn refuses_content(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    ["fsck", "exceeds maximum", "too large", "quota"]
        .iter()
        .any(|w| s.contains(w))
}

/// A URL as it may be shown and recorded: userinfo (`user:token@`) removed.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if path.is_empty() && !rest.contains('/') {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}/{path}")
    }
}

#[cfg(test)]
mod tests;
