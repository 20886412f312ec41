//! The Debian package on a testbed (issue 32, item 6): `scripts/deb` builds it on the host, it
//! is installed with `apt install ./cyclix_….deb` as root inside, and the demo runs from it as
//! the user: `/usr/bin/cyclix` (the testbed's `/usr/local/bin/cyclix`, first on PATH, is the
//! checkout's debug build) and the units of `/usr/lib/systemd/user`. The package is removed at
//! the end, also when the test fails, and the user's templates put back as they were.
//!
//! The package is built from the test's own binary (`CARGO_BIN_EXE_cyclix`, the debug build,
//! stripped: about 36 MB unpacked) with `--fast` (gzip -1): about 3 s, where a release build
//! would add minutes. Every other file of the package is what `scripts/deb` ships; the release
//! package differs only in its binary. Held exclusively: while the package is installed,
//! `cyclix install` of any binary takes the package's templates.

use std::path::{Path, PathBuf};

use crate::common::testbed::{Testbed, expect_success};

/// Builds the package from this test binary's cyclix into `target/deb-e2e/FLAVOUR/` (below
/// the project root, which the testbed sees at `/src`), with lintian when `lintian`.
/// Returns the `.deb`'s path relative to the project root.
///
/// # Panics
/// When `scripts/deb` fails (its output is in the message).
pub fn build(flavour: &str, lintian: bool) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_rel = PathBuf::from("target/deb-e2e").join(flavour);
    let out_dir = root.join(&out_rel);
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut cmd = std::process::Command::new(root.join("scripts/deb"));
    cmd.args(["--bin", env!("CARGO_BIN_EXE_cyclix"), "--fast", "--out"])
        .arg(&out_dir)
        .current_dir(root)
        .stdin(std::process::Stdio::null());
    if !lintian {
        cmd.arg("--no-lintian");
    }
    let out = cmd.output().expect("run scripts/deb");
    let stdout = expect_success(&out, "scripts/deb");
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    let name = deb.file_name().expect("the .deb's name").to_owned();
    assert!(
        name.to_string_lossy().starts_with("cyclix_")
            && name.to_string_lossy().ends_with("_amd64.deb")
            && out_dir.join(&name).is_file(),
        "scripts/deb printed {}\n{}",
        deb.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out_rel.join(name)
}

