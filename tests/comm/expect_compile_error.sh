#!/usr/bin/env bash
# expect_compile_error.sh CMAKE BUILD_DIR TARGET REGEX...: passes when building TARGET fails
# and the compiler's output matches every REGEX (extended grep).
set -u
cmake=$1 dir=$2 target=$3
shift 3
out=$("$cmake" --build "$dir" --target "$target" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -E "error|no_codec|required from here" | head -n 20
if [ "$rc" -eq 0 ]; then
  echo "expect_compile_error: $target compiled but must not" >&2
  exit 1
fi
for regex in "$@"; do
  if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
    echo "expect_compile_error: the compiler's output does not match /$regex/" >&2
    exit 1
  fi
done
echo "expect_compile_error: $target failed to compile, as expected, with the expected message"
