//! Field reports from ../shared/research/field-reports.md, each as a test over every golden
//! case's rendered units (both backends). The testbed half (real Quadlet, real systemd) is in
//! `golden_testbed.rs`.

use std::collections::BTreeMap;

use crate::golden::{cases, load, render_case};

fn all_rendered() -> Vec<(String, BTreeMap<String, String>)> {
    cases()
        .into_iter()
        .filter_map(|c| {
            let name = c.file_name().expect("name").to_string_lossy().into_owned();
            load(&c).ok().map(|s| (name, render_case(&s)))
        })
        .collect()
}

fn keys<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .collect()
}

fn quadlet_files(files: &BTreeMap<String, String>) -> impl Iterator<Item = (&String, &String)> {
    files
        .iter()
        .filter(|(k, _)| k.starts_with("quadlet/quadlet/"))
}

#[test]
fn b02_no_specifiers_in_quadlet_cross_references() {
    let all = all_rendered();
    assert!(
        all.iter().any(|(_, f)| quadlet_files(f).count() > 0),
        "no case renders Quadlet files"
    );
    for (case, files) in &all {
        for (name, text) in quadlet_files(files) {
            for key in ["Pod", "Network", "Volume"] {
                for v in keys(text, key) {
                    assert!(
                        !v.contains('%'),
                        "{case}/{name}: {key}={v} holds a specifier"
                    );
                }
            }
        }
    }
}

#[test]
fn b03_cross_references_use_quadlet_file_names_that_exist() {
    for (case, files) in &all_rendered() {
        let names: Vec<&str> = quadlet_files(files)
            .map(|(k, _)| k.trim_start_matches("quadlet/quadlet/"))
            .collect();
        for (name, text) in quadlet_files(files) {
            for v in keys(text, "Pod") {
                assert!(
                    v.ends_with(".pod") && names.contains(&v),
                    "{case}/{name}: Pod={v}"
                );
            }
            for v in keys(text, "Network") {
                let file = v.split(':').next().unwrap_or_default();
                assert!(
                    v == "none" || (file.ends_with(".network") && names.contains(&file)),
                    "{case}/{name}: Network={v} is not a file of the set"
                );
            }
            // [Unit] dependencies on other Quadlet files are only translated on podman >= 5.5.
            for key in ["After", "Requires", "Wants", "BindsTo"] {
                for v in keys(text, key) {
                    assert!(
                        !v.ends_with(".container") && !v.ends_with(".pod"),
                        "{case}/{name}: {key}={v}"
                    );
                }
            }
        }
    }
}

#[test]
fn b04_no_templated_network_or_pod() {
    for (case, files) in &all_rendered() {
        for name in files.keys() {
            let file = name.rsplit('/').next().unwrap_or_default();
            if let Some(at) = file.find('@') {
                assert!(
                    name.contains("/user/"),
                    "{case}/{name}: only the user templates may use `@`"
                );
                let rest = &file[at + 1..];
                assert!(
                    rest.starts_with(".service")
                        || rest.starts_with(".timer")
                        || !rest.contains('@'),
                    "{case}/{name}"
                );
            }
        }
    }
}

#[test]
fn b05_no_install_on_per_run_units_and_only_user_targets() {
    for (case, files) in &all_rendered() {
        for (name, text) in files {
            if name.contains("/user/") {
                for v in keys(text, "WantedBy") {
                    assert!(
                        v == "timers.target" || v == "default.target",
                        "{case}/{name}: WantedBy={v}"
                    );
                }
            } else {
                assert!(
                    !text.contains("[Install]"),
                    "{case}/{name} has [Install]: a reboot would resurrect it"
                );
            }
            assert!(
                !text.contains("multi-user.target"),
                "{case}/{name} names a system target"
            );
        }
    }
}

