#!/usr/bin/env bash
# One GPU call for the stage runtime on the GPU: the CUDA backend against the CPU backend
# (stage_cuda_tests, the multi-process job included), the NCCL communicator's and the
# hierarchical all-reduce's tests, then the training benchmark (train_bench.py: GPT-2 124M
# against PyTorch eager and torch.compile, a GPT-3 1.3B-shaped stage, a 2-stage pipeline with
# overlap on and off, a small model's loss curve on both backends).
# Uses the executables bench/gpu/pack_prebuilt.sh packed (tessel tessel-stage stage_cuda_tests
# transport_tests). $OUT receives runtime_tests.log and train_bench.py's three files.
# Environment: BUDGET (seconds for the training benchmark, default 240), TRAIN_ARGS (more
# arguments for train_bench.py, e.g. "--only tessel-gpt2,pipeline-overlap").
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build-gpu/out}
logs=$root/build-gpu/runtime-logs
rm -rf "$logs" && mkdir -p "$out" "$logs"
source bench/gpu/common.sh
use_prebuilt tessel tessel-stage stage_cuda_tests transport_tests || { log "no usable bundle"; exit 1; }
export TESSEL_STAGE_BINARY=$build/bin/tessel-stage TESSEL_STAGE_CUDA_BINARY=$build/bin/tessel-stage
export TESSEL_BINARY=$build/bin/tessel
status=0
tests_log=$out/runtime_tests.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$tests_log" 2>&1
log "stage_cuda_tests"
timeout 150 "$build/bin/stage_cuda_tests" >> "$tests_log" 2>&1 || status=1
log "transport_tests (NCCL and the hierarchical all-reduce)"
timeout 90 "$build/bin/transport_tests" --gtest_filter='Nccl*:Hierarchical*' >> "$tests_log" 2>&1 ||
  status=1
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$tests_log" >&2
grep -A4 '^step | loss' "$tests_log" >&2
log "the training benchmark"
TESSEL_STAGE=$build/bin/tessel-stage OUT=$out python3 bench/gpu/train_bench.py \
  --tessel-stage "$build/bin/tessel-stage" --out "$out" --budget-s "${BUDGET:-240}" \
  ${TRAIN_ARGS:-} || status=1
exit "$status"
