//! cyclix's metrics in the Prometheus text format (0.0.4), for `node_exporter`'s textfile
//! collector (issue 32, item 4). Pure: the caller ([`crate::app::metrics`]) reads the run
//! records and the pools' state, feeds them to a [`Metrics`] and writes [`Metrics::render`]'s
//! text atomically to `metrics_textfile` (docs/metrics.md).
//!
//! Everything is counted from the records kept (`$XDG_STATE_HOME/cyclix/runs/`), so every
//! writer (each run, each pool keeper) writes the whole truth, whichever writes last; plus
//! what `cyclix prune` removed, kept per tenant in its tally ([`Tally`]), so the counters never
//! go down.
//!
//! Labels are bounded: `tenant` (the records' tenants), `result` (the [`RunResult`] names),
//! `phase` (the names in [`PHASES`], any other `other`), `by` (`agent`, `probe`),
//! `environment` (`cold`, `warm`), `state` (the pool's four). No run id is a label: a run's
//! numbers are in the counters and the `cyclix_last_run_*` gauges. Every label value is
//! escaped as the format says (backslash, double quote, newline), whatever it holds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::run::record::{EgressCounts, RunRecord, RunResult, egress_counts};

/// Every result, in the order the metrics list them.
pub const RESULTS: [RunResult; 11] = RunResult::ALL;

/// The phase names a record holds (the container and plain tiers', then `cyclix kube run`'s);
/// any other name is counted as `other`, so a record cannot make a label of its own.
pub const PHASES: &[&str] = &[
    "queue",
    "claim",
    "credentials",
    "prepare",
    "build",
    "render",
    "install",
    "load",
    // Records written before issue 33 (the phase was a daemon-reload).
    "reload",
    "start",
    "probe",
    "baseline",
    "agent",
    "escape-check",
    "import",
    "gate-base",
    "gate",
    "gate-escape-check",
    "collect",
    "deliver",
    "teardown",
    "audit",
    "bundle",
    "secrets",
    "apply-proxy",
    "proxy-ready",
    "apply-agent",
    "apply-gate",
    "apply-collect",
    "delivery-start",
];

/// The upper bounds of `cyclix_time_to_agent_seconds`' buckets, in ms (`+Inf` follows): the
/// testbed's warm p50 is 0.66 s and its cold p95 2 s (docs/pool.md); a `build:` phase is in
/// the time to agent and takes minutes.
pub const TO_AGENT_BUCKETS_MS: [u128; 10] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
];

/// The two sides of egress (each decision's `by`).
const SIDES: [&str; 2] = ["agent", "probe"];

/// What `cyclix prune` removed of a tenant's runs, added to what the records kept count, so the
/// counters never go down (`$XDG_STATE_HOME/cyclix/pruned/TENANT.json`,
/// `crate::app::metrics::tally_path`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Runs removed, by result name.
    #[serde(default)]
    pub results: BTreeMap<String, u64>,
    /// Phase durations of the removed runs: phase name → `[count, sum in ms]`.
    #[serde(default)]
    pub phases: BTreeMap<String, (u64, u128)>,
    /// Time to agent of the removed runs, by environment (`cold`, `warm`): the bucket
    /// counts (cumulative, as [`TO_AGENT_BUCKETS_MS`] then `+Inf`) and the sum in ms. Bucket
    /// counts are by position: a change of the bounds must convert the tallies.
    #[serde(default)]
    pub to_agent: BTreeMap<String, (Vec<u64>, u128)>,
    /// Egress of the removed runs by side: `[requests, denied]`.
    #[serde(default)]
    pub egress: BTreeMap<String, (u64, u64)>,
    /// Leftovers their audits found.
    #[serde(default)]
    pub leftovers: u64,
    /// The runs counted here, by id: a run is added once, and a record still on disk whose id
    /// is here (a prune killed between its tally and the record's removal) is not counted
    /// again (attack review).
    #[serde(default)]
    pub runs: std::collections::BTreeSet<String>,
}

impl Tally {
    /// `rec` added to the tally (a run `cyclix prune` removes); nothing when it is counted
    /// here already.
    pub fn add(&mut self, rec: &RunRecord) {
        if !self.runs.insert(rec.run_id.clone()) {
            return;
        }
        *self
            .results
            .entry(rec.result.as_str().to_owned())
            .or_default() += 1;
        for (phase, ms) in phase_times(rec) {
            let e = self.phases.entry(phase_name(phase).to_owned()).or_default();
            e.0 += 1;
            e.1 += ms;
        }
        if let Some((env, ms)) = time_to_agent(rec) {
            let e = self
                .to_agent
                .entry(env.to_owned())
                .or_insert_with(|| (vec![0; TO_AGENT_BUCKETS_MS.len() + 1], 0));
            e.0.resize(TO_AGENT_BUCKETS_MS.len() + 1, 0);
            for (i, b) in buckets_of(ms).iter().enumerate() {
                e.0[i] += b;
            }
            e.1 += ms;
        }
        for side in SIDES {
            let c: EgressCounts = egress_counts(rec, side);
            let e = self.egress.entry(side.to_owned()).or_default();
            e.0 += c.requests as u64;
            e.1 += c.denied() as u64;
        }
        self.leftovers += rec.leftovers.len() as u64;
    }
}

