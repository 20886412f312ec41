//! Images built from the project's own setup files (issue 15, item 1) and the CI check of the
//! setup (item 6), on the real stack.
//!
//! - A run builds the agent's image from the repository's Containerfile at the base commit,
//!   its `RUN` step reaching an allowed host through the build's own proxy (the positive
//!   control); a second run with unchanged inputs reuses the image, a changed input (a file of
//!   the context, committed) builds a new one (`cyclix images build --tenant`).
//! - A build step reaching a host off `build.egress` fails the run in phase `build`
//!   (`setup_broken`, exit 1) with podman's last lines in the record and nothing left: no
//!   container (buildah's included), network, proxy or image. `ADD <url>` and a `FROM` that is
//!   neither local nor pinned are refused before anything is built, naming file and line.
//! - The documented CI commands (`docs/ci/`) run `cyclix twin --if-setup-changed`: skipped with
//!   exit 0 when no setup path changed, a passing twin when one did.

use crate::common::run::{leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The agent's Containerfile: fetches a page of the allowed host through the build's proxy,
/// notes what a direct connection to it gives (no route), and copies a file of the context.
const AGENT_CONTAINERFILE: &str = r#"FROM localhost/cyclix-agent-python:latest
RUN python3 -c "import urllib.request as u; open('/opt/fetched', 'wb').write(u.urlopen('http://allowed.example/', timeout=10).read())"
RUN python3 -c "import socket; s = socket.socket(); s.settimeout(3); open('/opt/direct', 'w').write('direct=%d' % s.connect_ex(('203.0.113.10', 80)))"
COPY build-marker.txt /opt/build-marker.txt
"#;

/// The agent: commits what its image holds, then fixes the demo's bug.
const AGENT: &str = r#"[sh, -c, "cat /opt/build-marker.txt /opt/fetched /opt/direct > image-evidence.txt && git add image-evidence.txt && git commit -qm 'image evidence' && exec cyclix-demo-agent"]"#;

fn images_of(tb: &Testbed, repo: &str) -> String {
    expect_success(
        &tb.user_sh(&format!(
            "podman images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep -F {repo} || true"
        )),
        "list the built images",
    )
}

#[test]
fn a_run_builds_its_image_from_the_base_commit_and_reuses_it_until_an_input_changes() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-build")
        .file("ci/agent.Containerfile", AGENT_CONTAINERFILE)
        .file("build-marker.txt", "v1\n")
        .agent_build("{ containerfile: ci/agent.Containerfile, egress: [allowed.example] }")
        .agent_cmd(AGENT)
        .write(tb);
    let c = tb.cyclix_bin();
    expect_success(
        &tb.user_sh(&format!(
            "podman images -q 'localhost/cyclix-build-{t}-agent' | xargs -r podman rmi -f >/dev/null"
        )),
        "remove earlier builds",
    );
    let _ = start(tb, &t);
    let first = record(tb, &t);
    assert_eq!(first["result"], "passed", "{first:#}");
    assert_eq!(first["images"][0]["role"], "agent", "{first:#}");
    assert_eq!(first["images"][0]["built"], true, "{first:#}");
    let tag = first["images"][0]["reference"]
        .as_str()
        .expect("tag")
        .to_string();
    assert!(
        tag.starts_with(&format!("localhost/cyclix-build-{t}-agent:")),
        "{tag}"
    );
    assert!(
        first["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .any(|p| p["name"] == "build"),
        "{first:#}"
    );
    let branch = first["branch"].as_str().expect("branch");
    let evidence = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/src/{t} show {branch}:image-evidence.txt"
        )),
        "the image's evidence",
    );
    // The context's file as committed, the allowed host's page fetched through the proxy,
    // and no route to it without the proxy (ENETUNREACH).
    assert_eq!(
        evidence, "v1\nhello-from-allowed.example\ndirect=101",
        "{first:#}"
    );
    let run = first["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run, &t);
    assert!(left.trim().is_empty(), "left behind by {run}:\n{left}");

    // Unchanged inputs: the same image, not built again.
    let _ = start(tb, &t);
    let second = record(tb, &t);
    assert_eq!(second["result"], "passed", "{second:#}");
    assert_eq!(second["images"][0]["built"], false, "{second:#}");
    assert_eq!(second["images"][0]["reference"], tag.as_str(), "{second:#}");

    // A changed file of the context: a new image, ahead of the run.
    let out = expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/{t} && echo v2 > build-marker.txt && git -c user.name=t -c user.email=t@example.com commit -qam v2 \
             && {c} images build --tenant {t} 2>/dev/null && {c} images build --tenant {t} 2>/dev/null"
        )),
        "images build --tenant, twice",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let new_tag = lines[0].strip_prefix("built ").expect("built first");
    assert_ne!(new_tag, tag, "{out}");
    assert_eq!(lines[1], format!("up to date {new_tag}"), "{out}");
    let content = expect_success(
        &tb.user_sh(&format!(
            "podman run --rm {new_tag} cat /opt/build-marker.txt"
        )),
        "the new image's marker",
    );
    assert_eq!(content, "v2\n");
}

