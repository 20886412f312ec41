//! `cyclix twin TENANT`, the pure half: what the two environments and the reference produced
//! goes in, a verdict and the report come out. No I/O (guarded by tests/integration/architecture.rs).
//!
//! The twin fails on (one [`FailureClass`] each):
//! - `build`: an environment (or the reference) could not be built, started or run to the end
//!   of its quick suite;
//! - `probe`: a boundary probe failed in an environment;
//! - `results`: per-test results differ between the environments or from the reference (a
//!   test skipped in one and passed in another is a difference; a test missing on one side
//!   too), or, without `JUnit` results, the exit status or the normalised output digest differ;
//! - `counts`: the passed/failed/skipped/error counts differ;
//! - `shared`: the two rendered plans share a name or address ([`shared_names`]);
//! - `leftover`: anything was left after teardown.
//!
//! Per-test results ([`junit`]): the quick suite may write `JUnit` XML to `$CYCLIX_RESULTS`.
//! Without a results file the comparison falls back to the exit status plus a digest of the
//! suite's normalised output ([`output_digest`]), and the report says so.

pub mod junit;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::render::plan::{Bind, RunPlan};

/// The report's JSON schema name.
pub const SCHEMA: &str = "cyclix-twin/1";
/// The environment variable naming the results file in the quick suite's container.
pub const RESULTS_ENV: &str = "CYCLIX_RESULTS";
/// Where the results directory appears in the quick suite's container (read-write).
pub const RESULTS_DIR_PATH: &str = "/cyclix/results";
/// The results file's name in that directory.
pub const RESULTS_FILE: &str = "junit.xml";
/// The results directory's name in the run directory on the host.
pub const RESULTS_DIR: &str = "results";

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// It passed.
    Passed,
    /// An assertion failed (`<failure>`).
    Failed,
    /// It was skipped (`<skipped>`, also pytest's xfail).
    Skipped,
    /// It could not run (`<error>`: a fixture or collection error).
    Error,
}

impl TestOutcome {
    /// `passed`, `failed`, `skipped`, `error`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed => "failed",
            TestOutcome::Skipped => "skipped",
            TestOutcome::Error => "error",
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCase {
    /// `CLASSNAME::NAME` (see [`junit`]).
    pub name: String,
    /// How it ended.
    pub outcome: TestOutcome,
}

/// What the quick suite left to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "contract")]
pub enum Results {
    /// Per-test results from the `JUnit` XML file at `$CYCLIX_RESULTS`.
    Junit {
        /// The test cases, in report order.
        tests: Vec<TestCase>,
    },
    /// No results file: the SHA-256 of the normalised output ([`output_digest`]).
    Digest {
        /// Lowercase hex.
        sha256: String,
    },
    /// A results file that could not be read or parsed.
    Unreadable {
        /// Why.
        reason: String,
    },
}

/// One run of the quick suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuiteRun {
    /// Its exit status.
    pub exit: i32,
    /// What it left to compare.
    pub results: Results,
}

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Passed tests.
    pub passed: usize,
    /// Failed tests.
    pub failed: usize,
    /// Skipped tests.
    pub skipped: usize,
    /// Tests that could not run.
    pub error: usize,
}

impl Counts {
    /// The counts of `tests`.
    #[must_use]
    pub fn of(tests: &[TestCase]) -> Self {
        let mut c = Counts::default();
        for t in tests {
            match t.outcome {
                TestOutcome::Passed => c.passed += 1,
                TestOutcome::Failed => c.failed += 1,
                TestOutcome::Skipped => c.skipped += 1,
                TestOutcome::Error => c.error += 1,
            }
        }
        c
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped, {} error",
            self.passed, self.failed, self.skipped, self.error
        )
    }
}

/// What one side (environment A, B or the reference) produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Side {
    /// `A`, `B` or `reference`.
    pub label: String,
    /// Its run id.
    pub run_id: String,
    /// Its podman networks (`none` for the reference's `Network=none` container).
    pub networks: Vec<String>,
    /// Its internal subnet, when it has one.
    pub subnet: Option<String>,
    /// Its pod, when it has one.
    pub pod: Option<String>,
    /// How many boundary probes passed (environments only).
    pub probes_passed: usize,
    /// Failed probes and other boundary findings, each `ID: expected …, got …`.
    pub probe_failures: Vec<String>,
    /// The first error that stopped it, naming its phase (`phase start: …`).
    pub error: Option<String>,
    /// The quick suite's run, when it ran to its end.
    pub suite: Option<SuiteRun>,
    /// What was left after its teardown.
    pub leftovers: Vec<String>,
    /// When it was up (probes passed), ms since the Unix epoch.
    pub up_ms: Option<u128>,
    /// When its teardown started, ms since the Unix epoch.
    pub down_ms: Option<u128>,
}

/// The kinds of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// A side could not be built, started or run.
    Build,
    /// A boundary probe failed.
    Probe,
    /// Results differ.
    Results,
    /// Outcome counts differ.
    Counts,
    /// The two environments share a name or address.
    Shared,
    /// Something was left after teardown.
    Leftover,
}

impl FailureClass {
    /// The class's name in the report.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Build => "build",
            FailureClass::Probe => "probe",
            FailureClass::Results => "results",
            FailureClass::Counts => "counts",
            FailureClass::Shared => "shared",
            FailureClass::Leftover => "leftover",
        }
    }
}

/// One reason the twin failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Its class.
    pub class: FailureClass,
    /// What, naming the side and the object.
    pub detail: String,
}

/// One row of the side-by-side table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The test.
    pub test: String,
    /// Its outcome in A, B and the reference (`None`: not in that side's results).
    pub outcomes: [Option<TestOutcome>; 3],
    /// Whether the three differ.
    pub differs: bool,
}