/// One tenant's pool as its state directory and its keeper's file say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolFacts {
    /// Environments being filled, ready, claimed, being destroyed after `max_idle`.
    pub filling: usize,
    /// Ready to be claimed.
    pub ready: usize,
    /// Claimed by a run.
    pub claimed: usize,
    /// Idle past `max_idle`, being destroyed.
    pub expiring: usize,
    /// The keeper's last words (`keeper.json`), `None` when no keeper wrote one.
    pub keeper: Option<KeeperFacts>,
}

/// What a pool's keeper wrote down last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeeperFacts {
    /// Environments it wants ready now (0 outside `warm_before` of the next timer run).
    pub want: usize,
    /// Its failures in a row (fills that failed, or the spec that cannot be loaded).
    pub failures: u32,
    /// Environments it filled since it started.
    pub filled: u64,
    /// Environments it expired since it started.
    pub expired: u64,
    /// When it wrote, in ms since the Unix epoch.
    pub updated_ms: u128,
}

/// The last run of a tenant, as its gauges show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LastRun {
    /// (first phase's start, run id): the newest is the largest, as `cyclix runs` orders.
    key: (Option<u128>, String),
    result: RunResult,
    ended_ms: Option<u128>,
    duration_ms: Option<u128>,
    phases: BTreeMap<usize, u128>,
    to_agent_ms: Option<u128>,
    denied: [usize; 2],
    leftovers: usize,
}

/// Samples of one family: `(suffix and labels, value)`.
type Samples = Vec<(String, String)>;

/// One tenant's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TenantRuns {
    results: [u64; RESULTS.len()],
    /// Phase (its index in [`PHASES`], `other` last) → (count, sum ms).
    phases: BTreeMap<usize, (u64, u128)>,
    /// cold, warm: (cumulative bucket counts, then `+Inf`; sum ms).
    to_agent: [(Vec<u64>, u128); 2],
    /// agent, probe: (requests, denied).
    egress: [(u64, u64); 2],
    leftovers: u64,
    last: Option<LastRun>,
}

impl Default for TenantRuns {
    fn default() -> Self {
        let empty = || (vec![0; TO_AGENT_BUCKETS_MS.len() + 1], 0);
        TenantRuns {
            results: [0; RESULTS.len()],
            phases: BTreeMap::new(),
            to_agent: [empty(), empty()],
            egress: [(0, 0); 2],
            leftovers: 0,
            last: None,
        }
    }
}

/// The metrics of one host, fed record by record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    tenants: BTreeMap<String, TenantRuns>,
    pools: BTreeMap<String, PoolFacts>,
    unreadable: u64,
}

impl Metrics {
    /// Counts `rec` (a record kept).
    pub fn add_record(&mut self, rec: &RunRecord) {
        let t = self.tenants.entry(rec.tenant.clone()).or_default();
        if let Some(i) = RESULTS.iter().position(|r| *r == rec.result) {
            t.results[i] += 1;
        }
        let times = phase_times(rec);
        for (phase, ms) in &times {
            let e = t.phases.entry(*phase).or_default();
            e.0 += 1;
            e.1 += ms;
        }
        let to_agent = time_to_agent(rec);
        if let Some((env, ms)) = to_agent {
            let h = &mut t.to_agent[usize::from(env == "warm")];
            for (i, b) in buckets_of(ms).iter().enumerate() {
                h.0[i] += b;
            }
            h.1 += ms;
        }
        let mut denied = [0; 2];
        for (i, side) in SIDES.iter().enumerate() {
            let c = egress_counts(rec, side);
            t.egress[i].0 += c.requests as u64;
            t.egress[i].1 += c.denied() as u64;
            denied[i] = c.denied();
        }
        t.leftovers += rec.leftovers.len() as u64;
        let started = rec.phases.first().map(|p| p.start_ms);
        let ended = rec.phases.iter().map(|p| p.end_ms).max();
        let key = (started, rec.run_id.clone());
        if t.last.as_ref().is_none_or(|l| l.key < key) {
            let mut phases = BTreeMap::new();
            for (phase, ms) in times {
                *phases.entry(phase).or_default() += ms;
            }
            t.last = Some(LastRun {
                key,
                result: rec.result,
                ended_ms: ended,
                duration_ms: started.zip(ended).map(|(s, e)| e.saturating_sub(s)),
                phases,
                to_agent_ms: to_agent.map(|(_, ms)| ms),
                denied,
                leftovers: rec.leftovers.len(),
            });
        }
    }