#[test]
fn a_build_reaching_a_host_off_its_allowlist_fails_in_phase_build_and_leaves_nothing() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // A base no other test builds from, so buildah's containers of other builds are not this one's.
    let denied = "FROM localhost/tb-busybox:latest\nRUN wget -q -T 10 -O- http://denied.example/\n";
    let t = Tenant::new("e2e-build-deny")
        .file("Containerfile", denied)
        .agent_build("{ containerfile: Containerfile, egress: [allowed.example] }")
        .write(tb);
    let repo = format!("localhost/cyclix-build-{t}-agent");
    let status = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user start cyclix-run@{t}.service 2>/dev/null; systemctl --user show -P ExecMainStatus cyclix-run@{t}.service; systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null; true"
        )),
        "the run",
    );
    assert_eq!(status.trim(), "1", "exit status of the run");
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "setup_broken", "{rec:#}");
    assert_eq!(rec["failed_phase"], "build", "{rec:#}");
    let log = rec["build_log"].as_array().expect("build_log");
    let text: Vec<&str> = log.iter().filter_map(|l| l.as_str()).collect();
    assert!(
        text.iter().any(|l| l.contains("403"))
            && text.iter().any(|l| l.contains("STEP 2/3: RUN wget")),
        "{rec:#}"
    );
    assert_eq!(
        rec["agent_exit"],
        serde_json::Value::Null,
        "the agent never ran: {rec:#}"
    );
    let run = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run, &t);
    assert!(left.trim().is_empty(), "left behind by {run}:\n{left}");
    assert_eq!(images_of(tb, &repo), "", "no image of the failed build");
    let external = expect_success(
        &tb.user_sh("podman ps -a --external --format '{{.Names}} {{.Image}}'"),
        "buildah's containers",
    );
    assert!(!external.contains("tb-busybox"), "{external}");

    // Refused before anything is built: a fetch outside the proxy, an unpinned remote base.
    let c = tb.cyclix_bin();
    for (text, want) in [
        (
            "FROM localhost/cyclix-agent-python:latest\\nADD https://allowed.example/x /x\\n",
            "Containerfile:2: `ADD https://allowed.example/x` fetches over the network outside the build's proxy",
        ),
        (
            "FROM docker.io/library/node:22\\n",
            "Containerfile:1: `docker.io/library/node:22` is neither in podman's local storage nor pinned by digest",
        ),
    ] {
        let out = tb.user_sh(&format!(
            "cd ~/src/{t} && printf '{text}' > Containerfile && git -c user.name=t -c user.email=t@example.com commit -qam next && {c} images build --tenant {t}"
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
        assert!(stderr.contains("fix:"), "{stderr}");
    }
    assert_eq!(images_of(tb, &repo), "");
}

/// The lines of a documented CI job that compute `BEFORE` and run the twin.
fn documented(file: &str) -> String {
    let lines: Vec<String> = file
        .lines()
        .map(|l| l.trim().trim_start_matches("- ").to_string())
        .filter(|l| {
            l.starts_with("BEFORE=")
                || l.starts_with("case \"$BEFORE\"")
                || l.starts_with("cyclix twin ")
        })
        .collect();
    assert!(
        lines.iter().any(|l| l.starts_with("cyclix twin ")),
        "no `cyclix twin` line in:\n{file}"
    );
    lines.join("\n")
}

#[test]
fn the_documented_ci_jobs_twin_a_setup_change_and_skip_an_unchanged_setup() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let github = documented(include_str!("../../docs/ci/github-actions.yml"));
    let gitlab = documented(include_str!("../../docs/ci/gitlab-ci.yml"));
    let t = Tenant::new("e2e-ci")
        .file("ci/setup.sh", "echo v1\n")
        .gate_quick(r#"[python3, -m, pytest, -q, -p, "no:cacheprovider"]"#)
        .extra_yaml("setup: [ci/]")
        .write(tb);
    let bin_dir = tb
        .cyclix_bin()
        .rsplit_once('/')
        .map(|(d, _)| d.to_string())
        .expect("dir");
    let commit = |what: &str| {
        expect_success(
            &tb.user_sh(&format!(
                "cd ~/src/{t} && {what} && git -c user.name=t -c user.email=t@example.com commit -qam step && git rev-parse HEAD"
            )),
            "commit",
        )
        .trim()
        .to_string()
    };
    let a = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} rev-parse HEAD")),
        "HEAD",
    )
    .trim()
    .to_string();
    let b = commit("echo more >> README.md");
    let job = |script: &str, env: &str| {
        tb.user_sh(&format!(
            "cd ~/src/{t} && export PATH={bin_dir}:$PATH CYCLIX_TENANT={t} {env}\n{script}"
        ))
    };
    // Unchanged setup (only README.md): both jobs skip the twin and pass.
    for out in [
        job(&github, &format!("BEFORE={a} GITHUB_SHA={b}")),
        job(
            &gitlab,
            &format!("CI_COMMIT_BEFORE_SHA={a} CI_COMMIT_SHA={b}"),
        ),
    ] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("setup unchanged"), "{stdout}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("environments"));
    }
    // A setup file changed: the twin runs at the new commit and passes.
    let c = commit("echo v2 > ci/setup.sh");
    let out = job(&github, &format!("BEFORE={b} GITHUB_SHA={c}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("setup changed between") && stderr.contains("ci/setup.sh"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("twin of tenant {t} at {}", &c[..12])),
        "{stderr}"
    );
}

