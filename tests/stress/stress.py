#!/usr/bin/python3
"""Randomized sweep: random distributed task graphs (tests/stress/stress_dag.cpp) over 1-8
ranks x 1-4 threads, with small, large, self and local edges, aggregation on and off, tiny
and default chunks of large bodies, remote async calls with big arguments and kept results,
checked mode on and off, back-pressure windows from none to below one message, under every
MPI given (--build DIR, one per MPI).

Each configuration runs under a timeout: a run that does not finish in time is a hang, a
wrong answer or a crash a failure. Failures and hangs are logged with the command that
reproduces them. The last line is

    stress: <N> configurations, <F> failures, <H> hangs

and the exit status is 1 when F + H > 0.

usage: stress.py --build DIR [--build DIR2] [--minutes M | --configs N] [--seed S]
                 [--max-ranks R] [--timeout S] [--log FILE]
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import benchlib  # noqa: E402


class Target:
    """One build (one MPI): its stress program and mpiexec."""

    def __init__(self, builddir):
        self.builddir = os.path.abspath(builddir)
        self.program = os.path.join(self.builddir, "tests", "stress", "stress_dag")
        if not os.access(self.program, os.X_OK):
            raise SystemExit(f"stress: {self.program} not found (build the stress_dag target)")
        self.exe, self.flags, self.flavor = benchlib.mpiexec_command(self.builddir)
        self.env = benchlib.mpi_env()
        if self.flavor == "openmpi":
            self.env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
        self.env.pop("CASCADE_CHECK", None)


def configuration(rng, max_ranks):
    """Random settings of one run: (ranks, env, program arguments)."""
    ranks = rng.randint(1, max_ranks)
    threads = rng.randint(1, 4)
    # fewer tasks when many threads share the two cores
    tasks = rng.choice([50, 300, 1000, 2000]) if ranks * threads <= 8 else rng.choice([50, 300, 800])
    args = {
        "--seed": rng.randint(1, 1 << 30),
        "--threads": threads,
        "--tasks": tasks,
        "--max-preds": rng.choice([1, 2, 4, 8]),
        "--aggregate": rng.randint(0, 1),
        "--chunk": rng.choice([0, 0, 1000, 4096, 65536]),
        "--large-pct": rng.choice([0, 5, 20, 50]),
        "--self-pct": rng.choice([0, 10, 50]),
        "--max-body": rng.choice([1000, 70000, 300000]),
        "--futures": rng.choice([0, 0, 4, 16]),
        "--keep": rng.randint(0, 1),
        "--rounds": rng.choice([1, 2, 3]),
        "--order": rng.choice([0, 4, 16]),
        # back-pressure: the default window, none, one smaller than a message, a few messages
        "--window": rng.choice([128 << 20, 128 << 20, 0, 256, 8192]),
    }
    env = {"CASCADE_CHECK": str(rng.randint(0, 1))}
    return ranks, env, [str(x) for kv in args.items() for x in kv]


def run_one(target, ranks, env, args, timeout):
    cmd = [target.exe, "-n", str(ranks)] + target.flags + [target.program] + args
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(target.env, **env), start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        verdict = "ok" if p.returncode == 0 and "stress_dag: ok" in out else "FAIL"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # mpiexec and its ranks: the session we started
        out, _ = p.communicate()
        verdict = "HANG"
    return verdict, out or "", time.monotonic() - t0, cmd


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--build", action="append", required=True,
                    help="build directory with tests/stress/stress_dag (repeat for each MPI)")
    ap.add_argument("--minutes", type=float, default=None, help="run configurations for this long")
    ap.add_argument("--configs", type=benchlib.positive_int, default=None,
                    help="run this many configurations")
    ap.add_argument("--seed", type=int, default=None, help="seed of the sweep (default: the time)")
    ap.add_argument("--max-ranks", type=benchlib.positive_int, default=8)
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a run counts as a hang")
    ap.add_argument("--log", default=None, help="file for the output of failed and hung runs")
    o = ap.parse_args(argv)
    if o.minutes is None and o.configs is None:
        o.minutes = 10.0
    targets = [Target(b) for b in o.build]
    seed = o.seed if o.seed is not None else int(time.time())
    rng = random.Random(seed)
    print(f"stress: seed {seed}; MPI: {', '.join(f'{t.flavor} ({t.builddir})' for t in targets)};"
          f" {'%d configurations' % o.configs if o.configs else '%.1f minutes' % o.minutes},"
          f" timeout {o.timeout:.0f} s per run", flush=True)
    log = open(o.log, "a") if o.log else None
    deadline = time.monotonic() + 60 * o.minutes if o.minutes is not None else None
    n = failures = hangs = 0
    per_mpi = {t.flavor: 0 for t in targets}
    while True:
        if o.configs is not None and n >= o.configs:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
        target = targets[n % len(targets)]
        ranks, env, args = configuration(rng, o.max_ranks)
        verdict, out, secs, cmd = run_one(target, ranks, env, args, o.timeout)
        n += 1
        per_mpi[target.flavor] += 1
        summary = next((l for l in out.splitlines() if l.startswith("stress_dag:")), "")
        print(f"[{n}] {verdict:<4} {target.flavor:<7} {secs:6.1f} s  CASCADE_CHECK={env['CASCADE_CHECK']}"
              f" -n {ranks} {' '.join(args)}" + (f"\n     {summary}" if verdict != "ok" and summary else ""),
              flush=True)
        if verdict != "ok":
            failures += verdict == "FAIL"
            hangs += verdict == "HANG"
            text = (f"==== {verdict}: CASCADE_CHECK={env['CASCADE_CHECK']} {' '.join(cmd)}\n"
                    f"{out[-6000:]}\n")
            if log:
                log.write(text)
                log.flush()
            else:
                print(text, flush=True)
    if log:
        log.close()
    print(f"stress: per MPI: {', '.join(f'{k} {v}' for k, v in per_mpi.items())}")
    print(f"stress: {n} configurations, {failures} failures, {hangs} hangs", flush=True)
    return 1 if failures or hangs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
