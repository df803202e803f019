#!/usr/bin/env bash
# Run on a machine with apt, for a GPU machine that lacks GoogleTest or OpenBLAS and cannot
# download: downloads the few Debian packages that bench/gpu/CMakeLists.txt needs and unpacks them
# into .gpu-deps/ (ignored by git). Copy .gpu-deps along with the tree; bench/gpu/run.sh and
# sanitize.sh find it there.
set -euo pipefail
cd "$(dirname "$0")/../.."
deps=.gpu-deps
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >> "$exclude"
rm -rf "$deps" && mkdir -p "$deps/debs"
(cd "$deps/debs" && apt-get download googletest libopenblas0-pthread libopenblas-pthread-dev \
  libgfortran5 libquadmath0)
for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$deps"; done
# What the build does not need: the packages themselves, static libraries, documentation.
rm -rf "$deps/debs" "$deps/usr/share"
find "$deps" -name '*.a' -delete
du -sh "$deps"
