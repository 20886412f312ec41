//! `services:` sidecar containers in the run's pod (a database, a cache), each with an
//! optional fixed port, a per-run data volume and a health check.

use std::collections::BTreeMap;

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::argv;
use crate::spec::rules::durations::bounded_duration;
use crate::spec::rules::env::env_list;
use crate::spec::rules::images::{self, RawImage, image};
use crate::spec::rules::names::tenant_name;
use crate::spec::rules::paths::{components, mount_path};
use crate::spec::rules::sizes::decimal_int;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Health, Service};

/// Service port bounds (1024–65535): unprivileged ports inside the pod.
const SERVICE_PORT_RANGE: (u16, u16) = (1024, 65_535);

/// Health check interval bounds and default, in seconds (1s–5m, default 1s).
const HEALTH_INTERVAL: (u64, u64, u64) = (1, 300, 1);

/// Health check timeout bounds and default, in seconds (1s–5m, default 5s).
const HEALTH_TIMEOUT: (u64, u64, u64) = (1, 300, 5);

/// Health check start period bounds and default, in seconds (0–10m, default 0).
const HEALTH_START_PERIOD: (u64, u64, u64) = (0, 600, 0);

/// Health check retries bounds and default (1–1000, default 30).
const HEALTH_RETRIES: (u32, u32, u32) = (1, 1000, 30);

/// The variables cyclix sets in every service container (see `render::plan`); a service's
/// `env` may not name them, or a secret would silently replace the run's value.
pub const SERVICE_RESERVED_ENV: &[&str] =
    &["PGHOST", "PGPORT", "PGDATABASE", "PGDATA", "POSTGRES_DB"];

/// One entry of `services:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawService {
    /// The entry.
    pub(crate) at: Pos,
    /// `name`.
    pub(crate) name: Option<Located<String>>,
    /// `image` + `unpinned_local_image`.
    pub(crate) image: RawImage,
    /// `command`.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `env`.
    pub(crate) env: Option<Located<Vec<Located<String>>>>,
    /// `port` as written (absent: cyclix picks a free one per run).
    pub(crate) port: Option<Located<String>>,
    /// `data`: the container path of the per-run data volume.
    pub(crate) data: Option<Located<String>>,
    /// `health`.
    pub(crate) health: Option<RawHealth>,
    /// `worktree` as written (`read_only`).
    pub(crate) worktree: Option<Located<String>>,
    /// `build`.
    pub(crate) build: Option<super::build::RawBuild>,
}

/// `services[i].health:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawHealth {
    /// The mapping.
    pub(crate) at: Pos,
    /// `command`: the argv of the check.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `interval`, e.g. `1s`.
    pub(crate) interval: Option<Located<String>>,
    /// `timeout`, e.g. `5s`.
    pub(crate) timeout: Option<Located<String>>,
    /// `retries` as written (a plain decimal integer).
    pub(crate) retries: Option<Located<String>>,
    /// `start_period`, e.g. `10s`.
    pub(crate) start_period: Option<Located<String>>,
}

/// The keys of one `services:` entry.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "name",
        Kind::Str(StrKind::Line),
        "the service's name (a-z, 0-9, `-`), its host name in the pod",
        None,
    ),
    images::IMAGE_OR_BUILD,
    images::UNPINNED_LOCAL_IMAGE,
    super::build::BUILD,
    Key::optional(
        "command",
        Kind::StrList,
        "argv overriding the image's command",
    ),
    Key::optional(
        "env",
        Kind::StrList,
        "names of the secrets passed to the service as variables",
    ),
    Key::optional(
        "port",
        Kind::Integer,
        "a fixed port (1024-65535; default: a free one per run)",
    ),
    Key::optional(
        "data",
        Kind::Str(StrKind::Line),
        "container path of the per-run data volume",
    ),
    Key::optional("health", Kind::Map(HEALTH_KEYS), "the readiness check"),
    Key::optional(
        "worktree",
        Kind::Str(StrKind::Line),
        "`read_only`: the run's work tree at /work, read-only, as the working directory (the project's own app); no secrets then",
    ),
];

/// The one value `services[i].worktree` takes.
pub const WORKTREE_READ_ONLY: &str = "read_only";

