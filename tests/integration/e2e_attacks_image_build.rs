//! Attack review 17: the image builds of issue 15 (`agent.build`, docs/build.md), attacked by
//! an agent whose Containerfile the user merged (the next run builds from it). Every attack
//! file is also built with plain `podman build --network=none` on the testbed: that is the
//! positive control that buildah honours the spelling (the attack works where nothing stops
//! it); cyclix's own build then shows what the fix leaves of it.
//!
//! - Reach beyond `build.egress`. Broke, fixed: `RUN --network=host` is the namespace of the
//!   build process, and podman built on the host's network, so the step reached every host
//!   (measured before the fix: `denied.example` answered); so did a base image's `ONBUILD`
//!   trigger (a pinned image from any registry may carry one) and `ADD $URL` (the variable
//!   hid the URL from the check; podman fetched `private.example:8080` itself). Now podman
//!   builds inside the holder's namespace (`podman unshare nsenter --net=…`): the steps'
//!   "host" is the internal network, the fetch has no route. Control: a plain step reaches
//!   the allowed host through the build's proxy. A base pinned by digest is taken from local
//!   storage or pulled by cyclix before the build (`--pull=never`).
//! - Slip a base past the check. Broke, fixed: a redeclared `ARG B` before `FROM $B` (cyclix
//!   took the first default, buildah the last) and `# escape=` behind a UTF-8 byte-order mark
//!   (buildah drops the mark; with the backtick as escape a `\` no longer continues a line,
//!   so a `FROM` cyclix read as part of a `RUN` was a stage of its own). Now both are read as
//!   buildah reads them and refused naming file and line.
//! - Poison another build. Broke, fixed: buildah keeps `RUN --mount=type=cache` directories
//!   in `/var/tmp/buildah-cache-UID`, shared by every build of the user and outside the inputs
//!   digest: one tenant's build wrote a file another tenant's build took into its image
//!   (measured before the fix: `POISON`). Now each build has its own `TMPDIR`, removed after.
//! - Print to the user's terminal. Broke, fixed: a step's output went raw to stderr (an OSC
//!   title sequence, a screen clear); now control characters are replaced (`text::printable`).
//!   So did the paths `cyclix twin --if-setup-changed` names as changed (a file under
//!   `.cyclix/` named with an OSC sequence, in a merged commit): replaced the same way.

use crate::common::run::prepared;
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// A docker-format base whose `ONBUILD` trigger fetches an off-allowlist host from the
/// build's "host" network (the attacker's pinned image, made local here), around the proxy
/// cyclix names in `http_proxy`.
const TRIGGER_BASE: &str = "FROM localhost/tb-busybox:latest\nONBUILD RUN --network=host unset http_proxy HTTP_PROXY; wget -q -T 5 -O /trigger http://denied.example/ || echo unreachable > /trigger\n";

/// The merged Containerfile: from the trigger base, a step on "host", a step through the
/// build's proxy (the control).
const HOSTNET: &str = "FROM localhost/atk17-trigger:latest\n\
RUN --network=host unset http_proxy HTTP_PROXY; wget -q -T 5 -O /host http://denied.example/ || echo unreachable > /host\n\
RUN wget -q -T 10 -O /proxied http://allowed.example/\n\
RUN printf 'atk17-\\033]0;title\\007\\033[2J-end\\n'\n";

/// A fetch of a host-only address by podman itself, its URL in a variable.
const ADD_VAR: &str =
    "FROM localhost/tb-busybox:latest\nARG U=http://private.example:8080/\nADD $U /add\n";

/// Commits `text` as the tenant's Containerfile, byte for byte.
fn commit(tb: &Testbed, t: &str, text: &str) {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\'', "'\\''");
    expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/{t} && printf %b '{escaped}' > Containerfile && git -c user.name=t -c user.email=t@example.com commit -qam next"
        )),
        "commit the Containerfile",
    );
}

