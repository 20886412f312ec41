//! The Debian package (issue 32, item 6; `scripts/deb`): the files it ships, and what
//! `cyclix install` does on a host where it is installed.
//!
//! The package puts the unit templates in `/usr/lib/systemd/user/` (running `/usr/bin/cyclix`),
//! the man pages, the bash completion and the spec's schema in `/usr/share/`. The user manager
//! prefers a unit in `~/.config/systemd/user/` to one of the same name there, and man-db and
//! bash-completion prefer the user's directories too, so `install` then writes none of these
//! files for the user and removes the copies an earlier install wrote (they would shadow the
//! package's). It only writes and enables what the specs need: the timers and their drop-ins,
//! the notify drop-ins, the pool keepers. [`Templates::detect`] tells the two cases apart by
//! the package's run template.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::naming::template;
use crate::render::{self, RenderedFile};

/// Where the package puts the unit templates (the user manager's vendor unit directory,
/// `systemd.unit(5)` "User Unit Search Path").
pub const UNITS_DIR: &str = "/usr/lib/systemd/user";
/// The package's binary: what its templates run.
pub const BIN: &str = "/usr/bin/cyclix";
/// The package's copy of the spec's JSON Schema.
pub const SCHEMA: &str = "/usr/share/cyclix/spec.schema.json";
/// The package's man pages (below `man1/`, `man5/`, gzipped by `scripts/deb`).
pub const MAN_DIR: &str = "/usr/share/man";
/// The package's bash completion (bash-completion's system directory).
pub const BASH_COMPLETION: &str = "/usr/share/bash-completion/completions/cyclix";

/// The names of every unit template (`units/`), in the order `install` writes them.
pub const TEMPLATE_NAMES: [&str; 5] = [
    template::RUN_SERVICE,
    template::RUN_TIMER,
    template::TICK_SERVICE,
    template::POOL_SERVICE,
    template::NOTIFY_SERVICE,
];

/// Where the unit templates come from on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Templates {
    /// No package: `install` writes them (and the man pages, the completion and the schema)
    /// for the user, naming `bin` (this binary's absolute path).
    Written {
        /// The binary the templates run.
        bin: String,
    },
    /// The package's, in `dir`: `install` writes none of them and removes the user's copies.
    Packaged {
        /// The package's unit directory ([`UNITS_DIR`] on a real host).
        dir: PathBuf,
    },
}

impl Templates {
    /// This host's case, for the binary at `bin`: [`Templates::detect`] in [`UNITS_DIR`].
    #[must_use]
    pub fn of_host(bin: String) -> Self {
        Self::detect(Path::new(UNITS_DIR), bin)
    }

    /// [`Templates::Packaged`] when `dir` holds every template as a regular file (the package
    /// ships all five), otherwise [`Templates::Written`] with `bin`: a run template put there
    /// by hand, or a partial or half-removed package, must not make `install` remove the
    /// user's templates that `dir` lacks (attack review).
    #[must_use]
    pub fn detect(dir: &Path, bin: String) -> Self {
        let all = TEMPLATE_NAMES
            .iter()
            .all(|n| std::fs::metadata(dir.join(n)).is_ok_and(|m| m.is_file()));
        if all {
            Self::Packaged {
                dir: dir.to_path_buf(),
            }
        } else {
            Self::Written { bin }
        }
    }
}

/// Every unit template as the user's copy would be written, with `bin` as its binary (the
/// four of [`render::units::templates`] and the notify template).
///
/// # Errors
/// `bin` is not absolute, or holds a control character.
pub fn user_templates(bin: &str) -> Result<Vec<RenderedFile>> {
    let mut files = render::units::templates(bin).map_err(|e| anyhow::anyhow!("{e}"))?;
    files.push(render::units::notify_template(bin).map_err(|e| anyhow::anyhow!("{e}"))?);
    Ok(files)
}

/// Removes the user's copies of the templates in `unit_dir` (a package is installed: they
/// would shadow its own) and prints one line per file removed.
///
/// # Errors
/// A copy cannot be removed.
pub fn remove_shadowing_templates(unit_dir: &Path, packaged: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    // Only what the package holds: a copy of a template it lacks shadows nothing.
    for name in TEMPLATE_NAMES
        .iter()
        .filter(|n| std::fs::metadata(packaged.join(n)).is_ok_and(|m| m.is_file()))
    {
        let p = unit_dir.join(name);
        if remove_file(&p)? {
            crate::outln!(
                "removed {} (it shadowed the package's {})",
                p.display(),
                packaged.join(name).display()
            );
            removed.push(p);
        }
    }
    Ok(removed)
}

/// Removes `paths` (the man pages, completion and schema an earlier `install` wrote for the
/// user: the package's are in `/usr/share`); prints one line when any went.
///
/// # Errors
/// A file cannot be removed.
pub fn remove_user_docs(paths: &[PathBuf], schema: &Path) -> Result<usize> {
    let mut n = 0;
    for p in paths {
        if remove_file(p)? {
            n += 1;
            if p == schema {
                crate::outln!(
                    "removed {} (the package's schema is {SCHEMA}: point a spec's `$schema=` line there)",
                    p.display()
                );
            }
        }
    }
    if n > 0 {
        crate::outln!(
            "removed {n} file(s) of man pages, completion and schema an earlier `cyclix install` wrote (the package's are in /usr/share)"
        );
    }
    Ok(n)
}

/// Removes `p`: true when it was there, false when it was not.
fn remove_file(p: &Path) -> Result<bool> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("removing {}", p.display())),
    }
}