/// Removes the package and puts the user's templates back (when they were installed before)
/// with the checkout's binary, on drop: after a failed assertion too.
pub struct Installed<'a> {
    tb: &'a Testbed,
    had_templates: bool,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let out = self.tb.root_sh(
            "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q cyclix >/dev/null 2>&1; \
             rm -f /tmp/cyclix_*.deb; ! dpkg -s cyclix >/dev/null 2>&1 \
             && [ ! -e /usr/lib/systemd/user/cyclix-run@.service ] && [ ! -e /usr/bin/cyclix ]",
        );
        if !out.status.success() {
            eprintln!(
                "the cyclix package could not be removed from the testbed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if self.had_templates {
            let c = self.tb.cyclix_bin();
            let out = self
                .tb
                .user_sh(&format!("{c} install --tenant demo >/dev/null"));
            if !out.status.success() {
                eprintln!(
                    "the templates could not be put back: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// Copies the package at `deb` (relative to the project root) into the testbed and installs it
/// with `apt install ./….deb` as root. Returns the guard that removes it.
///
/// # Panics
/// When apt fails, or the package's files are not where they belong.
pub fn install<'a>(tb: &'a Testbed, deb: &Path) -> Installed<'a> {
    let had_templates = tb
        .user_sh("test -f ~/.config/systemd/user/cyclix-run@.service")
        .status
        .success();
    let guard = Installed { tb, had_templates };
    let name = deb
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let out = expect_success(
        &tb.root_sh(&format!(
            "set -e; install -m 0644 {src}/{deb} /tmp/{name}; cd /tmp; \
             DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ./{name} 2>&1; \
             dpkg -s cyclix | sed -n 's/^Status: /status=/p'; \
             ls /usr/lib/systemd/user/ | grep '^cyclix-' | tr '\\n' ' ' | sed 's/^/units=/'; echo; \
             ls /usr/share/man/man1/cyclix.1.gz /usr/share/bash-completion/completions/cyclix \
                /usr/share/cyclix/spec.schema.json /usr/share/doc/cyclix/copyright \
                /usr/share/doc/cyclix/changelog.Debian.gz | wc -l | sed 's/^/shared=/'",
            src = tb.src(),
            deb = deb.display(),
        )),
        "apt install the package",
    );
    assert_eq!(
        crate::common::kv(&out, "status"),
        "install ok installed",
        "{out}"
    );
    assert_eq!(
        crate::common::kv(&out, "units"),
        "cyclix-notify@.service cyclix-pool@.service cyclix-run@.service cyclix-run@.timer cyclix-tick@.service",
        "{out}"
    );
    assert_eq!(crate::common::kv(&out, "shared"), "5", "{out}");
    guard
}

/// The demo as `scripts/demo` runs it (images, demo setup, install, the run unit, status), with
/// `/usr/bin/cyclix`, `install` for the demo tenant only (the other tests' tenants are theirs).
/// No `${…}` in the script: bookworm's systemd-run (252) substitutes it before bash runs.
/// Asserts that `install` wrote no template, that the run unit is the package's and runs
/// `/usr/bin/cyclix`, that the run passed and left nothing, and that man, the completion and
/// `check`'s drift row see the package. Returns the run record.
///
/// # Panics
/// On any of those.
pub fn demo_passes(tb: &Testbed) -> serde_json::Value {
    let out = tb.user_sh(
        r#"set -u
C=/usr/bin/cyclix
$C images build >/dev/null || exit 11
$C demo setup >/dev/null || exit 12
$C install --tenant demo > /tmp/deb-install.out 2>&1 || { cat /tmp/deb-install.out; exit 13; }
echo "--- install"; cat /tmp/deb-install.out; echo "--- end"
echo "fragment=$(systemctl --user show -P FragmentPath cyclix-run@demo.service)"
echo "exec=$(systemctl --user show -P ExecStart cyclix-run@demo.service | grep -o 'path=[^ ;]*')"
echo "user_templates=$(ls ~/.config/systemd/user/ 2>/dev/null | grep -c '^cyclix-.*@\.' || true)"
echo "man=$(man -w cyclix 2>&1) $(man -w 5 cyclix-run@.service 2>&1)"
echo "completion=$(bash -c '. /usr/share/bash-completion/completions/cyclix; COMP_WORDS=(cyclix ins); COMP_CWORD=1; COMP_LINE="cyclix ins"; COMP_POINT=10; _clap_complete_cyclix cyclix ins cyclix 2>/dev/null; declare -p COMPREPLY' 2>&1 | tr '\013\n' '  ')"
echo "drift=$($C check --quick --json --tenant demo | python3 -c 'import json,sys; r=json.load(sys.stdin); c=[c for c in r["checks"] if c["id"]=="install"][0]; print(c["status"], c["found"])')"
rc=0; systemctl --user start cyclix-run@demo || rc=$?
$C status demo
echo "rc=$rc"
"#,
    );
    let text = expect_success(&out, "the demo from the package");
    let kv = |k: &str| crate::common::kv(&text, k);
    let install = text
        .split("--- install\n")
        .nth(1)
        .and_then(|s| s.split("--- end").next())
        .unwrap_or_default();
    assert!(
        install.contains("the unit templates, man pages, bash completion and spec schema are the package's (/usr/lib/systemd/user, /usr/share); they run /usr/bin/cyclix")
            && !install.contains("wrote /home/cyx/.config/systemd/user/cyclix-run@.service")
            && !install.contains("note: this cyclix"),
        "install with the package writes no template:\n{install}"
    );
    assert_eq!(
        kv("fragment"),
        "/usr/lib/systemd/user/cyclix-run@.service",
        "{text}"
    );
    assert_eq!(kv("exec"), "path=/usr/bin/cyclix", "{text}");
    assert_eq!(kv("user_templates"), "0", "{text}");
    assert_eq!(
        kv("man"),
        "/usr/share/man/man1/cyclix.1.gz /usr/share/man/man5/cyclix-run@.service.5.gz",
        "{text}"
    );
    assert!(
        kv("completion").contains(r#"]="install""#),
        "the package's completion offers `install`: {text}"
    );
    assert!(
        kv("drift").starts_with("pass "),
        "check sees nothing for install to change: {text}"
    );
    assert_eq!(kv("rc"), "0", "the demo's run unit succeeded:\n{text}");
    let rec: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh("cat ~/.local/state/cyclix/runs/demo/latest.json"),
        "the demo's record",
    ))
    .expect("record JSON");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
    rec
}
