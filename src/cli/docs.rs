//! Man pages from the clap definitions (`clap_mangen`) and for the unit templates (`roff`),
//! rendered in memory; `cyclix install` writes them below `$XDG_DATA_HOME/man/` (issue 18,
//! item 2). Pure: no file system.

use clap::CommandFactory as _;
use roff::{Roff, bold, roman};

use super::Cli;
use crate::render::units::{
    NOTIFY_SERVICE_TEMPLATE, POOL_SERVICE_TEMPLATE, RUN_SERVICE_TEMPLATE, RUN_TIMER_TEMPLATE,
    TICK_SERVICE_TEMPLATE,
};

/// One man page: its path below the man directory (`man1/cyclix-run.1`) and its roff text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManPage {
    /// Path below `man/`, e.g. `man1/cyclix.1` or `man5/cyclix-run@.service.5`.
    pub path: String,
    /// The page in roff.
    pub text: String,
}

/// The unit templates' pages: (unit name, one-line summary, what it is for, the template).
const UNIT_PAGES: [(&str, &str, &str, &str); 5] = [
    (
        "cyclix-run@.service",
        "one run of a cyclix tenant",
        "Starting cyclix-run@TENANT.service runs `cyclix run TENANT` once: the tenant's spec \
         from ~/.config/cyclix/tenants/TENANT.yaml, its record in \
         ~/.local/state/cyclix/runs/TENANT/. Installed by `cyclix install`, removed by \
         `cyclix uninstall`.",
        RUN_SERVICE_TEMPLATE,
    ),
    (
        "cyclix-run@.timer",
        "the schedule of a cyclix tenant",
        "The timer of a tenant whose spec has a `schedule:`; its OnCalendar= comes from the \
         drop-in cyclix-run@TENANT.timer.d/schedule.conf that `cyclix install` writes. It \
         triggers cyclix-tick@TENANT.service.",
        RUN_TIMER_TEMPLATE,
    ),
    (
        "cyclix-tick@.service",
        "what a cyclix tenant's timer triggers",
        "Runs `cyclix tick TENANT`: starts cyclix-run@TENANT.service, or records the skipped \
         trigger while a run is active (shown by `cyclix status`).",
        TICK_SERVICE_TEMPLATE,
    ),
    (
        "cyclix-notify@.service",
        "tells a person about a cyclix run",
        "Started by the run unit's OnFailure= (and OnSuccess= with `notify.on_success`) through \
         the drop-in cyclix-run@TENANT.service.d/notify.conf that `cyclix install` writes for a \
         spec with `notify:`. Runs `cyclix notify TENANT`: the spec's `notify.command` on the \
         host with the latest run's summary as JSON (schema cyclix-notify/1) on its stdin.",
        NOTIFY_SERVICE_TEMPLATE,
    ),
    (
        "cyclix-pool@.service",
        "keeps a cyclix tenant's warm pool",
        "Runs `cyclix pool keep TENANT`: fills the tenant's warm pool to its `pool.size`, refills \
         it after each claim, destroys environments idle past `max_idle` or dead (their proxy or \
         pod unit not active) and, with a schedule, \
         fills only from `warm_before` before cyclix-run@TENANT.timer's next elapse. Enabled \
         and started by `cyclix install` for a tenant with a pool of size > 0; removed by \
         `cyclix uninstall`. Its state (last fill error, next wake) is in \
         $XDG_RUNTIME_DIR/cyclix/pool/TENANT/keeper.json, shown by `cyclix status TENANT`.",
        POOL_SERVICE_TEMPLATE,
    ),
];

/// Where the unit templates a section-5 page shows are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitsAt<'a> {
    /// `~/.config/systemd/user/`, written by `cyclix install` with its binary's path.
    User,
    /// The Debian package's directory (`/usr/lib/systemd/user`), naming the package's binary.
    Package {
        /// The directory.
        dir: &'a str,
        /// The binary the packaged templates run.
        bin: &'a str,
    },
}

/// Every man page: `cyclix(1)`, one per visible verb (`cyclix-run(1)`, `cyclix-spec-validate(1)`,
/// …) and one per unit template in section 5 (as `cyclix install` writes them).
///
/// # Errors
/// Only those of `clap_mangen`'s writer (none for an in-memory buffer).
pub fn man_pages() -> std::io::Result<Vec<ManPage>> {
    man_pages_for(UnitsAt::User)
}

