#!/usr/bin/env bash
# expect_failure.sh REGEX CMD...: passes when CMD exits non-zero and its output matches REGEX.
set -u
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 40
if [ "$rc" -eq 0 ]; then
  echo "expect_failure: command succeeded but should have failed" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect_failure: exit code $rc, but output does not match /$regex/" >&2
  exit 1
fi
echo "expect_failure: failed as expected (exit $rc, output matches /$regex/)"
