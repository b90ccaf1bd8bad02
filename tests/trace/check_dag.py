#!/usr/bin/python3
"""check_dag.py DOT NP: the DOT written for trace_program's `dag` mode has exactly the edges
of its graph: main -> a -> b on rank 0, a -> c on rank 1 % NP through 'hop', c -> d."""
import re
import sys


def edges(path):
    out = set()
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*"([^"]+)" -> "([^"]+)"(?: \[(.*)\])?;', line)
            if m:
                attrs = m.group(3) or ""
                am = re.search(r'label="([^"]*)"', attrs)
                out.add((m.group(1), m.group(2), am.group(1) if am else ""))
    return out


def main():
    path, np = sys.argv[1], int(sys.argv[2])
    c = 1 % np
    expected = {
        ("r0:main", "r0:a", ""),
        ("r0:a", "r0:b", ""),
        ("r0:a", "r%d:c" % c, "hop"),
        ("r%d:c" % c, "r%d:d" % c, ""),
    }
    got = edges(path)
    if got != expected:
        print("check_dag: edges differ\n  expected: %s\n  got:      %s\n  missing:  %s\n  extra:    %s"
              % (sorted(expected), sorted(got), sorted(expected - got), sorted(got - expected)))
        return 1
    print("check_dag: %s has the %d expected edges" % (path, len(expected)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