/// A value both rendered plans hold at identity fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shared {
    /// The value.
    pub value: String,
    /// Where plan A holds it (`networks[0].name`).
    pub a: String,
    /// Where plan B holds it.
    pub b: String,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// No failure.
    pub passed: bool,
    /// Every failure, in class order.
    pub failures: Vec<Failure>,
    /// The per-test table (empty without `JUnit` results on any side).
    pub rows: Vec<Row>,
    /// Outcome counts of A, B and the reference, where they have `JUnit` results.
    pub counts: [Option<Counts>; 3],
}

/// Judges the three sides (`[A, B, reference]`) and the shared names of the two plans.
#[must_use]
pub fn judge(sides: &[Side; 3], shared: &[Shared]) -> Verdict {
    let mut failures = Vec::new();
    let mut fail = |class, detail: String| failures.push(Failure { class, detail });
    for s in sides {
        let who = who(s);
        if let Some(e) = &s.error {
            fail(FailureClass::Build, format!("{who}: {e}"));
        } else if s.suite.is_none() {
            fail(
                FailureClass::Build,
                format!("{who}: the quick suite did not run to its end"),
            );
        }
        for p in &s.probe_failures {
            fail(FailureClass::Probe, format!("{who}: {p}"));
        }
        for l in &s.leftovers {
            fail(FailureClass::Leftover, format!("{who}: {l}"));
        }
    }
    let tests: [Option<&Vec<TestCase>>; 3] = std::array::from_fn(|i| match &sides[i].suite {
        Some(SuiteRun {
            results: Results::Junit { tests },
            ..
        }) => Some(tests),
        _ => None,
    });
    let rows = rows(&tests);
    let counts: [Option<Counts>; 3] = std::array::from_fn(|i| tests[i].map(|t| Counts::of(t)));
    let suites: Vec<&SuiteRun> = sides.iter().filter_map(|s| s.suite.as_ref()).collect();
    if suites.len() == 3 {
        let exits: Vec<i32> = suites.iter().map(|s| s.exit).collect();
        if exits.iter().any(|e| *e != exits[0]) {
            fail(
                FailureClass::Results,
                format!(
                    "exit status of the quick suite: A {}, B {}, reference {}",
                    exits[0], exits[1], exits[2]
                ),
            );
        }
        compare_results(sides, &rows, &counts, &mut fail);
    }
    for s in shared {
        fail(
            FailureClass::Shared,
            format!(
                "`{}` is in both environments (A {}, B {})",
                s.value, s.a, s.b
            ),
        );
    }
    failures.sort_by_key(|f| f.class);
    Verdict {
        passed: failures.is_empty(),
        failures,
        rows,
        counts,
    }
}

fn who(s: &Side) -> String {
    if s.label == "reference" {
        format!("reference ({})", s.run_id)
    } else {
        format!("env {} ({})", s.label, s.run_id)
    }
}

fn compare_results(
    sides: &[Side; 3],
    rows: &[Row],
    counts: &[Option<Counts>; 3],
    fail: &mut impl FnMut(FailureClass, String),
) {
    let contract = |s: &Side| match s.suite.as_ref().map(|r| &r.results) {
        Some(Results::Junit { .. }) => "JUnit results",
        Some(Results::Digest { .. }) => "no results file",
        Some(Results::Unreadable { .. }) | None => "an unreadable results file",
    };
    for s in sides {
        if let Some(SuiteRun {
            results: Results::Unreadable { reason },
            ..
        }) = &s.suite
        {
            fail(
                FailureClass::Results,
                format!("{}: the results file is unreadable: {reason}", who(s)),
            );
        }
    }
    let kinds: Vec<&str> = sides.iter().map(contract).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        fail(
            FailureClass::Results,
            format!(
                "the sides left different kinds of results: A {}, B {}, reference {}",
                kinds[0], kinds[1], kinds[2]
            ),
        );
        return;
    }
    let digests: Vec<&str> = sides
        .iter()
        .filter_map(|s| match s.suite.as_ref().map(|r| &r.results) {
            Some(Results::Digest { sha256 }) => Some(sha256.as_str()),
            _ => None,
        })
        .collect();
    if digests.len() == 3 && digests.iter().any(|d| *d != digests[0]) {
        fail(
            FailureClass::Results,
            format!(
                "normalised output differs (no results file, so the output digest is compared): A {}, B {}, reference {}",
                short(digests[0]),
                short(digests[1]),
                short(digests[2])
            ),
        );
    }
    let cell = |o: Option<TestOutcome>| o.map_or("missing", TestOutcome::as_str);
    for r in rows.iter().filter(|r| r.differs) {
        fail(
            FailureClass::Results,
            format!(
                "{}: A {}, B {}, reference {}",
                r.test,
                cell(r.outcomes[0]),
                cell(r.outcomes[1]),
                cell(r.outcomes[2])
            ),
        );
    }
    if let [Some(a), Some(b), Some(r)] = counts
        && (a != b || a != r)
    {
        fail(FailureClass::Counts, format!("A {a}; B {b}; reference {r}"));
    }
}

fn short(d: &str) -> &str {
    d.get(..12).unwrap_or(d)
}

fn rows(tests: &[Option<&Vec<TestCase>>; 3]) -> Vec<Row> {
    if tests.iter().all(Option::is_none) {
        return Vec::new();
    }
    // Report order of the first side that has the test; names first seen later go after.
    let mut order: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut by_side: [BTreeMap<&str, TestOutcome>; 3] = Default::default();
    for (i, t) in tests.iter().enumerate() {
        for c in t.iter().flat_map(|v| v.iter()) {
            by_side[i].insert(c.name.as_str(), c.outcome);
            if seen.insert(c.name.as_str()) {
                order.push(c.name.as_str());
            }
        }
    }
    order
        .into_iter()
        .map(|name| {
            let outcomes: [Option<TestOutcome>; 3] =
                std::array::from_fn(|i| by_side[i].get(name).copied());
            Row {
                test: name.to_string(),
                differs: outcomes.iter().any(|o| *o != outcomes[0]),
                outcomes,
            }
        })
        .collect()
}

