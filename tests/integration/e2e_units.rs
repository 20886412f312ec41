//! Every golden unit set through the REAL generator and systemd on the testbed:
//! `quadlet -dryrun -user` must accept it with no error and no warning, and
//! `systemd-analyze --user verify` must print nothing for the generated Quadlet services, the
//! plain backend's services, the templates and each tenant's timer with its drop-in (it exits 0
//! on parse warnings, so silence is the criterion; `--man=no` for the templates: their man pages
//! are installed by `cyclix install`, which `e2e_docs` checks). Calendar expressions go through
//! `systemd-analyze calendar`. The hostile-argv case's argv is then run for real through both
//! backends and compared word for word.

use crate::common::testbed::{Testbed, expect_success};
use crate::golden::{CYCLIX_BIN, cases, load};

/// Validates one case's expected files inside the testbed; prints `FAIL ...` lines on problems.
const VALIDATE: &str = r##"
set -uo pipefail
case_dir=$1; bin=$2; fail=0
note() { echo "FAIL $*"; fail=1; }
for backend in quadlet plain; do
  E=$case_dir/expected/$backend
  [ -d "$E" ] || continue
  if [ -d "$E/quadlet" ]; then
    Q=$(mktemp -d); G=$(mktemp -d)
    cp "$E"/quadlet/* "$Q"/
    QUADLET_UNIT_DIRS=$Q /usr/libexec/podman/quadlet -dryrun -user >/dev/null 2>"$Q.err" || note "$backend: quadlet -dryrun rc=$?: $(cat "$Q.err")"
    w=$(grep -v 'Loading source unit file' "$Q.err")
    [ -z "$w" ] || note "$backend: quadlet printed: $w"
    QUADLET_UNIT_DIRS=$Q /usr/libexec/podman/quadlet -user "$G" 2>/dev/null || note "$backend: quadlet generate"
    out=$(systemd-analyze --user verify "$G"/*.service 2>&1) || note "$backend: verify generated rc: $out"
    [ -z "$out" ] || note "$backend: verify generated: $out"
    # B07: no generated per-run unit waits for the system's network-online target.
    if grep -l 'podman-user-wait-network-online' "$G"/*.service >/dev/null 2>&1; then note "$backend: network-online wait in $(grep -l podman-user-wait-network-online "$G"/*.service)"; fi
  fi
  if [ -d "$E/units" ]; then
    P=$(mktemp -d); cp -r "$E"/units/. "$P"/
    # Plain units, and drop-ins for Quadlet's generated units (`X.service.d/`): those are
    # verified with the generated unit they extend.
    for d in "$P"/*.service.d; do
      [ -d "$d" ] || continue
      base=$(basename "$d" .d)
      [ -f "$G/$base" ] || { note "$backend: drop-in $(basename "$d") for $base, which nothing generates"; continue; }
      cp "$G/$base" "$P/$base"
    done
    if ls "$P"/*.service >/dev/null 2>&1; then
      out=$(SYSTEMD_UNIT_PATH="$P:${G:-$P}:" systemd-analyze --user verify "$P"/*.service 2>&1) || note "$backend: verify units rc: $out"
      [ -z "$out" ] || note "$backend: verify units: $out"
    fi
  fi
  U=$(mktemp -d); cp -r "$E"/user/. "$U"/
  sed -i "s#\"/usr/local/bin/cyclix\"#\"$bin\"#" "$U/cyclix-run@.service" "$U/cyclix-tick@.service"
  for d in "$U"/cyclix-run@*.timer.d; do
    [ -d "$d" ] || continue
    t=$(basename "$d" .d); s=${t%.timer}.service; k=cyclix-tick@${s#cyclix-run@}
    grep -qx 'Unit=cyclix-tick@%i.service' "$U/cyclix-run@.timer" || note "$backend: the timer does not trigger the tick unit"
    out=$(systemd-analyze --user verify --man=no "$U/$t" "$U/$k" "$U/$s" 2>&1) || note "$backend: verify $t rc: $out"
    [ -z "$out" ] || note "$backend: verify $t: $out"
    cal=$(sed -n 's/^OnCalendar=//p' "$d/schedule.conf")
    systemd-analyze calendar "$cal" >/dev/null 2>&1 || note "$backend: calendar '$cal' rejected"
  done
  out=$(systemd-analyze --user verify --man=no "$U/cyclix-run@golden.service" "$U/cyclix-tick@golden.service" 2>&1) || note "$backend: verify template rc: $out"
  [ -z "$out" ] || note "$backend: verify template: $out"
done
exit $fail
"##;

#[test]
fn golden_sets_pass_the_real_quadlet_generator_and_systemd_analyze() {
    let tb = Testbed::get();
    let bin = tb.cyclix_bin();
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases() {
        if load(&case).is_err() {
            continue; // a bad-input case: no units to validate
        }
        let rel = case
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("case under the project");
        let inside = format!("{}/{}", tb.src(), rel.display());
        let out = tb.user(&["bash", "-c", VALIDATE, "validate", &inside, &bin]);
        checked += 1;
        if !out.status.success() {
            failures.push(format!(
                "{}:\n{}{}",
                rel.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(checked >= 4, "only {checked} golden cases were validated");
    assert!(
        failures.is_empty(),
        "the real stack rejected golden units:\n{}",
        failures.join("\n")
    );
    assert_ne!(
        CYCLIX_BIN, bin,
        "the template must be checked with a binary that exists"
    );
}

#[test]
fn the_validator_catches_a_bad_key_and_a_bad_calendar() {
    // Positive control: the same script fails on a unit set with an unsupported Quadlet key
    // and a timer drop-in whose calendar systemd cannot parse.
    let tb = Testbed::get();
    let script = format!(
        "set -e; D=$(mktemp -d); cp -r {src}/tests/golden/full $D/case; chmod -R u+w $D; \
         echo 'Bogus=1' >> $D/case/expected/quadlet/quadlet/cyclix-golden-1-agent.container; \
         echo 'OnCalendar=garbage' >> $D/case/expected/plain/user/cyclix-run@acme.timer.d/schedule.conf; \
         bash -c \"$VALIDATE\" validate $D/case {bin}",
        src = tb.src(),
        bin = tb.cyclix_bin()
    );
    let out = tb.user(&[
        "env",
        &format!("VALIDATE={VALIDATE}"),
        "bash",
        "-c",
        &script,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "the validator passed a broken set:\n{text}"
    );
    assert!(text.contains("unsupported key 'Bogus'"), "{text}");
    assert!(text.contains("garbage"), "{text}");
}

#[test]
fn argv_round_trips_through_quadlet_and_plain_units_on_the_real_stack() {
    // The gate of the hostile-argv case prints each argv word as <word>; run its container
    // unit through each backend and compare with the spec's argv.
    let tb = Testbed::get();
    let case = cases()
        .into_iter()
        .find(|c| c.ends_with("hostile-argv"))
        .expect("hostile-argv case");
    let spec = load(&case).expect("valid");
    let want: Vec<String> = spec.gate.command[4..]
        .iter()
        .map(|w| format!("<{w}>"))
        .collect();
    let rel = case
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .expect("under root");
    for (backend, dir, dest) in [
        ("quadlet", "quadlet", "$XDG_RUNTIME_DIR/containers/systemd"),
        ("plain", "units", "$XDG_RUNTIME_DIR/systemd/user"),
    ] {
        let gate = if backend == "quadlet" {
            "cyclix-golden-1-gate.container"
        } else {
            "cyclix-golden-1-gate.service"
        };
        let script = format!(
            r#"set -euo pipefail
src={src}/{rel}/expected/{backend}
W=/home/cyx/.local/share/cyclix/worktrees/hostile/golden-1; mkdir -p $W $W.gate /home/cyx/src/hostile/.git
R=$XDG_RUNTIME_DIR/cyclix/runs/golden-1; mkdir -p $R $R/results
mkdir -p {dest}
sed -e 's#^Image=.*#Image=docker.io/library/busybox:latest#' -e 's# "localhost/hostile" # "docker.io/library/busybox:latest" #' \
    -e 's#/home/test/#/home/cyx/#g' $src/{dir}/{gate} > {dest}/{gate}
systemctl --user daemon-reload
cursor=$(journalctl --user -n 0 --show-cursor -q | sed -n 's/^-- cursor: //p')
systemctl --user start cyclix-golden-1-gate.service || true
# The gate's end is the event its output is read after (its container printed and exited).
for i in $(seq 1 1200); do s=$(systemctl --user show -P ActiveState cyclix-golden-1-gate.service); [ "$s" = active ] || [ "$s" = activating ] || break; sleep 0.1; done
if [ "$s" = active ] || [ "$s" = activating ]; then
  echo "the hostile gate was still $s after 120 s; its output cannot be read yet" >&2
  systemctl --user stop cyclix-golden-1-gate.service || true
  exit 1
fi
# The gate's output goes to its raw file (podman's k8s-file records), not to the journal.
sed -n 's/^[^ ]* std[a-z]* [FP] //p' $R/gate.out | grep '^<' || true
[ "$(journalctl --user -q -o cat --after-cursor "$cursor" -u cyclix-golden-1-gate.service | grep -c '^<')" = 0 ] || echo 'argv words in the journal'
systemctl --user stop cyclix-golden-1-gate.service || true
systemctl --user reset-failed cyclix-golden-1-gate.service 2>/dev/null || true
rm -f {dest}/{gate}; systemctl --user daemon-reload
rm -rf /home/cyx/.local/share/cyclix/worktrees/hostile /home/cyx/src/hostile $R
"#,
            src = tb.src(),
            rel = rel.display(),
        );
        let got = expect_success(&tb.user_sh(&script), "run the hostile gate");
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(
            got, want,
            "{backend}: argv changed on its way through the units"
        );
    }
}

#[test]
fn a_runs_units_are_generated_as_the_manager_would_for_this_user_and_no_other() {
    // Attack review of issue 33 item 3: cyclix runs Quadlet's generator itself. The admin's
    // drop-in for this uid merges (as on a reload); one written for another uid must not, and
    // `PODMAN=` in cyclix's own environment must not name the binary the units run.
    use crate::common::run::{leftovers, prepared, record_of};
    use crate::common::tenant::Tenant;
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-genparity").write(tb);
    let id = "genparity-1";
    let agent = format!("cyclix-{id}-agent.container");
    let admin = "/etc/containers/systemd/users";
    // Named apart: a drop-in of the same name in a later directory is shadowed.
    let dropin = |uid: &str, label: &str| {
        format!(
            "mkdir -p {admin}/{uid}/{agent}.d && printf '[Container]\\nLabel=e2e.{label}=yes\\n' > {admin}/{uid}/{agent}.d/50-e2e-{label}.conf"
        )
    };
    expect_success(
        &tb.root_sh(&format!(
            "set -e; {}; {}",
            dropin("$(id -u cyx)", "own"),
            dropin("4242", "other")
        )),
        "the admin's drop-ins",
    );
    let out = tb.user_sh(&format!(
        r#"set -u
D=$XDG_RUNTIME_DIR/e2e-failpoints/genparity; rm -rf "$D"; mkdir -p "$D"
w=$HOME/e2e-podman-wrap; printf '#!/bin/sh\necho "$@" >> $HOME/e2e-podman-wrap.log\nexec /usr/bin/podman "$@"\n' > $w; chmod 755 $w
CYCLIX_FAILPOINTS=phase.agent=pause CYCLIX_FAILPOINT_DIR=$D PODMAN=$w {c} run {t} --run-id {id} > /tmp/genparity.out 2>&1 &
r=$!
for i in $(seq 1 1200); do [ -e "$D/phase.agent.paused" ] && break; sleep 0.05; done
cp $XDG_RUNTIME_DIR/systemd/user/cyclix-{id}-agent.service /tmp/genparity.unit || echo "no agent unit"
touch "$D/phase.agent.go"
wait $r; echo "rc=$?"
echo "--- unit"; grep -E '^ExecStart=' /tmp/genparity.unit | cut -c1-60; grep -o 'e2e\.[a-z]*=yes' /tmp/genparity.unit | sort -u
# Positive control: the same generator over the same drop-ins, given the admin's directory
# whole and cyclix's environment, merges the other uid's drop-in and takes PODMAN.
s=$(mktemp -d); o=$(mktemp -d)
printf '[Container]\nImage=docker.io/library/busybox:latest\nExec=true\n' > $s/{agent}
echo "--- naive"
PODMAN=$w QUADLET_UNIT_DIRS=$s:{admin} /usr/lib/systemd/user-generators/podman-user-generator -user -no-kmsg-log $o
grep -E '^ExecStart=' $o/cyclix-{id}-agent.service | cut -c1-60; grep -o 'e2e\.[a-z]*=yes' $o/cyclix-{id}-agent.service | sort -u
rm -rf $s $o $w $HOME/e2e-podman-wrap.log /tmp/genparity.unit
"#,
        c = tb.cyclix_bin()
    ));
    let _ = tb.root_sh(&format!(
        "rm -rf {admin}/$(id -u cyx)/{agent}.d {admin}/4242"
    ));
    let text = expect_success(&out, "a run with the admin's drop-ins and PODMAN set");
    let (run, naive) = text.split_once("--- naive").expect("both parts");
    assert!(run.contains("rc=0"), "{text}");
    let unit = run.split_once("--- unit").map_or("", |x| x.1);
    assert!(
        unit.contains("ExecStart=/usr/bin/podman run"),
        "the unit runs the packaged podman: {text}"
    );
    assert!(
        unit.contains("e2e.own=yes"),
        "this uid's drop-in merges: {text}"
    );
    assert!(
        !unit.contains("e2e.other=yes"),
        "another uid's drop-in merged: {text}"
    );
    assert!(
        naive.contains("e2e-podman-wrap") && naive.contains("e2e.other=yes"),
        "positive control: the naive generation takes both: {text}"
    );
    let rec = record_of(tb, &t, id);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let left = leftovers(tb, id, &t);
    assert!(left.trim().is_empty(), "{left}");
}