/// [`man_pages`] with the section-5 pages showing the templates installed `at`.
///
/// # Errors
/// As [`man_pages`].
pub fn man_pages_for(at: UnitsAt<'_>) -> std::io::Result<Vec<ManPage>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    verb_pages(&cmd, &mut out)?;
    for (unit, summary, what, template) in UNIT_PAGES {
        out.push(ManPage {
            path: format!("man5/{unit}.5"),
            text: unit_page(unit, summary, what, template, at),
        });
    }
    Ok(out)
}

fn verb_pages(cmd: &clap::Command, out: &mut Vec<ManPage>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    out.push(ManPage {
        path: format!("man1/{}", man.get_filename()),
        text: String::from_utf8_lossy(&buf).into_owned(),
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        verb_pages(sub, out)?;
    }
    Ok(())
}

/// The section-5 page of one unit template: name, description, the template as installed.
fn unit_page(unit: &str, summary: &str, what: &str, template: &str, at: UnitsAt<'_>) -> String {
    let (file, how, template) = match at {
        UnitsAt::User => (
            format!("~/.config/systemd/user/{unit}"),
            " (@CYCLIX@ becomes the binary's absolute path):",
            template.to_owned(),
        ),
        UnitsAt::Package { dir, bin } => (
            format!("{dir}/{unit}"),
            " by the Debian package (`cyclix install` writes no copy of it):",
            template.replace("@CYCLIX@", &crate::render::escape::exec_word(bin)),
        ),
    };
    let mut r = Roff::new();
    r.control("TH", [unit, "5", "", "cyclix", "cyclix units"])
        .control("SH", ["NAME"])
        .text([roman(format!("{unit} - {summary}"))])
        .control("SH", ["DESCRIPTION"])
        .text([roman(what)])
        .control("SH", ["FILE"])
        .text([roman("As installed in "), bold(file), roman(how)])
        .control("nf", [] as [&str; 0]);
    for line in template.lines() {
        r.text([roman(line)]);
    }
    r.control("fi", [] as [&str; 0])
        .control("SH", ["SEE ALSO"])
        .text([roman(
            "cyclix(1), cyclix-run(1), cyclix-install(1), systemd.service(5), systemd.timer(5)",
        )]);
    r.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_a_page_per_visible_verb_and_per_template() {
        let pages = man_pages().expect("render");
        let paths: Vec<&str> = pages.iter().map(|p| p.path.as_str()).collect();
        for want in [
            "man1/cyclix.1",
            "man1/cyclix-run.1",
            "man1/cyclix-spec-validate.1",
            "man1/cyclix-init.1",
            "man5/cyclix-run@.service.5",
            "man5/cyclix-run@.timer.5",
            "man5/cyclix-tick@.service.5",
            "man5/cyclix-notify@.service.5",
        ] {
            assert!(paths.contains(&want), "{want} not in {paths:?}");
        }
        // Hidden verbs (cyclix's own plumbing) have no page.
        assert!(
            !paths
                .iter()
                .any(|p| p.contains("probe") || p.contains("agent-wait"))
        );
        let run = pages
            .iter()
            .find(|p| p.path == "man5/cyclix-run@.service.5");
        let run = run.expect("page");
        assert!(
            run.text.contains("ExecStart=@CYCLIX@ run %i"),
            "{}",
            run.text
        );
    }

    #[test]
    fn the_packaged_unit_pages_show_the_package_s_templates() {
        let pages = man_pages_for(UnitsAt::Package {
            dir: "/usr/lib/systemd/user",
            bin: "/usr/bin/cyclix",
        })
        .expect("render");
        let run = pages
            .iter()
            .find(|p| p.path == "man5/cyclix-run@.service.5")
            .expect("page");
        assert!(
            run.text
                .contains(r"/usr/lib/systemd/user/cyclix\-run@.service")
                && run.text.contains(r#"ExecStart="/usr/bin/cyclix" run %i"#)
                && !run.text.contains("@CYCLIX@"),
            "{}",
            run.text
        );
    }
}