/// The keys of `services[i].health:`.
pub(crate) const HEALTH_KEYS: &[Key] = &[
    Key::required(
        "command",
        Kind::StrList,
        "argv of the check, run in the service container",
        Some("`command: [PROGRAM, ARG, ...]` (run in the service container; exit 0 means healthy)"),
    ),
    Key::optional(
        "interval",
        Kind::Str(StrKind::Duration),
        "time between checks (1s-5m, default 1s)",
    ),
    Key::optional(
        "timeout",
        Kind::Str(StrKind::Duration),
        "longest check (1s-5m, default 5s)",
    ),
    Key::optional(
        "retries",
        Kind::Integer,
        "failed checks before giving up (1-1000, default 30)",
    ),
    Key::optional(
        "start_period",
        Kind::Str(StrKind::Duration),
        "grace time before failures count (0-10m, default 0)",
    ),
];

/// Reads one `services:` entry at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawService> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawService {
        at: f.pos(),
        name: d.string(&f, "name"),
        image: RawImage::decode(d, &f),
        command: d.strings(&f, "command"),
        env: d.strings(&f, "env"),
        port: d.number(&f, "port"),
        data: d.string(&f, "data"),
        health: d.section(&f, "health", decode_health),
        worktree: d.string(&f, "worktree"),
        build: super::build::decode_in(d, &f),
    })
}

/// Reads `services[i].health:` at `path`.
fn decode_health(d: &mut Decoder, node: &Node, path: &str) -> Option<RawHealth> {
    let f = d.mapping(node, path, HEALTH_KEYS)?;
    Some(RawHealth {
        at: f.pos(),
        command: d.strings(&f, "command"),
        interval: d.string(&f, "interval"),
        timeout: d.string(&f, "timeout"),
        retries: d.number(&f, "retries"),
        start_period: d.string(&f, "start_period"),
    })
}

/// Validates `services:`: unique names and ports, images, argv, env, data paths, health.
pub(crate) fn validate(raw: &[RawService], out: &mut Vec<Diagnostic>) -> Option<Vec<Service>> {
    let before = out.len();
    let mut result = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut ports: BTreeMap<u16, usize> = BTreeMap::new();
    for s in raw {
        let name = s.name.as_ref().and_then(|n| {
            if let Err(e) = tenant_name(&n.value) {
                out.push(
                    n.diag(format!("invalid service name: {e}"))
                        .hint("use 1-31 characters: a-z first, then a-z, 0-9 or `-`"),
                );
                return None;
            }
            if let Some(line) = names.get(&n.value) {
                out.push(
                    n.diag(format!(
                        "service `{}` is defined twice (first at line {line})",
                        n.value
                    ))
                    .hint("give every service its own name"),
                );
                return None;
            }
            names.insert(n.value.clone(), n.line);
            Some(n.value.clone())
        });
        let role = format!(
            "service-{}",
            s.name.as_ref().map_or("", |n| n.value.as_str())
        );
        let image = super::build::image_or_build(
            &s.image,
            s.build.as_ref(),
            &role,
            |out| images::required(&s.at, &s.image, out).then(|| image(&s.image, out))?,
            out,
        );
        let command = argv(s.command.as_ref(), false, out);
        let env = env_list(s.env.as_ref(), out).filter(|_| not_reserved(s.env.as_ref(), out));
        let port = match s.port.as_ref() {
            None => Some(None),
            Some(p) => fixed_port(p, &mut ports, out).map(Some),
        };
        let data = match s.data.as_ref() {
            None => Some(None),
            Some(d) => data_path(d, out).map(Some),
        };
        let health = match s.health.as_ref() {
            None => Some(None),
            Some(h) => health(h, out).map(Some),
        };
        let worktree = worktree(s, out);
        if let (
            Some(name),
            Some(image),
            Some(command),
            Some(env),
            Some(port),
            Some(data),
            Some(health),
            Some(worktree),
        ) = (name, image, command, env, port, data, health, worktree)
        {
            result.push(Service {
                name,
                image,
                command,
                env,
                port,
                data,
                health,
                worktree,
            });
        }
    }
    (out.len() == before).then_some(result)
}

/// `services[i].worktree`: `read_only` or absent. A service that runs the work tree runs code
/// the agent writes (a dev server reloads it), so it holds no secret: its `env` must be empty.
fn worktree(s: &RawService, out: &mut Vec<Diagnostic>) -> Option<bool> {
    let Some(w) = &s.worktree else {
        return Some(false);
    };
    if w.value != WORKTREE_READ_ONLY {
        out.push(
            w.diag(format!("worktree `{}` is not a mode cyclix offers", w.value))
                .hint(format!(
                    "write `worktree: {WORKTREE_READ_ONLY}` (the agent is the work tree's only writer), or remove the key"
                )),
        );
        return None;
    }
    if let Some(first) = s.env.as_ref().and_then(|e| e.value.first()) {
        out.push(
            first
                .diag(format!(
                    "service `{}` runs the work tree, which the agent writes, so it may not hold the secret `{}`",
                    s.name.as_ref().map_or("?", |n| n.value.as_str()),
                    first.value
                ))
                .hint("remove `env` from this service (give the app a value that is not secret in its `command`), or remove `worktree`"),
        );
        return None;
    }
    Some(true)
}

