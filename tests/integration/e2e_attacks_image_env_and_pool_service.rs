//! Attack review 20: what the static cyclix binary still takes from the image inside the agent's
//! container, and what a pooled service's claim check lets through.
//!
//! - The image's environment and /etc as code in cyclix. Held: a static glibc still reads
//!   `GLIBC_TUNABLES`, `LOCPATH`/`LANG`/`LC_ALL`/`LANGUAGE`, `GCONV_PATH`, `TZ`, `RES_OPTIONS`,
//!   `HOSTALIASES`, `LD_LIBRARY_PATH` (for a `dlopen`) and `HOME` (`std::env::home_dir` falls back
//!   to `getpwuid_r`), and it `dlopen`s NSS and gconv modules when asked to look something up or
//!   convert a charset. The binary's call graph (objdump, GOT slots resolved): of the
//!   NSS entry points only `home_dir` (no caller), std's `lookup_host` (zbus, on the host) and
//!   `getgrouplist` (zbus's peer credentials, on the host) are reached from Rust; the probes and
//!   agent-wait use addresses, `/etc/hosts` and `/etc/resolv.conf` themselves, and in the C locale
//!   glibc's message lookup loads no catalogue. Measured: the image names its module for every
//!   NSS database and a gconv module, sets all those variables (`HOME` empty), and the agent's
//!   `getent` and `iconv` (the controls) load them (4 and 1 lines); no line names cyclix's binary after the probe
//!   suite and two watch rounds.
//! - A forged report through clap's completion variables. Broke (Kubernetes), fixed:
//!   `COMPLETE=bash` in the image's `ENV` turned `cyclix agent-wait … -- ARGV` into clap's
//!   completion printer, which joins its candidates for ARGV (`sh -c`: four) with the image's
//!   `_CLAP_IFS` and exits 0 before any probe: with `--probe` (Kubernetes) that goes to the
//!   agent's log, from which the runner reads the suite's lines, so a separator made of report
//!   lines was a forged passing suite (measured by hand with `agent-wait --probe`:
//!   `-cv|FORGED|-cq|FORGED|-ch|FORGED|-cV`). With `--report` (podman) it failed closed (no
//!   report within 30 s; the agent never ran); the watch probe's argv has no `--`, so clap
//!   printed its registration script, no `W0`. Now `main` honours `COMPLETE` only for the
//!   registration script's calls (`cyclix` alone, `cyclix -- WORDS`). Measured: the same image
//!   runs the agent and every probe passes with real lines; control: `/c -- sh -c` in the
//!   image prints the forged separator.
//! - A process left in a pooled service under a name the fill saw. Broke, fixed: the claim
//!   allowed a pooled service's processes by name (`comm`) alone, so `cp /bin/sleep
//!   /tmp/postgres && exec /tmp/postgres 1000` left in the pooled database before the claim
//!   passed it (measured before the fix: the run took the tampered environment). Now the fill
//!   also records the executables (`DEV:INO` of `/proc/HPID/exe`) of the service's processes
//!   and the claim refuses a process whose executable is not among them or cannot be looked at
//!   (with the second look 1.5 s later, as for names); the run takes the next environment.

use std::path::PathBuf;
use std::process::Command;

