#!/usr/bin/env bash
# The operator on this machine, no cluster needed: a hub and two member "clusters" (the API test
# server), four GPU nodes played by process kubelets (pods run as local processes), the
# links between them annotated as a prober would (fast inside a member, slow across),
# tessel-operator itself, and the example TrainingJob applied with kubectl. Then it leaves you
# at a shell where `kubectl get trainingjobs -w` works; leaving that shell stops everything.
#
#   scripts/operator-demo.sh            build what is missing, start, open the shell
#   scripts/operator-demo.sh --check    the same, but wait for the job to succeed, then stop
#                                       (what the tests run); exit 1 if it does not
#
# Everything lives in one folder under $TMPDIR (printed); logs are kept there after the demo.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TESSEL_BUILD_DIR:-$repo/build}"
check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

operator="$build/operator/tessel-operator"
stage="$build/noderuntime/stage/tessel-stage"
apiserver="$build/tests/support/tessel-test-apiserver"
kubelet="$build/tests/support/tessel-process-kubelet"
if [[ ! -x $operator || ! -x $stage || ! -x $apiserver || ! -x $kubelet ]]; then
  echo "== building tessel-operator, tessel-stage and the test cluster tools in $build"
  [[ -f $build/build.ninja || -f $build/Makefile ]] || cmake -S "$repo" -B "$build" -G Ninja
  cmake --build "$build" --target tessel-operator tessel-stage tessel-test-apiserver \
    tessel-process-kubelet