    /// Adds what `cyclix prune` removed of `tenant`'s runs.
    pub fn add_tally(&mut self, tenant: &str, tally: &Tally) {
        let t = self.tenants.entry(tenant.to_owned()).or_default();
        for (i, r) in RESULTS.iter().enumerate() {
            t.results[i] += tally.results.get(r.as_str()).copied().unwrap_or(0);
        }
        for (name, (n, ms)) in &tally.phases {
            let e = t.phases.entry(phase_index(name)).or_default();
            e.0 += n;
            e.1 += ms;
        }
        for (env, (buckets, sum)) in &tally.to_agent {
            let h = &mut t.to_agent[usize::from(env == "warm")];
            for (i, b) in buckets.iter().take(h.0.len()).enumerate() {
                h.0[i] += b;
            }
            h.1 += sum;
        }
        for (i, side) in SIDES.iter().enumerate() {
            if let Some((n, d)) = tally.egress.get(*side) {
                t.egress[i].0 += n;
                t.egress[i].1 += d;
            }
        }
        t.leftovers += tally.leftovers;
    }

    /// Counts a record file that did not parse.
    pub fn add_unreadable(&mut self) {
        self.unreadable += 1;
    }

    /// `tenant`'s pool.
    pub fn add_pool(&mut self, tenant: &str, pool: PoolFacts) {
        self.pools.insert(tenant.to_owned(), pool);
    }

    /// The text: one family after another (`# HELP`, `# TYPE`, its samples, sorted by
    /// tenant then the other labels in their fixed order); a family without a sample is left
    /// out. `now_ms`: when it is written.
    #[must_use]
    pub fn render(&self, now_ms: u128) -> String {
        let mut out = Out::default();
        self.render_runs(&mut out);
        self.render_last(&mut out);
        self.render_pools(&mut out);
        out.family(
            "cyclix_records_unreadable",
            "gauge",
            "Run record files under the state directory that do not parse (not counted above).",
            vec![(String::new(), self.unreadable.to_string())],
        );
        out.family(
            "cyclix_metrics_generated_timestamp_seconds",
            "gauge",
            "When cyclix wrote this file, in seconds since the Unix epoch.",
            vec![(String::new(), seconds(now_ms))],
        );
        out.text
    }

