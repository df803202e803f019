#!/usr/bin/env bash
# Configures and builds tessel into build/ (warnings are errors when CI is set).
# Arguments name targets to build (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
werror=OFF
debug_info=-g
if [ -n "${CI:-}" ]; then
  werror=ON
  # CI keeps line tables only (-g1): backtraces and sanitizer reports still name file and line,
  # the generated code and the warnings are the same, and full -g cost a third more compile time.
  debug_info=-g1
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSEL_WERROR="$werror" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $debug_info -DNDEBUG" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build --parallel "$(nproc)" "${targets[@]}"
