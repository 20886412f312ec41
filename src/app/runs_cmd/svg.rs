//! The picture of `cyclix runs --svg FILE` (issue 32, item 5): the runs as a timeline of their
//! phases, in the manner of `systemd-analyze plot`. Each run is a block: a header line (run id,
//! result, start, duration, tenant, cause), then one row per phase with its bar, placed on a time
//! axis that counts from the run's first phase and is the same for every run, so runs compare at
//! a glance. A bar is coloured by its run's result; the phase where the run failed is outlined.
//!
//! Self-contained: no script, no link, no external reference of any kind (no `href`, no `url(`),
//! generic font families only, so a browser shows the file as it is, offline. Every text that
//! comes from a record (tenant, run id, phase, cause, outcome: some of it the agent's) is made
//! printable and XML-escaped here, in [`esc`].
//!
//! Pure: records in, a string out (no I/O, no clock).

use std::fmt::Write as _;

use crate::app::history::line;
use crate::run::record::{RunRecord, RunResult};

/// Width of the picture, px.
const WIDTH: f64 = 1200.0;
/// Left edge of the plot: the phase names stand in the column before it.
const LEFT: f64 = 190.0;
/// Width of the plot; the durations stand to the right of their bars, in the rest.
const PLOT: f64 = 860.0;
/// Top of the first run block (the title, the legend and the top axis above it).
const TOP: f64 = 84.0;
/// Height of a run's header line.
const HEAD: f64 = 22.0;
/// Height of one phase row, and of its bar.
const ROW: f64 = 16.0;
const BAR: f64 = 11.0;
/// Space after each run block.
const GAP: f64 = 10.0;
/// Room below the last block for the bottom axis.
const FOOT: f64 = 34.0;
/// The narrowest bar drawn: a phase of a few ms still shows.
const MIN_BAR: f64 = 1.5;
/// The longest cause a header shows (the whole of it is in the header's hover title).
const CAUSE_CHARS: usize = 110;
/// The longest text a hover title shows.
const TITLE_CHARS: usize = 400;

/// The colour of a result's bars and legend swatch.
#[must_use]
pub fn colour(r: RunResult) -> &'static str {
    match r {
        RunResult::Passed => "#2e7d32",
        RunResult::GateFailed => "#d32f2f",
        RunResult::GateWeakened => "#c2185b",
        RunResult::AgentFailed => "#f57c00",
        RunResult::AgentTimeout => "#f9a825",
        RunResult::ProbeRefused => "#7b1fa2",
        RunResult::LeakDetected => "#212121",
        RunResult::DeliveryRefused => "#0288d1",
        RunResult::SetupBroken => "#8d6e63",
        RunResult::Interrupted => "#9e9e9e",
        RunResult::Error => "#303f9f",
    }
}