fi
command -v kubectl >/dev/null || { echo "kubectl is missing: scripts/install-deps.sh installs it" >&2; exit 1; }
command -v openssl >/dev/null || { echo "openssl is missing: scripts/install-deps.sh installs it" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/tessel-demo.XXXXXX")"
pids=()
stop_all() {  # the operator first, the API servers last
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  echo "== stopped; logs are in $work"
}
trap stop_all EXIT

# --- three API servers ---------------------------------------------------------------------
for cluster in hub member-a member-b; do
  "$apiserver" --kubeconfig-out "$work/$cluster.kubeconfig" --port-file "$work/$cluster.port" \
    >"$work/$cluster.log" 2>&1 &
  pids+=($!)
done
for cluster in hub member-a member-b; do
  for _ in $(seq 100); do [[ -s $work/$cluster.kubeconfig ]] && break; sleep 0.1; done
  [[ -s $work/$cluster.kubeconfig ]] || { echo "the $cluster API server did not start: $work/$cluster.log" >&2; exit 1; }
done
hub=(kubectl --kubeconfig "$work/hub.kubeconfig")
echo "== hub and members up (API servers on ports $(cat "$work"/*.port | tr '\n' ' '))"

# --- the CRDs and the member clusters, as a user applies them --------------------------------
"${hub[@]}" apply -f "$repo/crds/" >/dev/null
# (kubectl create sends built-in kinds as protobuf, which the API test server does not speak:
# the objects are made on the client and applied as JSON.)
"${hub[@]}" create namespace tessel-system --dry-run=client -o json | "${hub[@]}" apply -f - >/dev/null
declare -A region=([member-a]=us-west-2 [member-b]=eu-north-1)
for member in member-a member-b; do
  "${hub[@]}" -n tessel-system create secret generic "$member-kubeconfig" \
    --from-file=kubeconfig="$work/$member.kubeconfig" --dry-run=client -o json |
    "${hub[@]}" apply -f - >/dev/null
  "${hub[@]}" apply -f - >/dev/null <<EOF
apiVersion: tessel.dev/v1alpha1
kind: MemberCluster
metadata:
  name: $member
spec:
  kubeconfigSecretRef: {name: $member-kubeconfig}
  region: ${region[$member]}
EOF
done
"${hub[@]}" wait --for=condition=Established crd/trainingjobs.tessel.dev >/dev/null

# --- four GPU nodes, two a member, with the links a prober would have measured ---------------
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
links() {  # links <member> <node>: fast to the member's other node, slow to the other member's
  local member=$1 node=$2 out="" sep=""
  for m in member-a member-b; do
    for n in gpu-0 gpu-1; do
      [[ $m == "$member" && $n == "$node" ]] && continue
      if [[ $m == "$member" ]]; then
        out+="$sep\"$m-$n\":{\"rttMs\":[0.2,0.3],\"gbps\":[8,40],\"at\":\"$now\"}"
      else
        out+="$sep\"$m/$m-$n\":{\"rttMs\":[140,160],\"gbps\":[0.05,0.4],\"at\":\"$now\"}"
      fi
      sep=","
    done
  done
  printf '{"version":1,"peers":{%s}}' "$out"
}
for member in member-a member-b; do
  for node in gpu-0 gpu-1; do
    "$kubelet" --kubeconfig "$work/$member.kubeconfig" --node "$member-$node" --gpus 1 \
      --label "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" \
      --label "topology.kubernetes.io/region=${region[$member]}" \
      --label "topology.kubernetes.io/zone=${region[$member]}a" \
      --annotation "net.tessel.dev/links=$(links "$member" "$member-$node")" \
      --image "tessel/stage=$stage" --work-dir "$work/pods" --restart-backoff-ms 1000 \
      >"$work/kubelet-$member-$node.log" 2>&1 &
    pids+=($!)
  done
done

# --- TLS for the operator's webhook and stage service ----------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=tessel demo CA" \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=tessel-operator" \
  -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -out "$work/tls.crt" -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost') 2>/dev/null

# --- the operator ------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
https_port="$(free_port)"
stage_port="$(free_port)"
"$operator" --kubeconfig "$work/hub.kubeconfig" --namespace tessel-system \
  --https-address "127.0.0.1:$https_port" --stage-service-address "127.0.0.1:$stage_port" \
  --stage-service-advertise "127.0.0.1:$stage_port" --tls-cert-file "$work/tls.crt" \
  --tls-key-file "$work/tls.key" --tls-ca-file "$work/ca.crt" \
  --data-root "$repo/examples/trainingjobs" --status-interval 1 >"$work/operator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf --cacert "$work/ca.crt" "https://127.0.0.1:$https_port/healthz" >/dev/null && break
  sleep 0.2
done
curl -sf --cacert "$work/ca.crt" "https://127.0.0.1:$https_port/healthz" >/dev/null ||
  { echo "tessel-operator did not start: $work/operator.log" >&2; tail -5 "$work/operator.log" >&2; exit 1; }
echo "== tessel-operator up (https://127.0.0.1:$https_port, stage service 127.0.0.1:$stage_port)"

# --- the admission webhook, as the Helm chart registers it -----------------------------------
ca_bundle="$(base64 -w0 "$work/ca.crt")"
"${hub[@]}" apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: tessel-demo
webhooks:
  - name: trainingjobs.tessel.dev
    clientConfig:
      url: https://127.0.0.1:$https_port/validate
      caBundle: $ca_bundle
    rules:
      - {apiGroups: [tessel.dev], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [trainingjobs, memberclusters]}
    sideEffects: None
    admissionReviewVersions: [v1]
    failurePolicy: Fail
EOF

# --- the example job ---------------------------------------------------------------------------
for _ in $(seq 100); do
  [[ $("${hub[@]}" get memberclusters -o jsonpath='{.items[*].status.conditions[?(@.type=="Reachable")].status}') == "True True" ]] && break
  sleep 0.2
done
"${hub[@]}" get memberclusters
"${hub[@]}" apply -f "$repo/examples/trainingjobs/fables.yaml"

if $check; then
  if "${hub[@]}" wait --for=jsonpath='{.status.phase}'=Succeeded trainingjob/fables --timeout=300s; then
    "${hub[@]}" get trainingjobs
    exit 0
  fi
  "${hub[@]}" get trainingjobs -o yaml >&2
  tail -20 "$work/operator.log" >&2
  exit 1
fi

cat <<EOF

The hub, two member clusters and tessel-operator are running; the example job is applied.
In this shell KUBECONFIG names the hub. Try:
  kubectl get trainingjobs -w
  kubectl describe trainingjob fables
  kubectl --kubeconfig $work/member-a.kubeconfig get pods -o wide
Leave the shell (exit) to stop everything. Logs: $work
EOF
KUBECONFIG="$work/hub.kubeconfig" PS1='(tessel demo) \w\$ ' bash --norc -i || true
