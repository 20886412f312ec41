//! The top level of a spec: `tenant`, `tier`, `worktree_isolation`, and which key holds
//! which section. A new section is one entry here plus its own file.

use super::{
    agent, baseline, delivery, egress, gate, mounts, notify, pool, repo, schedule, services, setup,
    task,
};
use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::names::tenant_name;
use crate::spec::suggest::nearest;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Egress, Spec, SpecContext};
use crate::tier::Tier;

/// The spec as decoded from YAML: closed schema and YAML types checked, nothing else.
/// `None` means the key was absent (or had the wrong YAML type, already reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawSpec {
    /// The document root.
    pub(crate) at: Pos,
    /// `tenant`.
    pub(crate) tenant: Option<Located<String>>,
    /// `repo`.
    pub(crate) repo: Option<repo::RawRepo>,
    /// `tier`.
    pub(crate) tier: Option<Located<String>>,
    /// `worktree_isolation`.
    pub(crate) worktree_isolation: Option<Located<bool>>,
    /// `task`.
    pub(crate) task: Option<task::RawTask>,
    /// `agent`.
    pub(crate) agent: Option<agent::RawAgent>,
    /// `gate`.
    pub(crate) gate: Option<gate::RawGate>,
    /// `egress`.
    pub(crate) egress: Option<egress::RawEgress>,
    /// `mounts` (absent = empty).
    pub(crate) mounts: Vec<mounts::RawMount>,
    /// `services` (absent = empty).
    pub(crate) services: Vec<services::RawService>,
    /// `schedule`.
    pub(crate) schedule: Option<schedule::RawSchedule>,
    /// `delivery`.
    pub(crate) delivery: Option<delivery::RawDelivery>,
    /// `setup`.
    pub(crate) setup: Option<Located<Vec<Located<String>>>>,
    /// `baseline`.
    pub(crate) baseline: Option<baseline::RawBaseline>,
    /// `notify`.
    pub(crate) notify: Option<notify::RawNotify>,
    /// `pool`.
    pub(crate) pool: Option<pool::RawPool>,
}

/// The top-level keys of a spec.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "tenant",
        Kind::Str(StrKind::Line),
        "the tenant's name (a-z, 0-9, `-`): its unit instance and container prefix",
        Some("`tenant: NAME` (a-z, 0-9, `-`)"),
    ),
    Key::required(
        "repo",
        Kind::Map(repo::KEYS),
        "the project the agent works on",
        Some("`repo:` with `path` and `base`"),
    ),
    Key::optional(
        "tier",
        Kind::Str(StrKind::Line),
        "isolation tier: direct, worktree, container (default) or gvisor (docs/tiers.md)",
    ),
    Key::optional(
        "worktree_isolation",
        Kind::Bool,
        "legacy spelling of `tier: worktree`",
    ),
    Key::required(
        "task",
        Kind::Map(task::KEYS),
        "the prompt for the agent",
        Some("`task:` with `text: |` or `file: PATH`"),
    ),
    Key::required(
        "agent",
        Kind::Map(agent::KEYS),
        "the agent's container",
        Some("the container: `image`, `command`"),
    ),
    Key::required(
        "gate",
        Kind::Map(gate::KEYS),
        "the test container that decides whether the work is kept",
        Some("the container: `image`, `command`"),
    ),
    Key::optional(
        "egress",
        Kind::Map(egress::KEYS),
        "what the sandbox may reach on the network",
    ),
    Key::optional(
        "mounts",
        Kind::MapList(mounts::KEYS),
        "extra host directories under /mnt/",
    ),
    Key::optional(
        "services",
        Kind::MapList(services::KEYS),
        "sidecar containers in the run's pod",
    ),
    Key::optional(
        "schedule",
        Kind::Map(schedule::KEYS),
        "when the tenant's timer fires",
    ),
    Key::optional(
        "delivery",
        Kind::Map(delivery::KEYS),
        "pushing the run's branch to a remote",
    ),
    setup::KEY,
    Key::optional(
        "baseline",
        Kind::Map(baseline::KEYS),
        "a basic test run in the agent's environment before the agent; failing ends `setup_broken`",
    ),
    Key::optional(
        "notify",
        Kind::Map(notify::KEYS),
        "a command told when a run fails, is refused or leaves something",
    ),
    Key::optional(
        "pool",
        Kind::Map(pool::KEYS),
        "a warm pool of environments kept ready for the tenant's runs",
    ),
];

/// Reads the document root.
pub(crate) fn decode(d: &mut Decoder, root: &Node) -> Option<RawSpec> {
    let f = d.mapping(root, "", KEYS)?;
    Some(RawSpec {
        at: f.pos(),
        tenant: d.string(&f, "tenant"),
        repo: d.section(&f, "repo", repo::decode),
        tier: d.string(&f, "tier"),
        worktree_isolation: d.boolean(&f, "worktree_isolation"),
        task: d.section(&f, "task", task::decode),
        agent: d.section(&f, "agent", agent::decode),
        gate: d.section(&f, "gate", gate::decode),
        egress: d.section(&f, "egress", egress::decode),
        mounts: d.list(&f, "mounts", mounts::decode),
        services: d.list(&f, "services", services::decode),
        schedule: d.section(&f, "schedule", schedule::decode),
        delivery: d.section(&f, "delivery", delivery::decode),
        setup: d.strings(&f, "setup"),
        baseline: d.section(&f, "baseline", baseline::decode),
        notify: d.section(&f, "notify", notify::decode),
        pool: d.section(&f, "pool", pool::decode),
    })
}

