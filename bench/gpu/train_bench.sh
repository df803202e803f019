#!/usr/bin/env bash
# The training benchmark in one GPU call: finds tessel-stage and runs bench/gpu/train_bench.py
# (its docstring says what it measures), passing every argument on. $OUT receives
# train_benchmark.md, train_results.json and train_logs.tar.gz.
#
# tessel-stage: $TESSEL_STAGE when set; else the prebuilt bundle (bench/gpu/pack_prebuilt.sh
# build tessel-stage, unpacked by common.sh's use_prebuilt when every library it needs loads);
# else build/noderuntime/stage/tessel-stage (first with --smoke).
# Examples:  OUT=/tmp/out bench/gpu/train_bench.sh
#            bench/gpu/train_bench.sh --smoke          (no GPU: tiny shapes, --device cpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
logs=$root/build-gpu/train-bench-setup
rm -rf "$logs" && mkdir -p "$logs"
source bench/gpu/common.sh
local_build=$root/build/noderuntime/stage/tessel-stage
smoke=0
for arg in "$@"; do [ "$arg" = --smoke ] && smoke=1; done
if [ -z "${TESSEL_STAGE:-}" ]; then
  if [ "$smoke" = 1 ] && [ -x "$local_build" ]; then
    export TESSEL_STAGE=$local_build
  elif use_prebuilt tessel-stage; then
    export TESSEL_STAGE=$build/bin/tessel-stage
  elif [ -x "$local_build" ]; then
    export TESSEL_STAGE=$local_build
  else
    log "no tessel-stage: set TESSEL_STAGE, or pack one with bench/gpu/pack_prebuilt.sh"
    exit 2
  fi
fi
log "tessel-stage: $TESSEL_STAGE"
exec python3 bench/gpu/train_bench.py "$@"
