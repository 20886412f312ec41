//! Attack review 18: the image's own code inside cyclix's processes in the agent's container.
//! An image is the tenant's or, with `agent.build`, built from a Containerfile an agent may have
//! written (attack review 17), so it is the attacker's. cyclix runs there before the agent is
//! let go (agent-wait, the probe suite) and during its work (the watch probes, `podman exec`),
//! and a forged report from either would hide a broken boundary.
//!
//! - Run as a preload. Broke, fixed: cyclix was a dynamic glibc binary, started inside the
//!   container by the image's `ld.so`, which loads what the image's `/etc/ld.so.preload` and an
//!   `LD_PRELOAD` in its environment name, and the image's libc. Now cyclix is linked static
//!   (`.cargo/config.toml`, static-pie: no `PT_INTERP`) and `exec_only::copy` refuses a binary
//!   that names an interpreter. Measured before the fix (this test's run with a dynamic
//!   build): four `preload exe=/cyclix/bin/cyclix` lines (agent-wait, the watch rounds).
//! - Run as an NSS module. Fixed with it: a static glibc still `dlopen`s the modules
//!   `/etc/nsswitch.conf` names when a name is looked up; N6 looked up
//!   `host.containers.internal` with getaddrinfo (measured before the fix: one
//!   `nss exe=/cyclix/bin/cyclix` line). Now N6 reads `/etc/hosts` itself.
//!
//! - Forge a report line from a child: not here. P6 starts the image's setuid binary while
//!   agent-wait probes, and that binary could open `/cyclix/ctl/report`; the host unlinks the
//!   FIFO on agent-wait's hello, before the first probe (atk8; `report_fifo` and `agent_wait`
//!   unit tests, with the positive control). On the real stack the window is a race: P6 kills
//!   its child right after reading its status, microseconds after the exec, so the image's
//!   binary seldom runs at all (a `passwd` script that forks first logged in one run of two),
//!   and a test of it could not be made to fail reliably.
//!
//! The image here has a library in `/etc/ld.so.preload`, in `LD_PRELOAD` and as the `hosts` and
//! `passwd` NSS module; its constructor appends `KIND exe=PATH` to `/tmp/atk18.log`, the
//! container's own tmpfs, which cyclix's processes share. Control: the agent's own dynamic
//! programs (`sh`, `getent`) log both kinds; no line names cyclix's binary.

use std::path::PathBuf;
use std::process::Command;

use crate::common::run::{WATCH_ROUNDS, WATCH_ROUNDS_FILE, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The library: one source, built once as the preload and once as the NSS module.
const LIBRARY: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void atk18(void) {
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n < 0 ? 0 : n] = 0;
    int fd = open("/tmp/atk18.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) {
        dprintf(fd, "%s exe=%s\n", KIND, exe);
        close(fd);
    }
}
"#;

const CONTAINERFILE: &str = "FROM localhost/cyclix-agent-python:latest\n\
COPY libatk18.so /usr/lib/libatk18.so\n\
COPY libnss_atk18.so.2 /usr/lib/x86_64-linux-gnu/libnss_atk18.so.2\n\
RUN echo /usr/lib/libatk18.so > /etc/ld.so.preload \
 && sed -i -e 's/^hosts:.*/hosts: atk18 files dns/' -e 's/^passwd:.*/passwd: atk18 files/' /etc/nsswitch.conf\n\
ENV LD_PRELOAD=/usr/lib/libatk18.so\n";

/// Builds the two libraries on the host (a C compiler is what `scripts/test` ensures) into
/// `target/atk18/` below the project root, which the testbed sees at `/src`, and returns the
/// directory as the testbed sees it.
fn libraries(tb: &Testbed) -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/atk18");
    std::fs::create_dir_all(&dir).expect("target/atk18");
    std::fs::write(dir.join("atk18.c"), LIBRARY).expect("atk18.c");
    std::fs::write(dir.join("Containerfile"), CONTAINERFILE).expect("Containerfile");
    for (kind, out) in [("preload", "libatk18.so"), ("nss", "libnss_atk18.so.2")] {
        let st = Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-O2",
                &format!("-DKIND=\"{kind}\""),
                "-o",
            ])
            .arg(dir.join(out))
            .arg(dir.join("atk18.c"))
            .status()
            .expect("running cc");
        assert!(st.success(), "cc {out}: {st}");
    }
    format!("{}/target/atk18", tb.src())
}

#[test]
fn the_images_loader_preload_and_nss_modules_never_run_inside_cyclix() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let ctx = libraries(tb);
    expect_success(
        &tb.user_sh(&format!(
            "timeout 180 podman build -q --network=none --layers=false --force-rm -t localhost/atk18:latest -f {ctx}/Containerfile {ctx} >/dev/null"
        )),
        "build the attack image",
    );
    let t = "e2e-a18";
    // The agent waits through two watch rounds (by their probes' own marks), looks up a name
    // and a user (NSS), then commits what the library logged in this container.
    Tenant::new(t)
        .image("localhost/atk18:latest")
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd(
            r#"[sh, -c, ". /work/rounds.sh; watch_rounds 2; getent hosts atk18.invalid; getent passwd 0 >/dev/null; cp /tmp/atk18.log atk18.log; git add atk18.log && git commit -qm atk18"]"#,
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
        "the watch probes ran while the agent worked: {rec:#}"
    );
    let log = expect_success(
        &tb.user_sh(&format!("cd ~/src/{t} && git show {branch}:atk18.log")),
        "read what the library logged",
    );
    // Controls: the image's dynamic programs load the library both ways.
    assert!(
        log.lines()
            .any(|l| l.starts_with("preload exe=") && (l.ends_with("/sh") || l.ends_with("/dash"))),
        "the agent's shell loaded the preload:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.starts_with("nss exe=") && l.ends_with("/getent")),
        "getent loaded the NSS module:\n{log}"
    );
    let in_cyclix: Vec<&str> = log.lines().filter(|l| l.contains("cyclix")).collect();
    assert!(
        in_cyclix.is_empty(),
        "the image's code ran inside cyclix: {in_cyclix:?}\n{log}"
    );
}