#[test]
fn b06_every_container_has_explicit_budgets() {
    for (case, files) in &all_rendered() {
        for (name, text) in files.iter().filter(|(k, _)| k.ends_with(".container")) {
            let stop: Vec<u64> = keys(text, "StopTimeout")
                .iter()
                .map(|v| v.parse().expect("int"))
                .collect();
            let unit_stop: Vec<u64> = keys(text, "TimeoutStopSec")
                .iter()
                .map(|v| v.parse().expect("int"))
                .collect();
            assert_eq!(stop.len(), 1, "{case}/{name}: StopTimeout");
            assert_eq!(unit_stop.len(), 1, "{case}/{name}: TimeoutStopSec");
            assert!(
                unit_stop[0] > stop[0],
                "{case}/{name}: TimeoutStopSec must exceed StopTimeout"
            );
            assert_eq!(
                keys(text, "TimeoutStartSec").len(),
                1,
                "{case}/{name}: TimeoutStartSec"
            );
            assert_eq!(
                keys(text, "Pull").len(),
                1,
                "{case}/{name}: Pull= must be explicit"
            );
        }
    }
}

#[test]
fn b07_per_run_quadlet_units_skip_the_network_online_wait() {
    for (case, files) in &all_rendered() {
        for (name, text) in quadlet_files(files) {
            assert!(
                text.contains("[Quadlet]\nDefaultDependencies=false"),
                "{case}/{name}: missing [Quadlet] DefaultDependencies=false"
            );
        }
    }
}

#[test]
fn b12_networks_are_named_and_labelled_so_teardown_finds_them() {
    for (case, files) in &all_rendered() {
        for (name, text) in files.iter().filter(|(k, _)| k.ends_with(".network")) {
            let names = keys(text, "NetworkName");
            assert_eq!(names.len(), 1, "{case}/{name}");
            assert!(
                names[0].starts_with("cyclix-golden-1"),
                "{case}/{name}: name carries the run id"
            );
            assert!(
                text.contains("io.cyclix.run=golden-1"),
                "{case}/{name}: run label"
            );
        }
        for (name, text) in files
            .iter()
            .filter(|(k, _)| k.ends_with("-network.service") && k.starts_with("plain/"))
        {
            assert!(
                keys(text, "ExecStop")
                    .iter()
                    .any(|v| v.contains("\"network\" \"rm\"")),
                "{case}/{name}: the plain network unit removes its network on stop"
            );
        }
    }
}

#[test]
fn b24_randomized_delay_is_fixed() {
    let mut seen = 0;
    for (case, files) in &all_rendered() {
        for (name, text) in files.iter().filter(|(k, _)| k.ends_with("schedule.conf")) {
            if !keys(text, "RandomizedDelaySec").is_empty() {
                seen += 1;
                assert_eq!(
                    keys(text, "FixedRandomDelay"),
                    vec!["true"],
                    "{case}/{name}"
                );
            }
        }
    }
    assert!(
        seen > 0,
        "no golden case has a randomized delay: the test proves nothing"
    );
}

#[test]
fn b25_user_timers_use_calendar_triggers_only() {
    let mut seen = 0;
    for (case, files) in &all_rendered() {
        for (name, text) in files.iter().filter(|(k, _)| k.contains(".timer")) {
            for bad in ["OnBootSec", "OnUnitActiveSec", "OnUnitInactiveSec"] {
                assert!(
                    keys(text, bad).is_empty(),
                    "{case}/{name}: {bad}= is a trap in user scope"
                );
            }
            if name.ends_with("schedule.conf") {
                seen += 1;
                assert_eq!(keys(text, "OnCalendar").len(), 1, "{case}/{name}");
            }
        }
    }
    assert!(seen > 0, "no golden case has a schedule");
}

#[test]
fn b26_timers_are_concrete_and_pull_nothing_in() {
    for (case, files) in &all_rendered() {
        for (name, text) in files.iter().filter(|(k, _)| k.contains(".timer")) {
            assert!(
                name.contains("/user/"),
                "{case}/{name}: timers belong in the user unit dir, not Quadlet's"
            );
            for key in ["Requires", "Wants", "BindsTo"] {
                assert!(
                    keys(text, key).is_empty(),
                    "{case}/{name}: {key}= would start the run at boot"
                );
            }
            for v in keys(text, "OnCalendar") {
                assert!(
                    !v.contains('%') || v.contains("%%"),
                    "{case}/{name}: specifier in OnCalendar"
                );
            }
        }
    }
}