    fn render_runs(&self, out: &mut Out) {
        let each = |f: &dyn Fn(&str, &TenantRuns) -> Samples| {
            self.tenants
                .iter()
                .flat_map(|(name, t)| f(name, t))
                .collect::<Vec<_>>()
        };
        out.family(
            "cyclix_runs_total",
            "counter",
            "Runs that ended, by result (the run records kept, plus those cyclix prune removed).",
            each(&|name, t| {
                RESULTS
                    .iter()
                    .zip(t.results)
                    .map(|(r, n)| {
                        (
                            labels(&[("tenant", name), ("result", r.as_str())]),
                            n.to_string(),
                        )
                    })
                    .collect()
            }),
        );
        out.summary(
            "cyclix_run_phase_duration_seconds",
            "Time the runs spent in each phase (a summary: _sum and _count, no quantiles).",
            each(&|name, t| {
                t.phases
                    .iter()
                    .map(|(p, (n, ms))| {
                        (
                            labels(&[("tenant", name), ("phase", phase_name(*p))]),
                            *n,
                            *ms,
                        )
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .flat_map(|(l, n, ms)| {
                        [
                            (format!("_sum{l}"), seconds(ms)),
                            (format!("_count{l}"), n.to_string()),
                        ]
                    })
                    .collect()
            }),
        );
        out.histogram(
            "cyclix_time_to_agent_seconds",
            "From the run's first phase after queue (claim for a warm run) to the go: the probe \
             suite passed and the agent is let start.",
            each(&|name, t| {
                let mut v = Vec::new();
                for (env, (buckets, sum)) in ["cold", "warm"].iter().zip(&t.to_agent) {
                    let base = [("tenant", name), ("environment", env)];
                    for (i, n) in buckets.iter().enumerate() {
                        let le = TO_AGENT_BUCKETS_MS
                            .get(i)
                            .map_or_else(|| "+Inf".to_owned(), |ms| seconds(*ms));
                        let mut l = base.to_vec();
                        l.push(("le", &le));
                        v.push((format!("_bucket{}", labels(&l)), n.to_string()));
                    }
                    let l = labels(&base);
                    v.push((format!("_sum{l}"), seconds(*sum)));
                    let count = buckets.last().copied().unwrap_or(0);
                    v.push((format!("_count{l}"), count.to_string()));
                }
                v
            }),
        );
        self.render_egress(out);
    }

    fn render_egress(&self, out: &mut Out) {
        let each = |f: &dyn Fn(&str, &TenantRuns) -> Samples| {
            self.tenants
                .iter()
                .flat_map(|(name, t)| f(name, t))
                .collect::<Vec<_>>()
        };
        for (name, help, pick) in [
            (
                "cyclix_egress_requests_total",
                "Requests through the runs' egress proxies, by side (the agent, the probe suite).",
                0,
            ),
            (
                "cyclix_egress_denied_total",
                "Egress requests the proxies denied (refused, or tunnels cut), by side.",
                1,
            ),
        ] {
            out.family(
                name,
                "counter",
                help,
                each(&|tenant, t| {
                    SIDES
                        .iter()
                        .zip(t.egress)
                        .map(|(side, e)| {
                            let n = if pick == 0 { e.0 } else { e.1 };
                            (labels(&[("tenant", tenant), ("by", side)]), n.to_string())
                        })
                        .collect()
                }),
            );
        }
        out.family(
            "cyclix_leftovers_total",
            "counter",
            "Leftovers the runs' audits found after teardown (each one failed its run).",
            each(&|name, t| vec![(labels(&[("tenant", name)]), t.leftovers.to_string())]),
        );
    }

    fn render_last(&self, out: &mut Out) {
        let each = |f: &dyn Fn(&str, &LastRun) -> Samples| {
            self.tenants
                .iter()
                .filter_map(|(name, t)| t.last.as_ref().map(|l| f(name, l)))
                .flatten()
                .collect::<Vec<_>>()
        };
        let tenant = |name: &str| labels(&[("tenant", name)]);
        out.family(
            "cyclix_last_run_result",
            "gauge",
            "The tenant's last run's result: 1 for its result, 0 for the others.",
            each(&|name, l| {
                RESULTS
                    .iter()
                    .map(|r| {
                        (
                            labels(&[("tenant", name), ("result", r.as_str())]),
                            u8::from(*r == l.result).to_string(),
                        )
                    })
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_end_timestamp_seconds",
            "gauge",
            "When the tenant's last run ended (its last phase), in seconds since the Unix epoch.",
            each(&|name, l| {
                l.ended_ms
                    .map(|ms| (tenant(name), seconds(ms)))
                    .into_iter()
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_duration_seconds",
            "gauge",
            "The tenant's last run from its first phase's start to its last phase's end.",
            each(&|name, l| {
                l.duration_ms
                    .map(|ms| (tenant(name), seconds(ms)))
                    .into_iter()
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_phase_duration_seconds",
            "gauge",
            "The time the tenant's last run spent in each phase it reached.",
            each(&|name, l| {
                l.phases
                    .iter()
                    .map(|(p, ms)| {
                        (
                            labels(&[("tenant", name), ("phase", phase_name(*p))]),
                            seconds(*ms),
                        )
                    })
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_time_to_agent_seconds",
            "gauge",
            "The tenant's last run's time to agent (absent when it never got to its agent).",
            each(&|name, l| {
                l.to_agent_ms
                    .map(|ms| (tenant(name), seconds(ms)))
                    .into_iter()
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_egress_denied",
            "gauge",
            "Egress requests denied in the tenant's last run, by side.",
            each(&|name, l| {
                SIDES
                    .iter()
                    .zip(l.denied)
                    .map(|(side, n)| (labels(&[("tenant", name), ("by", side)]), n.to_string()))
                    .collect()
            }),
        );
        out.family(
            "cyclix_last_run_leftovers",
            "gauge",
            "Leftovers the audit found after the tenant's last run (0: it left nothing).",
            each(&|name, l| vec![(tenant(name), l.leftovers.to_string())]),
        );
    }

    fn render_pools(&self, out: &mut Out) {
        let tenant = |name: &str| labels(&[("tenant", name)]);
        let keepers = |f: &dyn Fn(&KeeperFacts) -> String| {
            self.pools
                .iter()
                .filter_map(|(name, p)| p.keeper.as_ref().map(|k| (tenant(name), f(k))))
                .collect::<Vec<_>>()
        };
        out.family(
            "cyclix_pool_environments",
            "gauge",
            "Warm environments in the tenant's pool, by state (ready: claimable now).",
            self.pools
                .iter()
                .flat_map(|(name, p)| {
                    [
                        ("ready", p.ready),
                        ("filling", p.filling),
                        ("claimed", p.claimed),
                        ("expiring", p.expiring),
                    ]
                    .map(|(state, n)| {
                        (labels(&[("tenant", name), ("state", state)]), n.to_string())
                    })
                })
                .collect(),
        );
        out.family(
            "cyclix_pool_wanted_environments",
            "gauge",
            "Ready environments the pool's keeper wants now (its size, or 0 outside warm_before).",
            keepers(&|k| k.want.to_string()),
        );
        out.family(
            "cyclix_pool_keeper_failures",
            "gauge",
            "The pool keeper's failures in a row (a fill that failed, a spec that does not load).",
            keepers(&|k| k.failures.to_string()),
        );
        out.family(
            "cyclix_pool_keeper_filled_total",
            "counter",
            "Environments the pool's keeper filled since it started.",
            keepers(&|k| k.filled.to_string()),
        );
        out.family(
            "cyclix_pool_keeper_expired_total",
            "counter",
            "Environments the pool's keeper destroyed idle (max_idle) since it started.",
            keepers(&|k| k.expired.to_string()),
        );
        out.family(
            "cyclix_pool_keeper_updated_timestamp_seconds",
            "gauge",
            "When the pool's keeper last wrote its state, in seconds since the Unix epoch.",
            keepers(&|k| seconds(k.updated_ms)),
        );
    }
}

/// The text being written.
#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    /// A family whose samples are `(labels, value)`; nothing when it has none.
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: Samples) {
        self.typed(name, kind, help, samples);
    }

    /// A summary or histogram family whose samples are `(suffix and labels, value)`.
    fn summary(&mut self, name: &str, help: &str, samples: Samples) {
        self.typed(name, "summary", help, samples);
    }

    fn histogram(&mut self, name: &str, help: &str, samples: Samples) {
        self.typed(name, "histogram", help, samples);
    }

    fn typed(&mut self, name: &str, kind: &str, help: &str, samples: Samples) {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.text, "{name}{labels} {value}");
        }
    }
}

/// `{k="v",…}` with every value escaped ([`escape_label`]).
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A label value as the text format wants it: `\` → `\\`, `"` → `\"`, a line feed → `\n`.
#[must_use]
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// HELP text as the format wants it: `\` → `\\`, a line feed → `\n`.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// `ms` as seconds in decimal, exactly (`1500` → `1.5`, `2000` → `2`).
#[must_use]
pub fn seconds(ms: u128) -> String {
    let (s, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        s.to_string()
    } else {
        format!("{s}.{frac:03}").trim_end_matches('0').to_owned()
    }
}

/// A phase's place: its index in [`PHASES`] (the lifecycle's order), `PHASES.len()` for any
/// other name (labelled `other`).
fn phase_index(name: &str) -> usize {
    PHASES
        .iter()
        .position(|p| *p == name)
        .unwrap_or(PHASES.len())
}

/// The label of the phase at `index` ([`phase_index`]).
fn phase_name(index: usize) -> &'static str {
    PHASES.get(index).copied().unwrap_or("other")
}

/// `(phase index, ms)` of each phase of `rec`.
fn phase_times(rec: &RunRecord) -> Vec<(usize, u128)> {
    rec.phases
        .iter()
        .map(|p| (phase_index(&p.name), p.end_ms.saturating_sub(p.start_ms)))
        .collect()
}

/// `rec`'s time to agent (`cold` or `warm`, ms): from its first phase after `queue` (the
/// claim, for a warm run) to the go (`go_ms`: the probe suite passed; the agent starts right
/// after). `None` when the run never got its go (refused, or ended before).
fn time_to_agent(rec: &RunRecord) -> Option<(&'static str, u128)> {
    let go = rec.go_ms?;
    if !rec.refusal.is_empty() || rec.result == RunResult::ProbeRefused {
        return None;
    }
    let start = rec.phases.iter().find(|p| p.name != "queue")?.start_ms;
    let warm = rec.environment.as_ref().is_some_and(|e| e.pooled);
    Some((if warm { "warm" } else { "cold" }, go.saturating_sub(start)))
}

/// The cumulative bucket counts of one observation of `ms` (then `+Inf`).
fn buckets_of(ms: u128) -> Vec<u64> {
    TO_AGENT_BUCKETS_MS
        .iter()
        .map(|b| u64::from(ms <= *b))
        .chain([1])
        .collect()
}

#[cfg(test)]
mod tests;
