#!/usr/bin/env python3
"""cyclix's cost next to the bare commands it wraps (issue 7). Runs as the user cyclix runs as,
on a host (or testbed) with a systemd user manager and rootless Podman 5; `bench/run` calls it
inside the testbed. Prints the table on stderr and one JSON object (schema cyclix-bench/1) on
stdout. It measures; it never judges: noise cannot fail it, only a measurement that did not run.

  inside.py [--short | --to-agent | --gvisor] [--iterations N] [--cyclix PATH]
            [--build debug|release]

--to-agent measures only the time to agent, cold and warm, the field's way (issue 33): 100
iterations (`--iterations N`), each a cold and a warm run started by `systemctl --user start`
and by `cyclix run`; the start request -> the agent's first instruction, p50/p95/p99 and the
success rate, and from the same runs' records the claim -> first instruction with its parts.

--gvisor measures only tier gvisor next to tier container (the full run measures it too, last):
the demo tenant as `demo/tenant.yaml` has it, once per tier (`tier: gvisor` in the copy), its
agent printing T0 before the demo agent starts; `--iterations N` runs of each, interleaved
(10 by default); bring-up, time to agent and the gate's duration per tier and the
gVisor/container ratio of the medians. A tier-gvisor run that does not pass leaves the ratios
out (said in the table and in the JSON's `gvisor.error`) and the exit status 1, after the JSON.

Each pair runs interleaved N times (cyclix side, then bare side; N = 20, 1 with --short);
min/median(p50)/p95/max per side and the ratio of the medians; every sample is in the JSON.
What each side includes is in docs/performance.md.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HOME = Path.home()
RUNTIME = Path(os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}"))
STATE = HOME / ".local/state/cyclix/runs"
AGENT_IMAGE = "localhost/cyclix-agent-python:latest"
PROXY_IMAGE = "localhost/cyclix-proxy:latest"
# The agent's first instruction prints the wall clock in ms; both sides use the same one.
T0_CMD = "echo T0=$(date +%s%3N)"
# The demo tenant's spec as cyclix embeds it (`cyclix demo setup` writes it).
DEMO_SPEC = Path(__file__).resolve().parent.parent / "demo" / "tenant.yaml"
# The tiers compared by --gvisor (and the full run): the baseline first.
TIERS = ("container", "gvisor")
# Runs per tier of the tier comparison (the full run's; --gvisor takes --iterations).
GVISOR_RUNS = 10
# What the tier comparison measures: (pair name, figure, what it includes).
TIER_MEASURES = (
    ("bring-up (ms)", "bringup",
     "render start -> agent unit started, plus go -> the agent's first instruction (probe run "
     "excluded), as the cold bring-up"),
    ("time to agent (ms)", "to_agent",
     "the run's first phase -> the agent's first instruction, the probe run included"),
    ("gate (ms)", "gate", "the gate phase: the demo's pytest suite in the gate container"),
)


def now_ms():
    return time.time_ns() / 1e6


def sh(cmd, check=True, **kw):
    r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise SystemExit(f"bench: `{cmd}` failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r


def p95(xs):
    """The nearest-rank 95th percentile (the 19th of 20 samples)."""
    return pct(xs, 95)


def pct(xs, q):
    """The nearest-rank q-th percentile (p95 of 20 samples: the 19th; p99 of 100: the 99th)."""
    s = sorted(xs)
    return s[max(0, -(-q * len(s) // 100) - 1)]


def stats(xs):
    return {"n": len(xs), "min": round(min(xs), 1), "median": round(statistics.median(xs), 1),
            "p95": round(p95(xs), 1), "max": round(max(xs), 1),
            "samples": [round(x, 1) for x in xs]}


def pair(name, target, cyclix, bare, unit="ms", note=""):
    c, b = stats(cyclix), stats(bare)
    return {"name": name, "unit": unit, "target": target, "note": note, "cyclix": c, "bare": b,
            "ratio": round(c["median"] / b["median"], 2) if b["median"] else None}


def tenant(cyclix, name, agent_cmd, extra=""):
    repo = HOME / "src" / name
    sh(f"rm -rf {repo} && mkdir -p ~/src ~/.config/cyclix/tenants && "
       f"git clone -q ~/.local/share/cyclix/demo/project {repo}")
    (HOME / f".config/cyclix/tenants/{name}.yaml").write_text(f"""tenant: {name}
repo: {{ path: ~/src/{name}, base: main }}
task: {{ text: "benchmark" }}
agent:
  image: {AGENT_IMAGE}
  unpinned_local_image: true
  command: {json.dumps(["sh", "-c", agent_cmd])}
  timeout: 2m
