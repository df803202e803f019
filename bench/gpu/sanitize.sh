#!/usr/bin/env bash
# On a GPU machine: the CUDA tests under NVIDIA's compute-sanitizer, which sees on the hardware
# what the SIMT emulator (tests/support/simt) checks on the CPU:
# - memcheck on every op case and the GPT step: out-of-bounds and misaligned accesses;
# - racecheck on the attention cases: shared-memory hazards, the plain loads and stores included;
# - synccheck on the attention cases: barriers that not every thread reaches.
# The three tools run at once, each for at most TOOL_SECONDS (default 150). $OUT (default build-gpu/out) receives
# sanitize.md (one line a tool: its error summary and exit status) and sanitize-logs.tar.gz.
# Exits non-zero when a tool reported an error or did not finish.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build-gpu/out}
logs=$root/build-gpu/sanitize-logs
seconds=${TOOL_SECONDS:-150}
rm -rf "$logs" && mkdir -p "$out" "$logs"
source bench/gpu/common.sh
trap 'pack_logs "$out/sanitize-logs.tar.gz"' EXIT

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$sanitizer" ] || { log "compute-sanitizer not found"; exit 1; }
build_targets cuda_tests || exit 1
tests_bin=$(built cuda_tests)

summary="$out/sanitize.md"
echo "compute-sanitizer on cuda_tests ($("$sanitizer" --version | tail -1)):" > "$summary"
# run_tool NAME FILTER ARGS...: one tool over the tests FILTER selects; its line in $logs/NAME.line.
run_tool() {
  local name=$1 filter=$2
  shift 2
  log "$name on $filter"
  timeout "$seconds" "$sanitizer" --tool "$name" --error-exitcode 99 "$@" "$tests_bin" \
    --gtest_filter="$filter" > "$logs/$name.log" 2>&1
  local code=$?
  local errors
  errors=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$name.log" | tail -1)
  [ "$code" -eq 124 ] && errors="did not finish in ${seconds} s"
  echo "- $name ($filter): ${errors:-no summary} (exit $code)" > "$logs/$name.line"
}
run_tool memcheck 'Registry/*:GptStep*' &
run_tool racecheck 'Registry/*attention*' --racecheck-report hazard &
run_tool synccheck 'Registry/*attention*' &
wait
status=0
for name in memcheck racecheck synccheck; do
  cat "$logs/$name.line" >> "$summary"
  grep -q '(exit 0)$' "$logs/$name.line" || status=1
done
cat "$summary"
exit "$status"
