#!/usr/bin/env python3
"""check_links.py TRACE.json NP PIECES: the trace of trace_link at NP ranks links every piece
of every rank's body: one flow per piece (NP * PIECES in all) that starts on the sender's
"sim0 out" track (the device-to-host copy), steps through a "send piece traced" slice on the
sender and a "piece traced" slice on the next rank (the message), and ends on that rank's
"sim0 in" track (the host-to-device copy)."""
import collections
import json
import sys


def main():
    path, np, pieces = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))

    def inside(e, name):
        return any(a - 1e-3 <= e["ts"] <= b + 1e-3 and n == name
                   for a, b, n in slices[(e["pid"], e["tid"])])

    flows = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in events:
        if e.get("ph") in ("s", "t", "f") and e.get("cat") == "transfer":
            flows[e["id"]][e["ph"]].append(e)
    linked, problems = 0, []
    for fid, ph in flows.items():
        if len(ph["s"]) != 1 or len(ph["f"]) != 1 or len(ph["t"]) != 2:
            problems.append("flow %s: %s" % (fid, {k: len(v) for k, v in ph.items()}))
            continue
        s, f = ph["s"][0], ph["f"][0]
        send = [t for t in ph["t"] if t["pid"] == s["pid"] and inside(t, "send piece traced")]
        recv = [t for t in ph["t"] if t["pid"] == f["pid"] and inside(t, "piece traced")]
        ok = (threads.get((s["pid"], s["tid"]), "").endswith("sim0 out")
              and threads.get((f["pid"], f["tid"]), "").endswith("sim0 in")
              and (s["pid"] - 1 + 1) % np == f["pid"] - 1 and len(send) == 1 and len(recv) == 1)
        if ok:
            linked += 1
        else:
            problems.append("flow %s: s on %s, f on %s, %d send and %d arrival steps" % (
                fid, threads.get((s["pid"], s["tid"])), threads.get((f["pid"], f["tid"])),
                len(send), len(recv)))
    print("check_links: %d linked transfers (device out -> send -> arrival -> device in), "
          "expected %d" % (linked, np * pieces))
    if linked != np * pieces:
        problems.append("%d linked transfers, expected %d" % (linked, np * pieces))
    for p in problems:
        print("check_links: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
