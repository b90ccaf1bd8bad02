#!/usr/bin/env bash
# test_check_docs.sh PYTHON ROOT CXX FLAGS: tools/check-docs passes on the tree (C++ blocks
# compiled), and fails on a copy of it with one planted error each: a C++ block that does not
# compile, a path that does not exist, a link that does not exist, a CASCADE_ variable the
# settings parser does not know, a setting no page mentions, and an example block that differs
# from its file.
set -euo pipefail
py=$1 root=$2 cxx=$3 flags=$4
"$py" "$root/tools/check-docs" --root "$root" --cxx "$cxx" --flags "$flags"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in README.md CMakeLists.txt docs examples src include tests bench tools apps cmake fuzz; do
    [ -e "$root/$p" ] && cp -r "$root/$p" "$tmp/"
done
# Each case: the file, the text appended to it, what the checker must say.
cases=(
    'docs/futures.md|\n```cpp\nint main() { return not_declared_anywhere(); }\n```\n|does not compile'
    'docs/broadcast.md|\nSee `src/comm/no_such_file.cpp`.\n|src/comm/no_such_file.cpp does not exist'
    'README.md|\nRun `bench/no_such_suite/run`.\n|bench/no_such_suite/run does not exist'
    'docs/objects.md|\nSee [the guide](no_such_page.md).\n|no_such_page.md, which does not exist'
    'docs/running.md|\nSet `CASCADE_NO_SUCH_SETTING=1`.\n|CASCADE_NO_SUCH_SETTING is not a setting'
    'src/core/settings.cpp|\nconstexpr Variable kVariables[] = {{"CASCADE_PLANTED", "", "", ""}};\n|CASCADE_PLANTED: a setting of src/core/settings.cpp that no page mentions'
    'examples/01_task_graph.cpp|\n// planted\n|differs from examples/01_task_graph.cpp'
)
for c in "${cases[@]}"; do
    IFS='|' read -r file bad expect <<<"$c"
    if [ "$file" = src/core/settings.cpp ]; then
        # the parser's table with one more variable, which no page mentions
        sed 's/^constexpr Variable kVariables\[\] = {/&\n    {"CASCADE_PLANTED", "x", "x", "x"},/' \
            "$root/$file" >"$tmp/$file"
    else
        cp "$root/$file" "$tmp/$file"
        printf "$bad" >>"$tmp/$file"
    fi
    compile=()  # only the planted block needs the compiler
    [[ $expect == *compile* ]] && compile=(--cxx "$cxx" --flags "$flags")
    if out=$("$py" "$root/tools/check-docs" --root "$tmp" "${compile[@]}" 2>&1); then
        echo "check-docs accepted $file with: $bad" >&2
        exit 1
    fi
    grep -qF "$expect" <<<"$out" || { echo "expected '$expect' in:" >&2; echo "$out" >&2; exit 1; }
    echo "rejected as expected: $(grep -F "$expect" <<<"$out" | head -1)"
    cp "$root/$file" "$tmp/$file"
done