gate:
  image: {AGENT_IMAGE}
  unpinned_local_image: true
  command: ["true"]
  timeout: 2m
{extra}""")


def record(name, run_id):
    p = STATE / name / f"{run_id}.json"
    if not p.exists():
        p = STATE / name / "latest.json"
    rec = json.loads(p.read_text())
    if rec.get("run_id") != run_id:
        raise SystemExit(f"bench: no record of run {run_id} for {name}")
    return rec


def phase(rec, name):
    for p in rec["phases"]:
        if p["name"] == name:
            return p
    raise SystemExit(f"bench: run {rec['run_id']} has no phase {name}: {rec.get('error')}")


def t0_of(lines):
    for line in lines:
        m = re.search(r"T0=(\d{13})", line)
        if m:
            return int(m.group(1))
    return None


seq = [0]


def run_id():
    seq[0] += 1
    return time.strftime("%Y%m%dt%H%M%S", time.gmtime()) + f"-b{seq[0]:03x}"


def cyclix_run(cyclix, name):
    rid = run_id()
    r = sh([cyclix, "run", name, "--run-id", rid], check=False)
    rec = record(name, rid)
    if rec["result"] != "passed":
        raise SystemExit(f"bench: run {rid} of {name}: {rec['result']}: {rec.get('error')} "
                         f"{rec.get('refusal')} {r.stderr[-500:]}")
    return cold_figures(rec)


def first_instruction(rec):
    """The agent's T0 (ms since the epoch) from a passed run's record; raises if it is not there."""
    t0 = t0_of(rec["agent_log"])
    if t0 is None or rec.get("agent_ready_ms") is None or rec.get("go_ms") is None:
        raise SystemExit(f"bench: run {rec['run_id']}: no T0 / agent_ready_ms / go_ms in the "
                         "record")
    return t0


def cold_figures(rec):
    """A cold run's figures from its record."""
    t0 = first_instruction(rec)
    render = phase(rec, "render")["start_ms"]
    claim = rec["phases"][0]["start_ms"]
    return {
        # cold time to agent: the run's first phase (prepare: the claim of the tenant, the
        # worktree, the secrets) -> the agent's first instruction, the probe run included
        "to_agent": t0 - claim,
        "to_agent_parts": {
            "prepare": phase(rec, "prepare")["end_ms"] - claim,
            "render..load": phase(rec, "load")["end_ms"] - render,
            "start": rec["agent_ready_ms"] - phase(rec, "load")["end_ms"],
            "probe": rec["go_ms"] - rec["agent_ready_ms"],
            "go..first instruction": t0 - rec["go_ms"],
        },
        # render+install+load+start(infra)+agent unit start, then go -> first instruction
        "bringup": (rec["agent_ready_ms"] - render) + (t0 - rec["go_ms"]),
        "probe_wall": rec["go_ms"] - rec["agent_ready_ms"],
        "teardown": sum(phase(rec, p)["end_ms"] - phase(rec, p)["start_ms"]
                        for p in ("teardown", "audit")),
        "probes": {p["id"]: p.get("ms", 0) for p in rec["probes"]},
        "phases": {p["name"]: p["end_ms"] - p["start_ms"] for p in rec["phases"]},
        "leftovers": rec["leftovers"],
    }


def fill(cyclix, name):
    """`cyclix pool fill` makes one environment (untimed); returns its id and fill time (ms)."""
    filled = sh([cyclix, "pool", "fill", name]).stdout
    m = re.search(r"environment (\S+) ready \((\d+) ms\)", filled)
    if not m:
        raise SystemExit(f"bench: `cyclix pool fill {name}` made no environment: {filled}")
    return m.group(1), int(m.group(2))


def warm_run(cyclix, name):
    """One warm sample: `cyclix pool fill` makes one environment (untimed), then `cyclix run`
    claims it. Time to agent: the record's `claim` phase (the pool's rename, the check against
    the fill) -> the agent's first instruction, the probe run on the claimed objects included."""
    env, fill_ms = fill(cyclix, name)
    held = pooled_rss_kib(env)
    r = sh([cyclix, "run", name], check=False)
    rec = record(name, env)
    e = rec.get("environment") or {}
    if rec["result"] != "passed" or not e.get("pooled"):
        raise SystemExit(f"bench: warm run {env} of {name}: {rec['result']} pooled="
                         f"{e.get('pooled')} {e.get('why_cold')}: {rec.get('error')} "
                         f"{rec.get('notices')} {r.stderr[-500:]}")
    figures = warm_figures(rec, fill_ms)
    figures["pooled_rss_kib"] = held
    return figures


