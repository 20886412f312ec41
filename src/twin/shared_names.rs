//! The names two rendered plans must not share: every identity value of one plan (a string
//! or number at a field not in [`SHAREABLE`]) compared generically with the other's. Pure.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

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
    (
        "handed_over",
        "the names of the variables the agent gets at the go",
    ),
    (
        "secret_files[*]",
        "the proxy's path of a per-run secret file",
    ),
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
    // The fresh home, XDG dirs and telemetry switches: constants of every container, by
    // design the same in both environments (`render::plan::fresh`).
    let fresh = crate::render::plan::fresh::FRESH_DIRS
        .iter()
        .chain(crate::render::plan::fresh::TELEMETRY_OFF);
    if fresh
        .into_iter()
        .any(|(name, _)| field == format!("env[{name}]"))
    {
        return true;
    }
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