/// Plan fields whose values two environments share by design, and why. Every other string or
/// number in a rendered plan is an identity (a name, address, port, path or database name) and
/// must differ between the two environments: a field added to the plan later is compared
/// unless it is listed here (fail closed). `F#name` is the name of a `(name, value)` pair in
/// `F`, `F[NAME]` its value, `F[*]` any value of `F`, `P.F` the field `F` of an object under
/// the key `P` (`services.name`, not `networks.name`), `P.*` every field of such an object.
pub const SHAREABLE: &[(&str, &str)] = &[
    ("tenant", "both environments belong to the tenant"),
    ("tier", "both have the tier the gate granted"),
    ("warnings", "notices about the spec"),
    (
        "description",
        "unit descriptions (they name the run anyway)",
    ),
    ("image", "images are read-only and shared by design"),
    ("net", "the kind of networking (pod, none)"),
    ("network", "an index into the plan's own networks"),
    ("target", "a path inside the container"),
    ("tmpfs", "a tmpfs private to the container"),
    ("exec", "the spec's argv"),
    ("exec_key", "the spec key of the argv"),
    ("exec_key_offset", "a count of wrapper words"),
    ("workdir", "a path inside the container"),
    ("memory_bytes", "a limit from the spec"),
    ("cpu_millis", "a limit from the spec"),
    ("pids", "a limit from the spec"),
    ("runtime_max_s", "a budget from the spec"),
    ("start_timeout_s", "a budget"),
    ("stop_signal", "a signal name"),
    ("env#name", "variable names"),
    ("labels#name", "label keys"),
    ("secrets[*]", "the variable a per-run secret becomes"),
    ("env[HOME]", "/tmp inside the container"),
    ("env[NO_PROXY]", "loopback addresses inside the pod"),
    ("env[no_proxy]", "loopback addresses inside the pod"),
    ("env[CYCLIX_TASK]", "a path inside the container"),
    ("env[CYCLIX_TENANT]", "the tenant"),
    ("env[CYCLIX_RESULTS]", "a path inside the container"),
    ("labels[io.cyclix.tenant]", "the tenant"),
    ("labels[io.cyclix.role]", "the container's role"),
    ("env[CYCLIX_SERVICE]", "the spec's service name"),
    ("env[CYCLIX_CONTEXT]", "a path inside the container"),
    ("services.name", "the spec's service name"),
    ("services.key", "the spec key of the service"),
    ("services.env_var", "a variable name"),
    ("services.health", "the spec's health-check argv"),
    ("env[CYCLIX_DATA]", "a path inside the container"),
    ("env[PGDATA]", "a path inside the container"),
    ("volumes.volume", "an index into the plan's own volumes"),
    ("health.*", "the spec's health check: argv and timings"),
];

fn shareable(field: &str, scoped: &str) -> bool {
    SHAREABLE.iter().any(|(f, _)| {
        *f == scoped
            || f.strip_suffix(".*")
                .is_some_and(|p| scoped.strip_prefix(p).is_some_and(|r| r.starts_with('.')))
    }) || SHAREABLE.iter().any(|(f, _)| {
        f.strip_suffix("[*]").map_or(*f == field, |prefix| {
            field.starts_with(prefix) && field[prefix.len()..].starts_with('[')
        })
    })
}

/// One scalar of a plan: where, which field (and `PARENT.FIELD`), what.
struct Leaf {
    path: String,
    field: String,
    scoped: String,
    value: String,
}

fn leaves(v: &Value, path: &str, field: &str, out: &mut Vec<Leaf>) {
    walk(v, path, field, "", out);
}

/// `parent` is the key of the object that holds `field`.
fn walk(v: &Value, path: &str, field: &str, parent: &str, out: &mut Vec<Leaf>) {
    let leaf = |value: String| Leaf {
        path: path.to_string(),
        field: field.to_string(),
        scoped: format!("{parent}.{field}"),
        value,
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                // A read-only bind's source is shared by nothing either side can change.
                if k == "source" && m.get("read_only") == Some(&Value::Bool(true)) {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, &p, k, field, out);
            }
        }
        Value::Array(items) => {
            let pairs = !items.is_empty()
                && items.iter().all(|i| {
                    i.as_array()
                        .is_some_and(|p| p.len() == 2 && p[0].is_string())
                });
            for (i, x) in items.iter().enumerate() {
                match x.as_array().filter(|_| pairs) {
                    Some(p) => {
                        let name = p[0].as_str().unwrap_or_default();
                        out.push(Leaf {
                            path: format!("{path}[{i}]#name"),
                            field: format!("{field}#name"),
                            scoped: format!("{parent}.{field}#name"),
                            value: name.to_string(),
                        });
                        walk(
                            &p[1],
                            &format!("{path}[{name}]"),
                            &format!("{field}[{name}]"),
                            parent,
                            out,
                        );
                    }
                    None => walk(x, &format!("{path}[{i}]"), field, parent, out),
                }
            }
        }
        Value::String(s) => out.push(leaf(s.clone())),
        Value::Number(n) => out.push(leaf(n.to_string())),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The identity values of a plan (see [`SHAREABLE`]) as `(path, value)`, minus bare loopback