def pooled_rss_kib(env):
    """What a ready environment holds in memory (KiB, VmRSS of each container's processes): its
    proxy, its pod's infra container and its held agent container (issue 33)."""
    pod = f"cyclix-{env}"
    infra = sh(["podman", "pod", "inspect", pod, "--format", "{{.InfraContainerID}}"],
               check=False).stdout.strip()
    return {"proxy": rss_kib(f"{pod}-proxy"), "infra": rss_kib(infra) if infra else 0,
            "agent": rss_kib(f"{pod}-agent")}


def warm_figures(rec, fill_ms):
    """A warm run's figures from its record (`fill_ms`: its environment's fill, untimed)."""
    t0 = first_instruction(rec)
    claim = phase(rec, "claim")
    render = phase(rec, "render")["start_ms"]
    return {
        "to_agent": t0 - claim["start_ms"],
        "to_agent_parts": {
            "claim+check": claim["end_ms"] - claim["start_ms"],
            # from the claim's end: the run's set-up (its ledger, convergence) and prepare
            "prepare": phase(rec, "prepare")["end_ms"] - claim["end_ms"],
            "render..load": phase(rec, "load")["end_ms"] - render,
            "start": rec["agent_ready_ms"] - phase(rec, "load")["end_ms"],
            "probe": rec["go_ms"] - rec["agent_ready_ms"],
            "go..first instruction": t0 - rec["go_ms"],
        },
        "fill_ms": fill_ms,
        "teardown": sum(phase(rec, p)["end_ms"] - phase(rec, p)["start_ms"]
                        for p in ("teardown", "audit")),
        "phases": {p["name"]: p["end_ms"] - p["start_ms"] for p in rec["phases"]},
        "leftovers": rec["leftovers"],
    }


# The two ways a user starts a run (issue 33 item 1).
ENTRIES = ("systemctl", "cyclix run")


def latest_id(name):
    p = STATE / name / "latest.json"
    return json.loads(p.read_text()).get("run_id") if p.exists() else None


def started(cyclix, name, entry, warm):
    """One run started the user's way, the field's way of measuring it: from the start request
    (`systemctl --user start --wait cyclix-run@NAME.service` issued, or `cyclix run NAME`
    exec'd; the wall clock read right before) to the agent's first instruction (the T0 it
    prints from the same clock). Warm: one environment filled first, untimed (as a pool's
    keeper would have). Never raises for a run that went wrong: a sample is `ok` only when the
    run passed, went warm or cold as asked and its agent printed T0; otherwise `why` says."""
    fill_ms = fill(cyclix, name)[1] if warm else None
    before = latest_id(name)
    argv = (["systemctl", "--user", "start", "--wait", f"cyclix-run@{name}.service"]
            if entry == "systemctl" else [cyclix, "run", name])
    t_req = now_ms()
    r = subprocess.run(argv, capture_output=True, text=True)
    rid = latest_id(name)
    if entry == "systemctl" and r.returncode != 0:
        sh(["systemctl", "--user", "reset-failed", f"cyclix-run@{name}.service"], check=False)
    if rid is None or rid == before:
        return {"ok": False, "why": f"no new record ({entry} exited {r.returncode}: "
                                    f"{r.stderr.strip()[-300:]})"}
    rec = record(name, rid)
    pooled = bool((rec.get("environment") or {}).get("pooled"))
    t0 = t0_of(rec.get("agent_log") or [])
    if rec["result"] != "passed" or pooled != warm or t0 is None:
        return {"ok": False, "run": rid,
                "why": f"{rec['result']}, pooled={pooled}, T0={'yes' if t0 else 'no'}: "
                       f"{rec.get('error')} {rec.get('refusal')}"}
    figures = warm_figures(rec, fill_ms) if warm else cold_figures(rec)
    return {"ok": True, "run": rid, "ms": t0 - t_req, "figures": figures}


def start_to_agent(samples):
    """Per entry and temperature: the start request -> first instruction over every sample,
    p50/p95/p99 of the passed ones and the success rate."""
    out = {}
    for key, xs in samples.items():
        good = [x["ms"] for x in xs if x["ok"]]
        row = {"iterations": len(xs), "passed": len(good),
               "success_rate": round(len(good) / len(xs), 4) if xs else None,
               "failures": [{"run": x.get("run"), "why": x["why"]} for x in xs if not x["ok"]]}
        if good:
            row.update(stats(good))
            row["p99"] = round(pct(good, 99), 1)
        out[key] = row
    return out


