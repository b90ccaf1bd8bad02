#!/usr/bin/env bash
# test_check_layers.sh PYTHON ROOT: tools/check-layers passes on the tree, and fails on a
# copy of it with one include that points up (core -> comm), one that brings MPI into core,
# one that brings MPI into the MPI-free umbrella <cascade/core.hpp>, one from core to that
# umbrella (it includes trace), device including futures, a futures file other than the bridge
# futures/device.hpp including device, and functions declared in core or comm and defined in a
# layer above (two free functions defined in comm, a member function defined in broadcast),
# and an application including a benchmark's header.
set -euo pipefail
py=$1 root=$2
"$py" "$root/tools/check-layers" --root "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/include" "$root/src" "$root/apps" "$tmp/"
# Each case: the file (under include/cascade/) and the line appended to it.
cases=(
    'core/task.hpp|#include "cascade/comm/communicator.hpp"'
    'core/task.hpp|#include <mpi.h>'
    'core.hpp|#include <mpi.h>'
    'core/task.hpp|#include "cascade/core.hpp"'
    'device/task.hpp|#include "cascade/futures/future.hpp"'
    'futures/future.hpp|#include "cascade/device/task.hpp"'
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
# An application that includes a benchmark's file.
app=$(cd "$root" && ls apps/*/*.cpp | head -1)
echo '#include "../../bench/common/record.hpp"' >>"$tmp/$app"
if out=$("$py" "$root/tools/check-layers" --root "$tmp" 2>&1); then
    echo "check-layers accepted $app including bench/" >&2
    exit 1
fi
grep -q "$app" <<<"$out" || { echo "$out" >&2; exit 1; }
echo "rejected as expected: $(head -1 <<<"$out")"
cp "$root/$app" "$tmp/$app"
# Declared below, defined above: each case is the declaring file, the declaration (inside
# namespace cascade), the defining file (under src/) and the definition.
defs=(
    'include/cascade/core/threadpool.hpp|namespace detail { int planted_up(const Threadpool& tp, int n = 0); }|src/comm/node.cpp|int detail::planted_up(const Threadpool&, int n) { return n; }'
    'include/cascade/core/task.hpp|void planted_hook();|src/comm/send.cpp|void planted_hook() {}'
    'include/cascade/comm/broadcasts.hpp|namespace detail { struct Planted { void operator()(int) const; }; }|src/broadcast/tree.cpp|void detail::Planted::operator()(int) const {}'
)
for c in "${defs[@]}"; do
    IFS='|' read -r decl_file decl def_file def <<<"$c"
    cp "$root/$decl_file" "$tmp/$decl_file"
    cp "$root/$def_file" "$tmp/$def_file"
    printf '\nnamespace cascade {\n%s\n}\n' "$decl" >>"$tmp/$decl_file"
    printf '\nnamespace cascade {\n%s\n}\n' "$def" >>"$tmp/$def_file"
    if out=$("$py" "$root/tools/check-layers" --root "$tmp" 2>&1); then
        echo "check-layers accepted $def_file defining what $decl_file declares: $def" >&2
        exit 1
    fi
    grep -q "$def_file" <<<"$out" || { echo "$out" >&2; exit 1; }
    echo "rejected as expected: $(head -1 <<<"$out")"
    cp "$root/$decl_file" "$tmp/$decl_file"
    cp "$root/$def_file" "$tmp/$def_file"
done
# The same in the tree itself stays accepted: core defines what core declares.
cp "$root/src/core/log.cpp" "$tmp/src/core/log.cpp"
printf '\nnamespace cascade {\nvoid planted_hook() {}\n}\n' >>"$tmp/src/core/log.cpp"
printf '\nnamespace cascade {\nvoid planted_hook();\n}\n' >>"$tmp/include/cascade/core/task.hpp"
"$py" "$root/tools/check-layers" --root "$tmp" >/dev/null
