#!/usr/bin/env bash
# Run here (a build machine with CUDA 13.0, like the GPU machines' image): packs already built
# executables (by default the CUDA tests and kernel benchmark) with the libraries they load that
# the GPU image lacks into .gpu-prebuilt/bundle.tar.xz (ignored by git), so that a GPU call spends its time
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
  # The newest of that name: a build folder also holds older copies (the images' context).
  path=$(find "$build" -name "$name" -type f -perm -u+x -printf '%T@ %p\n' | sort -nr |
    head -1 | cut -d' ' -f2-)
  [ -n "$path" ] || { echo "pack_prebuilt: $name is not built in $build" >&2; exit 1; }
  cp "$path" "$stage/bin/"
done
# Debug information stays here: it would take most of what a GPU call may carry.
strip --strip-debug "$stage"/bin/*
# Every library they load but the C runtime's own and CUDA's (cudart, cublasLt and NCCL, which
# the GPU image has): OpenBLAS, gRPC, protobuf, yaml-cpp, abseil and the rest.
for exe in "$stage"/bin/*; do
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    libcudart.so*|libcublas*|libnccl.so*|libcuda.so*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
git rev-parse HEAD > "$stage/commit"
mkdir -p .gpu-prebuilt
tar -cJf .gpu-prebuilt/bundle.tar.xz -C "$stage" .
du -h .gpu-prebuilt/bundle.tar.xz
