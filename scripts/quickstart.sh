#!/usr/bin/env bash
# The first command of the README: installs what is missing, builds, and runs the main job:
# the placement of GPT3-1.3B (8 stages x 8 replicas) on the paper's world-wide topology.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh tessel >&2  # build progress on stderr: stdout is the placement
exec build/cli/tessel plan --topology examples/topologies/5-worldwide-geo.yaml \
  --stages 8 --replicas 8 --preset gpt3-1.3b "$@"
