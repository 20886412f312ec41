//! Reading a tenant spec file: the size cap before parsing, UTF-8, the host's paths for the
//! parser, the shallow mount walk, and printing an invalid spec as a finding.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context as _, Result};

use super::print_out;
use crate::context::{HostEnv, path_str};
use crate::exit::Outcome;
use crate::spec::schema::SCHEMA_FILE;
use crate::spec::{self, MAX_SPEC_BYTES, Spec, SpecContext, SpecError};

pub(crate) fn spec_context(file: &str, env: &HostEnv) -> SpecContext {
    SpecContext {
        file: file.to_string(),
        home: path_str(&env.home),
        runtime_dir: env
            .runtime_dir
            .as_deref()
            .map_or_else(|| "/run/user".to_string(), path_str),
    }
}

/// Reads a spec file with the size cap applied before parsing (security-cases §4).
///
/// # Errors
/// I/O failures (missing file, unreadable) as cyclix errors; an oversized or non-UTF-8 file is
/// returned as a spec finding.
pub fn read_spec_text(path: &Path) -> Result<std::result::Result<String, SpecError>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("opening spec {}", path.display()))?;
    let mut buf = Vec::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading spec {}", path.display()))?;
    let name = path.display().to_string();
    if buf.len() as u64 > MAX_SPEC_BYTES {
        return Ok(Err(SpecError::single(
            &name,
            format!("the file is larger than {MAX_SPEC_BYTES} bytes"),
            "a tenant spec is a few KiB; check that this is the right file",
        )));
    }
    match String::from_utf8(buf) {
        Ok(s) => Ok(Ok(s)),
        Err(e) => Ok(Err(SpecError::single(
            &name,
            format!(
                "the file is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
            "save the file as UTF-8 without a byte-order mark",
        ))),
    }
}

/// Loads and validates a spec: `Ok(Err(_))` for an invalid spec. Mount sources are also
/// checked against this host's protected paths and walked shallowly for git directories
/// (`host::mount_scan::SHALLOW`).
///
/// # Errors
/// I/O failures.
pub fn load_spec(path: &Path, env: &HostEnv) -> Result<std::result::Result<Spec, SpecError>> {
    Ok(load_spec_with_notes(path, env)?.0)
}

/// [`load_spec`] with the notes of the shallow mount walk (a walk that stopped at its bound
/// says so: `spec validate` prints them).
///
/// # Errors
/// I/O failures.
pub fn load_spec_with_notes(
    path: &Path,
    env: &HostEnv,
) -> Result<(std::result::Result<Spec, SpecError>, Vec<String>)> {
    let file = path.display().to_string();
    let spec = match read_spec_text(path)?
        .and_then(|text| spec::parse(&text, &spec_context(&file, env)))
    {
        Ok(s) => s,
        Err(e) => return Ok((Err(e), Vec::new())),
    };
    let mut found =
        crate::host::mount_scan::scan(&spec, env, &[], crate::host::mount_scan::SHALLOW);
    found
        .diagnostics
        .extend(crate::host::ca_certs::check(&spec));
    if found.diagnostics.is_empty() {
        Ok((Ok(spec), found.notes))
    } else {
        Ok((
            Err(SpecError {
                file,
                diagnostics: found.diagnostics,
            }),
            found.notes,
        ))
    }
}

pub(crate) fn report_spec_error(e: &SpecError, json: bool) -> Result<Outcome> {
    if json {
        print_out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&e.to_json())?
        ))?;
    }
    crate::stderr!("{e}");
    if !e.to_string().ends_with('\n') {
        crate::stderrln!();
    }
    Ok(Outcome::Findings)
}

/// The path of the schema in cyclix's data dir (`$XDG_DATA_HOME/cyclix/spec.schema.json`).
#[must_use]
pub fn schema_path(env: &HostEnv) -> std::path::PathBuf {
    env.data_home.join("cyclix").join(SCHEMA_FILE)
}

/// The schema a new spec names: the Debian package's when it is installed (then `cyclix
/// install` writes no copy for the user), else [`schema_path`].
#[must_use]
pub fn schema_named(env: &HostEnv) -> std::path::PathBuf {
    let packaged = Path::new(super::installer::packaged::SCHEMA);
    if packaged.is_file() {
        packaged.to_path_buf()
    } else {
        schema_path(env)
    }
}
