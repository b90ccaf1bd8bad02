#!/usr/bin/env bash
# test_check_layers.sh PYTHON ROOT: tools/check-layers passes on the tree, and fails on a
# copy of it with one include that points up (core -> comm), one that brings MPI into core,
# one that brings MPI into the MPI-free umbrella <cascade/core.hpp>, and one from core to that
# umbrella (it includes trace).
set -euo pipefail
py=$1 root=$2
"$py" "$root/tools/check-layers" --root "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/include" "$root/src" "$tmp/"
# Each case: the file (under include/cascade/) and the line appended to it.
cases=(
    'core/task.hpp|#include "cascade/comm/communicator.hpp"'
    'core/task.hpp|#include <mpi.h>'
    'core.hpp|#include <mpi.h>'
    'core/task.hpp|#include "cascade/core.hpp"'
)
for c in "${cases[@]}"; do
    file=${c%%|*} bad=${c#*|}
    cp "$root/include/cascade/$file" "$tmp/include/cascade/$file"
    echo "$bad" >>"$tmp/include/cascade/$file"
    if out=$("$py" "$root/tools/check-layers" --root "$tmp" 2>&1); then
        echo "check-layers accepted $file with: $bad" >&2
        exit 1
    fi
    grep -q "include/cascade/$file" <<<"$out" || { echo "$out" >&2; exit 1; }
    echo "rejected as expected: $(head -1 <<<"$out")"
    cp "$root/include/cascade/$file" "$tmp/include/cascade/$file"
done