/// Validates a decoded spec against the semantic rules, appending one diagnostic per problem
/// to `out`. Returns the validated spec when every required part was present and valid.
///
/// `ctx.home` expands `~/`; `ctx.runtime_dir` is never mountable.
#[must_use]
pub(crate) fn validate(
    raw: &RawSpec,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Option<Spec> {
    let before = out.len();
    let tenant = raw.tenant.as_ref().and_then(|t| {
        tenant_name(&t.value)
            .map_err(|e| {
                out.push(
                    t.diag(format!("invalid tenant: {e}"))
                        .hint("use 1-31 characters: a-z first, then a-z, 0-9 or `-`"),
                );
            })
            .ok()
            .map(|()| t.value.clone())
    });
    let repo = raw.repo.as_ref().and_then(|r| repo::validate(r, ctx, out));
    let tier = match &raw.tier {
        None => Some(Tier::Container),
        Some(t) => Tier::parse(&t.value).or_else(|| {
            let names: Vec<&str> = crate::tier::TIERS.iter().map(|f| f.tier.as_str()).collect();
            let all = names.join(", ");
            let mut d = t.diag(format!("unknown tier `{}`", t.value));
            d = d.hint(match nearest(&t.value, &names) {
                Some(n) => format!("did you mean `{n}`? tiers: {all}"),
                None => format!("tiers: {all}"),
            });
            out.push(d);
            None
        }),
    };
    let legacy = raw.worktree_isolation.as_ref().is_some_and(|b| b.value);
    let task = raw.task.as_ref().and_then(|t| task::validate(t, ctx, out));
    let agent = raw.agent.as_ref().and_then(|a| agent::validate(a, out));
    let gate = raw.gate.as_ref().and_then(|g| gate::validate(g, out));
    let egress = match &raw.egress {
        None => Some(Egress {
            allow: Vec::new(),
            ports: vec![443],
            http_ports: Vec::new(),
            report_only: false,
            ca_certs: Vec::new(),
        }),
        Some(e) => egress::validate(e, ctx, out),
    };
    if let (Some(a), Some(t)) = (&raw.agent, tier) {
        credentials_need_proxy(a, crate::tier::floor(t, legacy), out);
        presets_need_container(a, crate::tier::floor(t, legacy), out);
    }
    if let (Some(g), Some(t)) = (&raw.gate, tier) {
        protected_needs_container(g, crate::tier::floor(t, legacy), out);
    }
    let mounts = mounts::validate(&raw.mounts, repo.as_ref(), ctx, out);
    let services = services::validate(&raw.services, out);
    let schedule = match &raw.schedule {
        None => Some(None),
        Some(s) => schedule::validate(s, out).map(Some),
    };
    let delivery = match &raw.delivery {
        None => Some(None),
        Some(d) => delivery::validate(d, tier, out).map(Some),
    };
    let setup = setup::validate(raw.setup.as_ref(), out);
    let baseline = match &raw.baseline {
        None => Some(None),
        Some(b) => baseline::validate(b, out).map(Some),
    };
    let notify = match &raw.notify {
        None => Some(None),
        Some(n) => notify::validate(n, out).map(Some),
    };
    let pool = match &raw.pool {
        None => Some(None),
        Some(p) => pool::validate(p, tier.map(|t| crate::tier::floor(t, legacy)), out).map(Some),
    };
    if out.len() != before {
        return None;
    }
    let mut spec = Spec {
        file: ctx.file.clone(),
        tenant: tenant?,
        repo: repo?,
        tier: tier?,
        legacy_worktree_isolation: legacy,
        task: task?,
        agent: agent?,
        gate: gate?,
        egress: egress?,
        mounts: mounts?,
        services: services?,
        schedule: schedule?,
        delivery: delivery?,
        setup: setup?,
        baseline: baseline?,
        notify: notify?,
        pool: pool?,
    };
    super::build::name_builds(&mut spec);
    Some(spec)
}

/// Credentials are added by the egress proxy: a tier without one (`direct`, `worktree`: the
/// agent runs on the host with the host's network) cannot keep a key outside, so a spec with
/// `agent.credentials` there is refused.
fn credentials_need_proxy(a: &agent::RawAgent, tier: Tier, out: &mut Vec<Diagnostic>) {
    if tier.is_sandboxed() {
        return;
    }
    if let Some(c) = a.credentials.first() {
        out.push(
            c.at.diag(format!(
                "tier `{tier}` has no egress proxy, so a credential cannot stay outside the agent"
            ))
            .hint("use `tier: container`, or pass the key through `agent.env` knowing the agent then holds it"),
        );
    }
}

/// A preset CLI runs without confirmations (`--dangerously-skip-permissions`, `--yolo`), which
/// is acceptable only inside a boundary: in a host tier (`direct`, `worktree`) it is refused.
/// `gate.protected` needs tier `container`: the host tiers run the gate in the agent's own
/// work tree, which the agent can change while and after it runs (docs/gate.md).
fn protected_needs_container(g: &gate::RawGate, tier: Tier, out: &mut Vec<Diagnostic>) {
    if tier.is_sandboxed() {
        return;
    }
    if let Some(p) = g.protected.as_ref() {
        out.push(
            p.diag(format!(
                "`gate.protected` needs tier `container`: tier `{tier}` runs the gate in the agent's own work tree, so nothing it protects would hold"
            ))
            .hint("use `tier: container` (the default), or remove `gate.protected`"),
        );
    }
}

fn presets_need_container(a: &agent::RawAgent, tier: Tier, out: &mut Vec<Diagnostic>) {
    if tier.is_sandboxed() {
        return;
    }
    if let Some(p) = a.preset.preset.as_ref().filter(|p| p.value != "script") {
        out.push(
            p.diag(format!(
                "preset `{}` runs its CLI without confirmations; tier `{tier}` runs it on the host with no boundary",
                p.value
            ))
            .hint("use `tier: container` (the default) for a preset, or `preset: script` with your own command"),
        );
    }
}
