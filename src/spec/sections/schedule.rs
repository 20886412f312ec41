//! `schedule:` when the tenant's timer fires.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::calendar::calendar;
use crate::spec::rules::durations::bounded_duration;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Schedule};

/// Randomized delay bounds and default, in seconds (0–24h, default 0).
const RANDOM_DELAY: (u64, u64, u64) = (0, 24 * 3600, 0);

/// `schedule:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawSchedule {
    /// The mapping.
    pub(crate) at: Pos,
    /// `on_calendar`.
    pub(crate) on_calendar: Option<Located<String>>,
    /// `persistent`.
    pub(crate) persistent: Option<Located<bool>>,
    /// `randomized_delay`.
    pub(crate) randomized_delay: Option<Located<String>>,
}

/// The keys of `schedule:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "on_calendar",
        Kind::Str(StrKind::Line),
        "a systemd calendar expression (systemd.time(7)), at most every 5 minutes",
        Some("`on_calendar: daily`"),
    ),
    Key::optional(
        "persistent",
        Kind::Bool,
        "catch up on a run missed while the machine was off (default true)",
    ),
    Key::optional(
        "randomized_delay",
        Kind::Str(StrKind::Duration),
        "random delay added to each start (0-24h, default 0)",
    ),
];

/// Reads `schedule:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawSchedule> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawSchedule {
        at: f.pos(),
        on_calendar: d.string(&f, "on_calendar"),
        persistent: d.boolean(&f, "persistent"),
        randomized_delay: d.string(&f, "randomized_delay"),
    })
}

/// Validates `schedule:`: the calendar subset, `persistent` (default true), the delay.
pub(crate) fn validate(s: &RawSchedule, out: &mut Vec<Diagnostic>) -> Option<Schedule> {
    let on_calendar = s.on_calendar.as_ref().and_then(|c| {
        calendar(&c.value)
            .map_err(|e| {
                out.push(c.diag(e).hint(
                    "use e.g. `daily`, `hourly`, `*-*-* 02:00:00` or `Mon..Fri 03:00` (systemd.time(7)); runs at most every 5 minutes",
                ));
            })
            .ok()
            .map(|()| c.value.clone())
    });
    let randomized_delay_s = bounded_duration(s.randomized_delay.as_ref(), RANDOM_DELAY, out);
    Some(Schedule {
        on_calendar: on_calendar?,
        persistent: s.persistent.as_ref().is_none_or(|b| b.value),
        randomized_delay_s: randomized_delay_s?,
    })
}
