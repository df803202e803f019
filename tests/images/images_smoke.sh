#!/usr/bin/env bash
# The container images (ctest label images): builds them with scripts/build-images.sh (so they
# hold this build's binaries; layers are reused when nothing changed), then runs each with
# podman as the charts run them: read-only root, the image's user, no shell. Checks that each
# image's entrypoint answers --help, runs as 65532:65532, has no /bin/sh, and that the operator
# image serves /healthz and /readyz over HTTPS with a test certificate, against the API test
# server (started here; the container gets the host's network and its kubeconfig read-only),
# and that the stage image trains: `tessel local` runs the fables example's 4 ranks, each a
# container of the stage image (on the CPU: no GPU driver is mounted in).
# Skips (exit 77) when podman, buildah, mmdebstrap or runc is missing or it is not run as root.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${TESSEL_BUILD_DIR:-$repo/build}"

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*" >&2; exit 1; }

for tool in podman buildah mmdebstrap runc; do
  command -v "$tool" >/dev/null || skip "$tool is missing (scripts/install-deps.sh installs it)"
done
[[ $(id -u) -eq 0 ]] || skip "not root: the images are built and run with rootful podman"
for tool in openssl curl python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
apiserver="$build/tests/support/tessel-test-apiserver"
[[ -x $apiserver ]] || fail "$apiserver is not built"
tessel="$build/cli/tessel"
[[ -x $tessel ]] || fail "$tessel is not built"

TESSEL_BUILD_DIR="$build" "$repo/scripts/build-images.sh"

version="$(awk -F'"' '/^appVersion:/ {print $2}' "$repo/helm/tessel/Chart.yaml")"
# runc and cgroupfs: podman's default crun fails on some hosts' cgroups.
run=(podman run --rm --runtime runc --cgroup-manager cgroupfs --ulimit nofile=1024:1024
  --ulimit nproc=1024:1024 --read-only --tmpfs /tmp)

for name in operator stage prober; do
  image="docker.io/tessel/$name:$version"
  user="$(podman image inspect --format '{{.Config.User}}' "$image")"
  [[ $user == 65532:65532 ]] || fail "$image runs as '$user', not 65532:65532"
  # The name the charts use resolves to the same image.
  podman image exists "tessel/$name:$version" || fail "tessel/$name:$version does not name $image"
  if ! help="$("${run[@]}" --network none "$image" --help 2>&1)"; then
    fail "$image --help failed: $help"
  fi
  grep -q "tessel-$name" <<<"$help" || fail "$image --help does not name tessel-$name: $help"
  if "${run[@]}" --network none --entrypoint /bin/sh "$image" -c true >/dev/null 2>&1; then
    fail "$image has a shell (/bin/sh): the final stage should hold only the binary's runtime"
  fi
  echo "ok: $image ($(($(podman image inspect --format '{{.Size}}' "$image") / 1000000)) MB):" \
    "--help, user 65532:65532, no shell"
done

# --- the operator image serving /healthz ---------------------------------------------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/tessel-images-smoke.XXXXXX")"
container="tessel-images-smoke-$$"
apiserver_pid=""
cleanup() {
  podman rm --force --time 2 "$container" >/dev/null 2>&1 || true
  [[ -z $apiserver_pid ]] || { kill "$apiserver_pid" 2>/dev/null || true; wait "$apiserver_pid" || true; }
  rm -rf "$work"
}
trap cleanup EXIT

"$apiserver" --crds "$repo/crds" --kubeconfig-out "$work/hub.kubeconfig" \
  --port-file "$work/hub.port" >"$work/apiserver.log" 2>&1 &
apiserver_pid=$!
for _ in $(seq 100); do [[ -s $work/hub.kubeconfig ]] && break; sleep 0.1; done
[[ -s $work/hub.kubeconfig ]] || fail "the API test server did not start: $(cat "$work/apiserver.log")"