/// `text` as XML character data or an attribute value: control characters (a newline or tab
/// becomes a space, any other, which XML 1.0 cannot hold at all, U+FFFD), bidirectional
/// formatting characters and the non-characters U+FFFE/U+FFFF replaced; `&`, `<`, `>`, `"` and
/// `'` escaped.
#[must_use]
pub fn esc(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let mut out = String::with_capacity(spaced.len());
    for c in crate::text::printable(&spaced).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The first `n` characters of `text`, with `…` when it was longer.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_owned()
    } else {
        let mut t: String = text.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// A duration for a person: `340 ms`, `12.3 s`, `4 min 05 s`, `1 h 02 min`.
#[must_use]
pub fn duration(ms: u128) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
    } else if ms < 3_600_000 {
        format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{} h {:02} min", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// An axis tick's label: a multiple of the step, so whole units where it can (`0`, `500 ms`,
/// `30 s`, `1 min`, `1 min 30 s`, `2 h`).
fn tick_label(ms: u128) -> String {
    if ms == 0 {
        "0".to_owned()
    } else if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
        }
    } else if ms < 3_600_000 {
        if ms.is_multiple_of(60_000) {
            format!("{} min", ms / 60_000)
        } else {
            format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
        }
    } else if ms.is_multiple_of(3_600_000) {
        format!("{} h", ms / 3_600_000)
    } else {
        format!("{} h {} min", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// The axis step for a span of `span_ms`: the smallest round step that needs at most 10 ticks.
fn step(span_ms: u128) -> u128 {
    const STEPS: [u128; 21] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
        120_000, 300_000, 600_000, 900_000, 1_800_000,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span_ms.div_ceil(*s) <= 10)
        .unwrap_or_else(|| {
            // Whole hours past that.
            let hours = span_ms.div_ceil(3_600_000).div_ceil(10).max(1);
            hours * 3_600_000
        })
}

/// A record's first phase start and its span (first start to last end), ms.
fn bounds(r: &RunRecord) -> Option<(u128, u128)> {
    let start = r.phases.iter().map(|p| p.start_ms).min()?;
    let end = r.phases.iter().map(|p| p.end_ms).max().unwrap_or(start);
    Some((start, end.saturating_sub(start)))
}

/// A coordinate, one decimal.
fn px(v: f64) -> String {
    format!("{v:.1}")
}

/// Milliseconds as a float coordinate input (the spans drawn fit easily).
#[allow(clippy::cast_precision_loss)]
fn ms_f(ms: u128) -> f64 {
    ms as f64
}

/// A count as a coordinate factor.
#[allow(clippy::cast_precision_loss)]
fn count(n: usize) -> f64 {
    n as f64
}

/// The height of a run's block: its header, a row per phase, the gap after it.
fn block_height(r: &RunRecord) -> f64 {
    HEAD + ROW * count(r.phases.len()) + GAP
}

/// The longest time axis drawn (ms, a century): a record whose phases span more (a corrupted
/// or hand-edited one: records are written on the host from its clock) is drawn cut at it,
/// never overflowing the axis' arithmetic (attack review).
const MAX_SPAN_MS: u128 = 100 * 365 * 86_400_000;

/// The SVG of `records` (drawn in the order given: the caller's newest first), titled
/// `title`. One `<g class="run" data-run=… data-result=…>` per record, holding one
/// `<rect class="phase" data-phase=… data-ms=…>` per phase of its record, each with a
/// `<title>` naming the phase, its duration and its outcome.
#[must_use]
#[allow(clippy::too_many_lines)]
pub fn svg(records: &[RunRecord], title: &str) -> String {
    let span = records
        .iter()
        .filter_map(|r| bounds(r).map(|b| b.1))
        .max()
        .unwrap_or(0)
        .clamp(1, MAX_SPAN_MS);
    let step = step(span);
    let axis_end = span.div_ceil(step).max(1).saturating_mul(step);
    let scale = PLOT / ms_f(axis_end);
    let blocks: f64 = records.iter().map(block_height).sum();
    let bottom = TOP + blocks.max(ROW * 2.0);
    let height = (bottom + FOOT).ceil();

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    s.push_str(
        "<style>\
         text{fill:#222}\
         .title{font-size:16px;font-weight:bold}\
         .id{font-family:monospace;font-weight:bold}\
         .tick,.axis{fill:#666;font-size:11px}\
         .dur{fill:#444;font-size:11px}\
         .grid{stroke:#e3e3e3;stroke-width:1}\
         .sep{stroke:#bbb;stroke-width:1}\
         .phase.failed{stroke:#000;stroke-width:1.5}\
         .name.failed{font-weight:bold}\
         </style>\n",
    );
    let _ = writeln!(
        s,
        r##"<rect class="bg" x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text class="title" x="10" y="24">{}</text>"#,
        esc(title)
    );

    // The legend: each result drawn, in the order it first appears.
    let mut seen: Vec<RunResult> = Vec::new();
    for r in records {
        if !seen.contains(&r.result) {
            seen.push(r.result);
        }
    }
    s.push_str("<g class=\"legend\">\n");
    let mut x = 10.0;
    for r in &seen {
        let name = r.as_str();
        let _ = writeln!(
            s,
            r#"<rect class="swatch" data-result="{name}" x="{}" y="38" width="12" height="12" fill="{}"/><text x="{}" y="48">{name}</text>"#,
            px(x),
            colour(*r),
            px(x + 16.0)
        );
        x += 16.0 + 7.0 * count(name.len()) + 18.0;
    }
    if !seen.is_empty() {
        let _ = writeln!(
            s,
            r#"<text class="axis" x="{}" y="48">outlined: the phase where the run failed; hover a bar for its phase, duration and outcome</text>"#,
            px(x + 8.0)
        );
    }
    s.push_str("</g>\n");

    // The time axis: gridlines over every block, labels above and below.
    s.push_str("<g class=\"axis\">\n");
    let _ = writeln!(
        s,
        r#"<text class="axis" x="{}" y="{}" text-anchor="end">since the run's start</text>"#,
        px(LEFT - 8.0),
        px(TOP - 10.0)
    );
    let mut t = 0;
    while t <= axis_end {
        let x = px(LEFT + ms_f(t) * scale);
        let label = tick_label(t);
        let _ = writeln!(
            s,
            r#"<line class="grid" x1="{x}" y1="{}" x2="{x}" y2="{}"/><text class="tick" x="{x}" y="{}" text-anchor="middle">{label}</text><text class="tick" x="{x}" y="{}" text-anchor="middle">{label}</text>"#,
            px(TOP - 6.0),
            px(bottom),
            px(TOP - 10.0),
            px(bottom + 14.0)
        );
        t += step;
    }
    s.push_str("</g>\n");

    if records.is_empty() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">no runs recorded</text>"#,
            px(LEFT),
            px(TOP + 20.0)
        );
    }
    let mut y = TOP;
    for r in records {
        run_block(&mut s, r, y, scale);
        y += block_height(r);
    }
    s.push_str("</svg>\n");
    s
}

