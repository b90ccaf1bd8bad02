"""What the benchmark runners (bench/*/run) share: the command line, the process priority,
the mpiexec command of the build, the machine's load, running programs that print JSON
records, and writing the records with their provenance (commit, host, CPU, MPI, date).

A runner starts with

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import benchlib

The record format is the one of apps/common/record.hpp: one JSON object per line, bare or
after "RESULT ".
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*a):
    """A progress line on stderr (stdout carries the tables)."""
    print(*a, file=sys.stderr, flush=True)


# ---- command line ----------------------------------------------------------------------------

def parser(doc, quick=True, no_build=False, no_priority=True, repeats=None):
    """An argparse parser for a runner: BUILDDIR (default: ROOT/build) and the usual flags.
    Unknown options are errors. `doc` (the runner's docstring) is the help text."""
    script = os.path.abspath(sys.argv[0])
    prog = os.path.relpath(script, ROOT) if script.startswith(ROOT + os.sep) else os.path.basename(script)
    p = argparse.ArgumentParser(prog=prog, description=doc, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("builddir", nargs="?", default=os.path.join(ROOT, "build"),
                   help="configured build directory (default: %(default)s)")
    if quick:
        p.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, numbers mean nothing")
    if no_build:
        p.add_argument("--no-build", action="store_true", help="do not rebuild the programs first")
    if no_priority:
        p.add_argument("--no-priority", action="store_true",
                       help="keep the caller's CPU priority (no new session, no nice -20)")
    if repeats is not None:
        p.add_argument("--repeats", type=positive_int, default=repeats, metavar="R",
                       help="repeats per measurement (default: %(default)s)")
    return p


def positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not an integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"'{s}' is not positive")
    return v


def int_list(s):
    """"1,2,3" -> [1, 2, 3], positive integers."""
    v = [positive_int(x) for x in s.split(",") if x]
    if not v:
        raise argparse.ArgumentTypeError("empty list")
    return v


def name_list(allowed):
    """argparse type: a comma-separated list of names from `allowed`."""
    def parse(s):
        v = [x for x in s.split(",") if x]
        bad = [x for x in v if x not in allowed]
        if bad or not v:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(bad) or 'empty list'}"
                                             f" (choose from {', '.join(allowed)})")
        return v
    return parse


# ---- priority --------------------------------------------------------------------------------

def raise_priority():
    """Best effort: nice -20 for this process and its (new, private) autogroup."""
    got = {"nice": os.nice(0), "autogroup_nice": None}
    try:
        got["nice"] = os.nice(-20 - os.nice(0))
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("-20")
        with open("/proc/self/autogroup") as f:  # "/autogroup-123 nice -20"
            got["autogroup_nice"] = int(f.read().split()[-1])
    except (OSError, ValueError):
        pass
    return got


def prioritized(script, argv, enabled):
    """The machines are small and shared: unless disabled, re-run `script` in a new session
    (its own autogroup, whose priority can be raised without touching the caller's) and
    return its exit code; in that child (or when disabled) return None and the priority got
    ({"nice", "autogroup_nice"}) as the second value."""
    if enabled and os.environ.get("CASCADE_BENCH_CHILD") != "1":
        child = subprocess.Popen([sys.executable, os.path.abspath(script)] + list(argv),
                                 env=dict(os.environ, CASCADE_BENCH_CHILD="1"), start_new_session=True)
        try:
            return child.wait(), None
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
            return 130, None
    if enabled:
        return None, raise_priority()
    return None, {"nice": os.nice(0), "autogroup_nice": None}


# ---- the machine -----------------------------------------------------------------------------

def cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def machine_busy_seconds():
    """CPU-seconds the whole machine was busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def load_now(window=0.3):
    """CPUs busy over a short window (to flag runs measured on a loaded machine); None when
    /proc/stat cannot be read."""
    try:
        b0, t0 = machine_busy_seconds(), time.monotonic()
        time.sleep(window)
        return (machine_busy_seconds() - b0) / (time.monotonic() - t0)
    except OSError:
        return None


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def openblas_coretype():
    """The kernel family Debian's OpenBLAS should use here (it recognizes neither CPU)."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return "SkylakeX"
    if "avx2" in flags:
        return "Haswell"
    return None