#[test]
fn a_devcontainer_json_builds_with_its_env_and_one_with_features_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let dc = "{\n  // JSON with comments\n  \"build\": { \"dockerfile\": \"Dockerfile\", \"context\": \"..\", \"args\": { \"GREETING\": \"hi\" } },\n  \"containerEnv\": { \"DC_MARK\": \"from-devcontainer\" },\n}\n";
    let dockerfile = "FROM localhost/cyclix-agent-python:latest\nARG GREETING\nRUN echo \"$GREETING\" > /opt/greeting\n";
    let t = Tenant::new("e2e-build-dc")
        .file(".devcontainer/devcontainer.json", dc)
        .file(".devcontainer/Dockerfile", dockerfile)
        .agent_build("{ devcontainer: .devcontainer/devcontainer.json }")
        .write(tb);
    let c = tb.cyclix_bin();
    let out = expect_success(
        &tb.user_sh(&format!("{c} images build --tenant {t} 2>/dev/null")),
        "images build --tenant",
    );
    let tag = out.trim().rsplit(' ').next().expect("tag").to_string();
    assert!(
        tag.starts_with(&format!("localhost/cyclix-build-{t}-agent:")),
        "{out}"
    );
    let got = expect_success(
        &tb.user_sh(&format!(
            "podman run --rm {tag} sh -c 'echo $DC_MARK; cat /opt/greeting'"
        )),
        "the image's env and build arg",
    );
    assert_eq!(got, "from-devcontainer\nhi\n");
    let with_features = "{ \"image\": \"localhost/cyclix-agent-python:latest\", \"features\": { \"ghcr.io/devcontainers/features/node:1\": {} } }\n";
    let out = tb.user_sh(&format!(
        "cd ~/src/{t} && printf '%s' '{with_features}' > .devcontainer/devcontainer.json && git -c user.name=t -c user.email=t@example.com commit -qam features && {c} images build --tenant {t}"
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(".devcontainer/devcontainer.json: `features` is not supported by cyclix")
            && stderr.contains("fix:"),
        "{stderr}"
    );
}

