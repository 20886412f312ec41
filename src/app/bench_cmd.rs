//! `cyclix bench-render --tenants N` (hidden): renders N distinct tenants' unit sets in this
//! process and prints the wall time as one JSON line (issue 7, measurement 5; `bench/run`
//! calls it). Timing is a measurement, never asserted by a test.

use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;
use crate::render::{self, Backend};
use crate::spec;

/// Parses the embedded demo spec under N tenant names (`bench0000`, ...), then renders every
/// one with its own run id (Quadlet backend) and prints
/// `{"tenants":N,"parse_ms":F,"render_ms":F,"files":N,"bytes":N}` (ms as fractional
/// milliseconds of wall time; only `render_ms` covers rendering).
///
/// # Errors
/// The embedded spec does not parse or a tenant does not render (a bug in cyclix), or the
/// environment (`$HOME`) is unusable.
pub fn run(env: &HostEnv, tenants: usize) -> Result<Outcome> {
    let bin = path_str(&current_exe()?);
    let t = Instant::now();
    let mut specs = Vec::with_capacity(tenants);
    for i in 0..tenants {
        let name = format!("bench{i:04}");
        let text = crate::demo::TENANT_YAML.replacen("tenant: demo", &format!("tenant: {name}"), 1);
        let s = spec::parse(&text, &super::spec_file::spec_context("<bench>", env))
            .map_err(|e| anyhow::anyhow!("parsing the bench spec {name}: {e:?}"))?;
        specs.push(s);
    }
    let parse_ms = t.elapsed().as_secs_f64() * 1e3;
    let runs: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = format!("20261130t000000-{i:04x}");
            super::run_context::default_run_context(s, &id, env, None, None, None, &bin)
        })
        .collect();
    let t = Instant::now();
    let (mut files, mut bytes) = (0usize, 0usize);
    for (s, r) in specs.iter().zip(&runs) {
        let out = render::render(s, r, Backend::Quadlet)
            .with_context(|| format!("rendering tenant {}", s.tenant))?;
        files += out.files.len();
        bytes += out.files.iter().map(|f| f.contents.len()).sum::<usize>();
    }
    let render_ms = t.elapsed().as_secs_f64() * 1e3;
    super::print_out(&format!(
        "{}\n",
        serde_json::json!({
            "tenants": tenants, "parse_ms": parse_ms, "render_ms": render_ms,
            "files": files, "bytes": bytes,
        })
    ))?;
    Ok(Outcome::Ok)
}

/// `cyclix bench-private-repo --repo R --base B --out DIR` (hidden): makes a run's private
/// repository exactly as prepare does ([`crate::git::private::create`]) and prints
/// `{"ms":F,"objects":N}` (wall time in fractional milliseconds; the object count from
/// `git count-objects -v`). `bench/prepare-repo` compares it with `git worktree add`.
///
/// # Errors
/// `base` is not a commit of `repo`, `out` exists, or git fails.
pub fn private_repo(repo: &std::path::Path, base: &str, out: &std::path::Path) -> Result<Outcome> {
    let sha = crate::git::Git::new(repo).rev_parse_commit(base)?;
    let t = Instant::now();
    crate::git::private::create(repo, out, "cyclix/bench/run", &sha)
        .with_context(|| format!("making a private repository of {}", repo.display()))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    crate::outln!("{}", serde_json::json!({ "ms": ms }));
    Ok(Outcome::Ok)
}