/// addresses and the values shared by design (`by_design`: a value equal to one of them, or below it as a path).
fn identities(plan: &Value, by_design: &[String]) -> Vec<(String, String)> {
    let mut all = Vec::new();
    leaves(plan, "", "", &mut all);
    all.into_iter()
        .filter(|l| !shareable(&l.field, &l.scoped))
        // A bare loopback address is private to each pod's network namespace (with a port it
        // is still compared: the port is the identity).
        .filter(|l| !matches!(l.value.as_str(), "127.0.0.1" | "::1" | "localhost"))
        .filter(|l| {
            !by_design
                .iter()
                .any(|d| l.value == *d || l.value.starts_with(&format!("{d}/")))
        })
        .map(|l| (l.path, l.value))
        .collect()
}

/// Compares two rendered plans generically: every identity value of plan A (a string or
/// number at a field not in [`SHAREABLE`]) that is also an identity value of plan B is shared.
/// `by_design` lists values both may hold (none since each side has a private repository;
/// kept for values a future topology shares on purpose). Returns how many identity values A has, and the shared
/// ones (each value once).
#[must_use]
pub fn shared_names(a: &Value, b: &Value, by_design: &[String]) -> (usize, Vec<Shared>) {
    let ia = identities(a, by_design);
    let mut ib: BTreeMap<&str, &str> = BTreeMap::new();
    let b_ids = identities(b, by_design);
    for (p, v) in &b_ids {
        ib.entry(v.as_str()).or_insert(p.as_str());
    }
    let mut out: Vec<Shared> = Vec::new();
    for (p, v) in &ia {
        if let Some(bp) = ib.get(v.as_str())
            && !out.iter().any(|s| &s.value == v)
        {
            out.push(Shared {
                value: v.clone(),
                a: p.clone(),
                b: (*bp).to_string(),
            });
        }
    }
    (ia.len(), out)
}

/// Makes a plan's gate container run the quick suite with a results directory: `argv` as its
/// command, `results_host_dir` mounted read-write at [`RESULTS_DIR_PATH`] and
/// `CYCLIX_RESULTS=RESULTS_DIR_PATH/RESULTS_FILE` in its environment. Everything else of the
/// gate (Network=none, read-only root and worktree, dropped capabilities) stays.
///
/// # Errors
/// When the plan has no gate container (a non-container tier).
pub fn quick_gate(
    plan: &mut RunPlan,
    argv: &[String],
    results_host_dir: &str,
) -> Result<(), String> {
    let gate_stem = plan.units.gate.trim_end_matches(".service").to_string();
    let gate = plan
        .containers
        .iter_mut()
        .find(|c| c.stem == gate_stem)
        .ok_or_else(|| format!("the plan has no gate container {gate_stem}"))?;
    gate.exec = argv.to_vec();
    gate.exec_key = "gate.quick".into();
    gate.binds.push(Bind {
        source: results_host_dir.to_string(),
        target: RESULTS_DIR_PATH.into(),
        read_only: false,
    });
    gate.env.push((
        RESULTS_ENV.into(),
        format!("{RESULTS_DIR_PATH}/{RESULTS_FILE}"),
    ));
    Ok(())
}

/// The digest the comparison falls back to without a results file: SHA-256 (hex) of the
/// suite's output lines after normalising what differs between runs without a difference in
/// results: podman's own event lines and conmon's warnings are dropped, empty lines too; every
/// run id in `run_ids` becomes `RUN`, and lines about the run's own units and containers
/// (`cyclix-RUN-…`, written by systemd and podman) are dropped; durations (`0.03s`, `12ms`, `1.5 s`) become `Ns`/`Nms`;
/// hex addresses (`0x7f3a…`) become `0xADDR`.
#[must_use]
pub fn output_digest(lines: &[String], run_ids: &[&str]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for line in normalise(lines, run_ids) {
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The normalised lines [`output_digest`] hashes.
#[must_use]
pub fn normalise(lines: &[String], run_ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<&str> = run_ids.iter().copied().filter(|i| !i.is_empty()).collect();
    ids.sort_by_key(|i| std::cmp::Reverse(i.len())); // longest first: `x-ref` before `x`
    lines
        .iter()
        .filter(|l| !l.contains(" UTC m=+") && !l.starts_with("conmon ") && !l.trim().is_empty())
        .map(|l| {
            let mut l = l.clone();
            for id in &ids {
                l = l.replace(id, "RUN");
            }
            hex_addresses(&l.split(' ').map(word).collect::<Vec<_>>().join(" "))
        })
        // The container id `podman run -d` prints.
        .filter(|l| !(l.len() == 64 && l.chars().all(|c| c.is_ascii_hexdigit())))
        // systemd's and podman's lines about the run's own units and containers
        // (`cyclix-RUN-gate.service: Consumed 1.2s CPU time`) are not the suite's output.
        .filter(|l| !l.contains("cyclix-RUN"))
        .collect()
}

fn word(w: &str) -> String {
    let core = w.trim_matches(|c: char| {
        matches!(
            c,
            '(' | ')' | ',' | ';' | ':' | '[' | ']' | '<' | '>' | '"' | '\''
        )
    });
    let (lead, rest) = w.split_at(w.find(core).unwrap_or(0));
    let tail = &rest[core.len()..];
    let is_num = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_digit() || c == '.')
            && s.chars().next().is_some_and(|c| c.is_ascii_digit())
    };
    let replaced = if let Some(n) = core.strip_suffix("ms").filter(|n| is_num(n)) {
        let _ = n;
        "Nms".to_string()
    } else if core.strip_suffix('s').is_some_and(is_num) {
        "Ns".to_string()
    } else {
        core.to_string()
    };
    format!("{lead}{replaced}{tail}")
}