#[test]
fn a_build_is_stopped_with_its_run_and_dies_with_a_killed_cyclix() {
    // Issue 36 item 2: `cyclix stop` during a `RUN sleep` step ended only when systemd killed
    // cyclix 120 s later, with no record; a SIGKILLed cyclix left the step running.
    // Exclusive: buildah's working containers carry no mark of their build in `podman ps
    // --external`, so another test's build would be counted (and removed) as this one's.
    let _only = crate::common::testbed::exclusive();
    let tb = prepared();
    let t = Tenant::new("e2e-build-stop")
        .file(
            "ci/slow.Containerfile",
            "FROM localhost/cyclix-agent-python:latest\nRUN sleep 271\n",
        )
        .agent_build("{ containerfile: ci/slow.Containerfile }")
        .write(tb);
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -u
step() {{ pgrep -u "$(id -u)" -a -x sleep | grep -c ' 271$'; }}
wait_step() {{ for i in $(seq 1 1200); do [ "$(step)" -gt 0 ] && break; sleep 0.1; done; echo "$(step)"; }}
ext() {{ podman ps -a --external --format '{{{{.ID}}}} {{{{.Names}}}}' | sort; }}
# `--ta[g]`: the pattern does not match this script's own command line.
builders() {{ pgrep -u "$(id -u)" -f -- '--ta[g] localhost/cyclix-build-{t}-agent' | wc -l; }}
# A kept testbed may hold the image an earlier build completed: the steps must run.
podman images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep '^localhost/cyclix-build-{t}-agent:' | xargs -r podman rmi -f >/dev/null 2>&1
ext0=$(ext)
# 1. A stop during the build, through the unit.
systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null
systemctl --user start --no-block cyclix-run@{t}.service
echo "step_running=$(wait_step)"
{c} stop {t} >/tmp/{t}-stop.out 2>&1; echo "rc_stop=$?"
echo "steps_after_stop=$(step)"
echo "external_after_stop=$(ext | comm -13 <(echo "$ext0") - | wc -l)"
systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null
r1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' ~/.local/state/cyclix/runs/{t}/latest.json); echo "r1=$r1"
# 2. cyclix SIGKILLed during the build.
{c} run {t} >/tmp/{t}-kill.out 2>&1 & p=$!
echo "step_running_2=$(wait_step)"
kill -KILL $p; wait $p 2>/dev/null
echo "external_after_kill=$(ext | comm -13 <(echo "$ext0") - | wc -l)"
echo "builders_after_kill=$(builders)"
cd ~/.local/state/cyclix/runs/{t} && echo "dead=$(ls *.running 2>/dev/null | sed 's/[.]running$//')"
{c} leftovers >/tmp/{t}-left.out 2>&1; echo "leftovers_rc=$?"
echo "leftovers_dead=$(grep -c dead-run /tmp/{t}-left.out)"
echo "killed_said=$(tail -3 /tmp/{t}-kill.out | tr '\n' ' ')"
# 3. The next ordinary run (the step made quick, committed) converges the dead one and passes.
cd ~/src/{t} && sed -i 's/sleep 271/true/' ci/slow.Containerfile && git commit -qam quick
{c} run {t} >/tmp/{t}-next.out 2>&1; echo "rc_next=$?"
echo "steps_after_next=$(step)"
echo "builders_after_next=$(builders)"
echo "external_after_next=$(ext | comm -13 <(echo "$ext0") - | wc -l)"
# Whatever a failed assertion would leave of podman's killed build.
for c in $(ext | comm -13 <(echo "$ext0") -); do podman rm -f "${{c%% *}}" >/dev/null 2>&1; done
"#
    );
    let out = expect_success(&tb.user_sh(&script), "stop and kill during a build");
    let field = |k: &str| crate::common::kv(&out, k);
    // The positive controls: the step was running when each fault came.
    assert_ne!(field("step_running"), "0", "{out}");
    assert_ne!(field("step_running_2"), "0", "{out}");
    // 1. Stopped: the step is gone, the run recorded `interrupted` in phase build.
    assert_eq!(field("rc_stop"), "0", "{out}");
    assert_eq!(field("steps_after_stop"), "0", "{out}");
    // With its steps killed first, podman failed the step and removed buildah's working
    // container itself.
    assert_eq!(field("external_after_stop"), "0", "{out}");
    let r1 = field("r1");
    let rec1 = crate::common::run::record_of(tb, &t, &r1);
    assert_eq!(rec1["result"], "interrupted", "{rec1:#}");
    assert_eq!(rec1["failed_phase"], "build", "{rec1:#}");
    assert_eq!(
        leftovers(tb, &r1, &t).trim(),
        "",
        "the stopped run left something"
    );
    // 2. Killed: podman died with cyclix (pdeathsig), leaving buildah's working container (the
    // positive control of its removal below); what the build made is the dead run's until
    // converged, and `leftovers` says so.
    assert_ne!(field("external_after_kill"), "0", "{out}");
    // Once (a full suite, 12:07) podman's build outlived the kill and committed the image
    // 271 s later; not reproduced since (`builders_after_kill` is 0 here, printed for the
    // record). Convergence kills any process joining the dead holder's network namespace by
    // argv (`images::build::kill_builders`, unit-tested with a positive control); after the
    // next run none may be left.
    let dead = field("dead");
    assert!(!dead.is_empty(), "{out}");
    assert_ne!(field("leftovers_rc"), "0", "{out}");
    assert_ne!(field("leftovers_dead"), "0", "{out}");
    // 3. The next run converges it (the step killed in its holder's network) and passes.
    assert_eq!(field("rc_next"), "0", "{out}");
    assert_eq!(field("steps_after_next"), "0", "{out}");
    assert_eq!(
        field("builders_after_next"),
        "0",
        "the killed run's build was killed: {out}"
    );
    // The working container is tied through the network namespace buildah noted for it.
    assert_eq!(field("external_after_next"), "0", "{out}");
    assert_eq!(record(tb, &t)["result"], "passed");
    assert_eq!(
        leftovers(tb, &dead, &t).trim(),
        "",
        "the killed run was converged"
    );
}
