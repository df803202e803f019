#!/usr/bin/env bash
# Builds tessel's three container images from the binaries of the host's build, with no
# registry: docker.io/tessel/{operator,stage,prober}:<the charts' appVersion>, the names the
# Helm charts use by default. Needs root (rootful podman), mmdebstrap, podman, buildah and runc
# (scripts/install-deps.sh installs them) and Debian's package mirror.
#
#   scripts/build-images.sh                  build what changed (the bases are made once)
#   scripts/build-images.sh --rebuild-bases  make the two Debian bases again first
#
# The bases, made by mmdebstrap from the host's Debian release and imported with podman:
#   localhost/tessel/debian-slim:<release>   extract variant: libc, libstdc++, no shell (16 MB);
#                                            every image's final stage
#   localhost/tessel/debian-build:<release>  minbase with apt and binutils; the first stages
# Their tarballs are kept in $TESSEL_IMAGE_CACHE (default <build>/images/bases) and imported
# again when podman lacks them. Each image is built by buildah with --pull=never and --layers, so
# a second run with the same binaries reuses every layer. TESSEL_BUILD_DIR names the build
# (default ./build).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TESSEL_BUILD_DIR:-$repo/build}"
cache="${TESSEL_IMAGE_CACHE:-$build/images/bases}"
context="$build/images/context"
rebuild_bases=false
case "${1:-}" in
  --rebuild-bases) rebuild_bases=true ;;
  "") ;;
  *) echo "usage: $0 [--rebuild-bases]" >&2; exit 2 ;;
esac

fail() { echo "build-images: $*" >&2; exit 1; }

for tool in mmdebstrap podman buildah runc; do
  command -v "$tool" >/dev/null ||
    fail "$tool is missing: scripts/install-deps.sh installs it (Debian package $tool)"
done
[[ $(id -u) -eq 0 ]] || fail "run as root: the images are built and run with rootful podman"

# name -> the binary the image holds (and its CMake target)
declare -A binary=(
  [operator]="$build/operator/tessel-operator"
  [stage]="$build/noderuntime/stage/tessel-stage"
  [prober]="$build/noderuntime/prober/tessel-prober"
)
for name in operator stage prober; do
  [[ -x ${binary[$name]} ]] || fail "${binary[$name]} is not built: run" \
    "cmake --build $build --target $(basename "${binary[$name]}") (or scripts/build.sh)"
done

version="$(awk -F'"' '/^appVersion:/ {print $2}' "$repo/helm/tessel/Chart.yaml")"
[[ -n $version ]] || fail "no appVersion in $repo/helm/tessel/Chart.yaml"
release="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[[ $(. /etc/os-release && echo "$ID") == debian && -n $release ]] ||
  fail "the host is not Debian (/etc/os-release): the images hold Debian's libraries of the" \
    "release the binaries were built on"
mirrors=(
  "deb http://deb.debian.org/debian $release main"
  "deb http://deb.debian.org/debian $release-updates main"
  "deb http://deb.debian.org/debian-security $release-security main"
)
# podman's default OCI runtime (crun) fails on some hosts' cgroups; runc does not. nproc is
# set because the hosts' limit may exceed what a container may be given.
runtime_flags=(--runtime runc --cgroup-manager cgroupfs --ulimit nofile=4096:4096
  --ulimit nproc=4096:4096)

# --- the bases ----------------------------------------------------------------------------------
slim_base="localhost/tessel/debian-slim:$release"
build_base="localhost/tessel/debian-build:$release"
mkdir -p "$cache"
make_base() {  # make_base <image> <tarball> <mmdebstrap options...>
  local image="$1" tarball="$2"
  shift 2
  if $rebuild_bases; then
    rm -f "$tarball"
    podman image rm --force "$image" >/dev/null 2>&1 || true
  fi
  if [[ ! -f $tarball || ! -s $tarball ]]; then
    echo "== mmdebstrap $* $release -> $tarball"
    # (mmdebstrap picks the format by the name: .tar)
    mmdebstrap --quiet "$@" "$release" "${tarball%.tar}.partial.tar" "${mirrors[@]}" ||
      fail "mmdebstrap could not make $tarball (is Debian's mirror reachable?)"
    mv "${tarball%.tar}.partial.tar" "$tarball"
  fi
  if ! podman image exists "$image"; then
    echo "== podman import $tarball $image"
    podman import --quiet "$tarball" "$image" >/dev/null
  fi
}
# The slim base: glibc and the C++ runtime every binary needs, nothing to run a shell with.
make_base "$slim_base" "$cache/debian-slim-$release.tar" \
  --variant=extract --include=base-files,netbase,libc6,libgcc-s1,libstdc++6
# The build base: apt for each image's runtime packages, binutils to strip the binaries.
make_base "$build_base" "$cache/debian-build-$release.tar" \
  --variant=minbase --include=binutils,ca-certificates

# --- the build context: the binaries, images/common, examples/, the libraries Debian lacks -------
rm -rf "$context"
mkdir -p "$context/host-libs"
link_or_copy() { cp -l "$1" "$2" 2>/dev/null || cp "$1" "$2"; }
for name in operator stage prober; do
  link_or_copy "${binary[$name]}" "$context/$(basename "${binary[$name]}")"
done
cp -r "$repo/images/common" "$context/common"
cp -r "$repo/examples" "$context/examples"  # the stage image ships them (its Dockerfile says why)
# tessel-stage's libraries that no Debian package holds (the host's CUDA runtime, cuBLASLt,
# NCCL when it was built with them), at the paths the host's loader found them.
while read -r name path; do
  [[ $path == /* ]] || fail "tessel-stage: $name does not resolve on this host (ldd)"
  dpkg-query -S "$(readlink -f "$path")" >/dev/null 2>&1 && continue
  dpkg-query -S "$path" >/dev/null 2>&1 && continue
  mkdir -p "$context/host-libs$(dirname "$path")"
  link_or_copy "$(readlink -f "$path")" "$context/host-libs$path"
  echo "== tessel-stage links $name from $path (no Debian package): copied into the image"
done < <(ldd "${binary[stage]}" | awk '$2 == "=>" {print $1, $3}')

# --- the images ---------------------------------------------------------------------------------
revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
for name in operator stage prober; do
  image="docker.io/tessel/$name:$version"
  previous="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  echo "== buildah build $image (images/tessel-$name/Dockerfile)"
  started=$SECONDS
  buildah build --quiet --pull=never --layers "${runtime_flags[@]}" \
    --build-arg BUILD_BASE="$build_base" --build-arg SLIM_BASE="$slim_base" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    --build-arg CREATED="$(date -u -r "${binary[$name]}" +%Y-%m-%dT%H:%M:%SZ)" \
    -f "$repo/images/tessel-$name/Dockerfile" -t "$image" "$context" >/dev/null ||
    fail "buildah could not build $image (its output is above)"
  current="$(podman image inspect --format '{{.Id}}' "$image")"
  # The image this one replaces, unless something still uses it.
  if [[ -n $previous && $previous != "$current" ]]; then
    podman image rm "$previous" >/dev/null 2>&1 || true
  fi
  echo "   built in $((SECONDS - started)) s"
done

echo "== images"
for name in operator stage prober; do
  image="docker.io/tessel/$name:$version"
  size="$(podman image inspect --format '{{.Size}}' "$image")"
  printf '   %-32s %6d MB  %s\n' "$image" $((size / 1000000)) \
    "$(podman image inspect --format '{{.Id}}' "$image" | cut -c1-12)"
done
