"""Unit tests of bench/inside.py's pure parts (the tier comparison's spec, figures and ratios).
No testbed, no clock: `python3 -m unittest discover -s bench -p 'test_*.py'`
(tests/integration/e2e_bench.rs runs them)."""

import json
import unittest

import inside

# A wall clock in ms since the epoch (T0 is matched as 13 digits); the figures below are
# offsets from it.
E = 1_796_664_590_000


def record(run_id, t0, render, ready, go, gate, start=1000):
    """A passed run's record with the fields the tier comparison reads (ms after E)."""
    t0, render, ready, go, start = (E + x for x in (t0, render, ready, go, start))
    gate = (E + gate[0], E + gate[1])
    return {
        "run_id": run_id,
        "result": "passed",
        "agent_log": ["cyclix: waiting for go", f"T0={t0}", "cyclix-demo-agent: fixed"],
        "agent_ready_ms": ready,
        "go_ms": go,
        "phases": [
            {"name": "prepare", "start_ms": start, "end_ms": render},
            {"name": "render", "start_ms": render, "end_ms": render + 5},
            {"name": "agent", "start_ms": ready, "end_ms": gate[0]},
            {"name": "gate", "start_ms": gate[0], "end_ms": gate[1]},
        ],
    }


class TierSpec(unittest.TestCase):
    def test_the_demo_spec_becomes_one_tenant_per_tier_with_a_t0_agent(self):
        demo = inside.DEMO_SPEC.read_text()
        got = inside.tier_spec(demo, "btier-gvisor", "gvisor")
        self.assertIn("tenant: btier-gvisor\n", got)
        self.assertIn("  path: ~/src/btier-gvisor\n", got)
        self.assertIn("tier: gvisor\n", got)
        self.assertNotIn("tier: container", got)
        agent = json.dumps(["sh", "-c", inside.T0_CMD + "; exec cyclix-demo-agent"])
        self.assertIn(f"  command: {agent}\n", got)
        # Everything else is the demo's: its gate, task, egress.
        self.assertEqual(demo.count("\n"), got.count("\n"))
        for line in ("  file: ~/.local/share/cyclix/demo/task.md\n", "  timeout: 5m\n",
                     "  allow: []\n"):
            self.assertIn(line, got)
        self.assertIn("tier: container\n", inside.tier_spec(demo, "c", "container"))

    def test_a_demo_spec_without_a_line_it_changes_is_refused(self):
        demo = inside.DEMO_SPEC.read_text().replace("tier: container\n", "")
        with self.assertRaisesRegex(ValueError, "0 line\\(s\\) 'tier: container'"):
            inside.tier_spec(demo, "x", "gvisor")


class TierFigures(unittest.TestCase):
    def test_bring_up_time_to_agent_and_gate_from_the_record(self):
        rec = record("r1", t0=1900, render=1100, ready=1500, go=1800, gate=(2500, 4500))
        f = inside.tier_figures(rec)
        self.assertEqual(f["bringup"], (1500 - 1100) + (1900 - 1800))
        self.assertEqual(f["to_agent"], 1900 - 1000)
        self.assertEqual(f["gate"], 2000)
        self.assertEqual(f["phases"]["gate"], 2000)

    def test_a_record_without_t0_is_a_missing_measurement(self):
        rec = record("r2", t0=1900, render=1100, ready=1500, go=1800, gate=(2500, 4500))
        rec["agent_log"] = ["no clock here"]
        with self.assertRaises(SystemExit):
            inside.tier_figures(rec)


class TierPairs(unittest.TestCase):
    def test_ratios_are_gvisor_over_container_medians(self):
        c = [{"bringup": b, "to_agent": 2 * b, "gate": 1000} for b in (400, 500, 600)]
        g = [{"bringup": b, "to_agent": 3 * b, "gate": 2500} for b in (900, 1000, 1100)]
        pairs = inside.tier_pairs({"container": c, "gvisor": g})
        self.assertEqual([p["name"] for p in pairs],
                         ["bring-up (ms)", "time to agent (ms)", "gate (ms)"])
        self.assertEqual([p["ratio"] for p in pairs], [2.0, 3.0, 2.5])
        self.assertEqual(pairs[0]["container"]["median"], 500)
        self.assertEqual(pairs[0]["gvisor"]["median"], 1000)
        row = inside.fmt_tier_row(pairs[2])
        self.assertTrue(row.startswith("gate (ms)"), row)
        self.assertTrue(row.rstrip().endswith("2.5"), row)

    def test_a_zero_container_median_has_no_ratio(self):
        pairs = inside.tier_pairs({"container": [{"bringup": 0, "to_agent": 0, "gate": 0}],
                                   "gvisor": [{"bringup": 1, "to_agent": 1, "gate": 1}]})
        self.assertEqual([p["ratio"] for p in pairs], [None, None, None])


class TierLog(unittest.TestCase):
    def test_a_comparison_that_did_not_run_says_why(self):
        lines = []
        inside.log_gvisor(lines.append, {"n": 3, "error": "run x of btier-gvisor: failed"})
        self.assertIn("not measured: run x of btier-gvisor: failed", "\n".join(lines))

    def test_the_table_names_runsc_and_one_row_per_measure(self):
        lines = []
        c = [{"bringup": 500, "to_agent": 900, "gate": 1000}]
        g = [{"bringup": 1000, "to_agent": 1800, "gate": 3000}]
        inside.log_gvisor(lines.append, {
            "n": 1, "pairs": inside.tier_pairs({"container": c, "gvisor": g}),
            "runtime": {"version": "0.0~20240729.0", "flags": ["network=host"]}})
        text = "\n".join(lines)
        self.assertIn("runsc 0.0~20240729.0 (network=host)", text)
        self.assertEqual(len([x for x in lines if x.startswith(("bring-up", "time to", "gate"))]),
                         3, text)


if __name__ == "__main__":
    unittest.main()