def tier_spec(demo_yaml, name, tier):
    """The demo tenant's spec (`demo_yaml`, demo/tenant.yaml) as tenant `name` on tier `tier`:
    its repository ~/src/NAME, its agent printing T0 (T0_CMD) before the demo agent starts.
    Raises ValueError when the demo spec no longer has exactly one of the lines it changes."""
    agent = json.dumps(["sh", "-c", f"{T0_CMD}; exec cyclix-demo-agent"])
    for old, new in (("tenant: demo\n", f"tenant: {name}\n"),
                     ("  path: ~/.local/share/cyclix/demo/project\n", f"  path: ~/src/{name}\n"),
                     ("tier: container\n", f"tier: {tier}\n"),
                     ("  command: [cyclix-demo-agent]\n", f"  command: {agent}\n")):
        if demo_yaml.count(old) != 1:
            raise ValueError(f"the demo spec has {demo_yaml.count(old)} line(s) {old.strip()!r}, "
                             "not one: update bench/inside.py's tier_spec")
        demo_yaml = demo_yaml.replace(old, new)
    return demo_yaml


def tier_figures(rec):
    """A passed demo run's figures for the tier comparison (TIER_MEASURES), from its record."""
    t0 = first_instruction(rec)
    gate = phase(rec, "gate")
    return {
        "bringup": (rec["agent_ready_ms"] - phase(rec, "render")["start_ms"]) + (t0 - rec["go_ms"]),
        "to_agent": t0 - rec["phases"][0]["start_ms"],
        "gate": gate["end_ms"] - gate["start_ms"],
        "phases": {p["name"]: p["end_ms"] - p["start_ms"] for p in rec["phases"]},
    }


def tier_pairs(figures):
    """`figures`: per tier (TIERS) a list of tier_figures. One pair per TIER_MEASURES, each with
    the stats per tier and the gVisor/container ratio of the medians."""
    base, other = TIERS
    out = []
    for name, key, note in TIER_MEASURES:
        b, o = stats([f[key] for f in figures[base]]), stats([f[key] for f in figures[other]])
        out.append({"name": name, "unit": "ms", "note": note, base: b, other: o,
                    "ratio": round(o["median"] / b["median"], 2) if b["median"] else None})
    return out


def fmt_tier_row(p):
    c, g = p[TIERS[0]], p[TIERS[1]]
    return (f"{p['name']:<28} {c['min']:>8} {c['median']:>8} {c['p95']:>8} | "
            f"{g['min']:>8} {g['median']:>8} {g['p95']:>8} | {p['ratio']!s:>6}")


class Miss(Exception):
    """A run of the tier comparison did not pass: its measurement did not run."""


def tier_run(cyclix, name):
    """One `cyclix run NAME` of the tier comparison: its tier_figures and its record."""
    rid = run_id()
    r = sh([cyclix, "run", name, "--run-id", rid], check=False)
    try:
        rec = record(name, rid)
    except (SystemExit, FileNotFoundError) as e:
        raise Miss(f"run {rid} of {name} left no record ({e}): {r.stderr.strip()[-500:]}")
    if rec["result"] != "passed":
        raise Miss(f"run {rid} of {name}: {rec['result']}: {rec.get('error')} "
                   f"{rec.get('refusal')} {r.stderr.strip()[-300:]}")
    try:
        return tier_figures(rec), rec
    except SystemExit as e:
        raise Miss(str(e))


def gvisor_vs_container(cyclix, n, log):
    """Tier gvisor next to tier container on the demo tenant: one tenant per tier (tier_spec,
    each with its own clone of the demo project), one untimed warm-up each, then `n` runs of
    each, interleaved. Returns {"n", "runtime", "pairs", "phases_median_ms"} or, when a run did
    not pass, {"error"}."""
    demo = DEMO_SPEC.read_text()
    names = {t: f"btier-{t}" for t in TIERS}
    for t, name in names.items():
        repo = HOME / "src" / name
        sh(f"rm -rf {repo} && mkdir -p ~/src ~/.config/cyclix/tenants && "
           f"git clone -q ~/.local/share/cyclix/demo/project {repo}")
        (HOME / f".config/cyclix/tenants/{name}.yaml").write_text(tier_spec(demo, name, t))
    figures = {t: [] for t in TIERS}
    runtime = None
    try:
        for t in TIERS:
            tier_run(cyclix, names[t])
        for i in range(n):
            log(f"bench: tier pair {i + 1}/{n}")
            for t in TIERS:
                f, rec = tier_run(cyclix, names[t])
                figures[t].append(f)
                runtime = rec.get("oci_runtime") or runtime
    except Miss as e:
        return {"n": n, "error": str(e)}
    return {"n": n, "tenant": "demo", "runtime": runtime, "pairs": tier_pairs(figures),
            "phases_median_ms": {t: {k: statistics.median([f["phases"][k] for f in fs])
                                     for k in fs[0]["phases"]} for t, fs in figures.items()}}


