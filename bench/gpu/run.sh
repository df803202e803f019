#!/usr/bin/env bash
# One call on a GPU machine: builds the CUDA kernels, their tests and their benchmark (only those
# targets, -j16), runs the tests (tests/cuda against the CPU twins), the benchmark
# (bench/kernels/cuda_kernels_bench) and the PyTorch comparison (bench/gpu/torch_ops_bench.py),
# and writes the combined markdown table to $OUT/kernels_benchmark.md, with the logs beside it,
# and into docs/benchmarks.md between its cuda-kernels-table markers (a copy in $OUT too, for a
# machine whose tree is not kept). OUT defaults to build-gpu/out.
#
# The whole project is configured when its dependencies are installed; otherwise the kernels-only
# project in bench/gpu/CMakeLists.txt, with GoogleTest and OpenBLAS from the system or from
# .gpu-deps/ (made by bench/gpu/fetch_deps.sh and carried along).
#
# Environment: OUT, ITERS (timed runs per op, default 30), MODELS (default gpt2-124m,gpt3-1.3b).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build-gpu/out}
iters=${ITERS:-30}
models=${MODELS:-gpt2-124m,gpt3-1.3b}
mkdir -p "$out"
log() { echo "run.sh: $*" >&2; }

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see nvidia-smi.txt)"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
deps=$root/.gpu-deps
if [ -d "$deps" ]; then
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi

build=$root/build-gpu/project
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON \
    > "$out/configure.log" 2>&1; then
  log "configured the whole project"
else
  log "the whole project does not configure here (configure.log); building kernels only"
  build=$root/build-gpu/kernels
  dep_args=()
  [ -d "$deps" ] && dep_args=(-DTESSEL_DEPS_PREFIX="$deps")
  cmake -S "$root/bench/gpu" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${dep_args[@]}" \
    >> "$out/configure.log" 2>&1 || { log "configure failed:"; tail -30 "$out/configure.log"; exit 1; }
fi
log "building cuda_tests and cuda_kernels_bench"
if ! cmake --build "$build" --target cuda_tests cuda_kernels_bench -j16 > "$out/build.log" 2>&1; then
  log "build failed:"; tail -40 "$out/build.log"; exit 1
fi
tests_bin=$(find "$build" -name cuda_tests -type f -perm -u+x | head -1)
bench_bin=$(find "$build" -name cuda_kernels_bench -type f -perm -u+x | head -1)

log "running the CUDA tests"
"$tests_bin" > "$out/cuda_tests.log" 2>&1
tests_status=$?
passed=$(grep -c '^\[       OK \]' "$out/cuda_tests.log")
failed=$(grep -c '^\[  FAILED  \] .*(' "$out/cuda_tests.log")
skipped=$(grep -c '^\[  SKIPPED \] .*(' "$out/cuda_tests.log")
tests_summary="$passed passed, $failed failed, $skipped skipped"
log "tests: $tests_summary"
grep '^\[  FAILED  \]' "$out/cuda_tests.log" | head -20 >&2

log "running the benchmark"
"$bench_bin" --iters "$iters" --models "$models" --json "$out/cuda_kernels.jsonl" \
  > "$out/cuda_kernels.md" 2> "$out/cuda_kernels.log" || { log "benchmark failed:"; tail -20 "$out/cuda_kernels.log"; exit 1; }

torch_rows=()
log "running the PyTorch comparison"
if PYTHONUNBUFFERED=1 python3 bench/gpu/torch_ops_bench.py "$out/cuda_kernels.jsonl" --iters "$iters" \
    > "$out/torch_ops.jsonl" 2> "$out/torch_ops.log"; then
  torch_rows=("$out/torch_ops.jsonl")
else
  log "PyTorch comparison failed (torch_ops.log); the table has no PyTorch column values"
  tail -5 "$out/torch_ops.log" >&2
fi
python3 bench/gpu/combine_tables.py "$out/cuda_kernels.jsonl" "${torch_rows[@]}" \
  --tests-summary "$tests_summary" --gpu "$gpu" > "$out/kernels_benchmark.md"
cat "$out/kernels_benchmark.md"
python3 bench/gpu/put_table.py docs/benchmarks.md "$out/kernels_benchmark.md" &&
  cp docs/benchmarks.md "$out/benchmarks.md" && log "wrote the table into docs/benchmarks.md"
exit "$tests_status"
