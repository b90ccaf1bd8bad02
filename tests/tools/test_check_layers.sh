#!/usr/bin/env bash
# test_check_layers.sh PYTHON ROOT: tools/check-layers passes on the tree, and fails on a
# copy of it with one include that points up (core -> comm) and one that brings MPI into core.
set -euo pipefail
py=$1 root=$2
"$py" "$root/tools/check-layers" --root "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/include" "$root/src" "$tmp/"
for bad in '#include "cascade/comm/communicator.hpp"' '#include <mpi.h>'; do
    cp "$root/include/cascade/core/task.hpp" "$tmp/include/cascade/core/task.hpp"
    echo "$bad" >>"$tmp/include/cascade/core/task.hpp"
    if out=$("$py" "$root/tools/check-layers" --root "$tmp" 2>&1); then
        echo "check-layers accepted core/task.hpp with: $bad" >&2
        exit 1
    fi
    grep -q "include/cascade/core/task.hpp" <<<"$out" || { echo "$out" >&2; exit 1; }
    echo "rejected as expected: $(head -1 <<<"$out")"
done