def log_gvisor(log, g):
    log("")
    if "error" in g:
        log(f"gVisor vs container          not measured: {g['error'][:600]}")
        return
    rt = g.get("runtime") or {}
    log(f"{'gVisor vs container (n=' + str(g['n']) + ')':<28} {'cont min':>8} {'p50':>8} "
        f"{'p95':>8} | {'gVis min':>8} {'p50':>8} {'p95':>8} | {'gV/ct':>6}   demo tenant, "
        f"runsc {rt.get('version', '?')} ({', '.join(rt.get('flags', []))})")
    for p in g["pairs"]:
        log(fmt_tier_row(p))


def bare_once(conf_dir, i):
    """The same topology by hand: networks, pod, proxy, agent, one command after the other,
    with the flags of the rendered Quadlet files; then removal of the same objects."""
    n = f"bare{i}"
    lbl = f"--label=io.cyclix.run={n}"
    hard = ["--cap-drop=all", "--security-opt=no-new-privileges", "--read-only", "--init"]
    t = now_ms()
    sh(["podman", "network", "create", "--internal", "--subnet", "10.213.250.0/24", lbl, n])
    sh(["podman", "network", "create", lbl, f"{n}-egress"])
    sh(["podman", "pod", "create", "--name", n, "--network", n, "--dns-option=timeout:1",
        "--dns-option=attempts:1", lbl])
    sh(["podman", "run", "-d", "--name", f"{n}-proxy", "--pull=never",
        "--network", f"{n}:ip=10.213.250.2", "--network", f"{n}-egress", *hard,
        f"--mount=type=bind,source={conf_dir}/squid.conf,destination=/etc/cyclix/squid.conf,"
        "readonly=true", lbl, "--stop-signal=SIGKILL", PROXY_IMAGE])
    sh(["podman", "run", "-d", "--name", f"{n}-agent", "--pull=never", "--pod", n, *hard,
        "--tmpfs=/tmp:rw,nosuid,nodev,mode=1777,size=1g", lbl, AGENT_IMAGE, "sh", "-c", T0_CMD])
    sh(["podman", "wait", f"{n}-agent"])
    t0 = t0_of(sh(["podman", "logs", f"{n}-agent"]).stdout.splitlines())
    if t0 is None:
        raise SystemExit("bench: the bare agent printed no T0")
    bringup = t0 - t
    t = now_ms()
    sh(["podman", "rm", "-f", "-t0", f"{n}-agent", f"{n}-proxy"])
    sh(["podman", "pod", "rm", "-f", n])
    sh(["podman", "network", "rm", n, f"{n}-egress"])
    teardown = now_ms() - t
    return bringup, teardown


def timed(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    ms = (time.perf_counter() - t) * 1e3
    if r.returncode != 0:
        raise SystemExit(f"bench: `{' '.join(argv)}` failed: {r.stderr.strip()[-500:]}")
    return ms


def rss_kib(container):
    r = sh(["podman", "top", container, "hpid"], check=False)
    total = 0
    for pid in r.stdout.split()[1:]:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ValueError, ProcessLookupError):
            pass
    return total


