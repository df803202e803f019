#!/usr/bin/env bash
# The GPU script's pipeline on the SIMT emulator: cuda_kernels_bench --smoke, the table script,
# and the table put into a copy of docs/benchmarks.md. Usage: smoke_test.sh BENCH SOURCE_DIR
set -euo pipefail
bench=$1 source=$2
"$bench" --smoke --json smoke.jsonl > smoke_bench.md
python3 "$source/bench/gpu/combine_tables.py" smoke.jsonl --tests-summary "not run" \
  --gpu "SIMT emulator" > smoke_table.md
cp "$source/docs/benchmarks.md" benchmarks.md
python3 "$source/bench/gpu/put_table.py" benchmarks.md smoke_table.md
# Every op of the driver made a row, and the rows landed between the markers.
rows=$(grep -c '^| smoke |' benchmarks.md)
[ "$rows" -eq "$(grep -c '^| smoke |' smoke_bench.md)" ] && [ "$rows" -ge 20 ] ||
  { echo "smoke_test.sh: expected the bench's rows (at least 20) in benchmarks.md, found $rows"; exit 1; }
sed -n '/cuda-kernels-table:begin/,/cuda-kernels-table:end/p' benchmarks.md | grep -q 'SIMT emulator'
echo "smoke_test.sh: $rows rows"