mkdir "$work/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=tessel images smoke CA" -keyout "$work/ca.key" -out "$work/tls/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=tessel-operator" \
  -keyout "$work/tls/tls.key" -out "$work/tls.csr" 2>/dev/null
openssl x509 -req -in "$work/tls.csr" -CA "$work/tls/ca.crt" -CAkey "$work/ca.key" \
  -CAcreateserial -days 1 -out "$work/tls/tls.crt" \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1') 2>/dev/null
# The image's user (65532) reads them, as the chart's fsGroup lets it in a cluster.
chmod 0755 "$work/tls" && chmod 0644 "$work/tls/"* "$work/hub.kubeconfig"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
https_port="$(free_port)"
stage_port="$(free_port)"
image="docker.io/tessel/operator:$version"
"${run[@]/--rm/--detach}" --name "$container" --network host \
  -v "$work/tls:/etc/tessel-operator/tls:ro" -v "$work/hub.kubeconfig:/etc/tessel/kubeconfig:ro" \
  "$image" --kubeconfig /etc/tessel/kubeconfig --namespace tessel-system --leader-elect=false \
  --https-address "127.0.0.1:$https_port" --tls-cert-file /etc/tessel-operator/tls/tls.crt \
  --tls-key-file /etc/tessel-operator/tls/tls.key --tls-ca-file /etc/tessel-operator/tls/ca.crt \
  --stage-service-address "127.0.0.1:$stage_port" \
  --stage-service-advertise "127.0.0.1:$stage_port" >/dev/null

# /healthz answers once the HTTPS server is up; /readyz (with --leader-elect=false) once the
# controllers' caches have synced from the API server: the kubeconfig and network work.
get() { curl -sf --cacert "$work/tls/ca.crt" "https://127.0.0.1:$https_port/$1" 2>/dev/null; }
readyz=""
for _ in $(seq 150); do
  readyz="$(get readyz)" && break
  [[ $(podman inspect --format '{{.State.Running}}' "$container" 2>/dev/null) == true ]] ||
    fail "the operator container exited: $(podman logs "$container" 2>&1 | tail -20)"
  sleep 0.2
done
[[ -n $readyz ]] || fail "the operator image was not ready at https://127.0.0.1:$https_port/readyz" \
  "in 30 s: $(podman logs "$container" 2>&1 | tail -20)"
healthz="$(get healthz)" || fail "https://127.0.0.1:$https_port/healthz failed while /readyz answered"
echo "ok: $image serves /healthz ($healthz) and /readyz ($readyz) over HTTPS, the test CA" \
  "verifying it, its caches synced from the API test server"

# --- the stage image training -------------------------------------------------------------------
# tessel local starts each rank as `<stage binary> --job ... --rank R ...`; here the "binary"
# runs the image instead, with the host's network (the ranks' links) and the output folder
# handed to the image's user (:U), as a pod's volumes are by fsGroup. The job file names its
# data as examples/local/../data/fables.txt, relative: the ranks start in /usr/share/tessel, so
# they read the examples the image ships.
mkdir "$work/fables"
wrapper="$work/tessel-stage-in-podman"
{
  echo '#!/usr/bin/env bash'
  printf 'exec'
  printf ' %q' "${run[@]}" --network host -v "$work/fables:$work/fables:U" \
    -w /usr/share/tessel "docker.io/tessel/stage:$version"
  echo ' "$@"'
} >"$wrapper"
chmod +x "$wrapper"
if ! trained="$(cd "$repo" && "$tessel" local examples/local/fables.yaml --steps 3 \
  --output "$work/fables" --stage-binary "$wrapper" 2>&1)"; then
  fail "tessel local with the stage image failed: $trained"
fi
grep -q "done: 3 of 3 steps" <<<"$trained" || fail "tessel local did not train 3 steps: $trained"
echo "ok: docker.io/tessel/stage:$version trained examples/local/fables.yaml (4 ranks, 3 steps):" \
  "$(grep -m1 'device' "$work/fables/logs/rank-0.log")"
