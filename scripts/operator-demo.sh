#!/usr/bin/env bash
# The operator on this machine, no cluster needed: a hub and two member "clusters" (the API test
# server), four GPU nodes played by process kubelets (pods run as local processes), a
# tessel-prober pod on each that measures its links to the others (emulated: fast inside a
# member, slow across) and annotates its Node, tessel-operator itself, and the example
# TrainingJob applied with kubectl once the links are measured. Then it leaves you at a shell
# where `kubectl get trainingjobs -w` works; leaving that shell stops everything.
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
prober="$build/noderuntime/prober/tessel-prober"
if [[ ! -x $operator || ! -x $stage || ! -x $apiserver || ! -x $kubelet || ! -x $prober ]]; then
  echo "== building tessel-operator, tessel-stage, tessel-prober and the test cluster tools in $build"
  [[ -f $build/build.ninja || -f $build/Makefile ]] || cmake -S "$repo" -B "$build" -G Ninja
  cmake --build "$build" --target tessel-operator tessel-stage tessel-prober \
    tessel-test-apiserver tessel-process-kubelet
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

# --- four GPU nodes, two a member, and a prober on each ---------------------------------------
for member in member-a member-b; do
  for node in gpu-0 gpu-1; do
    "$kubelet" --kubeconfig "$work/$member.kubeconfig" --node "$member-$node" --gpus 1 \
      --label "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" \
      --label "topology.kubernetes.io/region=${region[$member]}" \
      --label "topology.kubernetes.io/zone=${region[$member]}a" \
      --image "tessel/stage=$stage" --image "tessel/prober=$prober" \
      --work-dir "$work/pods" --restart-backoff-ms 1000 \
      >"$work/kubelet-$member-$node.log" 2>&1 &
    pids+=($!)
  done
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The probers' shared secret, and (since these "pods" run on this machine, not in the cluster)
# the member's kubeconfig, in a Secret each prober mounts. On one machine the links are told
# apart by the prober's link emulator: 2 Gbit/s and +0.5 ms to every peer, 0.2 Gbit/s and
# +40 ms to the other member's. (A real DaemonSet: docs/prober.md.)
secret="$(openssl rand -hex 24)"
for member in member-a member-b; do
  other=member-b; [[ $member == member-b ]] && other=member-a
  m=(kubectl --kubeconfig "$work/$member.kubeconfig" -n tessel-system)
  kubectl --kubeconfig "$work/$member.kubeconfig" create namespace tessel-system --dry-run=client -o json |
    kubectl --kubeconfig "$work/$member.kubeconfig" apply -f - >/dev/null
  "${m[@]}" create secret generic tessel-prober --from-literal=secret="$secret" \
    --from-file=kubeconfig="$work/$member.kubeconfig" --dry-run=client -o json |
    "${m[@]}" apply -f - >/dev/null
  for node in gpu-0 gpu-1; do
    port="$(free_port)"
    "${m[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: tessel-prober-$member-$node
  labels: {app.kubernetes.io/name: tessel-prober}
spec:
  nodeName: $member-$node
  hostNetwork: true
  automountServiceAccountToken: false
  containers:
    - name: prober
      image: tessel/prober:0.1.0
      args: [--kubeconfig=/etc/tessel-prober/kubeconfig, --secret-file=/etc/tessel-prober/secret,
             --listen=127.0.0.1:$port, --check-interval=10s,
             "--emulate-link==2/0.5", "--emulate-link=$other/=0.2/40"]
      env:
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
      ports: [{name: probe, containerPort: $port, hostPort: $port}]
      volumeMounts: [{name: config, mountPath: /etc/tessel-prober}]
  volumes: [{name: config, secret: {secretName: tessel-prober}}]
EOF
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
# The probers find each other (their own member's through its API, the other member's through
# the ConfigMap the operator keeps), measure, and annotate their Nodes: each measures 3 peers.
echo "== waiting for the probers to measure the links (a minute or so)"
for _ in $(seq 180); do
  [[ $("${hub[@]}" get memberclusters -o jsonpath='{.items[*].status.probeCoverage}') == "6/6 6/6" ]] && break
  sleep 1
done
"${hub[@]}" get memberclusters
kubectl --kubeconfig "$work/member-a.kubeconfig" get node member-a-gpu-0 \
  -o jsonpath='{.metadata.annotations.net\.tessel\.dev/links}{"\n"}'
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