/// Whether a service's `env` leaves alone the variables cyclix sets
/// ([`SERVICE_RESERVED_ENV`]); reports each one it names.
fn not_reserved(list: Option<&Located<Vec<Located<String>>>>, out: &mut Vec<Diagnostic>) -> bool {
    let mut ok = true;
    for at in list.map_or(&[][..], |l| l.value.as_slice()) {
        if SERVICE_RESERVED_ENV.contains(&at.value.as_str()) {
            out.push(
                at.diag(format!("`{}` is set by cyclix for every service", at.value))
                    .hint(format!(
                        "remove it: cyclix sets {} to the run's own values",
                        SERVICE_RESERVED_ENV.join(", ")
                    )),
            );
            ok = false;
        }
    }
    ok
}

/// `services[i].port`: in range and not another service's.
fn fixed_port(
    p: &Located<String>,
    ports: &mut BTreeMap<u16, usize>,
    out: &mut Vec<Diagnostic>,
) -> Option<u16> {
    let (lo, hi) = SERVICE_PORT_RANGE;
    let Some(n) = decimal_int(&p.value)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (lo..=hi).contains(n))
    else {
        out.push(
            p.diag(format!("service port `{}` is out of range", p.value))
                .hint(format!(
                    "use a port from {lo} to {hi}, or remove `port` and cyclix picks a free one per run"
                )),
        );
        return None;
    };
    if let Some(line) = ports.get(&n) {
        out.push(
            p.diag(format!(
                "port {n} is already used by another service (line {line})"
            ))
            .hint("give every service its own port, or remove `port` and cyclix picks one"),
        );
        return None;
    }
    ports.insert(n, p.line);
    Some(n)
}

/// `services[i].data`: an absolute, normalised container path for the per-run data volume;
/// not `/`, and not under the kernel's or cyclix's own paths.
fn data_path(d: &Located<String>, out: &mut Vec<Diagnostic>) -> Option<String> {
    if !d.value.starts_with('/') {
        out.push(
            d.diag(format!("data path `{}` is not absolute", d.value))
                .hint("write the path inside the service container, e.g. /var/lib/postgresql/data"),
        );
        return None;
    }
    let norm = mount_path(d, None, out)?;
    let first = components(&norm).first().copied();
    match first {
        None => {
            out.push(d.diag("data path `/` would hide the whole image").hint(
                "write the directory the service keeps its data in, e.g. /var/lib/postgresql/data",
            ));
            None
        }
        Some(top @ ("proc" | "sys" | "dev" | "run" | "tmp" | "cyclix" | "work")) => {
            out.push(
                d.diag(format!("data path `{norm}` is under /{top}, which the container runtime or cyclix owns"))
                    .hint("write the directory the service keeps its data in, e.g. /var/lib/postgresql/data"),
            );
            None
        }
        Some(_) => Some(norm),
    }
}

/// `services[i].health`: the check's argv and its timing, with the defaults applied.
fn health(h: &RawHealth, out: &mut Vec<Diagnostic>) -> Option<Health> {
    let command = argv(h.command.as_ref(), true, out);
    let interval_s = bounded_duration(h.interval.as_ref(), HEALTH_INTERVAL, out);
    let timeout_s = bounded_duration(h.timeout.as_ref(), HEALTH_TIMEOUT, out);
    let start_period_s = bounded_duration(h.start_period.as_ref(), HEALTH_START_PERIOD, out);
    let (lo, hi, default) = HEALTH_RETRIES;
    let retries = match &h.retries {
        None => Some(default),
        Some(r) => {
            let n = decimal_int(&r.value)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (lo..=hi).contains(n));
            if n.is_none() {
                out.push(
                    r.diag(format!("retries `{}` is out of range", r.value))
                        .hint(format!("use a number of retries from {lo} to {hi}")),
                );
            }
            n
        }
    };
    Some(Health {
        command: command?,
        interval_s: interval_s?,
        timeout_s: timeout_s?,
        retries: retries?,
        start_period_s: start_period_s?,
    })
}
