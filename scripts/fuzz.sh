#!/usr/bin/env bash
# Runs tessel's libFuzzer targets (tests/fuzz/<name>_fuzz.cpp): builds them with clang, ASan and
# UBSan in build-fuzz (-DTESSEL_FUZZ=ON), runs each for a fixed time over its committed corpus
# (tests/fuzz/corpus/<name>) and its crash regressions (tests/fuzz/regressions/<name>), merges
# what it found into the corpus (minimized with -merge=1), and prints per target: executions,
# executions per second, time, corpus size and crashes. Exits 1 when any target crashed; the
# crashing inputs are left in build-fuzz/fuzz-work/<name>/artifacts/.
#
#   scripts/fuzz.sh [--seconds N] [--max-len BYTES] [--no-merge] [target...]
#
# One fuzzer process at a time; the build takes /tmp/tessel-build.lock (shared machines).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TESSEL_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=60
max_len=16384
merge=1
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --max-len) max_len=$2; shift 2 ;;
    --no-merge) merge=0; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds must be a positive integer, got '$seconds'" >&2; exit 2; }
[[ $max_len =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --max-len must be a positive integer, got '$max_len'" >&2; exit 2; }
all=$(cd "$root/tests/fuzz" && ls -- *_fuzz.cpp | sed 's/_fuzz\.cpp$//')
if ((${#targets[@]} == 0)); then
  mapfile -t targets <<<"$all"
fi
for t in "${targets[@]}"; do
  grep -qx -- "$t" <<<"$all" || { echo "fuzz.sh: no target '$t'; targets: $(echo $all)" >&2; exit 2; }
done

if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DTESSEL_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
flock /tmp/tessel-build.lock cmake --build "$build" --target "${targets[@]/#/fuzz_}"

summary=()
crashed=0
for t in "${targets[@]}"; do
  corpus=$root/tests/fuzz/corpus/$t
  regressions=$root/tests/fuzz/regressions/$t
  work=$build/fuzz-work/$t
  rm -rf "$work" && mkdir -p "$work/new" "$work/artifacts" "$corpus"
  inputs=("$work/new" "$corpus")
  [[ -d $regressions ]] && inputs+=("$regressions")
  echo "== $t: ${seconds} s, -max_len=$max_len"
  start=$(date +%s)
  # New inputs go to the first folder (work/new); the corpus is only read until the merge.
  set +e
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "${inputs[@]}" >"$work/log" 2>&1
  status=$?
  set -e
  elapsed=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  crashes=$(find "$work/artifacts" -type f | wc -l)
  if ((status != 0 && crashes == 0)); then crashes=1; fi  # died without leaving an input
  if ((crashes > 0)); then
    crashed=1
    echo "   CRASH (exit $status): $(ls "$work/artifacts" | head -5 | tr '\n' ' ')"
    grep -m3 -E 'ERROR: |runtime error|fuzz finding|deadly signal|uncaught exception' \
      "$work/log" | sed 's/^/   /' || true
  fi
  if ((merge)); then
    # Minimized on edge coverage alone (-use_counters=0): a few hundred files per target, so that
    # the committed corpus stays small and its replay takes seconds.
    mkdir -p "$work/merged"
    if "$build/tests/fuzz/fuzz_$t" -merge=1 -use_counters=0 -max_len="$max_len" -timeout=10 \
      -rss_limit_mb=2048 "$work/merged" "$corpus" "$work/new" >"$work/merge.log" 2>&1 &&
      [[ -n $(ls -A "$work/merged") ]]; then
      find "$corpus" -maxdepth 1 -type f -delete
      cp "$work/merged"/* "$corpus"/
    else
      echo "   merge failed (the corpus is kept): see $work/merge.log"
    fi
  fi
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  summary+=("$(printf '%-18s %12s %9s %6ss %7s files %9s bytes %4s' "$t" "${execs:-?}" \
    "${rate:-?}" "$elapsed" "$files" "$bytes" "$crashes")")
done

printf '\n%-18s %12s %9s %7s %13s %15s %7s\n' target executions exec/s time corpus "" crashes
printf '%s\n' "${summary[@]}"
exit $crashed
