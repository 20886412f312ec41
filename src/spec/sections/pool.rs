//! `pool:` a warm pool of environments kept ready for the tenant's runs (issue 16): how many,
//! how long one may sit idle, and how long before the tenant timer's next elapse the pool is
//! filled when the tenant has a `schedule:`.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::durations::bounded_duration;
use crate::spec::rules::sizes::decimal_int;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Pool};
use crate::tier::Tier;

/// Environments kept ready: bounds (0–8; 0 keeps none, as if there were no pool).
pub const SIZE: (u32, u32) = (0, 8);

/// `max_idle` bounds and default, in seconds (1 min–24 h, default 2 h).
const MAX_IDLE: (u64, u64, u64) = (60, 24 * 3600, 2 * 3600);

/// `warm_before` bounds and default, in seconds (0–24 h, default 10 min).
const WARM_BEFORE: (u64, u64, u64) = (0, 24 * 3600, 10 * 60);

/// `pool:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawPool {
    /// The mapping.
    pub(crate) at: Pos,
    /// `size` as written (a plain decimal integer).
    pub(crate) size: Option<Located<String>>,
    /// `max_idle`.
    pub(crate) max_idle: Option<Located<String>>,
    /// `warm_before`.
    pub(crate) warm_before: Option<Located<String>>,
}

/// The keys of `pool:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "size",
        Kind::Integer,
        "environments kept ready (0-8)",
        Some("`size: 2`"),
    ),
    Key::optional(
        "max_idle",
        Kind::Str(StrKind::Duration),
        "an environment idle this long is destroyed (1m-24h, default 2h)",
    ),
    Key::optional(
        "warm_before",
        Kind::Str(StrKind::Duration),
        "with a schedule: fill only this long before the timer's next elapse (0-24h, default 10m)",
    ),
];

/// Reads `pool:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawPool> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawPool {
        at: f.pos(),
        size: d.number(&f, "size"),
        max_idle: d.string(&f, "max_idle"),
        warm_before: d.string(&f, "warm_before"),
    })
}

/// Validates `pool:`: `size` within [`SIZE`], the two durations within their bounds; `tier`
/// is the spec's tier floor: only tier `container` has an environment to keep warm (tier
/// `gvisor` not yet: a warm environment's held agent container is checked from the host's
/// `/proc`, which under gVisor shows runsc's processes, not agent-wait).
pub(crate) fn validate(p: &RawPool, tier: Option<Tier>, out: &mut Vec<Diagnostic>) -> Option<Pool> {
    if tier == Some(Tier::Gvisor) {
        out.push(
            p.at.diag(
                "tier `gvisor` has no warm pool yet: a warm environment's held agent container is checked from the host's /proc (its mounts, its wait on the claim FIFO), which under gVisor shows runsc's processes, not the agent's".to_string(),
            )
            .hint("remove `pool:` (each run makes its sandbox), or use `tier: container` for a warm pool"),
        );
        return None;
    }
    if let Some(t) = tier.filter(|t| !t.is_sandboxed()) {
        out.push(
            p.at.diag(format!(
                "tier `{t}` runs the agent on the host: it has no environment (networks, proxy, pod) to keep warm"
            ))
            .hint("use `tier: container` (the default), or remove `pool:`"),
        );
        return None;
    }
    let (lo, hi) = SIZE;
    let size = p.size.as_ref().and_then(|s| {
        let n = decimal_int(&s.value)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (lo..=hi).contains(n));
        if n.is_none() {
            out.push(
                s.diag(format!("pool size `{}` is out of range", s.value))
                    .hint(format!(
                        "use a size from {lo} to {hi} (each ready environment holds a proxy and a pod)"
                    )),
            );
        }
        n
    });
    let max_idle_s = bounded_duration(p.max_idle.as_ref(), MAX_IDLE, out);
    let warm_before_s = bounded_duration(p.warm_before.as_ref(), WARM_BEFORE, out);
    Some(Pool {
        size: size?,
        max_idle_s: max_idle_s?,
        warm_before_s: warm_before_s?,
    })
}

#[cfg(test)]
mod tests {
    use crate::spec::{Pool, SpecContext, parse};

    const BASE: &str = "tenant: z\nrepo: { path: /srv/z, base: main }\ntask: { text: x }\nagent:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\ngate:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [a]\n";

    fn ctx() -> SpecContext {
        SpecContext {
            file: "z.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1000".into(),
        }
    }

    fn err(pool: &str) -> String {
        parse(&format!("{BASE}pool: {pool}\n"), &ctx())
            .expect_err(pool)
            .to_string()
    }

    #[test]
    fn pool_has_a_size_and_defaults_for_its_durations() {
        let spec = parse(&format!("{BASE}pool: {{ size: 2 }}\n"), &ctx()).expect("ok");
        assert_eq!(
            spec.pool,
            Some(Pool {
                size: 2,
                max_idle_s: 7200,
                warm_before_s: 600
            })
        );
        let spec = parse(
            &format!("{BASE}pool:\n  size: 8\n  max_idle: 30m\n  warm_before: 0s\n"),
            &ctx(),
        )
        .expect("ok");
        assert_eq!(
            spec.pool,
            Some(Pool {
                size: 8,
                max_idle_s: 1800,
                warm_before_s: 0
            })
        );
        assert_eq!(parse(BASE, &ctx()).expect("ok").pool, None);
    }

    #[test]
    fn a_bad_pool_key_names_file_line_key_and_a_fix() {
        let e = err("{ size: 9 }");
        assert!(
            e.starts_with("z.yaml:12:15: pool.size: pool size `9` is out of range"),
            "{e}"
        );
        assert!(e.contains("use a size from 0 to 8"), "{e}");
        let e = err("{ size: -1 }");
        assert!(
            e.contains("pool.size: pool size `-1` is out of range"),
            "{e}"
        );
        let e = err("{ size: 1, max_idle: 2d }");
        assert!(
            e.contains("z.yaml:12:28: pool.max_idle: `2d` is not a duration"),
            "{e}"
        );
        let e = err("{ size: 1, max_idle: 30s }");
        assert!(
            e.contains("pool.max_idle: duration `30s` is out of range") && e.contains("1m to 24h"),
            "{e}"
        );
        let e = err("{ size: 1, warm_before: 25h }");
        assert!(
            e.contains("pool.warm_before: duration `25h` is out of range"),
            "{e}"
        );
        let e = err("{ max_idle: 1h }");
        assert!(e.contains("pool.size: missing required key `size`"), "{e}");
        let e = err("{ size: 1, max_idel: 1h }");
        assert!(e.contains("pool.max_idel") && e.contains("max_idle"), "{e}");
        let e = err("{ size: '2' }");
        assert!(e.contains("pool.size: expected an integer"), "{e}");
        let e = parse(
            &format!("{BASE}tier: worktree\npool: {{ size: 1 }}\n"),
            &ctx(),
        )
        .expect_err("host tier");
        let e = e.to_string();
        assert!(
            e.contains("z.yaml:13:7: pool: tier `worktree` runs the agent on the host")
                && e.contains("use `tier: container`"),
            "{e}"
        );
    }
}
