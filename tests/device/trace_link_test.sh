#!/usr/bin/env bash
# trace_link_test.sh NP OUT.json TOOL CHECK EXE MPIEXEC [MPIEXEC FLAGS...]
# Runs trace_link at NP ranks with CASCADE_TRACE=OUT.json, checks the file against the
# trace-event format (TOOL validate) and that every piece of every body is linked across the
# devices and ranks (CHECK, check_links.py: 3 pieces per rank).
set -euo pipefail
np=$1 json=$2 tool=$3 check=$4 exe=$5
shift 5
PY="${CASCADE_PYTHON:-/usr/bin/python3}"
rm -f "$json"
CASCADE_TRACE="$json" "$@" -n "$np" "$exe"
"$PY" "$tool" validate "$json" --ranks "$np"
"$PY" "$check" "$json" "$np" 3