# ---- MPI -------------------------------------------------------------------------------------

def mpiexec_executable(builddir):
    """The mpiexec the build was configured with (CMake cache), else the one on PATH."""
    try:
        with open(os.path.join(builddir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("MPIEXEC_EXECUTABLE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return shutil.which("mpiexec") or "mpiexec"


def mpi_version(exe):
    """First line of `mpiexec --version` ("mpiexec (OpenRTE) 4.1.4", "HYDRA build details:" ...)."""
    try:
        out = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Version:"):  # MPICH's hydra: "Version: 4.0.2"
            return "MPICH " + line.split(":", 1)[1].strip()
    return next((l.strip() for l in out.splitlines() if l.strip()), "")


def mpiexec_command(builddir, bind_none=True):
    """(mpiexec, flags, flavor) for the MPI the build uses: Open MPI gets --oversubscribe
    (more ranks than cores here) and, with bind_none, --bind-to none (Open MPI binds a job of
    one or two ranks to one core per rank, so a rank's threads would share one core)."""
    exe = mpiexec_executable(builddir)
    ver = mpi_version(exe)
    openmpi = "Open MPI" in ver or "OpenRTE" in ver
    flags = (["--oversubscribe"] + (["--bind-to", "none"] if bind_none else [])) if openmpi else []
    return exe, flags, ("openmpi" if openmpi else "mpich")


def mpi_env(base=None):
    """Environment for mpiexec here: Open MPI's run-as-root permission when root."""
    env = dict(os.environ if base is None else base)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


# ---- programs and their records --------------------------------------------------------------

def parse_records(text):
    """The JSON records in a program's output: lines that are one object, bare or after
    "RESULT "."""
    recs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("RESULT "):
            line = line[len("RESULT "):]
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    return recs


def build(builddir, targets, bindir, tag, rebuild=True):
    """cmake --build the targets (unless not rebuild); on failure fall back to binaries
    already built (with a warning). False when some are missing."""
    p = subprocess.run(["cmake", "--build", builddir, "--target"] + list(targets),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True) if rebuild else None
    have = all(os.access(os.path.join(bindir, t), os.X_OK) for t in targets)
    if p is not None and p.returncode != 0:
        log(p.stdout[-4000:])
        if not have:
            log(f"{tag}: building {', '.join(targets)} in {builddir} failed")
            return False
        log(f"{tag}: WARNING: rebuilding failed; measuring the binaries already in {bindir}")
        print("WARNING: the rebuild failed; these numbers come from previously built binaries")
    if not have:
        log(f"{tag}: {', '.join(targets)} not found in {bindir} (configure and build {builddir} first)")
        return False
    return True


@contextlib.contextmanager
def snapshot(tag):
    """A private folder for copies of the programs: others may relink the build tree while
    we measure. Removed at the end."""
    d = tempfile.mkdtemp(prefix=f"cascade-bench-{tag}-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- provenance and output -------------------------------------------------------------------

_provenance = {}


def provenance(builddir):
    """Where the records come from: commit (with "-dirty" for uncommitted changes), host, CPU
    model, cores, MPI (its mpiexec --version) and the date (UTC)."""
    if builddir in _provenance:
        return dict(_provenance[builddir])
    commit = None
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30).stdout.strip()
        if commit and dirty:
            commit += "-dirty"
    except (OSError, subprocess.TimeoutExpired):
        pass
    p = {"commit": commit, "host": socket.gethostname(), "cpu": cpu_model(), "cores": cores(),
         "mpi": mpi_version(mpiexec_executable(builddir)) or None,
         "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    _provenance[builddir] = p
    return dict(p)


def stamp(records, builddir):
    """Adds the provenance fields to each record (fields a record already has are kept)."""
    p = provenance(builddir)
    for r in records:
        for k, v in p.items():
            r.setdefault(k, v)
    return records


def finite(x):
    """x with every nan/inf number replaced by None (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def write_json(path, obj):
    """Writes obj as strict JSON (nan/inf -> null), through a temporary file and a rename."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(finite(obj), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
