#!/usr/bin/env bash
# Run here (a build machine with CUDA 13.0, like the GPU machines' image): packs the already built
# CUDA test and benchmark executables, with the OpenBLAS the CPU twins link and its Fortran
# runtime, into .gpu-prebuilt/bundle.tar.xz (ignored by git), so that a GPU call spends its time
# running rather than compiling. bench/gpu/common.sh unpacks it there and falls back to building
# when the bundle is missing or its executables do not load.
# Usage: bench/gpu/pack_prebuilt.sh [BUILD_DIR (default build)] [EXECUTABLE...]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(cuda_tests cuda_kernels_bench)
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-prebuilt/' "$exclude" 2>/dev/null || echo '/.gpu-prebuilt/' >> "$exclude"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for name in "${names[@]}"; do
  path=$(find "$build" -name "$name" -type f -perm -u+x | head -1)
  [ -n "$path" ] || { echo "pack_prebuilt: $name is not built in $build" >&2; exit 1; }
  cp "$path" "$stage/bin/"
done
# The libraries the GPU image lacks; CUDA's own (cudart, cublasLt, nccl) are there.
for lib in openblas-pthread/libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$stage/lib/" 2>/dev/null ||
    cp -L "/lib/x86_64-linux-gnu/$lib" "$stage/lib/"
done
git rev-parse HEAD > "$stage/commit"
mkdir -p .gpu-prebuilt
tar -cJf .gpu-prebuilt/bundle.tar.xz -C "$stage" .
du -h .gpu-prebuilt/bundle.tar.xz
