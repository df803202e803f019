#!/usr/bin/env bash
# The first command of the README: installs what is missing, builds, and runs the main job:
# `tessel local` on examples/local/fables.yaml, a small GPT trained as 2 pipeline stages x 2
# data-parallel replicas over two emulated sites, on this machine (about a minute on 2 cores).
# Arguments go to `tessel local` (e.g. --steps 50, --trace).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh tessel >&2  # builds tessel and tessel-stage; progress on stderr
exec build/cli/tessel local examples/local/fables.yaml "$@"