/// Why the quick suite could not start at all, if so, from its exit status and output: `podman
/// run` exits 125 (podman failed), 126 (the command cannot be invoked) or 127 (not found);
/// under `--init` (cyclix's containers run catatonit as PID 1, Quadlet `RunInit=true`) a
/// command that cannot be executed makes catatonit print `failed to exec pid1` and exit 1.
#[must_use]
pub fn cannot_start(exit: i32, output: &[String]) -> Option<&'static str> {
    let catatonit = output
        .iter()
        .any(|l| l.contains("(catatonit:") && l.contains("failed to exec pid1"));
    match exit {
        125 => Some("podman failed to run the container"),
        126 => Some("the command cannot be invoked"),
        127 => Some("the command was not found"),
        _ if catatonit => {
            Some("the command could not be executed (catatonit: failed to exec pid1)")
        }
        _ => None,
    }
}

/// Every `0x` followed by hex digits (an address in a repr) becomes `0xADDR`.
fn hex_addresses(l: &str) -> String {
    let mut out = String::with_capacity(l.len());
    let mut rest = l;
    while let Some(i) = rest.find("0x") {
        let after = &rest[i + 2..];
        let n = after
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(after.len());
        out.push_str(&rest[..i]);
        if n == 0 {
            out.push_str("0x");
        } else {
            out.push_str("0xADDR");
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}

/// The whole report (`--json`: schema [`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The tenant.
    pub tenant: String,
    /// The commit both environments and the reference were built from (full sha).
    pub commit: String,
    /// The quick suite's argv.
    pub quick: Vec<String>,
    /// A, B and the reference.
    pub sides: [Side; 3],
    /// How many identity values of plan A were compared with plan B.
    pub names_compared: usize,
    /// Values both plans hold (each a failure).
    pub shared: Vec<Shared>,
    /// How long both environments were up at the same time, in ms.
    pub overlap_ms: Option<u128>,
    /// The verdict.
    pub verdict: Verdict,
}

impl Report {
    /// Builds the report: judges the sides and the shared names.
    #[must_use]
    pub fn new(
        tenant: String,
        commit: String,
        quick: Vec<String>,
        sides: [Side; 3],
        names: (usize, Vec<Shared>),
    ) -> Self {
        let verdict = judge(&sides, &names.1);
        let overlap_ms = match (&sides[0], &sides[1]) {
            (
                Side {
                    up_ms: Some(ua),
                    down_ms: Some(da),
                    ..
                },
                Side {
                    up_ms: Some(ub),
                    down_ms: Some(db),
                    ..
                },
            ) => (*da).min(*db).checked_sub((*ua).max(*ub)),
            _ => None,
        };
        Report {
            schema: SCHEMA,
            tenant,
            commit,
            quick,
            sides,
            names_compared: names.0,
            shared: names.1,
            overlap_ms,
            verdict,
        }
    }

    /// The human report: the sides side by side, the per-test table (differing rows marked
    /// `*` and `<- differs`), the failures and a verdict line.
    #[must_use]
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "cyclix twin {} @ {} — quick suite: {}",
            self.tenant,
            self.commit.get(..12).unwrap_or(&self.commit),
            self.quick.join(" ")
        );
        let contract = match self.sides.iter().find_map(|x| x.suite.as_ref()) {
            Some(SuiteRun {
                results: Results::Junit { .. },
                ..
            }) => "per-test results (JUnit XML at $CYCLIX_RESULTS)".to_string(),
            Some(SuiteRun {
                results: Results::Digest { .. },
                ..
            }) => "no results file: exit status + normalised output digest compared".to_string(),
            _ => "-".to_string(),
        };
        let _ = writeln!(s, "compared: {contract}");
        self.sides_text(&mut s);
        if let Some(o) = self.overlap_ms {
            let _ = writeln!(s, "both environments were up at the same time for {o} ms");
        }
        if !self.verdict.rows.is_empty() {
            let tw = self
                .verdict
                .rows
                .iter()
                .map(|r| r.test.chars().count())
                .max()
                .unwrap_or(4)
                .max(4);
            let _ = writeln!(
                s,
                "\n  {:<tw$}  {:<8} {:<8} reference",
                "test", "env A", "env B"
            );
            for r in &self.verdict.rows {
                let c = |i: usize| r.outcomes[i].map_or("missing", TestOutcome::as_str);
                let row = format!(
                    "{} {:<tw$}  {:<8} {:<8} {:<9}{}",
                    if r.differs { "*" } else { " " },
                    r.test,
                    c(0),
                    c(1),
                    c(2),
                    if r.differs { "  <- differs" } else { "" }
                );
                let _ = writeln!(s, "{}", row.trim_end());
            }
        }
        let _ = writeln!(
            s,
            "\nshared names: {} ({} identity values of env A compared with env B)",
            if self.shared.is_empty() {
                "none".to_string()
            } else {
                self.shared.len().to_string()
            },
            self.names_compared
        );
        for f in &self.verdict.failures {
            let _ = writeln!(s, "  [{}] {}", f.class.as_str(), f.detail);
        }
        let _ = writeln!(s, "{}", self.verdict_line());
        s
    }

    /// The sides, one column each.
    fn sides_text(&self, s: &mut String) {
        // Each column as wide as its longest cell (run ids and network names are long).
        let widths: Vec<usize> = self
            .sides
            .iter()
            .map(|x| {
                [
                    x.run_id.len(),
                    x.networks.join(",").len(),
                    x.pod.as_ref().map_or(0, String::len),
                    12,
                ]
                .into_iter()
                .max()
                .unwrap_or(12)
            })
            .collect();
        let mut line = |k: &str, f: &dyn Fn(&Side) -> String| {
            let _ = write!(s, "{k:<22}");
            for (side, w) in self.sides.iter().zip(&widths) {
                let _ = write!(s, "  {:<w$}", f(side));
            }
            s.truncate(s.trim_end().len());
            s.push('\n');
        };
        line("", &|x| {
            if x.label == "reference" {
                "reference".into()
            } else {
                format!("env {}", x.label)
            }
        });
        line("run", &|x| x.run_id.clone());
        line("network", &|x| x.networks.join(","));
        line("subnet", &|x| {
            x.subnet.clone().unwrap_or_else(|| "-".into())
        });
        line("pod", &|x| x.pod.clone().unwrap_or_else(|| "-".into()));
        line("probes", &|x| {
            if x.label == "reference" {
                "- (no network)".into()
            } else if x.probe_failures.is_empty() {
                format!("{} passed", x.probes_passed)
            } else {
                format!("{} FAILED", x.probe_failures.len())
            }
        });
        line("quick suite exit", &|x| {
            x.suite
                .as_ref()
                .map_or_else(|| "did not run".into(), |r| r.exit.to_string())
        });
        line("passed/failed/skip/err", &|x| match &x.suite {
            Some(SuiteRun {
                results: Results::Junit { tests },
                ..
            }) => {
                let c = Counts::of(tests);
                format!("{}/{}/{}/{}", c.passed, c.failed, c.skipped, c.error)
            }
            Some(SuiteRun {
                results: Results::Digest { sha256 },
                ..
            }) => format!("digest {}", short(sha256)),
            Some(SuiteRun {
                results: Results::Unreadable { .. },
                ..
            }) => "unreadable results".into(),
            None => "-".into(),
        });
        line("leftovers", &|x| {
            if x.leftovers.is_empty() {
                "none".into()
            } else {
                format!("{}", x.leftovers.len())
            }
        });
    }

    /// `verdict: PASS …` or `verdict: FAIL …`.
    #[must_use]
    pub fn verdict_line(&self) -> String {
        if self.verdict.passed {
            let what = match self.verdict.counts[0] {
                Some(c) => format!("{} tests, {c}", self.verdict.rows.len()),
                None => "the same exit status and output".into(),
            };
            format!(
                "verdict: PASS — env A, env B and the reference agree ({what}); no shared names; nothing left"
            )
        } else {
            let mut classes: Vec<&str> = self
                .verdict
                .failures
                .iter()
                .map(|f| f.class.as_str())
                .collect();
            classes.dedup();
            format!(
                "verdict: FAIL — {} problem(s): {}",
                self.verdict.failures.len(),
                classes.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, outcome: TestOutcome) -> TestCase {
        TestCase {
            name: name.into(),
            outcome,
        }
    }

    #[allow(clippy::unnecessary_wraps)] // reads as a side's `suite`
    fn junit(exit: i32, tests: Vec<TestCase>) -> Option<SuiteRun> {
        Some(SuiteRun {
            exit,
            results: Results::Junit { tests },
        })
    }

    fn side(label: &str, suite: Option<SuiteRun>) -> Side {
        Side {
            label: label.into(),
            run_id: format!("x-{label}"),
            suite,
            probes_passed: 40,
            ..Side::default()
        }
    }

    /// The demo at its base commit: one test passes, one fails, everywhere.
    fn demo() -> [Side; 3] {
        let suite = || {
            junit(
                1,
                vec![
                    t("tests.test_calc::test_add", TestOutcome::Passed),
                    t("tests.test_calc::test_subtract", TestOutcome::Failed),
                ],
            )
        };
        [
            side("A", suite()),
            side("B", suite()),
            side("reference", suite()),
        ]
    }

    fn classes(v: &Verdict) -> Vec<FailureClass> {
        v.failures.iter().map(|f| f.class).collect()
    }

    #[test]
    fn identical_results_pass_even_when_a_test_fails_everywhere() {
        let v = judge(&demo(), &[]);
        assert!(v.passed, "{v:?}");
        assert_eq!(v.rows.len(), 2);
        assert!(v.rows.iter().all(|r| !r.differs));
        assert_eq!(
            v.counts[2],
            Some(Counts {
                passed: 1,
                failed: 1,
                skipped: 0,
                error: 0
            })
        );
    }

    #[test]
    fn a_build_error_fails() {
        let mut s = demo();
        s[1].error = Some("phase start: starting cyclix-x-B-proxy.service: job failed".into());
        s[1].suite = None;
        let v = judge(&s, &[]);
        assert_eq!(classes(&v), [FailureClass::Build]);
        assert!(v.failures[0].detail.starts_with("env B (x-B): phase start"));
        // A side that produced no suite without an error is a build failure too.
        let mut s = demo();
        s[2].suite = None;
        assert_eq!(classes(&judge(&s, &[])), [FailureClass::Build]);
    }

    #[test]
    fn a_failed_probe_fails() {
        let mut s = demo();
        s[0].probe_failures = vec!["N8: expected 403, got 200".into()];
        let v = judge(&s, &[]);
        assert_eq!(classes(&v), [FailureClass::Probe]);
        assert_eq!(
            v.failures[0].detail,
            "env A (x-A): N8: expected 403, got 200"
        );
    }

    #[test]
    fn a_skip_against_a_pass_is_a_difference_and_changes_the_counts() {
        let mut s = demo();
        s[1].suite = junit(
            1,
            vec![
                t("tests.test_calc::test_add", TestOutcome::Skipped),
                t("tests.test_calc::test_subtract", TestOutcome::Failed),
            ],
        );
        let v = judge(&s, &[]);
        assert_eq!(classes(&v), [FailureClass::Results, FailureClass::Counts]);
        assert_eq!(
            v.failures[0].detail,
            "tests.test_calc::test_add: A passed, B skipped, reference passed"
        );
        let differing: Vec<&str> = v
            .rows
            .iter()
            .filter(|r| r.differs)
            .map(|r| r.test.as_str())
            .collect();
        assert_eq!(differing, ["tests.test_calc::test_add"]);
    }

    #[test]
    fn a_difference_from_the_reference_alone_fails() {
        let mut s = demo();
        s[2].suite = junit(
            0,
            vec![
                t("tests.test_calc::test_add", TestOutcome::Passed),
                t("tests.test_calc::test_subtract", TestOutcome::Passed),
            ],
        );
        let v = judge(&s, &[]);
        assert_eq!(
            classes(&v),
            [
                FailureClass::Results,
                FailureClass::Results,
                FailureClass::Counts
            ]
        );
        assert!(v.failures[0].detail.contains("reference 0"), "{v:?}");
    }

    #[test]
    fn a_test_missing_on_one_side_is_a_difference() {
        let mut s = demo();
        s[0].suite = junit(
            1,
            vec![t("tests.test_calc::test_subtract", TestOutcome::Failed)],
        );
        let v = judge(&s, &[]);
        assert!(
            v.failures
                .iter()
                .any(|f| f.detail
                    == "tests.test_calc::test_add: A missing, B passed, reference passed"),
            "{v:?}"
        );
    }

    #[test]
    fn without_results_files_exit_and_digest_are_compared() {
        let d = |exit, sha: &str| {
            Some(SuiteRun {
                exit,
                results: Results::Digest { sha256: sha.into() },
            })
        };
        let same = [
            side("A", d(1, "aa")),
            side("B", d(1, "aa")),
            side("reference", d(1, "aa")),
        ];
        assert!(judge(&same, &[]).passed);
        let mut other = same.clone();
        other[1].suite = d(1, "bb");
        let v = judge(&other, &[]);
        assert_eq!(classes(&v), [FailureClass::Results]);
        assert!(v.failures[0].detail.contains("normalised output differs"));
        // One side with `JUnit` and the others without is a difference too.
        let mut mixed = demo();
        mixed[0].suite = d(1, "aa");
        assert_eq!(classes(&judge(&mixed, &[])), [FailureClass::Results]);
    }

    #[test]
    fn a_shared_name_and_a_leftover_fail() {
        let mut s = demo();
        s[1].leftovers = vec!["network cyclix-x-B".into()];
        let shared = [Shared {
            value: "10.213.5.0/24".into(),
            a: "subnet".into(),
            b: "subnet".into(),
        }];
        let v = judge(&s, &shared);
        assert_eq!(classes(&v), [FailureClass::Shared, FailureClass::Leftover]);
        assert!(v.failures[0].detail.contains("`10.213.5.0/24` is in both"));
    }

    fn plan(run: &str, octet: u8) -> RunPlan {
        plan_with_port(run, octet, 20000 + u16::from(octet))
    }

    /// A run of a spec with a service whose port cyclix picks (`service_port`).
    fn plan_with_port(run: &str, octet: u8, service_port: u16) -> RunPlan {
        let yaml = "tenant: acme\nrepo: {path: /srv/acme, base: main}\ntask: {text: t}\n\
                    agent: {image: localhost/a, unpinned_local_image: true, command: [agent], env: [API_KEY]}\n\
                    gate: {image: localhost/a, unpinned_local_image: true, command: [check]}\n\
                    mounts: [{source: /srv/data, target: /mnt/data}]\n\
                    services: [{name: db, image: localhost/pg, unpinned_local_image: true, \
                    data: /var/lib/pg, health: {command: [pg_isready], interval: 1s, retries: 3}}]\n";
        let ctx = crate::spec::SpecContext {
            file: "t.yaml".into(),
            home: "/home/t".into(),
            runtime_dir: "/run/user/1000".into(),
        };
        let spec = crate::spec::parse(yaml, &ctx).expect("spec");
        let run = crate::render::RunContext {
            run_id: run.into(),
            worktree: format!("/home/t/wt/{run}"),
            run_dir: format!("/run/user/1000/cyclix/runs/{run}"),
            subnet_octet: octet,
            proxy_image: "localhost/cyclix-proxy:latest".into(),
            cyclix_bin: "/usr/bin/cyclix".into(),
            service_ports: vec![service_port],
        };
        crate::render::plan::plan(&spec, &run).expect("plan")
    }

    fn json(p: &RunPlan) -> Value {
        serde_json::to_value(p).expect("json")
    }

    #[test]
    fn two_rendered_runs_share_no_name_and_a_constant_name_is_caught_generically() {
        let by_design: Vec<String> = Vec::new();
        let (a, b) = (plan("t1-a", 7), plan("t1-b", 9));
        let (n, shared) = shared_names(&json(&a), &json(&b), &by_design);
        // Two runs as cyclix renders them share nothing: networks, subnets, addresses, pod,
        // containers, units, secrets, the service's port, database name and data.
        assert!(n > 30, "only {n} identity values");
        assert!(shared.is_empty(), "{shared:?}");
        // The same service port in both (e.g. a port the spec fixes) is caught with its field.
        let (_, s) = shared_names(
            &json(&a),
            &json(&plan_with_port("t1-b", 9, 20007)),
            &by_design,
        );
        assert!(s.iter().any(|x| x.value.contains("20007")), "{s:?}");
        // A by-design value is never reported: the same service port declared shareable.
        let (_, s) = shared_names(
            &json(&a),
            &json(&plan_with_port("t1-b", 9, 20007)),
            &["20007".to_string()],
        );
        assert!(!s.iter().any(|x| x.value == "20007"), "{s:?}");
        // Same subnet: every address derived from it is shared, named with its field.
        let (_, s) = shared_names(&json(&a), &json(&plan("t1-b", 7)), &by_design);
        let values: Vec<&str> = s.iter().map(|x| x.value.as_str()).collect();
        for v in [
            "10.213.7.0/24",
            "10.213.7.128/25",
            "10.213.7.2",
            "10.213.7.3",
        ] {
            assert!(values.contains(&v), "{v} not reported: {s:?}");
        }
        // A field the comparison has never heard of (a volume, a database name) is compared.
        let mut ja = json(&a);
        let mut jb = json(&b);
        ja["volumes"] = serde_json::json!([{"name": "pgdata", "database": "app"}]);
        jb["volumes"] = serde_json::json!([{"name": "pgdata-b", "database": "app"}]);
        let (_, s) = shared_names(&ja, &jb, &by_design);
        assert!(
            s.iter()
                .any(|x| x.value == "app" && x.a == "volumes[0].database"),
            "{s:?}"
        );
        assert!(!s.iter().any(|x| x.value == "pgdata"));
    }

    #[test]
    fn the_quick_gate_keeps_the_gate_hardened_and_adds_the_results_mount() {
        let mut p = plan("t1-a", 7);
        let before = p.containers.last().cloned().expect("gate");
        quick_gate(&mut p, &["pytest".into(), "-x".into()], "/run/r/results").expect("gate");
        let g = p.containers.last().expect("gate");
        assert_eq!(g.exec, ["pytest", "-x"]);
        assert_eq!(g.net, before.net);
        assert_eq!(g.net, crate::render::plan::Net::None);
        assert_eq!(g.binds.len(), before.binds.len() + 1);
        assert!(g.binds[..before.binds.len()].iter().all(|b| b.read_only));
        assert_eq!(
            g.binds.last().map(|b| (b.target.as_str(), b.read_only)),
            Some((RESULTS_DIR_PATH, false))
        );
        assert!(
            g.env
                .contains(&(RESULTS_ENV.into(), "/cyclix/results/junit.xml".into()))
        );
    }

    #[test]
    fn a_suite_that_cannot_start_is_told_from_one_that_fails() {
        let none: Vec<String> = Vec::new();
        assert_eq!(cannot_start(127, &none), Some("the command was not found"));
        assert!(cannot_start(125, &none).is_some() && cannot_start(126, &none).is_some());
        let init =
            vec!["ERROR (catatonit:2): failed to exec pid1: No such file or directory".to_string()];
        assert!(cannot_start(1, &init).is_some_and(|w| w.contains("catatonit")));
        assert_eq!(
            cannot_start(1, &["1 failed, 2 passed in 0.02s".to_string()]),
            None
        );
        assert_eq!(cannot_start(0, &none), None);
    }

    #[test]
    fn the_output_digest_ignores_timings_run_ids_and_podman_noise() {
        let a = vec![
            "2026-11-30 12:33:25.88 +0000 UTC m=+0.04 container exec 945e".to_string(),
            "F.                                                                       [100%]"
                .into(),
            "FAILED tests/test_calc.py::test_subtract - assert 4 == 2 (run t1-a)".into(),
            "1 failed, 1 passed in 0.03s".into(),
            "<object at 0x7f3a9c2b1d60>".into(),
        ];
        let b = vec![
            "F.                                                                       [100%]"
                .to_string(),
            "conmon 945e <nwarn>: Failed to add inotify watch".into(),
            "FAILED tests/test_calc.py::test_subtract - assert 4 == 2 (run t1-b)".into(),
            String::new(),
            "1 failed, 1 passed in 1.20s".into(),
            "<object at 0x55d0a1>".into(),
            "f269f241b9f1daea58f01baa25cbbdc643213087aca8fc101e1ed94d35cf79df".into(),
            "cyclix-t1-b-gate.service: Consumed 1.2s CPU time.".into(),
        ];
        assert_eq!(
            output_digest(&a, &["t1-a"]),
            output_digest(&b, &["t1-b"]),
            "{:?} vs {:?}",
            normalise(&a, &["t1-a"]),
            normalise(&b, &["t1-b"])
        );
        let c = vec!["2 passed in 0.03s".to_string()];
        assert_ne!(output_digest(&a, &["t1-a"]), output_digest(&c, &[]));
        assert_eq!(normalise(&c, &[]), ["2 passed in Ns"]);
        let d = vec!["E + where 11 = <function subtract at 0x7f5edc872d40>(7, 4) 0x".to_string()];
        assert_eq!(
            normalise(&d, &[]),
            ["E + where 11 = <function subtract at 0xADDR>(7, 4) 0x"]
        );
    }

    #[test]
    fn the_report_shows_the_sides_the_table_and_the_verdict() {
        let mut s = demo();
        s[0].up_ms = Some(1000);
        s[1].up_ms = Some(1200);
        s[0].down_ms = Some(5000);
        s[1].down_ms = Some(4900);
        let r = Report::new(
            "demo".into(),
            "0123456789abcdef".into(),
            vec!["pytest".into()],
            s.clone(),
            (42, Vec::new()),
        );
        let text = r.text();
        assert_eq!(r.overlap_ms, Some(3700));
        assert!(
            text.contains("tests.test_calc::test_subtract  failed   failed   failed"),
            "{text}"
        );
        assert!(text.contains("verdict: PASS"), "{text}");
        assert!(text.contains("x-A"), "{text}");
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["schema"], "cyclix-twin/1");
        assert_eq!(json["verdict"]["passed"], true);
        assert_eq!(json["sides"][2]["label"], "reference");
        assert_eq!(json["sides"][0]["suite"]["results"]["contract"], "junit");

        s[1].suite = junit(
            0,
            vec![
                t("tests.test_calc::test_add", TestOutcome::Passed),
                t("tests.test_calc::test_subtract", TestOutcome::Passed),
            ],
        );
        let r = Report::new("demo".into(), "0123".into(), vec![], s, (42, Vec::new()));
        let text = r.text();
        assert!(
            text.contains(
                "* tests.test_calc::test_subtract  failed   passed   failed     <- differs"
            ),
            "{text}"
        );
        assert!(text.contains("verdict: FAIL"), "{text}");
    }
}
