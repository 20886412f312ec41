//! The user manager re-executing (`systemctl --user daemon-reexec`, as a package update does)
//! while a run talks to it: every D-Bus call of the run rides the blink out under the seam's one
//! retry rule (issue 20 item 2, issue 36 item 1; docs/faults.md).
//!
//! How the blink is made to meet a call of each phase, with no timing: the run pauses at a fail
//! point of the phase (`NAME=pause`); a user generator that waits on a file holds the manager
//! inside its reexec (it still owns its old bus connection and reads nothing: every call sent to
//! it waits); the run goes on; `busctl monitor` shows the run's first call of the phase reach
//! the bus; only then is the generator let go, the manager drops the old connection, and that
//! call gets `NoReply` — the error a reexec gives.

use crate::common::run::{arm, leftovers, prepared, record_of};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The phases whose first D-Bus call meets a reexec, each by its pause point: between the
/// reload and the look at what it loaded (`LoadUnit`: the call the fault trial saw fail 7 of
/// 7), the start jobs, the agent's wait, teardown's stops and the audit's reads. The gate
/// phase makes no call of its own: its containers are podman's, whose runtime (crun) asks the
/// manager for a scope itself; a reexec held for long there fails crun's call, not cyclix's.
const POINTS: &[&str] = &[
    "reload.confirm",
    "phase.start",
    "phase.agent",
    "phase.teardown",
    "phase.audit",
];

/// Installs (or with `on` false removes) the user generator that holds a reexec while the
/// file `$XDG_RUNTIME_DIR/e2e-gen-hold` exists (at most 60 s); it logs each start. User
/// generators are searched only below /run, /etc and /usr (systemd.generator(7)), so root
/// writes it; generators run with a private /tmp, so its files are in the runtime dir.
fn hold_generator(tb: &crate::common::testbed::Testbed, on: bool) {
    let script = if on {
        r"set -e
d=/run/user/$(id -u cyx)
mkdir -p /run/systemd/user-generators
cat > /run/systemd/user-generators/e2e-reexec-hold <<G
#!/bin/sh
echo start >> $d/e2e-gen.log
i=0
while [ -e $d/e2e-gen-hold ] && [ \$i -lt 1200 ]; do sleep 0.05; i=\$((i+1)); done
exit 0
G
chmod 755 /run/systemd/user-generators/e2e-reexec-hold"
    } else {
        "rm -f /run/systemd/user-generators/e2e-reexec-hold"
    };
    expect_success(&tb.root_sh(script), "the reexec-holding generator");
}

#[test]
fn a_reexec_that_meets_the_first_dbus_call_of_each_phase_is_ridden_out_and_the_run_passes() {
    // Exclusive: the user manager is shared by every run on the testbed.
    let _only = crate::common::testbed::exclusive();
    let tb = prepared();
    let t = "e2e-reexec-each";
    Tenant::new(t).write(tb);
    hold_generator(tb, true);
    arm(
        tb,
        t,
        &POINTS
            .iter()
            .map(|p| format!("{p}=pause"))
            .collect::<Vec<_>>()
            .join(","),
    );
    let script = format!(
        r#"set -u
t={t}
D=$XDG_RUNTIME_DIR/e2e-failpoints/$t; H=$XDG_RUNTIME_DIR/e2e-gen-hold; G=$XDG_RUNTIME_DIR/e2e-gen.log
rm -rf "$D" "$H" "$G" /tmp/e2e-mon.*; mkdir -p "$D"; : > "$G"
systemctl --user reset-failed cyclix-run@$t.service 2>/dev/null
cursor=$(journalctl --user -n 0 --show-cursor --no-pager | sed -n 's/^-- cursor: //p')
systemctl --user start --no-block cyclix-run@$t.service
for p in {points}; do
  for i in $(seq 1 1200); do [ -e "$D/$p.paused" ] && break; sleep 0.05; done
  [ -e "$D/$p.paused" ] || {{ echo "never paused at $p"; break; }}
  pid=$(systemctl --user show -P MainPID cyclix-run@$t.service)
  names=$(busctl --user list --unique --no-legend | awk -v p="$pid" '$2 == p {{print $1}}' | paste -sd'|')
  [ -n "$names" ] || {{ echo "no bus connection of cyclix (pid $pid) at $p"; break; }}
  busctl --user monitor --match "type='method_call',destination='org.freedesktop.systemd1'" > /tmp/e2e-mon.$p 2>&1 &
  m=$!
  for i in $(seq 1 200); do grep -q 'Monitoring' /tmp/e2e-mon.$p && break; sleep 0.05; done
  n=$(wc -l < "$G")
  touch "$H"
  systemctl --user daemon-reexec &
  r=$!
  for i in $(seq 1 400); do [ $(wc -l < "$G") -gt $n ] && break; sleep 0.05; done
  [ $(wc -l < "$G") -gt $n ] || {{ echo "the reexec never reached the generator at $p"; rm -f "$H"; break; }}
  touch "$D/$p.go"
  seen=
  for i in $(seq 1 1200); do
    seen=$(grep -E -A1 "Sender=($names) " /tmp/e2e-mon.$p | grep -o 'Member=[A-Za-z]*' | head -1)
    [ -n "$seen" ] && break; sleep 0.05
  done
  rm -f "$H"
  wait $r
  kill $m 2>/dev/null; wait $m 2>/dev/null
  echo "blink at $p met ${{seen:-nothing}}"
done
for i in $(seq 1 1200); do
  s=$(systemctl --user show -P ActiveState cyclix-run@$t.service); [ "$s" = activating ] || break; sleep 0.1
done
ls "$D"
run=$(ls -t ~/.local/state/cyclix/runs/$t/*.json | grep -v skips | head -1); run=${{run##*/}}; echo "run=${{run%.json}}"
journalctl --user -u cyclix-run@$t.service --after-cursor="$cursor" --no-pager -o cat | grep -c 'did not answer' | sed 's/^/retries=/'
"#,
        points = POINTS.join(" ")
    );
    let out = tb.user_sh(&script);
    arm(tb, t, "");
    hold_generator(tb, false);
    let text = expect_success(&out, "reexec at each phase's first call");
    // Each phase's first call was met by a blink (the positive control that the fault hit the
    // call it is about: `LoadUnit` in the reload phase).
    for p in POINTS {
        let met = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("blink at {p} met ")))
            .unwrap_or_else(|| panic!("no blink at {p}:\n{text}"));
        assert!(met.starts_with("Member="), "{p}: {met}\n{text}");
    }
    assert!(
        text.contains("blink at reload.confirm met Member=LoadUnit"),
        "{text}"
    );
    let run = text
        .lines()
        .find_map(|l| l.strip_prefix("run="))
        .expect("run id")
        .to_string();
    let retries: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("retries="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        retries >= u32::try_from(POINTS.len()).unwrap_or(u32::MAX),
        "each blink meets a call that is retried: {retries} retries logged\n{text}"
    );
    let rec = record_of(tb, t, &run);
    assert_eq!(rec["result"], "passed", "{rec:#}\n{text}");
    let left = leftovers(tb, &run, t);
    assert!(left.is_empty(), "leftovers: {left}");
}