use crate::common::run::{WATCH_ROUNDS, WATCH_ROUNDS_FILE, leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The library: its constructor appends `KIND exe=PATH` to `/tmp/atk20.log` (the container's
/// tmpfs, shared by cyclix's processes and the agent's).
const LIBRARY: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void atk20(void) {
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n < 0 ? 0 : n] = 0;
    int fd = open("/tmp/atk20.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) {
        dprintf(fd, "%s exe=%s\n", KIND, exe);
        close(fd);
    }
}
"#;

/// Every NSS database names the module first; a gconv module for charset `ATK20`; every variable
/// a static glibc or Rust's std reads pointed at the image's files.
const CONTAINERFILE: &str = "FROM localhost/cyclix-agent-python:latest\n\
COPY libnss_atk20.so.2 /usr/lib/x86_64-linux-gnu/libnss_atk20.so.2\n\
COPY libnss_atk20.so.2 /opt/atk20/lib/libnss_atk20.so.2\n\
COPY atk20gconv.so /opt/atk20/gconv/ATK20.so\n\
COPY gconv-modules /opt/atk20/gconv/gconv-modules\n\
RUN printf '%s\\n' 'passwd: atk20 files' 'group: atk20 files' 'shadow: atk20 files' \
 'gshadow: atk20 files' 'hosts: atk20 files dns' 'networks: atk20 files' \
 'protocols: atk20 files' 'services: atk20 files' 'ethers: atk20 files' 'rpc: atk20 files' \
 'netgroup: atk20' 'initgroups: atk20' 'aliases: atk20 files' 'publickey: atk20' \
 > /etc/nsswitch.conf && echo 'precedence ::ffff:0:0/96 100' > /etc/gai.conf\n\
ENV GCONV_PATH=/opt/atk20/gconv LOCPATH=/opt/atk20/locale LANG=atk20.ATK20 LC_ALL=atk20.ATK20 \
 LANGUAGE=atk20 TZ=/opt/atk20/tz TZDIR=/opt/atk20 GLIBC_TUNABLES=glibc.malloc.perturb=165 \
 MALLOC_PERTURB_=165 RES_OPTIONS=debug HOSTALIASES=/opt/atk20/aliases \
 LD_LIBRARY_PATH=/opt/atk20/lib HOME= RUST_BACKTRACE=full RUST_LOG=trace\n";

const GCONV_MODULES: &str = "module INTERNAL ATK20// ATK20 1\nmodule ATK20// INTERNAL ATK20 1\n";

/// Builds the NSS module and the gconv module into `target/atk20/` (the testbed's `/src`).
fn context(tb: &Testbed, containerfile: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/atk20");
    std::fs::create_dir_all(&dir).expect("target/atk20");
    std::fs::write(dir.join("atk20.c"), LIBRARY).expect("atk20.c");
    std::fs::write(dir.join("Containerfile"), containerfile).expect("Containerfile");
    std::fs::write(dir.join("gconv-modules"), GCONV_MODULES).expect("gconv-modules");
    for (kind, out) in [("nss", "libnss_atk20.so.2"), ("gconv", "atk20gconv.so")] {
        let st = Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-O2",
                &format!("-DKIND=\"{kind}\""),
                "-o",
            ])
            .arg(dir.join(out))
            .arg(dir.join("atk20.c"))
            .status()
            .expect("running cc");
        assert!(st.success(), "cc {out}: {st}");
    }
    format!("{}/target/atk20", tb.src())
}

fn build(tb: &Testbed, tag: &str, containerfile: &str) {
    let ctx = context(tb, containerfile);
    expect_success(
        &tb.user_sh(&format!(
            "timeout 180 podman build -q --network=none --layers=false --force-rm -t {tag} -f {ctx}/Containerfile {ctx} >/dev/null"
        )),
        "build the attack image",
    );
}

#[test]
fn the_images_env_nss_and_gconv_modules_never_run_inside_cyclix() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    build(tb, "localhost/atk20:latest", CONTAINERFILE);
    let t = "e2e-a20";
    // Two watch rounds (waited for by their probes' own marks), then the controls: a name, a
    // user, a group, a service and a charset conversion, each loading the image's module in
    // the agent's own programs.
    Tenant::new(t)
        .image("localhost/atk20:latest")
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd(
            r#"[sh, -c, ". /work/rounds.sh; watch_rounds 2; getent hosts atk20.invalid; getent passwd 0 >/dev/null; getent group 0 >/dev/null; getent services 1 >/dev/null; echo x | iconv -f UTF-8 -t ATK20 >/dev/null 2>&1; cp /tmp/atk20.log .; git add atk20.log && git commit -qm atk20"]"#,
        )
        .gate_cmd("[\"true\"]")
        .write(tb);
    let out = start(tb, t);
    let rec = record(tb, t);
    let Some(branch) = rec["branch"].as_str() else {
        panic!("the agent ran: {rec:#}\n{out:?}");
    };
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert!(
        rec["watch_rounds"].as_u64().is_some_and(|n| n >= 2),
        "two watch rounds ran while the agent worked: {rec:#}"
    );
    let log = expect_success(
        &tb.user_sh(&format!("cd ~/src/{t} && git show {branch}:atk20.log")),
        "read what the modules logged",
    );
    // Controls: the NSS module for getent, the gconv module for iconv.
    assert!(
        log.lines()
            .any(|l| l.starts_with("nss exe=") && l.ends_with("/getent")),
        "getent loaded the NSS module:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.starts_with("gconv exe=") && l.ends_with("/iconv")),
        "iconv loaded the gconv module:\n{log}"
    );
    let in_cyclix: Vec<&str> = log.lines().filter(|l| l.contains("cyclix")).collect();
    assert!(
        in_cyclix.is_empty(),
        "the image's code ran inside cyclix: {in_cyclix:?}\n{log}"
    );
}

