#!/usr/bin/env bash
# One command on a GPU machine, within 8 minutes: builds the CUDA kernels, their tests and their
# benchmark (only those targets, -j16; or takes them prebuilt), runs the tests (tests/cuda
# against the CPU twins), the benchmark (bench/kernels/cuda_kernels_bench) and the PyTorch
# comparison (bench/gpu/torch_ops_bench.py), and writes the combined markdown table into
# docs/benchmarks.md between its cuda-kernels-table markers. Exits non-zero when a test failed.
#
# $OUT (default build-gpu/out) receives three files, for a machine whose tree is not kept:
# kernels_benchmark.md (the table), benchmarks.md (the updated document) and logs.tar.gz (every
# log: nvidia-smi, configure, build, tests, benchmark, PyTorch).
#
# The whole project is configured when its dependencies are installed; otherwise the kernels-only
# project in bench/gpu/CMakeLists.txt, with GoogleTest and OpenBLAS from the system or from
# .gpu-deps/ (made by bench/gpu/fetch_deps.sh and copied along).
#
# Then, unless RUNTIME=0, bench/gpu/runtime_call.sh: the stage runtime's CUDA backend against the
# CPU's, NCCL, and the training benchmark against PyTorch (its files land in $OUT too; it needs
# the runtime's executables in the prebuilt bundle: bench/gpu/pack_prebuilt.sh build cuda_tests
# cuda_kernels_bench tessel tessel-stage stage_cuda_tests transport_tests).
#
# Environment: OUT, ITERS (timed runs per op, default 30), MODELS (default gpt2-124m,gpt3-1.3b),
# RUNTIME (default 1), and runtime_call.sh's BUDGET and TRAIN_ARGS.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build-gpu/out}
logs=$root/build-gpu/logs
iters=${ITERS:-30}
models=${MODELS:-gpt2-124m,gpt3-1.3b}
rm -rf "$logs" && mkdir -p "$out" "$logs"
source bench/gpu/common.sh
trap 'pack_logs "$out/logs.tar.gz"' EXIT

nvidia-smi > "$logs/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)

build_targets cuda_tests cuda_kernels_bench || exit 1
tests_bin=$(built cuda_tests)
bench_bin=$(built cuda_kernels_bench)

log "running the CUDA tests"
"$tests_bin" > "$logs/cuda_tests.log" 2>&1
tests_status=$?
passed=$(grep -c '^\[       OK \]' "$logs/cuda_tests.log")
failed=$(grep -c '^\[  FAILED  \] .*(' "$logs/cuda_tests.log")
skipped=$(grep -c '^\[  SKIPPED \] .*(' "$logs/cuda_tests.log")
tests_summary="$passed passed, $failed failed, $skipped skipped"
log "tests: $tests_summary"
grep '^\[  FAILED  \]' "$logs/cuda_tests.log" | head -20 >&2

log "running the benchmark"
if ! "$bench_bin" --iters "$iters" --models "$models" --json "$logs/cuda_kernels.jsonl" \
    > "$logs/cuda_kernels.md" 2> "$logs/cuda_kernels.log"; then
  log "benchmark failed:"; tail -20 "$logs/cuda_kernels.log" >&2; exit 1
fi

torch_rows=()
log "running the PyTorch comparison"
if PYTHONUNBUFFERED=1 python3 bench/gpu/torch_ops_bench.py "$logs/cuda_kernels.jsonl" \
    --iters "$iters" > "$logs/torch_ops.jsonl" 2> "$logs/torch_ops.log"; then
  torch_rows=("$logs/torch_ops.jsonl")
else
  log "PyTorch comparison failed (torch_ops.log); the table has no PyTorch column values"
  tail -5 "$logs/torch_ops.log" >&2
fi
python3 bench/gpu/combine_tables.py "$logs/cuda_kernels.jsonl" "${torch_rows[@]}" \
  --tests-summary "$tests_summary" --gpu "$gpu" > "$out/kernels_benchmark.md"
cat "$out/kernels_benchmark.md"
python3 bench/gpu/put_table.py docs/benchmarks.md "$out/kernels_benchmark.md" &&
  cp docs/benchmarks.md "$out/benchmarks.md" && log "wrote the table into docs/benchmarks.md"

runtime_status=0
if [ "${RUNTIME:-1}" = 1 ]; then
  log "the stage runtime on the GPU (bench/gpu/runtime_call.sh)"
  bash bench/gpu/runtime_call.sh || runtime_status=1
fi
[ "$tests_status" = 0 ] && exit "$runtime_status"
exit "$tests_status"
