//! The files `cyclix install` puts beside the units for people and editors (issue 18, items 2
//! and 3), in the XDG locations: man pages below `$XDG_DATA_HOME/man/`, the bash completion in
//! bash-completion's user directory `$XDG_DATA_HOME/bash-completion/completions/cyclix`, the
//! spec's JSON Schema at `$XDG_DATA_HOME/cyclix/spec.schema.json`. `cyclix uninstall` removes
//! exactly these paths.

use std::path::PathBuf;

use anyhow::{Context as _, Result};

use crate::context::HostEnv;

/// One installed file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocFile {
    /// Absolute path.
    pub path: PathBuf,
    /// Its bytes.
    pub contents: Vec<u8>,
}

/// `$XDG_DATA_HOME/man`.
#[must_use]
pub fn man_dir(env: &HostEnv) -> PathBuf {
    env.data_home.join("man")
}

/// `$XDG_DATA_HOME/bash-completion/completions/cyclix`.
#[must_use]
pub fn bash_completion(env: &HostEnv) -> PathBuf {
    env.data_home.join("bash-completion/completions/cyclix")
}

/// Every file, with `bin` (absolute) as the binary the completion calls back.
///
/// # Errors
/// Rendering failures (none expected).
pub fn files(env: &HostEnv, bin: &str) -> Result<Vec<DocFile>> {
    let mut out = vec![
        DocFile {
            path: super::super::spec_file::schema_path(env),
            contents: crate::spec::schema::json_schema_text().into_bytes(),
        },
        DocFile {
            path: bash_completion(env),
            contents: super::super::completion::registration("bash", bin)?.into_bytes(),
        },
    ];
    let man = man_dir(env);
    out.extend(
        crate::cli::docs::man_pages()
            .context("rendering the man pages")?
            .into_iter()
            .map(|p| DocFile {
                path: man.join(p.path),
                contents: p.text.into_bytes(),
            }),
    );
    Ok(out)
}

/// Writes every file (atomically, creating directories) and prints one line per kind.
///
/// # Errors
/// I/O failures, naming the file.
pub fn install(env: &HostEnv, bin: &str) -> Result<()> {
    let files = files(env, bin)?;
    for f in &files {
        let dir = f
            .path
            .parent()
            .context("invariant: a doc path has a parent")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::atomic::write(&f.path, &f.contents)?;
    }
    let pages = files.len() - 2;
    crate::outln!(
        "wrote {} (the spec's JSON Schema), {} (bash completion) and {pages} man pages below {} (`man` finds them when ~/.local/bin is on PATH, or with MANPATH={}:)",
        super::super::spec_file::schema_path(env).display(),
        bash_completion(env).display(),
        man_dir(env).display(),
        man_dir(env).display()
    );
    Ok(())
}