/// `podman build --network=none` of `text` (the control), then `podman run` of `cat FILE`.
fn plain_build(tb: &Testbed, text: &str, tag: &str, format: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\'', "'\\''");
    let out = tb.user_sh(&format!(
        "set -e; d=$(mktemp -d); printf %b '{escaped}' > $d/C; \
         timeout 120 podman build -q --format {format} --network=none --layers=false --force-rm -f $d/C -t {tag} $d >/dev/null; rm -rf $d"
    ));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "plain build of {tag}: {stderr}");
    stderr
}

fn cat(tb: &Testbed, image: &str, file: &str) -> String {
    expect_success(
        &tb.user_sh(&format!("podman run --rm {image} cat {file}")),
        "read the image",
    )
    .trim()
    .to_string()
}

#[test]
fn a_build_step_reaches_no_host_network_by_run_network_host_an_onbuild_trigger_or_add_of_a_variable()
 {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-atk17-net")
        .file("Containerfile", HOSTNET)
        .agent_build("{ containerfile: Containerfile, egress: [allowed.example] }")
        .write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "podman images -q 'localhost/cyclix-build-{t}-agent' | xargs -r podman rmi -f >/dev/null"
        )),
        "remove earlier builds",
    );
    // Controls: buildah honours all three spellings where nothing stops them.
    plain_build(tb, TRIGGER_BASE, "localhost/atk17-trigger:latest", "docker");
    plain_build(
        tb,
        HOSTNET
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str(),
        "localhost/atk17-net-ctl",
        "oci",
    );
    assert_eq!(
        cat(tb, "localhost/atk17-net-ctl", "/host"),
        "hello-from-denied.example"
    );
    assert_eq!(
        cat(tb, "localhost/atk17-net-ctl", "/trigger"),
        "hello-from-denied.example"
    );
    plain_build(tb, ADD_VAR, "localhost/atk17-net-ctl", "oci");
    assert_eq!(
        cat(tb, "localhost/atk17-net-ctl", "/add"),
        "hello-from-outside"
    );

    let raw = expect_success(
        &tb.user_sh(
            "d=$(mktemp -d); printf 'FROM localhost/tb-busybox:latest\\nRUN printf \\047atk17-\\\\033]0;title\\\\007-end\\\\n\\047\\n' > $d/C; \
             podman build --network=none --layers=false --force-rm -f $d/C $d 2>&1 | grep atk17-; rm -rf $d",
        ),
        "plain build printing an escape",
    );
    assert!(raw.contains("atk17-\u{1b}]0;title\u{7}-end"), "{raw:?}");

    // cyclix's build: neither the step nor the trigger gets out, the proxy still does, and
    // the step's escapes reach no terminal.
    let out = tb.user_sh(&format!("{c} images build --tenant {t}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("atk17-\u{fffd}]0;title\u{fffd}\u{fffd}[2J-end"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let tag = out
        .trim()
        .strip_prefix("built ")
        .expect("built")
        .to_string();
    assert_eq!(cat(tb, &tag, "/host"), "unreachable");
    assert_eq!(cat(tb, &tag, "/trigger"), "unreachable");
    assert_eq!(cat(tb, &tag, "/proxied"), "hello-from-allowed.example");

    // ADD of a variable: podman's own fetch has no route, the build fails, no image.
    commit(tb, &t, ADD_VAR);
    let out = tb.user_sh(&format!("{c} images build --tenant {t}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 2 (`exit::TOOL_FAILED`): podman's build failed (a run says `setup_broken`).
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ADD $U /add") && stderr.contains("network is unreachable"),
        "{stderr}"
    );
    assert!(!stderr.contains("hello-from-outside"), "{stderr}");
    let left = expect_success(
        &tb.user_sh(&format!(
            "podman rmi -f localhost/atk17-net-ctl localhost/atk17-trigger:latest {tag} >/dev/null; \
             podman images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep -F cyclix-build-{t}-agent || true; \
             podman ps -a --format '{{{{.Names}}}}' | grep -F build || true"
        )),
        "what the failed build left",
    );
    assert_eq!(left.trim(), "", "left behind: {left}");
}

#[test]
fn a_redeclared_arg_or_an_escape_directive_behind_a_byte_order_mark_slips_no_base_past_the_check() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    // Controls: buildah takes the last default of a redeclared ARG, and honours the directive
    // behind the mark (the second FROM is a stage of its own: two stages).
    let stderr = plain_build(
        tb,
        "ARG B=localhost/tb-busybox:latest\nARG B=localhost/tb-debian:trixie\nFROM $B\nRUN grep -q trixie /etc/os-release\n",
        "localhost/atk17-parse-ctl",
        "oci",
    );
    assert!(!stderr.contains("Error"), "{stderr}");
    let out = expect_success(
        &tb.user_sh(
            "set -e; d=$(mktemp -d); printf '\\357\\273\\277# escape=`\\nFROM localhost/tb-busybox:latest\\nRUN true \\\\\\nFROM localhost/tb-debian:trixie\\n' > $d/C; \
             timeout 120 podman build --network=none --layers=false --force-rm -f $d/C -t localhost/atk17-parse-ctl $d 2>&1; rm -rf $d; podman rmi -f localhost/atk17-parse-ctl >/dev/null",
        ),
        "plain build behind a byte-order mark",
    );
    assert!(
        out.contains("[2/2] STEP 1/1: FROM localhost/tb-debian:trixie"),
        "{out}"
    );

    let t = Tenant::new("e2e-atk17-parse")
        .file("Containerfile", "FROM localhost/tb-busybox:latest\n")
        .agent_build("{ containerfile: Containerfile }")
        .write(tb);
    for (text, want) in [
        (
            "ARG B=localhost/tb-busybox:latest\nARG B=docker.io/library/alpine:3\nFROM $B\n",
            "Containerfile:3: `docker.io/library/alpine:3` is neither in podman's local storage nor pinned by digest",
        ),
        (
            "\u{feff}# escape=`\nFROM localhost/tb-busybox:latest\nRUN true \\\nFROM docker.io/library/alpine:3\n",
            "Containerfile:1: the parser directive `# escape=` is not supported",
        ),
    ] {
        commit(tb, &t, text);
        let out = tb.user_sh(&format!("{c} images build --tenant {t}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(want) && stderr.contains("fix:"), "{stderr}");
    }
}

/// The poisoner: writes into the cache every build of the user would share.
const CACHE_WRITE: &str = "FROM localhost/tb-busybox:latest\nRUN --mount=type=cache,target=/atk17-cache echo POISON > /atk17-cache/pkg\n";

/// Another tenant's build that takes what its cache holds into its image.
const CACHE_READ: &str = "FROM localhost/tb-busybox:latest\nRUN --mount=type=cache,target=/atk17-cache cat /atk17-cache/pkg > /got 2>/dev/null || echo clean > /got\n";

#[test]
fn a_cache_mount_carries_nothing_from_one_build_into_another() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    // Control: plain builds share buildah's cache directory (`/var/tmp/buildah-cache-UID`).
    plain_build(tb, CACHE_WRITE, "localhost/atk17-cache-ctl", "oci");
    plain_build(tb, CACHE_READ, "localhost/atk17-cache-ctl", "oci");
    assert_eq!(cat(tb, "localhost/atk17-cache-ctl", "/got"), "POISON");
    expect_success(
        &tb.user_sh(
            "podman rmi -f localhost/atk17-cache-ctl >/dev/null; podman unshare sh -c 'rm -rf /var/tmp/buildah-cache-*/*atk17*'",
        ),
        "remove the control's image and cache",
    );

    let writer = Tenant::new("e2e-atk17-cache-a")
        .file("Containerfile", CACHE_WRITE)
        .agent_build("{ containerfile: Containerfile }")
        .write(tb);
    let reader = Tenant::new("e2e-atk17-cache-b")
        .file("Containerfile", CACHE_READ)
        .agent_build("{ containerfile: Containerfile }")
        .write(tb);
    let mut tags = Vec::new();
    for t in [&writer, &reader] {
        expect_success(
            &tb.user_sh(&format!(
                "podman images -q 'localhost/cyclix-build-{t}-agent' | xargs -r podman rmi -f >/dev/null"
            )),
            "remove earlier builds",
        );
        let out = expect_success(
            &tb.user_sh(&format!("{c} images build --tenant {t} 2>/dev/null")),
            "cyclix images build",
        );
        tags.push(
            out.trim()
                .strip_prefix("built ")
                .expect("built")
                .to_string(),
        );
    }
    assert_eq!(cat(tb, &tags[1], "/got"), "clean");
    // Nothing of either cache is left on the host.
    let left = expect_success(
        &tb.user_sh(&format!(
            "podman rmi -f {} >/dev/null; ls -d /var/tmp/buildah-cache-*/*atk17* /tmp/.tmp*/tmp/buildah-cache-* 2>/dev/null || true",
            tags.join(" ")
        )),
        "what the builds left",
    );
    assert_eq!(left.trim(), "", "left behind: {left}");
}

#[test]
fn a_setup_path_named_with_escapes_reaches_no_terminal_through_twin_if_setup_changed() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-atk17-twin")
        .file("Containerfile", "FROM localhost/tb-busybox:latest\n")
        .agent_build("{ containerfile: Containerfile }")
        .write(tb);
    // The merged commit: a file under `.cyclix/` whose name holds an OSC sequence and a line
    // that a CI runner reads as a command, and a base that is refused (so the twin stops
    // right after saying what changed).
    let listed = expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/{t} && mkdir -p .cyclix && touch \"$(printf '.cyclix/a\\033]0;title\\007\\n::error::spoofed')\" \
             && echo 'FROM docker.io/library/alpine:3' > Containerfile && git add -A \
             && git -c user.name=t -c user.email=t@example.com commit -qm setup \
             && git diff --name-only -z HEAD~1 HEAD | tr '\\0' '\\n'"
        )),
        "commit the file",
    );
    // Control: git names it with the raw bytes.
    assert!(
        listed.contains(".cyclix/a\u{1b}]0;title\u{7}\n::error::spoofed"),
        "{listed:?}"
    );
    let out = tb.user_sh(&format!(
        "cd ~/src/{t} && {c} twin {t} --if-setup-changed HEAD~1"
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("setup changed between HEAD~1 and HEAD: .cyclix/a\u{fffd}]0;title\u{fffd}")
            && stderr.contains("is neither in podman's local storage nor pinned"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains("\n::error::"),
        "{stderr:?}"
    );
}

/// The testbed's busybox by the digest it was imported with (its first `RepoDigests` entry).
/// Read at run time: the image is built from the testbed cache's rootfs, so its digest differs
/// between machines (a hard-coded one failed CI on a freshly built cache).
fn busybox_pin(tb: &Testbed) -> String {
    let pin = expect_success(
        &tb.user_sh(
            "podman image inspect --format '{{index .RepoDigests 0}}' docker.io/library/busybox:latest",
        ),
        "the busybox image's digest",
    );
    let pin = pin.trim().to_string();
    assert!(
        pin.starts_with("docker.io/library/busybox@sha256:"),
        "{pin:?}"
    );
    pin
}

#[test]
fn a_pinned_base_is_taken_from_local_storage_or_pulled_before_the_build_which_has_no_route() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let pin = busybox_pin(tb);
    let t = Tenant::new("e2e-atk17-pin")
        .file(
            "Containerfile",
            &format!("FROM {pin}\nRUN echo pinned > /pinned\n"),
        )
        .agent_build("{ containerfile: Containerfile }")
        .write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "podman images -q 'localhost/cyclix-build-{t}-agent' | xargs -r podman rmi -f >/dev/null"
        )),
        "remove earlier builds",
    );
    // Local by its digest: built with `--pull=never`.
    let out = expect_success(
        &tb.user_sh(&format!("{c} images build --tenant {t} 2>/dev/null")),
        "cyclix images build",
    );
    let tag = out
        .trim()
        .strip_prefix("built ")
        .expect("built")
        .to_string();
    assert_eq!(cat(tb, &tag, "/pinned"), "pinned");
    // Not local: cyclix pulls it first, on the host's network (no registry on the testbed),
    // and says so; nothing of the build is started.
    let missing = "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    commit(tb, &t, &format!("FROM {missing}\n"));
    let out = tb.user_sh(&format!("{c} images build --tenant {t}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("pulling pinned base {missing}"))
            && stderr.contains(&format!("pulling image {missing}"))
            && !stderr.contains("[build agent]"),
        "{stderr}"
    );
    expect_success(
        &tb.user_sh(&format!("podman rmi -f {tag} >/dev/null")),
        "remove the image",
    );
}

