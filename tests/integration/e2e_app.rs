//! The project's own app as a service (issue 15, item 3): `services[].worktree: read_only`
//! runs the run's work tree — the project — with its own command, on a port cyclix picked,
//! behind its health check. The service sees the tree as the agent changes it, but can never
//! write it (the agent is its one writer); its address is in the context file and `cyclix status` of the
//! run in progress (and in a preset agent's prompt: `render::prompt`'s unit test).

use crate::common::run::{inject_mid_run, leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The project's app: serves files of `/work` as they are now, and `/write`, what became of
/// its own attempts to write the work tree and (the positive control) its `/tmp`.
const APP: &str = r#"import errno, http.server, os

def attempt(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "WROTE"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

WROTE = "work=%s tmp=%s" % (attempt("/work/written-by-service"), attempt("/tmp/written-by-service"))

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/write":
            body = WROTE.encode()
        else:
            try:
                body = open("/work" + self.path, "rb").read()
            except OSError:
                self.send_error(404)
                return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", int(os.environ["CYCLIX_PORT"])), H).serve_forever()
"#;

/// The agent: asks the app for a file of the base commit, changes it and asks again (the app
/// sees the tree live), asks what the app's writes did, and commits the evidence; then holds
/// the run open until the test releases it.
const AGENT: &str = r#"set -eu
get() { python3 -c 'import sys, urllib.request as u; o = u.build_opener(u.ProxyHandler({})); sys.stdout.write(o.open("http://" + sys.argv[1], timeout=5).read().decode())' "$CYCLIX_SERVICE_APP$1"; }
base=$(get /marker.txt)
echo "changed by the agent" > marker.txt
live=$(get /marker.txt)
write=$(get /write)
if [ -e written-by-service ]; then file=present; else file=absent; fi
tree=$(python3 -c 'import json, os; print([s for s in json.load(open(os.environ["CYCLIX_CONTEXT"]))["services"] if s["name"] == "app"][0]["worktree"])')
printf 'base=%s live=%s %s service-file=%s context=%s\n' "$base" "$live" "$write" "$file" "$tree" > app-evidence.txt
git add app-evidence.txt marker.txt
git commit -q -m "app evidence"
i=0; while [ "$i" -lt 600 ] && [ ! -e /tmp/release ]; do sleep 0.1; i=$((i + 1)); done
"#;

/// The app service: the python agent image, the project's `app.py` from the work tree.
const SERVICE: &str = "  - name: app
    image: localhost/cyclix-agent-python:latest
    unpinned_local_image: true
    worktree: read_only
    command: [python3, app.py]
    health:
      command: [python3, -c, \"import os, urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:' + os.environ['CYCLIX_PORT'] + '/write', timeout=1)\"]
      interval: 1s
      retries: 60";

#[test]
fn the_projects_app_runs_the_work_tree_live_read_only_and_shows_in_status() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-app")
        .file("app.py", APP)
        .file("marker.txt", "from the base commit\n")
        .file("agent.sh", AGENT)
        .task("\"Check the app.\"")
        .agent_cmd("[sh, /work/agent.sh]")
        .gate_cmd("[cat, app-evidence.txt]")
        .gate_timeout("1m")
        .services(SERVICE)
        .write(tb);
    let c = tb.cyclix_bin();
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{c} status {t} > /tmp/app-status-$run.txt 2>&1
             podman exec \"$a\" touch /tmp/release"
        ),
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert_eq!(rec["services"][0]["worktree"], true, "{rec:#}");
    let port = rec["services"][0]["port"].as_u64().expect("port");
    let branch = rec["branch"].as_str().expect("branch");
    let evidence = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} show {branch}:app-evidence.txt")),
        "the committed evidence",
    );
    // The app served the base commit's file, then the agent's change (it runs the tree live);
    // its own write to the tree was refused read-only while its write to /tmp worked (the
    // positive control: the attempt itself would have written), and no file of it is in the tree.
    assert_eq!(
        evidence.trim(),
        "base=from the base commit live=changed by the agent work=EROFS tmp=WROTE service-file=absent context=/work",
        "{rec:#}"
    );
    let tree = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} ls-tree -r --name-only {branch}")),
        "the delivered tree",
    );
    assert!(!tree.contains("written-by-service"), "{tree}");
    let status = expect_success(
        &tb.user_sh(&format!(
            "cat /tmp/app-status-{run}.txt; rm -f /tmp/app-status-{run}.txt"
        )),
        "cyclix status mid-run",
    );
    assert!(
        status.contains(&format!(
            "  service app at 127.0.0.1:{port} (in the pod; runs /work)"
        )),
        "{status}"
    );
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "left behind by {run}:\n{left}");
}