/// A report line that passes everything, as clap's completion separator would print it.
const FORGED: &str = r#"{"id":"P1","expect":"x","got":"x","verdict":"PASS"}"#;

#[test]
fn completions_in_the_images_env_forge_no_report() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    build(
        tb,
        "localhost/atk20c:latest",
        &format!(
            "FROM localhost/cyclix-agent-python:latest\n\
             ENV COMPLETE=bash _CLAP_COMPLETE_INDEX=1 _CLAP_IFS='{FORGED}'\n"
        ),
    );
    // Positive control: the image's variables reach cyclix in its container, and a call of the
    // registration script's form prints the forged separator.
    let bin = format!("{}/target/x86_64-unknown-linux-gnu/debug/cyclix", tb.src());
    let control = expect_success(
        &tb.user_sh(&format!(
            "podman run --rm --network=none -v {bin}:/c:ro localhost/atk20c:latest /c -- sh -c"
        )),
        "complete in the image",
    );
    assert!(control.contains(FORGED), "{control}");
    let t = "e2e-a20c";
    Tenant::new(t)
        .image("localhost/atk20c:latest")
        .agent_cmd(r#"[sh, -c, "echo ran > ran.txt; git add ran.txt && git commit -qm ran"]"#)
        .gate_cmd("[\"true\"]")
        .write(tb);
    let _ = start(tb, t);
    let rec = record(tb, t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert!(
        rec["commits"].as_array().is_some_and(|c| !c.is_empty()),
        "the agent ran: {rec:#}"
    );
    assert!(
        !rec.to_string().contains(r#"got":"x""#),
        "the forged line reached the record: {rec:#}"
    );
}

/// A pooled database, as `e2e_pool_services` pools it.
const DB: &str = "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health:
      command: [sh, -c, \"pg_isready -q -h 127.0.0.1 -p \\\"${PGPORT}\\\"\"]
      interval: 1s
      retries: 60";

/// A process left in a pooled database, named `postgres` (a copy of `sleep`): the fill saw
/// processes of that name there, so a check by name alone takes it for the database's own.
#[test]
fn a_process_named_like_the_service_left_in_a_pooled_service() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-a20p")
        .agent_cmd("[\"true\"]")
        .gate_cmd("[\"true\"]")
        .services(DB)
        .extra_yaml("pool:\n  size: 2")
        .write(tb);
    crate::e2e_pool::drain(tb, &t);
    let mut envs = crate::e2e_pool::fill(tb, &t);
    assert_eq!(envs.len(), 2, "{envs:?}");
    envs.sort();
    let (tampered, good) = (&envs[0], &envs[1]);
    let db = format!("cyclix-{tampered}-svc-db");
    let unit = format!("e2e-a20-{tampered}");
    // Positive control: the impostor is there, under the name, before the claim.
    crate::e2e_pool_claim::stray(
        tb,
        &unit,
        &db,
        "sh -c 'cp /bin/sleep /tmp/postgres && exec /tmp/postgres 1000'",
        "postgres",
    );
    let impostor = expect_success(
        &tb.user_sh(&format!(
            "podman top {db} args | grep -c '^/tmp/postgres 1000' || true"
        )),
        "find the impostor",
    );
    assert_eq!(impostor.trim(), "1", "the impostor runs in {db}");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let _ = tb.user_sh(&format!("systemctl --user stop {unit} 2>/dev/null; true"));
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(
        rec["run_id"],
        good.as_str(),
        "the run took the tampered environment: {rec:#}"
    );
    let refused = rec["notices"].as_array().into_iter().flatten().any(|n| {
        n.as_str().is_some_and(|n| {
            n.starts_with(&format!(
                "pool: environment {tampered} refused at the claim"
            )) && n.contains("not an executable the fill saw there")
        })
    });
    assert!(refused, "{rec:#}");
    assert_eq!(leftovers(tb, good, &t).trim(), "", "what is left of {good}");
    assert_eq!(
        leftovers(tb, tampered, &t).trim(),
        "",
        "what is left of {tampered}"
    );
}