/// An agent image whose `ENTRYPOINT` runs first, then hands over to the command it was given.
const EP_AGENT: &str = "FROM localhost/cyclix-agent-python:latest\n\
ENTRYPOINT [\"/bin/sh\", \"-c\", \"echo atk17-entrypoint-ran-first >&2; exec \\\"$@\\\"\", \"--\"]\n";

/// A gate image whose `ENTRYPOINT` exits 0 whatever the command.
const EP_GATE: &str = "FROM localhost/cyclix-agent-python:latest\n\
ENTRYPOINT [\"/bin/sh\", \"-c\", \"echo atk17-gate-says-yes; exit 0\", \"--\"]\n";

#[test]
fn an_images_entrypoint_runs_neither_before_the_boundary_is_proven_nor_around_the_gate() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    plain_build(tb, EP_AGENT, "localhost/atk17-ep-agent:latest", "docker");
    plain_build(tb, EP_GATE, "localhost/atk17-ep-gate:latest", "docker");
    // Positive controls: podman runs each entrypoint around a given command.
    let control = expect_success(
        &tb.user_sh(
            "podman run --rm localhost/atk17-ep-agent:latest true 2>&1; \
             podman run --rm localhost/atk17-ep-gate:latest false; echo \"gate-rc=$?\"",
        ),
        "run the images as podman would",
    );
    assert!(
        control.contains("atk17-entrypoint-ran-first") && control.contains("gate-rc=0"),
        "the entrypoints run around a plain `podman run` command: {control}"
    );
    let c = tb.cyclix_bin();
    // The agent's image: its entrypoint would run before `agent-wait`, i.e. before the probes.
    let a = Tenant::new("e2e-atk17-ep-a")
        .image("localhost/atk17-ep-agent:latest")
        .write(tb);
    // The gate's image: its entrypoint would turn a failing check into exit 0. The agent
    // changes nothing, so the demo's failing test must fail the gate.
    let g = Tenant::new("e2e-atk17-ep-g")
        .agent_cmd("[\"true\"]")
        .write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "f=~/.config/cyclix/tenants/{g}.yaml; \
             awk '/^gate:/{{g=1}} g && /image:/ && !d {{sub(/image: .*/, \"image: localhost/atk17-ep-gate:latest\"); d=1}} {{print}}' $f > $f.new && mv $f.new $f; \
             grep -A1 '^gate:' $f"
        )),
        "give the gate the entrypoint image",
    );
    let out = tb.user_sh(&format!(
        "{c} run {a} >/dev/null 2>&1; {c} run {g} >/dev/null 2>&1; true"
    ));
    assert!(out.status.success(), "{out:?}");
    let rec_a = crate::common::run::record(tb, &a);
    assert_eq!(rec_a["result"], "passed", "{rec_a:#}");
    let log = rec_a["agent_log"].to_string();
    assert!(
        !log.contains("atk17-entrypoint-ran-first"),
        "the image's entrypoint ran in the agent's container: {log}"
    );
    let rec_g = crate::common::run::record(tb, &g);
    assert_eq!(
        rec_g["result"], "gate_failed",
        "the gate's own command decides, not the image's entrypoint: {rec_g:#}"
    );
    assert!(
        !rec_g["gate_log"]
            .to_string()
            .contains("atk17-gate-says-yes"),
        "{rec_g:#}"
    );
}
