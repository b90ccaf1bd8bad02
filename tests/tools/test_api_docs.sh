#!/usr/bin/env bash
# The API reference builds from the public headers' /// comments with zero Doxygen warnings
# (an undocumented public member is one): usage: test_api_docs.sh DOXYGEN SOURCE_DIR OUT_DIR
set -euo pipefail
doxygen=$1 src=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
cd "$src"
version="$(sed -n 's/^project(Cascade VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
CASCADE_VERSION="$version" CASCADE_DOCS_OUT="$out" "$doxygen" docs/Doxyfile >/dev/null
warnings="$(grep -c 'warning:' "$out/warnings.log" || true)"
if [[ "$warnings" -ne 0 ]]; then
    sed -n '1,40p' "$out/warnings.log"
    echo "api_docs: $warnings Doxygen warning(s); document the members above (docs/api.md)"
    exit 1
fi
[[ -f "$out/html/index.html" ]] || { echo "api_docs: no $out/html/index.html"; exit 1; }
echo "api_docs: $out/html/index.html, 0 warnings"