/// One file of the package's tree: its path below the root, its bytes and its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Relative to the package's root, e.g. `usr/lib/systemd/user/cyclix-run@.service`.
    pub path: PathBuf,
    /// Its bytes.
    pub contents: Vec<u8>,
}

/// The files the package ships besides the binary, generated by this binary for `bin` (the
/// package's [`BIN`]): the unit templates for [`UNITS_DIR`], the man pages (uncompressed;
/// `scripts/deb` gzips them), the bash completion and the spec's schema.
///
/// # Errors
/// `bin` is not an absolute path; rendering failures (none expected).
pub fn tree(bin: &str) -> Result<Vec<TreeFile>> {
    let rel = |p: &str| PathBuf::from(p.trim_start_matches('/'));
    let mut out: Vec<TreeFile> = user_templates(bin)?
        .into_iter()
        .map(|f| TreeFile {
            path: rel(UNITS_DIR).join(f.name),
            contents: f.contents.into_bytes(),
        })
        .collect();
    let man = rel(MAN_DIR);
    out.extend(
        crate::cli::docs::man_pages_for(crate::cli::docs::UnitsAt::Package {
            dir: UNITS_DIR,
            bin,
        })
        .context("rendering the man pages")?
        .into_iter()
        .map(|p| TreeFile {
            path: man.join(p.path),
            contents: p.text.into_bytes(),
        }),
    );
    out.push(TreeFile {
        path: rel(BASH_COMPLETION),
        contents: super::super::completion::registration("bash", bin)?.into_bytes(),
    });
    out.push(TreeFile {
        path: rel(SCHEMA),
        contents: crate::spec::schema::json_schema_text().into_bytes(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_is_told_by_its_templates() {
        let d = tempfile::tempdir().expect("tempdir");
        let bin = "/home/u/.cargo/bin/cyclix".to_owned();
        assert_eq!(
            Templates::detect(d.path(), bin.clone()),
            Templates::Written { bin: bin.clone() }
        );
        // A directory of that name is no template.
        std::fs::create_dir(d.path().join(template::RUN_SERVICE)).expect("dir");
        assert!(matches!(
            Templates::detect(d.path(), bin.clone()),
            Templates::Written { .. }
        ));
        std::fs::remove_dir(d.path().join(template::RUN_SERVICE)).expect("rmdir");
        for name in TEMPLATE_NAMES {
            std::fs::write(d.path().join(name), "x").expect("write");
        }
        assert_eq!(
            Templates::detect(d.path(), bin),
            Templates::Packaged {
                dir: d.path().to_path_buf()
            }
        );
    }

    #[test]
    fn the_tree_holds_the_templates_pages_completion_and_schema_for_the_package_s_binary() {
        let files = tree(BIN).expect("tree");
        let find = |p: &str| {
            files.iter().find(|f| f.path == Path::new(p)).map_or_else(
                || panic!("{p} not in the tree"),
                |f| String::from_utf8_lossy(&f.contents).into_owned(),
            )
        };
        for name in TEMPLATE_NAMES {
            let t = find(&format!("usr/lib/systemd/user/{name}"));
            assert!(!t.contains("@CYCLIX@"), "{name}: {t}");
        }
        assert!(
            find("usr/lib/systemd/user/cyclix-run@.service")
                .contains("ExecStart=\"/usr/bin/cyclix\" run %i")
        );
        assert!(find("usr/share/man/man1/cyclix.1").contains(".TH cyclix 1"));
        // roff escapes the hyphen.
        assert!(
            find("usr/share/man/man5/cyclix-pool@.service.5")
                .contains(r"/usr/lib/systemd/user/cyclix\-pool@.service")
        );
        assert!(
            find("usr/share/bash-completion/completions/cyclix")
                .contains(r#""/usr/bin/cyclix" -- "${words[@]}""#)
        );
        assert!(find("usr/share/cyclix/spec.schema.json").contains("urn:cyclix:spec:1"));
        assert!(files.iter().all(|f| f.path.is_relative()));
        assert!(tree("cyclix").is_err(), "a relative binary is refused");
    }
}

/// Attack review of issue 32 item 6.
#[cfg(test)]
mod partial {
    use super::*;

    /// Only `cyclix-run@.service` in the vendor directory (a file put there by hand, or an
    /// older or partial package) is not the package: the user's templates stay; and a removal
    /// takes only the names the package holds.
    #[test]
    fn a_partial_vendor_directory_is_not_the_package_and_only_what_it_holds_is_removed() {
        let vendor = tempfile::tempdir().expect("tmp");
        let user = tempfile::tempdir().expect("tmp");
        std::fs::write(vendor.path().join(template::RUN_SERVICE), "[Service]\n").expect("w");
        for name in TEMPLATE_NAMES {
            std::fs::write(user.path().join(name), "mine").expect("w");
        }
        assert_eq!(
            Templates::detect(vendor.path(), "/x/cyclix".into()),
            Templates::Written {
                bin: "/x/cyclix".into()
            }
        );
        remove_shadowing_templates(user.path(), vendor.path()).expect("rm");
        for name in TEMPLATE_NAMES {
            assert_eq!(
                user.path().join(name).exists(),
                name != template::RUN_SERVICE,
                "{name}"
            );
        }
        // The control: all five there is the package.
        for name in TEMPLATE_NAMES {
            std::fs::write(vendor.path().join(name), "[Unit]\n").expect("w");
        }
        assert!(matches!(
            Templates::detect(vendor.path(), "/x/cyclix".into()),
            Templates::Packaged { .. }
        ));
    }
}
