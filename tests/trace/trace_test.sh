#!/usr/bin/env bash
# trace_test.sh MODE NP OUTDIR TOOL EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs `MPIEXEC -n NP FLAGS EXE MODE` with CASCADE_TRACE and CASCADE_DAG set, then checks:
#   load  the JSON is valid Chrome trace-event format (tools/cascade-trace validate) with NP
#         ranks, tasks and active-message flows across ranks; every rank's counters are in the
#         file and in the summary; summary and gantt run on it
#   pool  the same for a Threadpool without Communicator (written at exit), and two DOT edges
#   dag   the DOT file holds exactly the edges of the known graph (check_dag.py)
#   perrank  the load program with CASCADE_TRACE=...%r.json: one valid file per rank, each
#         with that rank's tasks only
#   edgesoff  the load program with CASCADE_TRACE only: tasks are recorded, promise edges are
#         not (the JSON's task graph is empty, no DOT file)
#   futures  the run ends cleanly (the trace names the futures' tasks in ~Communicator, after
#         their jobs were freed: this once crashed), the JSON is valid, and every rank has
#         task slices named "async" and "future::then" (check_futures.py)
#   symlink  the trace path is a symbolic link to another file: the trace replaces the link
#         (written to a temporary name, then renamed) and the file it pointed to is untouched
#   abort  rank 0 gets an active message it does not know at 3 ranks: the job fails (fail-stop),
#         and each rank that could left its own events in <trace>.rank<R>.json (the failing one at least), each a valid trace
#   objects  a mobile object that migrates: handler tasks named "add(Counter 0:1)" (every one,
#         also those run on the communication thread), the migration "migrate(Counter 0:1)",
#         and flows across ranks
set -euo pipefail
mode=$1 np=$2 out=$3 tool=$4 exe=$5
shift 5
PY="${CASCADE_PYTHON:-/usr/bin/python3}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
json="$out/$mode-np$np.json" dot="$out/$mode-np$np.dot"
rm -f "$json" "$dot" "$out/$mode-np$np.png"
export CASCADE_TRACE="$json" CASCADE_DAG="$dot"
run_mode=$mode
if [[ $mode == edgesoff ]]; then
    unset CASCADE_DAG
    run_mode=load
elif [[ $mode == perrank ]]; then
    rm -f "$out"/perrank-np$np.*.json
    export CASCADE_TRACE="$out/perrank-np$np.%r.json"
    unset CASCADE_DAG
    run_mode=load
fi
if [[ $mode == symlink ]]; then
    victim="$out/symlink-victim-np$np.txt"
    echo "not a trace" >"$victim"
    ln -sf "$(basename "$victim")" "$json"
    run_mode=dag
fi
if [[ $mode == abort ]]; then
    rm -f "$out/$mode-np$np".rank*.json
    if "$@" -n "$np" "$exe" "$run_mode" >"$out/$mode-np$np.log" 2>&1; then
        echo "the job should have failed" >&2
        exit 1
    fi
    cat "$out/$mode-np$np.log"
    grep -q "rank 0 received active message #[0-9]* from rank 1" "$out/$mode-np$np.log"
    for r in $(seq 0 $((np - 1))); do
        f="$out/$mode-np$np.rank$r.json"
        if [[ -f $f ]]; then
            "$PY" "$tool" validate "$f" --ranks 1
        elif [[ $r == 0 ]]; then
            echo "the failing rank left no events ($f)" >&2
            exit 1
        fi
    done
    exit 0
fi
"$@" -n "$np" "$exe" "$run_mode"
case "$mode" in
    perrank)
        for ((r = 0; r < np; ++r)); do
            "$PY" "$tool" validate "$out/perrank-np$np.$r.json" --ranks 1 --min-tasks 400 \
                --expect-task "work($r)"
        done
        test ! -e "$out/perrank-np$np.$np.json"
        ;;
    load)
        flows=()
        [[ $np -gt 1 ]] && flows=(--cross-rank-flows)
        "$PY" "$tool" validate "$json" --ranks "$np" --min-tasks $((400 * np)) \
            --min-flows $((150 * np)) "${flows[@]}" --expect-task 'work(7)' --expect-task 'done(7)'
        "$PY" "$tool" summary "$json" | tee "$out/$mode-np$np.summary"
        # Every rank's counters are in the file and the summary prints them.
        "$PY" -c 'import json, sys; c = json.load(open(sys.argv[1]))["otherData"]["counters"]; sys.exit(0 if len(c) == int(sys.argv[2]) and all("broadcast.root_messages" in v for v in c.values()) else 1)' "$json" "$np"
        grep -q '^broadcast.root_messages' "$out/$mode-np$np.summary"
        "$PY" "$tool" gantt "$json" -o "$out/$mode-np$np.png"
        test -s "$out/$mode-np$np.png"
        ;;
    pool)
        "$PY" "$tool" validate "$json" --ranks 1 --min-tasks 200 --expect-task 'grid(19, 9)'
        grep -q '"r0:grid(0, 0)" -> "r0:grid(1, 0)"' "$dot"
        grep -q '"r0:main" -> "r0:grid(0, 3)"' "$dot"
        ;;
    edgesoff)
        "$PY" "$tool" validate "$json" --ranks "$np" --min-tasks $((400 * np)) --expect-task 'work(7)'
        test ! -e "$dot"
        "$PY" -c 'import json, sys; g = json.load(open(sys.argv[1]))["cascadeGraph"]; sys.exit(1 if g["edges"] else 0)' "$json"
        ;;
    dag)
        "$PY" "$tool" validate "$json" --ranks "$np" --expect-task a --expect-task d
        "$PY" "$here/check_dag.py" "$dot" "$np"
        ;;
    futures)
        # 400 jobs per rank, of which the 100 remote calls may run on the communication thread
        # instead of as tasks (short calls arriving while the pool is idle).
        "$PY" "$tool" validate "$json" --ranks "$np" --min-tasks $((300 * np)) \
            --expect-task async --expect-task 'future::then'
        "$PY" "$here/check_futures.py" "$json" "$np"
        ;;
    symlink)
        [[ ! -L "$json" && -f "$json" ]] || { echo "trace still a link" >&2; exit 1; }
        [[ "$(cat "$victim")" == "not a trace" ]] || { echo "link target overwritten" >&2; exit 1; }
        "$PY" "$tool" validate "$json" --ranks "$np" --expect-task a
        # Only this test's own names: other trace tests write to the same folder concurrently.
        if ls "$json".tmp.* "$dot".tmp.* >/dev/null 2>&1; then
            echo "temporary file left" >&2
            exit 1
        fi
        ;;
    objects)
        # Every request is a task, on a worker or on the communication thread: 100 add per
        # rank, 100 peek from rank 0, the migration.
        "$PY" "$tool" validate "$json" --ranks "$np" --min-tasks $((100 * np + 101)) \
            --cross-rank-flows --expect-task 'add(Counter 0:1)' \
            --expect-task 'peek(Counter 0:1)' --expect-task 'migrate(Counter 0:1)'
        ;;
    *) echo "trace_test.sh: unknown mode $mode" >&2; exit 2 ;;
esac
