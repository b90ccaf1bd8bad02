#!/usr/bin/env python3
"""check_futures.py TRACE.json NP: every one of the NP ranks recorded task slices named
"async" and "future::then" (trace_program futures makes 300 asyncs and 100 continuations per
rank), so the futures layer's tasks were named after their jobs were freed."""
import collections
import json
import sys

NAMES = ("async", "future::then")
MIN_PER_RANK = 100


def main():
    path, np = sys.argv[1], int(sys.argv[2])
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    count = collections.Counter((e["pid"], e["name"]) for e in events
                                if e.get("ph") == "X" and e.get("cat") == "task")
    pids = sorted({e["pid"] for e in events
                   if e.get("ph") == "M" and e.get("name") == "process_name"})
    print("check_futures: task slices per rank:",
          {p: {n: count[(p, n)] for n in NAMES} for p in pids})
    problems = []
    if len(pids) != np:
        problems.append("%d ranks in the trace, expected %d" % (len(pids), np))
    for p in pids:
        for n in NAMES:
            if count[(p, n)] < MIN_PER_RANK:
                problems.append("rank pid %s: %d task slices named %r, expected at least %d"
                                % (p, count[(p, n)], n, MIN_PER_RANK))
    for p in problems:
        print("check_futures: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
