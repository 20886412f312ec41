//! The agent preset images on the testbed (issue 14): `cyclix images build --preset P` builds
//! `localhost/cyclix-agent-P:VERSION` offline (the testbed has no internet) from the pinned
//! packages the host fetched into the cache bound at `/opt/cyclix-packages`; the CLI inside runs
//! as uid 1000 on a read-only root with no network. Failure modes: a missing package names the
//! package, its lock line and the fix; a package file with one flipped byte is refused.

use crate::common::testbed::{self, PACKAGES_INSIDE, Testbed, expect_success};

/// (preset, CLI, what `CLI --version` prints for the pinned version).
const CI_PRESETS: [(&str, &str, &str); 2] = [
    ("claude-code", "claude", "2.1.332 (Claude Code)"),
    ("codex", "codex", "codex-cli 0.171.0"),
];

#[test]
fn preset_images_run_their_cli_as_uid_1000_on_a_read_only_root_offline() {
    let _hold = testbed::shared();
    for (preset, cli, version) in CI_PRESETS {
        runs_as_uid_1000(preset, cli, version);
    }
}

/// The gemini-cli preset image (its packages are fetched by `testbed.sh up` like the others).
#[test]
fn gemini_cli_image_runs_gemini_and_node_as_uid_1000() {
    let _hold = testbed::shared();
    runs_as_uid_1000("gemini-cli", "gemini", "0.61.0");
    let tag = testbed::preset_image("gemini-cli");
    let out = expect_success(
        &Testbed::get().user_sh(&format!(
            "podman run --rm --network=none --user 1000:1000 --read-only --tmpfs /tmp {tag} node --version"
        )),
        "node --version",
    );
    assert_eq!(out.trim(), "v22.23.5");
}

/// Builds `preset`'s image (once per boot) and runs `CLI --version` in it as uid 1000 on a
/// read-only root with no network, checking its labels and default user.
fn runs_as_uid_1000(preset: &str, cli: &str, version: &str) {
    let tag = testbed::preset_image(preset);
    let pkg = &cyclix::images::agents::packages(preset).expect("lock")[0];
    let tb = Testbed::get();
    let out = expect_success(
        &tb.user_sh(&format!(
            "set -e; podman image inspect -f '{{{{index .Labels \"io.cyclix.package\"}}}} \
                 {{{{index .Labels \"io.cyclix.package.file\"}}}} \
                 {{{{index .Labels \"io.cyclix.image\"}}}} {{{{.Config.User}}}}' {tag}; \
                 podman run --rm --network=none --user 1000:1000 --read-only --tmpfs /tmp {tag} \
                 sh -c 'id -u; id -g; command -v {cli}; {cli} --version 2>/dev/null; \
                 touch /tmp/ok && echo tmp-writable; \
                 touch /usr/local/bin/x 2>/dev/null && echo ROOT-WRITABLE || echo root-read-only'; \
                 podman run --rm --network=none --read-only {tag} id -u"
        )),
        &format!("run {cli} --version in {tag}"),
    );
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(
        lines,
        [
            &*format!(
                "{}@{} {}@{} agent-{preset} 1000:1000",
                pkg.release().0,
                pkg.release().1,
                pkg.name,
                pkg.version
            ),
            "1000",
            "1000",
            &*format!("/usr/local/bin/{cli}"),
            version,
            // The positive control of the read-only root: /tmp is writable, / is not.
            "tmp-writable",
            "root-read-only",
            // The image's default user is uid 1000 too.
            "1000",
        ],
        "{tag}: {out}"
    );
}

#[test]
fn preset_build_names_a_missing_package_and_refuses_a_flipped_byte() {
    let _hold = testbed::shared();
    // The base image must be there, so that the refusals below are about the package alone.
    let tag = testbed::preset_image("claude-code");
    let pkg = &cyclix::images::agents::packages("claude-code").expect("lock")[0];
    let tb = Testbed::get();
    let c = tb.cyclix_bin();
    let missing = tb.user_sh(&format!(
        "{c} images build --preset claude-code --packages /nonexistent"
    ));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{err}");
    for want in [
        &*format!(
            "package {}@{} of preset claude-code is missing",
            pkg.name, pkg.version
        ),
        &*format!("/nonexistent/sha512/{}", pkg.hex),
        &*format!("images/agents/packages.lock:{}: {}", pkg.line, pkg.text),
        "fix: run `scripts/fetch-agent-packages claude-code`",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }

    // A copy of the cache: intact it is accepted (built, or up to date: the positive control);
    // with one byte flipped it is refused before podman runs, and the tag stays where it was.
    let rel = pkg.cache_rel();
    let script = format!(
        r#"set -e; d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; mkdir -p "$d/sha512"
cp {PACKAGES_INSIDE}/{rel} "$d/{rel}"
{c} images build --preset claude-code --packages "$d" >/dev/null
before=$(podman image inspect -f '{{{{.Id}}}}' {tag})
python3 -c 'import sys; f=open(sys.argv[1],"r+b"); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^1]))' "$d/{rel}"
set +e; {c} images build --preset claude-code --packages "$d" 2>"$d/err"; echo "rc=$?"; set -e
cat "$d/err"
[ "$(podman image inspect -f '{{{{.Id}}}}' {tag})" = "$before" ] && echo tag-unchanged
"#
    );
    let out = expect_success(
        &tb.user_sh(&script),
        "build from an intact, then a flipped copy",
    );
    assert!(out.starts_with("rc=1\n"), "{out}");
    for want in [
        &*format!(
            "package {}@{} of preset claude-code:",
            pkg.name, pkg.version
        ),
        &*format!("the lock says {}: refused", pkg.hex),
        &*format!("images/agents/packages.lock:{}:", pkg.line),
        "fix: delete the file and run `scripts/fetch-agent-packages claude-code`",
        "tag-unchanged",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}
