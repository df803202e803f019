#!/usr/bin/env bash
# The second command of the README (and what CI runs): installs what is missing, builds, and
# runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 600