/// The phase where `r` failed: the one its record names, else the one its result speaks of
/// (a gate that failed ran to its end, so its phase's outcome is `ok`).
fn culprit(r: &RunRecord) -> Option<&str> {
    r.failed_phase.as_deref().or(match r.result {
        RunResult::GateFailed | RunResult::GateWeakened => Some("gate"),
        RunResult::AgentFailed | RunResult::AgentTimeout | RunResult::LeakDetected => Some("agent"),
        RunResult::ProbeRefused => Some("probe"),
        RunResult::Passed
        | RunResult::DeliveryRefused
        | RunResult::SetupBroken
        | RunResult::Interrupted
        | RunResult::Error => None,
    })
}

/// One run's block at `top`: its header line, then a row per phase.
fn run_block(out: &mut String, rec: &RunRecord, top: f64, scale: f64) {
    let hist = line(rec);
    let result = rec.result.as_str();
    let fill = colour(rec.result);
    let _ = writeln!(
        out,
        r#"<g class="run" data-run="{}" data-tenant="{}" data-result="{result}">"#,
        esc(&rec.run_id),
        esc(&rec.tenant)
    );
    if top > TOP {
        let _ = writeln!(
            out,
            r#"<line class="sep" x1="10" y1="{y}" x2="{}" y2="{y}"/>"#,
            px(WIDTH - 10.0),
            y = px(top - GAP / 2.0)
        );
    }
    let when = hist
        .started
        .clone()
        .unwrap_or_else(|| "no phase recorded".into());
    let took = hist.duration_ms.map(duration).unwrap_or_default();
    let cause = hist.cause.clone().unwrap_or_default();
    let _ = write!(
        out,
        r#"<text class="head" x="10" y="{}"><title>{}</title><tspan class="id">{}</tspan> · <tspan fill="{fill}" font-weight="bold">{result}</tspan> · {} · {} · {}"#,
        px(top + 15.0),
        esc(&clip(
            &format!(
                "{} {} {result} {when} {took} {cause}",
                rec.tenant, rec.run_id
            ),
            TITLE_CHARS
        )),
        esc(&rec.run_id),
        esc(&when),
        esc(&took),
        esc(&rec.tenant),
    );
    if !cause.is_empty() {
        let _ = write!(out, " — {}", esc(&clip(&cause, CAUSE_CHARS)));
    }
    out.push_str("</text>\n");
    let start = bounds(rec).map_or(0, |b| b.0);
    for (n, p) in rec.phases.iter().enumerate() {
        let row = top + HEAD + ROW * count(n);
        let ms = p.end_ms.saturating_sub(p.start_ms);
        let bar_x = LEFT + ms_f(p.start_ms.saturating_sub(start)) * scale;
        let bar_w = (ms_f(ms) * scale).max(MIN_BAR);
        let failed = p.outcome != "ok" || culprit(rec) == Some(p.name.as_str());
        let class = if failed { " failed" } else { "" };
        let name = esc(&p.name);
        let outcome = esc(&clip(&p.outcome, TITLE_CHARS));
        let took = duration(ms);
        let _ = writeln!(
            out,
            r#"<text class="name{class}" x="{}" y="{}" text-anchor="end">{name}</text><rect class="phase{class}" data-run="{}" data-phase="{name}" data-result="{result}" data-ms="{ms}" x="{}" y="{}" width="{}" height="{BAR}" fill="{fill}"><title>{name}: {took} ({outcome})</title></rect><text class="dur" x="{}" y="{}">{took}</text>"#,
            px(LEFT - 8.0),
            px(row + 11.0),
            esc(&rec.run_id),
            px(bar_x),
            px(row + (ROW - BAR) / 2.0),
            px(bar_w),
            px(bar_x + bar_w + 4.0),
            px(row + 11.0),
        );
    }
    out.push_str("</g>\n");
}

#[cfg(test)]
mod tests;
