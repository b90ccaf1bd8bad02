#!/usr/bin/python3
"""Unit tests of tools/cascade-trace on synthetic traces with known answers."""
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                    "cascade-trace")
loader = importlib.machinery.SourceFileLoader("cascade_trace", TOOL)
spec = importlib.util.spec_from_loader("cascade_trace", loader)
ct = importlib.util.module_from_spec(spec)
loader.exec_module(ct)


def meta(pid, tid, pname, tname):
    return [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": pname}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}}]


def X(name, cat, ts, dur, pid, tid, node=None):
    e = {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if node is not None:
        e["args"] = {"node": node}
    return e


def synthetic():
    """rank 0: worker A [0,10] idle [10,30] B [30,40]; progress [5,8] with a handler
    [6,7] on the MPI thread. rank 1: idle [0,12], C [12,28]. Edges main->A, A->C (through
    'hop'), C->B, A->B. Wall 40; critical path A+C+B = 10+16+10 = 36."""
    ev = meta(1, 1001, "rank 0", "w0") + meta(1, 1002, "rank 0", "main") + \
        meta(2, 2001, "rank 1", "w0")
    ev += [X("A", "task", 0, 10, 1, 1001, 0), X("idle", "idle", 10, 20, 1, 1001),
           X("B", "task", 30, 10, 1, 1001, 1), X("progress", "comm", 5, 3, 1, 1002),
           X("hop", "am", 6, 1, 1, 1002), X("idle", "idle", 0, 12, 2, 2001),
           X("C(1, 2)", "task", 12, 16, 2, 2001, 2),
           {"ph": "s", "name": "hop", "cat": "am", "id": "0-1-0", "ts": 5, "pid": 1, "tid": 1001},
           {"ph": "f", "bp": "e", "name": "hop", "cat": "am", "id": "0-1-0", "ts": 6.5, "pid": 1,
            "tid": 1002}]
    graph = {"nodes": [{"rank": 0, "name": "A", "task": True}, {"rank": 0, "name": "B", "task": True},
                       {"rank": 1, "name": "C(1, 2)", "task": True},
                       {"rank": 0, "name": "main", "task": False}],
             "edges": [[3, 0, 1, ""], [0, 2, 1, "hop"], [2, 1, 1, ""], [0, 1, 1, ""]]}
    return {"traceEvents": ev, "cascadeGraph": graph}


class Summary(unittest.TestCase):
    def test_numbers(self):
        s = ct.summarize(synthetic())
        self.assertAlmostEqual(s["wall_us"], 40)
        rows = {(r["rank"], r["thread"]): r for r in s["threads"]}
        w0 = rows[("rank 0", "w0")]
        self.assertAlmostEqual(w0["busy_us"], 20)
        self.assertAlmostEqual(w0["idle_us"], 20)
        self.assertAlmostEqual(w0["comm_us"], 0)
        self.assertEqual(w0["tasks"], 2)
        self.assertAlmostEqual(rows[("rank 0", "main")]["comm_us"], 3)  # handler nested
        r1 = rows[("rank 1", "w0")]
        self.assertAlmostEqual(r1["busy_us"], 16)
        self.assertAlmostEqual(r1["idle_us"], 12)
        tasks = {t["name"]: t for t in s["tasks"]}
        self.assertEqual(tasks["C"]["count"], 1)  # grouped without its key
        self.assertAlmostEqual(tasks["C"]["mean_us"], 16)
        cp = s["critical_path"]
        self.assertAlmostEqual(cp["length_us"], 36)
        self.assertEqual(cp["path"], ["rank 0: A", "rank 1: C(1, 2)", "rank 0: B"])

    def test_no_graph(self):
        d = synthetic()
        del d["cascadeGraph"]
        self.assertIsNone(ct.summarize(d)["critical_path"])

    def test_cli(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.json")
            with open(path, "w") as f:
                json.dump(synthetic(), f)
            self.assertEqual(ct.main(["summary", path]), 0)
            png = os.path.join(tmp, "t.png")
            self.assertEqual(ct.main(["gantt", path, "-o", png]), 0)
            self.assertGreater(os.path.getsize(png), 1000)


class Busy(unittest.TestCase):
    def test_fractions(self):
        width, t0, rows = ct.busy_over_time(synthetic(), 4)
        self.assertAlmostEqual(width, 10)
        self.assertAlmostEqual(t0, 0)
        for got, want in zip(rows["rank 0"], [1.0, 0.0, 0.0, 1.0]):
            self.assertAlmostEqual(got, want)
        for got, want in zip(rows["rank 1"], [0.0, 0.8, 0.8, 0.0]):
            self.assertAlmostEqual(got, want)

    def test_cli(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.json")
            with open(path, "w") as f:
                json.dump(synthetic(), f)
            png = os.path.join(tmp, "busy.png")
            self.assertEqual(ct.main(["busy", path, "-o", png, "--bins", "8"]), 0)
            self.assertGreater(os.path.getsize(png), 1000)


class Validate(unittest.TestCase):
    def test_valid(self):
        self.assertEqual(ct.validate(synthetic(), ranks=2, min_tasks=3, min_flows=1,
                                     cross_rank_flows=False, expect_tasks=("A",)), [])

    def test_overlap(self):
        d = synthetic()
        d["traceEvents"].append(X("D", "task", 35, 10, 1, 1001))  # crosses B's end
        self.assertTrue(any("overlaps" in p for p in ct.validate(d)))

    def test_flow_without_end(self):
        d = synthetic()
        d["traceEvents"] = [e for e in d["traceEvents"] if e["ph"] != "f"]
        self.assertTrue(any("has only s" in p for p in ct.validate(d)))

    def test_missing_field_and_names(self):
        d = synthetic()
        d["traceEvents"].append({"ph": "X", "name": "E", "ts": 1, "pid": 3, "tid": 1})
        d["traceEvents"].append(X("F", "task", 1, 1, 3, 1))
        problems = ct.validate(d, ranks=2)
        self.assertTrue(any("missing dur" in p for p in problems))
        self.assertTrue(any("no thread_name" in p for p in problems))
        self.assertTrue(any("no process_name" in p for p in problems))


if __name__ == "__main__":
    unittest.main()