def density(cyclix, n):
    names = [f"bdens{i}" for i in range(n)]
    for name in names:
        tenant(cyclix, name, T0_CMD + "; sleep 4")
    ids = {name: run_id() for name in names}
    peak = {}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for name, rid in ids.items():
                pod = f"cyclix-{rid}"
                infra = sh(["podman", "pod", "inspect", pod, "--format",
                            "{{.InfraContainerID}}"], check=False).stdout.strip()
                proxy = rss_kib(f"{pod}-proxy")
                inf = rss_kib(infra) if infra else 0
                if proxy and inf:
                    peak[rid] = max(peak.get(rid, 0), proxy + inf)
            time.sleep(0.3)

    th = threading.Thread(target=sample)
    th.start()
    t = time.perf_counter()
    procs = {name: subprocess.Popen([cyclix, "run", name, "--run-id", rid],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, rid in ids.items()}
    for p in procs.values():
        p.wait()
    wall = (time.perf_counter() - t) * 1e3
    stop.set()
    th.join()
    recs = [record(name, rid) for name, rid in ids.items()]
    left = []
    for rid in ids.values():
        l = f"label=io.cyclix.run={rid}"
        left += sh(f"podman ps -aq --filter {l}; podman pod ls -q --filter {l}; "
                   f"podman network ls -q --filter {l}; podman volume ls -q --filter {l}"
                   ).stdout.split()
    left += [x for r in recs for x in r["leftovers"]]
    results = [r["result"] for r in recs]
    return {
        "runs": n,
        "wall_ms": round(wall),
        "passed": results.count("passed"),
        "results": results,
        "collisions": len([r for r in recs if r["result"] != "passed"
                           and "subnet" in str(r.get("error", ""))]) + (n - len(set(ids.values()))),
        "leftovers": left,
        "rss_mib_per_run": stats([v / 1024 for v in peak.values()]) if peak else None,
        "rss_sampled_runs": len(peak),
    }


def time_to_agent(cy, wa):
    """The cold and the warm time to agent, their parts, and the warm/cold ratio of the p50s."""
    parts = lambda xs: {k: stats([x["to_agent_parts"][k] for x in xs])  # noqa: E731
                        for k in xs[0]["to_agent_parts"]}
    cold, warm = stats([c["to_agent"] for c in cy]), stats([w["to_agent"] for w in wa])
    return {
        "cold": cold, "cold_parts": parts(cy), "warm": warm, "warm_parts": parts(wa),
        "warm_over_cold": round(warm["median"] / cold["median"], 2),
        "warm_fill_ms": stats([w["fill_ms"] for w in wa]),
        "pooled_rss_mib": {k: stats([round(w["pooled_rss_kib"][k] / 1024, 1) for w in wa])
                           for k in ("proxy", "infra", "agent")}
        if wa and "pooled_rss_kib" in wa[0] else None,
        "warm_teardown_ms": stats([w["teardown"] for w in wa]),
        "warm_phases_median_ms": {k: statistics.median([w["phases"][k] for w in wa])
                                  for k in wa[0]["phases"]},
        "warm_leftovers": [x for w in wa for x in w["leftovers"]],
        "target": "warm p50 <= 250 ms, p95 <= 400 ms and <= 0.25 x cold p50 (issue 33)",
        "note": "cold: the run's first phase (prepare; `--run-id`, no claim) -> the agent's "
                "first instruction, the probe run included; warm: the `claim` phase (the pool's "
                "rename and the check against the fill) -> the agent's first instruction, the "
                "whole probe suite on the claimed objects included; fill (`cyclix pool fill`, "
                "one environment) untimed in it"}


def log_to_agent(log, build, n, ta):
    if build:
        log("")
        log(f"cyclix build: {build}, n={n}")
    for side in ("cold", "warm"):
        s = ta[side]
        log(f"time to agent, {side} (ms)     {s['min']:>8} {s['median']:>8} {s['p95']:>8}   "
            "parts p50/p95: " + ", ".join(f"{k} {v['median']}/{v['p95']}"
                                         for k, v in ta[side + "_parts"].items()))
    log(f"time to agent, warm/cold     {ta['warm_over_cold']} (target <= 0.25; warm p50 target "
        f"<= 250 ms, p95 <= 400 ms); fill p50 {ta['warm_fill_ms']['median']} ms, warm "
        f"teardown+audit p50 {ta['warm_teardown_ms']['median']} ms, "
        f"{len(ta['warm_leftovers'])} leftovers")
    if ta.get("pooled_rss_mib"):
        log("pooled environment RSS p50 (MiB): " + ", ".join(
            f"{k} {v['median']}" for k, v in ta["pooled_rss_mib"].items()))


def to_agent_their_way(cyclix, a, out, log):
    """--to-agent: `a.iterations` iterations, each a cold and a warm run started by systemctl
    and by `cyclix run`, interleaved; the start request -> first instruction of every one
    (`start_to_agent`), and the claim/first phase -> first instruction with its parts from the
    same runs' records (`time_to_agent`). The bench tenant's `cyclix-run@bench.service` comes
    from `cyclix install --tenant bench`, run while its spec has no pool (so no keeper fills
    behind the cold runs' backs); the pool is put back right after."""
    spec = HOME / ".config/cyclix/tenants/bench.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("pool:\n  size: 1\n", ""))
    sh([cyclix, "install", "--tenant", "bench"])
    spec.write_text(text)
    samples = {f"{t}, {e}": [] for t in ("cold", "warm") for e in ENTRIES}
    for i in range(a.iterations):
        log(f"bench: iteration {i + 1}/{a.iterations}")
        for e in ENTRIES:
            for warm in (False, True):
                samples[f"{'warm' if warm else 'cold'}, {e}"].append(
                    started(cyclix, "bench", e, warm))
    sh([cyclix, "uninstall"], check=False)
    figures = lambda t: [x["figures"] for k, xs in samples.items()  # noqa: E731
                         if k.startswith(t) for x in xs if x["ok"]]
    cy, wa = figures("cold"), figures("warm")
    if not cy or not wa:
        raise SystemExit("bench: no cold or no warm run passed: "
                         + json.dumps(start_to_agent(samples))[:2000])
    out["n"] = a.iterations
    out["time_to_agent"] = time_to_agent(cy, wa)
    out["start_to_agent"] = start_to_agent(samples)
    log_to_agent(log, a.build, a.iterations, out["time_to_agent"])
    log_start_to_agent(log, out["start_to_agent"])
    print(json.dumps(out, indent=1))


def log_start_to_agent(log, st):
    log("start request -> agent's first instruction (ms): min / p50 / p95 / p99 / max, passed")
    for key, r in st.items():
        if r["passed"]:
            log(f"  {key:<22} {r['min']:>8} {r['median']:>8} {r['p95']:>8} {r['p99']:>8} "
                f"{r['max']:>8}   {r['passed']}/{r['iterations']} passed")
        else:
            log(f"  {key:<22} none passed of {r['iterations']}")
        for f in r["failures"][:3]:
            log(f"    failed: {f['run']}: {f['why'][:300]}")


def fmt_row(p):
    c, b = p["cyclix"], p["bare"]
    return (f"{p['name']:<28} {c['min']:>8} {c['median']:>8} {c['p95']:>8} | "
            f"{b['min']:>8} {b['median']:>8} {b['p95']:>8} | {p['ratio']!s:>6}  {p['target']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--to-agent", action="store_true")
    ap.add_argument("--gvisor", action="store_true",
                    help="only tier gvisor next to tier container (the demo tenant)")
    ap.add_argument("--cyclix", default="/src/target/debug/cyclix")
    ap.add_argument("--build", default="debug", choices=["debug", "release"])
    ap.add_argument("--iterations", type=int, default=None,
                    help="--to-agent: iterations (each: cold and warm, by systemctl and by "
                         "`cyclix run`; 100 by default); --gvisor: runs per tier (10)")
    a = ap.parse_args()
    if sum((a.short, a.to_agent, a.gvisor)) > 1:
        ap.error("--short, --to-agent and --gvisor exclude each other")
    if a.iterations is None:
        a.iterations = GVISOR_RUNS if a.gvisor else 100
    cyclix = a.cyclix
    n = 1 if a.short else 20
    mode = ("short" if a.short else "to-agent" if a.to_agent else "gvisor" if a.gvisor
            else "full")
    out = {"schema": "cyclix-bench/1", "mode": mode, "n": n,
           "build": a.build, "host": os.uname().nodename, "pairs": [], "probes": {},
           "render": {}, "density": None, "gvisor": None}
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731

    # Setup: images, demo, the bench tenant, a squid.conf for the bare side.
    sh(f"{cyclix} images build >/dev/null && {cyclix} demo setup >/dev/null")
    if a.gvisor:
        out["n"] = a.iterations
        out["gvisor"] = gvisor_vs_container(cyclix, a.iterations, log)
        if a.build:
            log(f"cyclix build: {a.build}")
        log_gvisor(log, out["gvisor"])
        print(json.dumps(out, indent=1))
        sys.exit(1 if "error" in out["gvisor"] else 0)
    # A pool of one: the cold runs name their run (`--run-id`), so they never claim; each warm
    # sample fills one environment and claims it.
    tenant(cyclix, "bench", T0_CMD, "pool:\n  size: 1\n")
    sh([cyclix, "pool", "expire", "bench", "--now-ms", "99999999999999"])
    conf = RUNTIME / "cyclix-bench"
    sh(f"rm -rf {conf}; {cyclix} render --demo --run-id benchconf --out {conf}")
    (conf / "squid.conf").write_text((conf / "run/squid.conf").read_text())
    # One untimed warm-up per side (page cache, image layers, podman's first-run state).
    cyclix_run(cyclix, "bench")
    warm_run(cyclix, "bench")
    if not a.to_agent:
        bare_once(conf, 0)

    if a.to_agent:
        to_agent_their_way(cyclix, a, out, log)
        return

    # 1-3: interleaved runs (cold, bare, warm).
    cy, ba, wa = [], [], []
    for i in range(n):
        log(f"bench: run pair {i + 1}/{n}")
        cy.append(cyclix_run(cyclix, "bench"))
        if not a.to_agent:
            ba.append(bare_once(conf, i + 1))
        wa.append(warm_run(cyclix, "bench"))
    out["time_to_agent"] = time_to_agent(cy, wa)
    out["pairs"].append(pair(
        "bring-up (ms)", "ratio <= 1.0", [c["bringup"] for c in cy], [b[0] for b in ba],
        note="cyclix: render start -> agent unit started, plus go -> agent's first instruction "
             "(probe run excluded); bare: network create x2, pod create, run -d proxy, run -d "
             "agent -> agent's first instruction"))
    out["pairs"].append(pair(
        "teardown+audit (ms)", "ratio <= 1.5", [c["teardown"] for c in cy], [b[1] for b in ba],
        note="cyclix: teardown + audit phases; bare: rm -f -t0 containers, pod rm, network rm"))
    probe_wall = [c["probe_wall"] for c in cy]
    per_probe = {}
    for c in cy:
        for k, v in c["probes"].items():
            per_probe.setdefault(k, []).append(v)
    slow = sorted(per_probe.items(), key=lambda kv: -statistics.median(kv[1]))[:3]
    out["probes"] = {"wall_ms": stats(probe_wall), "target": "<= 150 ms",
                     "count": len(per_probe),
                     "slowest": [{"id": k, "median_ms": statistics.median(v)} for k, v in slow],
                     "probe_phase_ms": stats([c["phases"]["probe"] for c in cy])}
    out["phases_median_ms"] = {k: statistics.median([c["phases"][k] for c in cy])
                               for k in cy[0]["phases"]}

    # 4: D-Bus vs shell, on a oneshot no-op user unit.
    unit = "cyclix-bench-noop.service"
    udir = HOME / ".config/systemd/user"
    udir.mkdir(parents=True, exist_ok=True)
    (udir / unit).write_text("[Unit]\nDescription=cyclix bench no-op\n[Service]\n"
                             "Type=oneshot\nExecStart=/bin/true\n")
    sh("systemctl --user daemon-reload")
    m = 3 if a.short else 20
    d, dp, s = [], [], []
    for _ in range(m):
        t = time.perf_counter()
        r = sh([cyclix, "unit", "start", unit])
        dp.append((time.perf_counter() - t) * 1e3)
        got = re.search(r"job done, (\d+) ms", r.stdout)
        if not got:
            raise SystemExit(f"bench: `cyclix unit start` printed no job time: {r.stdout}")
        d.append(float(got.group(1)))
        s.append(timed(["systemctl", "--user", "start", unit]))
    out["pairs"].append(pair(
        "D-Bus start vs systemctl (ms)", "ratio <= 0.5", d, s,
        note="cyclix: StartUnit -> job done -> unit state read, in-process (the `job done, N "
             "ms` of `cyclix unit start`, connection set-up excluded); systemctl: the whole "
             "`systemctl --user start U` process; U a oneshot /bin/true"))
    out["pairs"].append(pair(
        "cyclix unit start process (ms)", "-", dp, s,
        note="both as whole processes: `cyclix unit start U` vs `systemctl --user start U`"))
    (udir / unit).unlink()
    sh("systemctl --user daemon-reload")

    # 5: render.
    tenants = 100 if a.short else 1000
    r = json.loads(sh([cyclix, "bench-render", "--tenants", str(tenants)]).stdout)
    rp = [timed([cyclix, "render", "--demo", "--run-id", f"r{i}", "--out",
                 str(RUNTIME / f"cyclix-bench-r{i}")]) for i in range(m)]
    sh(f"rm -rf {RUNTIME}/cyclix-bench-r*")
    out["render"] = {"in_process": r, "target": "1000 tenants <= 100 ms",
                     "process_ms": stats(rp), "podlet": "not measured: podlet is not installed"}

    # 6: density.
    out["density"] = density(cyclix, 2 if a.short else 16)

    # 7: tier gvisor next to tier container (not with --short).
    if not a.short:
        out["gvisor"] = gvisor_vs_container(cyclix, GVISOR_RUNS, log)

    # Table.
    log("")
    log(f"cyclix build: {a.build}")
    log(f"{'pair (' + out['mode'] + f', n={n})':<28} {'min':>8} {'p50':>8} {'p95':>8} | "
        f"{'bare min':>8} {'p50':>8} {'p95':>8} | {'ratio':>6}  target")
    for p in out["pairs"]:
        log(fmt_row(p))
    log_to_agent(log, None, n, out["time_to_agent"])
    pw = out["probes"]["wall_ms"]
    log(f"probe run (ms)               {pw['min']:>8} {pw['median']:>8} {pw['p95']:>8}"
        f"   target <= 150; slowest: "
        + ", ".join(f"{x['id']} {x['median_ms']}" for x in out["probes"]["slowest"]))
    log(f"render in-process            {r['tenants']} tenants: {r['render_ms']:.1f} ms "
        f"(parse {r['parse_ms']:.1f} ms); `cyclix render` process median "
        f"{out['render']['process_ms']['median']} ms")
    dn = out["density"]
    rss = dn["rss_mib_per_run"]
    log(f"density                      {dn['runs']} runs at once: {dn['passed']} passed, "
        f"{dn['collisions']} collisions, {len(dn['leftovers'])} leftovers, {dn['wall_ms']} ms; "
        f"proxy+infra RSS/run MiB median {rss['median'] if rss else '-'} max "
        f"{rss['max'] if rss else '-'} (target <= 40)")
    log("phases (median ms): " + ", ".join(f"{k} {v}" for k, v in
                                          out["phases_median_ms"].items()))
    if out["gvisor"] is not None:
        log_gvisor(log, out["gvisor"])
    print(json.dumps(out, indent=1))
    # A tier comparison that did not run is a measurement that did not run (after the JSON).
    if out["gvisor"] is not None and "error" in out["gvisor"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
