#!/usr/bin/env python3
"""bench/operator: tessel-operator at scale on this machine, with no real cluster.

What it starts (everything under one folder in $TMPDIR, printed, logs kept there):
  - a hub and --members member "clusters", each a tessel-test-apiserver (HTTPS, admin token);
  - GPU nodes played by tessel-process-kubelet, one process per node, with the labels and the
    net.tessel.dev/links annotations a prober would write (fast inside a member, slow across);
  - tessel-operator with TLS made by openssl, its validating webhook registered in the hub as
    the Helm chart does, and the MemberClusters with their kubeconfig Secrets.
The stage image of every job is "bench/idle", which the kubelets map to idle-stage.sh (ignores
its arguments and sleeps): the pods are real processes, but nobody trains, so the figures are
the operator's, the API servers' and the kubelets' work only.

Two scenarios (both by default):
  gang   one TrainingJob of --stages x --replicas tasklets (default 8 x 8 = 64, an 8-layer
         model, 1,000,000 steps) on --members members of --gang-nodes nodes x --gang-gpus GPUs;
         --repeats times, each on a fresh hub, members and operator (--same-operator: one after
         the other on one operator, each once the last was deleted and its pods were gone):
         time from `kubectl apply` to every pod Running (read from the members' pods by watch),
         of which placement (tessel_placement_seconds' sum from /metrics, and the Placed
         condition's "placed in X s"). Medians of the repeats.
  fleet  for each SIZE in --fleet-sizes (tasklets per job: 1 -> 1 stage x 1 replica, 4 -> 2 x 2,
         16 -> 4 x 4), a fresh set of clusters and operator, then --fleet-pods // SIZE jobs
         (at most --fleet-jobs) applied at once with one `kubectl apply -f`: every job's latency
         from its creation to its Placed condition and to phase Running (both seen by a watch
         on the hub, the driver's clock, millisecond resolution), one reconcile's duration
         (p50/p99 from tessel_reconcile_seconds{controller="trainingjob"} buckets), the
         operator's peak memory (VmHWM) and CPU seconds, and API requests per job from
         tessel_api_requests_total (hub and members), less the idle rate (Lease renewals)
         measured for --idle-seconds before the apply.
         The fleet has --fleet-nodes nodes x --fleet-gpus GPUs in each member: enough GPUs
         that every job runs. The operator's member traffic goes through a counting TLS relay
         (CountingRelay): its tessel_api_requests_total counts the hub client's requests only.
         The operator runs with --member-resync 3600 so that MemberCluster refreshes do not
         count as the jobs' requests.

Usage (from the repository root, after building the four binaries):
  flock /tmp/tessel-build.lock cmake --build build --target tessel-operator \
      tessel-test-apiserver tessel-process-kubelet
  bench/operator/operator_bench.py                     # both scenarios, defaults as above
  bench/operator/operator_bench.py --scenario gang --repeats 3
  bench/operator/operator_bench.py --scenario fleet --fleet-sizes 1 --fleet-jobs 100
Needs python3 (standard library only), kubectl and openssl. Results: docs/benchmarks.md,
section "Operator (bench/operator)".
"""

import argparse
import base64
import http.client
import json
import math
import os
import re
import select
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDLE_STAGE = os.path.join(REPO, "bench", "operator", "idle-stage.sh")
IDLE_IMAGE = "bench/idle"
# Round-trip times (median, p90 ms) and throughput (small, bulk Gbit/s) the "prober" reports.
INSIDE_MEMBER = {"rttMs": [0.2, 0.3], "gbps": [8, 40]}
# Between members i < j: entry (i * members + j) mod 6; for three members a-b 80 ms, a-c 60 ms,
# b-c 150 ms (throughput 0.1 / 1 Gbit/s).
ACROSS_MEMBERS_RTT_MS = [30, 80, 60, 120, 45, 150]


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Api:
    """A bearer-token HTTPS client of one API server, from its kubeconfig (via kubectl)."""

    def __init__(self, kubeconfig):
        view = json.loads(subprocess.run(
            ["kubectl", "config", "view", "--raw", "-o", "json", "--kubeconfig", kubeconfig],
            check=True, capture_output=True, text=True).stdout)
        cluster = view["clusters"][0]["cluster"]
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port
        self.context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        self.token = view["users"][0]["user"]["token"]
        self.headers = {"Authorization": "Bearer " + self.token,
                        "Accept": "application/json"}

    def connect(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                           timeout=timeout)

    def get(self, path):
        conn = self.connect(60)
        try:
            conn.request("GET", path, headers=self.headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
            return json.loads(body)
        finally:
            conn.close()

    def watch(self, path, resource_version):
        """Yields the events of a watch from resource_version until the server ends it."""
        sep = "&" if "?" in path else "?"
        conn = self.connect(None)
        try:
            conn.request("GET", f"{path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion="
                         f"{resource_version}", headers=self.headers)
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"watch {path}: HTTP {response.status}")
            while True:
                line = response.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


class Watcher(threading.Thread):
    """List then watch a collection, relisting when the watch ends or expires; hands every
    object to on_object(event_type, object, monotonic time of arrival)."""

    def __init__(self, api, path, on_object):
        super().__init__(daemon=True)
        self.api, self.path, self.on_object = api, path, on_object
        self.stopping = threading.Event()
        self.synced = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                listed = self.api.get(self.path)
                for item in listed.get("items", []):
                    self.on_object("ADDED", item, time.monotonic())
                self.synced.set()
                rv = listed["metadata"]["resourceVersion"]
                for event in self.api.watch(self.path, rv):
                    if self.stopping.is_set():
                        return
                    if event["type"] == "ERROR":
                        break  # 410 Gone: relist
                    rv = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self.on_object(event["type"], event["object"], time.monotonic())
            except Exception as error:  # a server going away at teardown, or a reset
                if self.stopping.is_set():
                    return
                log(f"watch {self.path}: {error}; relisting")
                time.sleep(0.2)


class JobTracker:
    """When each TrainingJob was first seen, first Placed=True, first phase Running."""

    def __init__(self):
        self.lock = threading.Lock()
        self.added, self.placed, self.running, self.placed_message = {}, {}, {}, {}

    def on_object(self, event_type, job, at):
        name = job["metadata"]["name"]
        with self.lock:
            if event_type == "DELETED":
                return
            self.added.setdefault(name, at)
            status = job.get("status", {})
            for condition in status.get("conditions", []):
                if condition.get("type") == "Placed" and condition.get("status") == "True":
                    if name not in self.placed:
                        self.placed[name] = at
                        self.placed_message[name] = condition.get("message", "")
            if status.get("phase") == "Running":
                self.running.setdefault(name, at)


class PodTracker:
    """The phase of every tessel stage pod in every member, and when each job first had
    `expected` of them Running at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.phase = {}  # (member, pod name) -> (job, phase)
        self.expected = {}  # job -> pods
        self.all_running = {}  # job -> monotonic time

    def on_object(self, member, event_type, pod, at):
        key = (member, pod["metadata"]["name"])
        job = pod["metadata"].get("labels", {}).get("tessel.dev/job", "")
        with self.lock:
            if event_type == "DELETED":
                self.phase.pop(key, None)
                return
            self.phase[key] = (job, pod.get("status", {}).get("phase", ""))
            want = self.expected.get(job)
            if want and job not in self.all_running:
                running = sum(1 for j, p in self.phase.values() if j == job and p == "Running")
                if running >= want:
                    self.all_running[job] = at

    def pods_of(self, job):
        with self.lock:
            return sum(1 for j, _ in self.phase.values() if j == job)

    def running_total(self):
        with self.lock:
            return sum(1 for _, p in self.phase.values() if p == "Running")


def parse_metrics(text):
    """Prometheus text -> list of (name, labels dict, value)."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', line)
        if not match:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        samples.append((match.group(1), labels, float(match.group(4))))
    return samples


def metric_sum(samples, name, **want):
    return sum(v for n, labels, v in samples
               if n == name and all(labels.get(k) == w for k, w in want.items()))


def histogram_quantile(q, before, after, name, **want):
    """Prometheus' histogram_quantile over the buckets' increase from `before` to `after`."""
    def buckets(samples):
        out = {}
        for n, labels, v in samples:
            if n == name + "_bucket" and all(labels.get(k) == w for k, w in want.items()):
                out[float(labels["le"])] = v
        return out
    b0, b1 = buckets(before), buckets(after)
    edges = sorted(b1)
    counts = [b1[e] - b0.get(e, 0) for e in edges]
    if not counts or counts[-1] <= 0:
        return float("nan")
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for edge, count in zip(edges, counts):
        if count >= rank:
            if math.isinf(edge):
                return lower  # in the +Inf bucket: the highest finite bound, as Prometheus
            return lower + (edge - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = edge, count
    return lower


def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    index = q * (len(values) - 1)
    low = math.floor(index)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (index - low)


def proc_status_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CountingRelay(threading.Thread):
    """A TLS relay between tessel-operator and one member's API server that counts the HTTP
    requests passing through it, by verb and resource. tessel_api_requests_total counts only
    the operator's hub client, so the members' requests are counted here: the operator gets a
    kubeconfig naming the relay (the bench CA's certificate), the relay dials the member."""

    REQUEST = re.compile(rb"(GET|POST|PUT|PATCH|DELETE) (/\S*) HTTP/1\.[01]\r\n")
    VERBS = {b"POST": "create", b"PUT": "update", b"PATCH": "patch", b"DELETE": "delete"}

    def __init__(self, upstream, cert, key):
        super().__init__(daemon=True)
        self.upstream = upstream
        self.server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_tls.load_cert_chain(cert, key)
        self.server_tls.set_alpn_protocols(["http/1.1"])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.counts = {}

    def total(self):
        with self.lock:
            return sum(self.counts.values())

    def snapshot(self):
        with self.lock:
            return dict(self.counts)

    def run(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.relay, args=(conn,), daemon=True).start()

    def count(self, method, target):
        path = urllib.parse.urlsplit(target.decode(errors="replace"))
        segments = [s for s in path.path.split("/") if s]
        if "namespaces" in segments and segments.index("namespaces") + 2 < len(segments):
            resource = segments[segments.index("namespaces") + 2]
        else:
            resource = segments[2 if segments[:1] == ["api"] else 3] if len(segments) > 3 or (
                segments[:1] == ["api"] and len(segments) > 2) else path.path
        query = urllib.parse.parse_qs(path.query)
        verb = self.VERBS.get(method) or (
            "watch" if query.get("watch", [""])[0] in ("1", "true") else "get")
        with self.lock:
            self.counts[f"{verb} {resource}"] = self.counts.get(f"{verb} {resource}", 0) + 1

    def relay(self, conn):
        try:
            client = self.server_tls.wrap_socket(conn, server_side=True)
            server = self.upstream.context.wrap_socket(
                socket.create_connection((self.upstream.host, self.upstream.port)),
                server_hostname=self.upstream.host)
        except (OSError, ssl.SSLError):
            conn.close()
            return
        tail = b""
        try:
            while True:
                readable, _, _ = select.select([client, server], [], [])
                for source in readable:
                    data = source.recv(65536)
                    while data and source.pending():
                        data += source.recv(source.pending())
                    if not data:
                        return
                    if source is client:
                        tail += data
                        end = 0
                        for match in self.REQUEST.finditer(tail):
                            self.count(match.group(1), match.group(2))
                            end = match.end()
                        tail = tail[end:][-8192:]
                        server.sendall(data)
                    else:
                        client.sendall(data)
        except (OSError, ssl.SSLError):
            return
        finally:
            client.close()
            server.close()


class Fleet:
    """The hub, the members, their kubelets and the operator, started in one folder and
    stopped (by the process ids it started) on exit."""

    def __init__(self, args, members, nodes_per_member, gpus_per_node, label, count_members):
        self.args = args
        self.count_members = count_members
        self.relays = {}
        self.members = [f"member-{chr(ord('a') + i)}" for i in range(members)]
        self.nodes_per_member, self.gpus_per_node = nodes_per_member, gpus_per_node
        self.work = tempfile.mkdtemp(prefix=f"tessel-operator-bench-{label}.",
                                     dir=os.environ.get("TMPDIR", "/tmp"))
        self.processes = []
        self.watchers = []
        self.jobs = JobTracker()
        self.pods = PodTracker()

    # --- processes -----------------------------------------------------------------------
    def spawn(self, name, argv):
        out = open(os.path.join(self.work, name + ".log"), "w")
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        self.processes.append(process)
        return process

    def stop(self):
        for watcher in self.watchers:
            watcher.stopping.set()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 20
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log(f"stopped; logs in {self.work}")

    def kubectl(self, cluster, *argv, stdin=None):
        done = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig(cluster), *argv],
                              input=stdin, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(argv)} ({cluster}) failed: {done.stderr.strip()}")
        return done.stdout

    def kubeconfig(self, cluster):
        return os.path.join(self.work, cluster + ".kubeconfig")

    def start(self):
        build = self.args.build
        for cluster in ["hub", *self.members]:
            self.spawn(cluster, [f"{build}/tests/support/tessel-test-apiserver",
                                 "--kubeconfig-out", self.kubeconfig(cluster),
                                 "--port-file", os.path.join(self.work, cluster + ".port")])
        for cluster in ["hub", *self.members]:
            wait_for(lambda: os.path.getsize(self.kubeconfig(cluster)) > 0
                     if os.path.exists(self.kubeconfig(cluster)) else False, 10,
                     f"the {cluster} API server (log: {self.work}/{cluster}.log)")
        self.hub = Api(self.kubeconfig("hub"))
        self.member_api = {m: Api(self.kubeconfig(m)) for m in self.members}

        self.make_tls()
        self.kubectl("hub", "apply", "-f", os.path.join(REPO, "crds"))
        self.apply("hub", {"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "tessel-system"}})
        for i, member in enumerate(self.members):
            config = base64.b64encode(self.operator_kubeconfig(member).encode()).decode()
            self.apply("hub", {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": f"{member}-kubeconfig",
                                            "namespace": "tessel-system"},
                               "data": {"kubeconfig": config}})
            self.apply("hub", {"apiVersion": "tessel.dev/v1alpha1", "kind": "MemberCluster",
                               "metadata": {"name": member},
                               "spec": {"kubeconfigSecretRef": {"name": f"{member}-kubeconfig"},
                                        "region": f"region-{i}"}})
        self.kubectl("hub", "wait", "--for=condition=Established",
                     "crd/trainingjobs.tessel.dev")

        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for i, member in enumerate(self.members):
            for n in range(self.nodes_per_member):
                node = f"{member}-gpu-{n}"
                self.spawn(f"kubelet-{node}", [
                    f"{build}/tests/support/tessel-process-kubelet",
                    "--kubeconfig", self.kubeconfig(member), "--node", node,
                    "--gpus", str(self.gpus_per_node),
                    "--label", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                    "--label", f"topology.kubernetes.io/region=region-{i}",
                    "--label", f"topology.kubernetes.io/zone=region-{i}a",
                    "--annotation", "net.tessel.dev/links=" + self.links(i, n, now),
                    "--image", f"{IDLE_IMAGE}={IDLE_STAGE}",
                    "--work-dir", os.path.join(self.work, "pods")])

        https_port, stage_port = free_port(), free_port()
        self.metrics_address = f"127.0.0.1:{https_port}"
        self.operator = self.spawn("operator", [
            self.args.operator_binary, "--kubeconfig", self.kubeconfig("hub"),
            "--namespace", "tessel-system", "--https-address", self.metrics_address,
            "--stage-service-address", f"127.0.0.1:{stage_port}",
            "--stage-service-advertise", f"127.0.0.1:{stage_port}",
            "--tls-cert-file", f"{self.work}/tls.crt", "--tls-key-file", f"{self.work}/tls.key",
            "--tls-ca-file", f"{self.work}/ca.crt",
            "--data-root", os.path.join(REPO, "examples", "trainingjobs"),
            # MemberCluster status refreshes (node and GPU counts) are not per-job work: out of
            # the way, so that the requests counted during a run are the jobs'.
            "--member-resync", "3600"])
        self.operator_tls = ssl.create_default_context(cafile=f"{self.work}/ca.crt")
        wait_for(self.healthy, 30, f"tessel-operator (log: {self.work}/operator.log)")

        with open(f"{self.work}/ca.crt", "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        self.apply("hub", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "tessel-bench"},
            "webhooks": [{
                "name": "trainingjobs.tessel.dev",
                "clientConfig": {"url": f"https://{self.metrics_address}/validate",
                                 "caBundle": ca_bundle},
                "rules": [{"apiGroups": ["tessel.dev"], "apiVersions": ["v1alpha1"],
                           "operations": ["CREATE", "UPDATE"],
                           "resources": ["trainingjobs", "memberclusters"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail"}]})

        gpus = len(self.members) * self.nodes_per_member * self.gpus_per_node
        wait_for(lambda: self.free_gpus() == gpus, 60,
                 f"{len(self.members)} MemberClusters Reachable with {gpus} free GPUs")

        self.watchers.append(Watcher(
            self.hub, "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs",
            self.jobs.on_object))
        for member, api in self.member_api.items():
            self.watchers.append(Watcher(
                api, "/api/v1/namespaces/default/pods?labelSelector=tessel.dev%2Fjob",
                lambda t, o, at, member=member: self.pods.on_object(member, t, o, at)))
        for watcher in self.watchers:
            watcher.start()
        for watcher in self.watchers:
            watcher.synced.wait(30)
        log(f"up: hub + {len(self.members)} members, {gpus} GPUs on "
            f"{len(self.members) * self.nodes_per_member} nodes, operator at "
            f"https://{self.metrics_address}; folder {self.work}")

    def operator_kubeconfig(self, member):
        """The member's kubeconfig as the operator gets it: through a CountingRelay when
        member requests are counted."""
        with open(self.kubeconfig(member)) as f:
            text = f.read()
        if not self.count_members:
            return text
        relay = CountingRelay(self.member_api[member], f"{self.work}/tls.crt",
                              f"{self.work}/tls.key")
        relay.start()
        self.relays[member] = relay
        with open(f"{self.work}/ca.crt", "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "relay",
            "clusters": [{"name": "relay", "cluster": {
                "server": f"https://127.0.0.1:{relay.port}", "certificate-authority-data": ca}}],
            "users": [{"name": "relay", "user": {"token": self.member_api[member].token}}],
            "contexts": [{"name": "relay", "context": {"cluster": "relay", "user": "relay",
                                                        "namespace": "default"}}]})

    def save_diagnostics(self):
        """The hub's Events and TrainingJobs, into the folder, for reading after teardown."""
        for what in ("events", "trainingjobs"):
            with open(os.path.join(self.work, f"hub-{what}.json"), "w") as f:
                f.write(self.kubectl("hub", "get", what, "-A", "-o", "json"))

    def member_requests(self):
        return sum(relay.total() for relay in self.relays.values())

    def member_request_counts(self):
        out = {}
        for relay in self.relays.values():
            for key, value in relay.snapshot().items():
                out[key] = out.get(key, 0) + value
        return out

    def links(self, member_index, node_index, now):
        peers = {}
        for j, member in enumerate(self.members):
            for n in range(self.nodes_per_member):
                if (j, n) == (member_index, node_index):
                    continue
                if j == member_index:
                    peers[f"{member}-gpu-{n}"] = dict(INSIDE_MEMBER, at=now)
                else:
                    pair = sorted((member_index, j))
                    rtt = ACROSS_MEMBERS_RTT_MS[(pair[0] * len(self.members) + pair[1]) %
                                                len(ACROSS_MEMBERS_RTT_MS)]
                    peers[f"{member}/{member}-gpu-{n}"] = {
                        "rttMs": [rtt, rtt * 1.1], "gbps": [0.1, 1.0], "at": now}
        return json.dumps({"version": 1, "peers": peers}, separators=(",", ":"))

    def make_tls(self):
        w = self.work
        for argv in (
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-days", "2", "-subj", "/CN=tessel bench CA", "-keyout", f"{w}/ca.key",
             "-out", f"{w}/ca.crt"],
            ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-subj", "/CN=tessel-operator", "-keyout", f"{w}/tls.key", "-out", f"{w}/tls.csr"],
        ):
            subprocess.run(["openssl", *argv], check=True, capture_output=True)
        with open(f"{w}/san.ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        subprocess.run(["openssl", "x509", "-req", "-in", f"{w}/tls.csr", "-CA", f"{w}/ca.crt",
                        "-CAkey", f"{w}/ca.key", "-CAcreateserial", "-days", "2",
                        "-out", f"{w}/tls.crt", "-extfile", f"{w}/san.ext"],
                       check=True, capture_output=True)

    # --- the API, as a user and as a monitor ---------------------------------------------
    def apply(self, cluster, obj):
        self.kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(obj))

    def free_gpus(self):
        total = 0
        for member in self.hub.get("/apis/tessel.dev/v1alpha1/memberclusters")["items"]:
            status = member.get("status", {})
            reachable = any(c.get("type") == "Reachable" and c.get("status") == "True"
                            for c in status.get("conditions", []))
            if reachable:
                total += int(status.get("gpus", {}).get("free", 0))
        return total

    def healthy(self):
        try:
            return self.https_get("/healthz") is not None
        except Exception:
            return False

    def https_get(self, path):
        host, port = self.metrics_address.split(":")
        conn = http.client.HTTPSConnection(host, int(port), context=self.operator_tls, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read().decode()
            return body if response.status == 200 else None
        finally:
            conn.close()

    def metrics(self):
        return parse_metrics(self.https_get("/metrics") or "")

    def check_operator(self):
        if self.operator.poll() is not None:
            raise RuntimeError(f"tessel-operator exited with {self.operator.returncode}: "
                               f"{self.work}/operator.log")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")


def trainingjob(name, stages, replicas, layers, hidden, steps):
    return {
        "apiVersion": "tessel.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "model": {"layers": layers, "hidden": hidden, "heads": 4, "seqLen": 64,
                      "vocab": 256, "precision": "fp32"},
            "parallelism": {"stages": stages, "replicas": replicas, "schedule": "1f1b"},
            "batch": {"microBatch": 1, "globalBatch": replicas * 4},
            "training": {"steps": steps, "learningRate": 0.003},
            "data": {"text": {"path": "../data/fables.txt"}},
            "template": {"image": IDLE_IMAGE},
        }}


def write_manifest(fleet, name, objects):
    path = os.path.join(fleet.work, name)
    with open(path, "w") as f:
        # YAML documents of flow (JSON) style: a file that starts with "{" would be read as
        # one JSON object, and a v1 List needs OpenAPI the API test server does not serve.
        f.write("".join("---\n" + json.dumps(o) + "\n" for o in objects))
    return path


# --- scenario 1: one 64-tasklet job -----------------------------------------------------------
def run_gang(args):
    """By default each repeat runs on a fresh hub, members and operator: a job on an idle
    fleet. --same-operator runs them one after the other on one operator instead, each applied
    once the previous job was deleted and its pods were gone."""
    rows = []
    if args.same_operator:
        fleet = Fleet(args, args.members, args.gang_nodes, args.gang_gpus, "gang",
                      count_members=False)
        try:
            fleet.start()
            for run in range(1, args.repeats + 1):
                rows.append(run_gang_job(args, fleet, run))
        finally:
            fleet.stop()
        return rows
    for run in range(1, args.repeats + 1):
        fleet = Fleet(args, args.members, args.gang_nodes, args.gang_gpus, f"gang{run}",
                      count_members=False)
        try:
            fleet.start()
            rows.append(run_gang_job(args, fleet, run))
        finally:
            fleet.stop()
    return rows


def run_gang_job(args, fleet, run):
    """Apply one job, time it to every pod Running, then delete it and wait for its pods to
    be gone from every member (the finalizer's work)."""
    tasklets = args.stages * args.replicas
    name = f"gang-{run}"
    fleet.pods.expected[name] = tasklets
    manifest = write_manifest(fleet, name + ".yaml", [trainingjob(
        name, args.stages, args.replicas, max(8, args.stages), 256, 1_000_000)])
    before = fleet.metrics()
    start = time.monotonic()
    fleet.kubectl("hub", "apply", "-f", manifest)
    applied = time.monotonic()
    wait_for(lambda: name in fleet.pods.all_running or fleet.check_operator(),
             args.timeout, f"all {tasklets} pods of {name} Running")
    done = fleet.pods.all_running[name]
    wait_for(lambda: name in fleet.jobs.placed, 10, f"{name}'s Placed condition")
    after = fleet.metrics()
    match = re.search(r"placed in ([0-9.eE+-]+) s", fleet.jobs.placed_message[name])
    with fleet.pods.lock:
        clusters = {m for (m, _), (j, _) in fleet.pods.phase.items() if j == name}
    row = {"run": run, "apply_to_running_s": done - start,
           "kubectl_apply_s": applied - start,
           "apply_to_placed_s": fleet.jobs.placed[name] - start,
           "placement_s": metric_sum(after, "tessel_placement_seconds_sum") -
                          metric_sum(before, "tessel_placement_seconds_sum"),
           "placements": metric_sum(after, "tessel_placement_seconds_count") -
                         metric_sum(before, "tessel_placement_seconds_count"),
           "placed_in_s": float(match.group(1)) if match else float("nan"),
           "members_used": len(clusters),
           "placed_message": fleet.jobs.placed_message[name]}
    log(f"{name}: {json.dumps(row)}")
    fleet.kubectl("hub", "delete", "trainingjob", name, "--timeout=120s")
    wait_for(lambda: fleet.pods.pods_of(name) == 0, args.timeout,
             f"{name}'s pods deleted in every member")
    return row


# --- scenario 2: many jobs at once ------------------------------------------------------------
SHAPES = {1: (1, 1), 4: (2, 2), 16: (4, 4)}  # tasklets -> (stages, replicas)


def run_fleet(args, size):
    stages, replicas = SHAPES[size]
    jobs = min(args.fleet_jobs, args.fleet_pods // size)
    fleet = Fleet(args, args.members, args.fleet_nodes, args.fleet_gpus, f"fleet{size}",
                  count_members=args.count_member_requests)
    try:
        fleet.start()
        names = [f"j{size}-{i:04d}" for i in range(jobs)]
        manifest = write_manifest(fleet, "jobs.yaml", [
            trainingjob(n, stages, replicas, max(2, stages), 64, 1_000_000) for n in names])
        idle_before = request_snapshot(fleet)
        time.sleep(args.idle_seconds)
        before, requests_before = fleet.metrics(), request_snapshot(fleet)
        idle_rate = {side: (requests_before[side] - idle_before[side]) / args.idle_seconds
                     for side in ("hub", "members")}
        cpu_before = proc_cpu_seconds(fleet.operator.pid)
        start = time.monotonic()
        log(f"applying {jobs} jobs of {size} tasklets ({stages} x {replicas})")
        fleet.kubectl("hub", "apply", "-f", manifest)
        applied = time.monotonic()
        log(f"kubectl apply of {jobs} jobs took {applied - start:.1f} s")
        stalled = None
        try:
            wait_for(lambda: len(fleet.jobs.running) >= jobs or fleet.check_operator(),
                     args.timeout, f"{jobs} jobs Running")
        except RuntimeError as error:
            stalled = str(error)
            log(f"STALL: {error}; {len(fleet.jobs.placed)} placed, {len(fleet.jobs.running)} "
                f"running, {fleet.pods.running_total()} pods Running")
        end = time.monotonic()
        time.sleep(1)
        after, requests_after = fleet.metrics(), request_snapshot(fleet)
        window = end - start
        net = {side: requests_after[side] - requests_before[side] - idle_rate[side] * window
               for side in ("hub", "members")}
        placed_latency = [fleet.jobs.placed[n] - fleet.jobs.added[n]
                          for n in names if n in fleet.jobs.placed]
        running_latency = [fleet.jobs.running[n] - fleet.jobs.added[n]
                           for n in names if n in fleet.jobs.running]
        result = {
            "tasklets_per_job": size, "jobs": jobs, "pods": jobs * size,
            "gpus": len(fleet.members) * fleet.nodes_per_member * fleet.gpus_per_node,
            "kubectl_apply_s": applied - start, "all_running_s": window,
            "placed": len(placed_latency), "running": len(running_latency),
            "placed_p50_s": percentile(placed_latency, 0.5),
            "placed_p99_s": percentile(placed_latency, 0.99),
            "running_p50_s": percentile(running_latency, 0.5),
            "running_p99_s": percentile(running_latency, 0.99),
            "reconcile_p50_s": histogram_quantile(0.5, before, after, "tessel_reconcile_seconds",
                                                  controller="trainingjob"),
            "reconcile_p99_s": histogram_quantile(0.99, before, after,
                                                  "tessel_reconcile_seconds",
                                                  controller="trainingjob"),
            "reconciles": metric_sum(after, "tessel_reconcile_seconds_count",
                                     controller="trainingjob") -
                          metric_sum(before, "tessel_reconcile_seconds_count",
                                     controller="trainingjob"),
            "placement_s_total": metric_sum(after, "tessel_placement_seconds_sum") -
                                 metric_sum(before, "tessel_placement_seconds_sum"),
            "operator_vmhwm_mib": proc_status_kib(fleet.operator.pid, "VmHWM") / 1024,
            "operator_cpu_s": proc_cpu_seconds(fleet.operator.pid) - cpu_before,
            "hub_requests_per_job": net["hub"] / jobs,
            "member_requests_per_job": net["members"] / jobs,
            "requests_by_verb": {
                k: v - requests_before["by_verb"].get(k, 0)
                for k, v in requests_after["by_verb"].items()
                if v != requests_before["by_verb"].get(k, 0)},
            "idle_requests_per_s": idle_rate,
            "stalled": stalled,
        }
        log(f"fleet {size}: {json.dumps(result)}")
        fleet.save_diagnostics()
        return result
    finally:
        fleet.stop()


def request_snapshot(fleet):
    """The operator's API requests so far: the hub's from tessel_api_requests_total (by verb
    and code), the members' from the counting relays (by verb and resource)."""
    by_verb = {}
    for n, labels, v in fleet.metrics():
        if n == "tessel_api_requests_total":
            key = f"{labels.get('cluster', '')} {labels.get('verb', '')} {labels.get('code', '')}"
            by_verb[key] = by_verb.get(key, 0) + v
    hub = sum(by_verb.values())
    for key, value in fleet.member_request_counts().items():
        by_verb["members " + key] = value
    return {"hub": hub, "members": fleet.member_requests(), "by_verb": by_verb}


# --- the table ----------------------------------------------------------------------------------
def print_tables(gang, fleets, args):
    print(f"\n## tessel-operator bench ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores)")
    if gang:
        med = lambda key: statistics.median(r[key] for r in gang)
        print(f"\n{args.stages} x {args.replicas} = {args.stages * args.replicas} tasklets on "
              f"{args.members} members x {args.gang_nodes} nodes x {args.gang_gpus} GPUs, "
              f"median, min and max of {len(gang)} runs\n")
        print("| metric | median | min | max |\n|---|---|---|---|")
        for key, label in (("apply_to_running_s", "kubectl apply -> every pod Running (s)"),
                           ("kubectl_apply_s", "of which kubectl apply itself (s)"),
                           ("apply_to_placed_s", "kubectl apply -> Placed condition seen (s)"),
                           ("placement_s", "placement search, tessel_placement_seconds (s)"),
                           ("placed_in_s", "placement, the Placed condition's \"placed in\" (s)")):
            values = [r[key] for r in gang]
            print(f"| {label} | {med(key):.3f} | {min(values):.3f} | {max(values):.3f} |")
        print(f"| placements per run | {med('placements'):.0f} | | |")
        print(f"| member clusters used | {med('members_used'):.0f} | | |")
    if fleets:
        print("\n| tasklets/job | jobs (pods) | apply (s) | all Running (s) | create->Placed p50 / p99 (s) "
              "| create->Running p50 / p99 (s) | one reconcile p50 / p99 (ms) | reconciles | "
              "placement total (s) | operator VmHWM (MiB) | operator CPU (s) | "
              "API requests/job hub + members |")
        print("|" + "---|" * 12)
        for r in fleets:
            print(f"| {r['tasklets_per_job']} | {r['jobs']} ({r['pods']}) | "
                  f"{r['kubectl_apply_s']:.1f} | {r['all_running_s']:.1f} | "
                  f"{r['placed_p50_s']:.2f} / {r['placed_p99_s']:.2f} | "
                  f"{r['running_p50_s']:.2f} / {r['running_p99_s']:.2f} | "
                  f"{r['reconcile_p50_s'] * 1000:.1f} / {r['reconcile_p99_s'] * 1000:.1f} | "
                  f"{r['reconciles']:.0f} | {r['placement_s_total']:.1f} | "
                  f"{r['operator_vmhwm_mib']:.1f} | {r['operator_cpu_s']:.1f} | "
                  f"{r['hub_requests_per_job']:.1f} + {r['member_requests_per_job']:.1f} |")
        for r in fleets:
            if r["stalled"]:
                print(f"\nSTALLED ({r['tasklets_per_job']} tasklets/job): {r['stalled']}; "
                      f"{r['placed']} placed, {r['running']} Running")


def main():
    # SIGTERM and SIGINT (ignored by default in a background job) stop the clusters cleanly.
    def stop(signum, _frame):
        raise SystemExit(f"stopped by signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.environ.get("TESSEL_BUILD_DIR",
                                                          os.path.join(REPO, "build")))
    parser.add_argument("--scenario", choices=["gang", "fleet", "both"], default="both")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--gang-nodes", type=int, default=3, help="nodes per member (gang)")
    parser.add_argument("--gang-gpus", type=int, default=8, help="GPUs per node (gang)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--same-operator", action="store_true",
                        help="gang: all repeats on one operator, each after the last was deleted")
    parser.add_argument("--fleet-sizes", default="1,4,16",
                        help="tasklets per job, comma-separated, of 1, 4, 16")
    parser.add_argument("--fleet-jobs", type=int, default=1000, help="most jobs per fleet run")
    parser.add_argument("--fleet-pods", type=int, default=1024,
                        help="jobs = min(--fleet-jobs, this / tasklets per job)")
    parser.add_argument("--fleet-nodes", type=int, default=6, help="nodes per member (fleet)")
    parser.add_argument("--fleet-gpus", type=int, default=64, help="GPUs per node (fleet)")
    parser.add_argument("--count-member-requests", action=argparse.BooleanOptionalAction,
                        default=True, help="fleet: route the operator's member traffic through "
                        "a counting TLS relay (without it, member requests read 0)")
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for Running")
    parser.add_argument("--json", help="also write the raw results to this file")
    args = parser.parse_args()

    sizes = [int(s) for s in args.fleet_sizes.split(",") if s]
    for size in sizes:
        if size not in SHAPES:
            parser.error(f"--fleet-sizes: {size} is not one of {sorted(SHAPES)}")
    for tool in ("kubectl", "openssl"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing: scripts/install-deps.sh installs it")
    for binary in ("operator/tessel-operator", "tests/support/tessel-test-apiserver",
                   "tests/support/tessel-process-kubelet"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            sys.exit(f"--build {args.build}: {binary} is not built (cmake --build "
                     f"{args.build} --target tessel-operator tessel-test-apiserver "
                     "tessel-process-kubelet)")

    # A copy, so that a rebuild during the run cannot change the binary between scenarios.
    binary = os.path.join(args.build, "operator", "tessel-operator")
    binary_dir = tempfile.mkdtemp(prefix="tessel-operator-bench-bin.")
    args.operator_binary = os.path.join(binary_dir, "tessel-operator")
    shutil.copy2(binary, args.operator_binary)
    built = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(binary)))
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    load_at_start = os.getloadavg()[0]
    log(f"tessel-operator built {built}, repository at {head}")

    try:
        gang = run_gang(args) if args.scenario in ("gang", "both") else []
        fleets = [run_fleet(args, s) for s in sizes] if args.scenario in ("fleet", "both") else []
    finally:
        shutil.rmtree(binary_dir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gang": gang, "fleet": fleets}, f, indent=1)
    print_tables(gang, fleets, args)
    print(f"\ntessel-operator built {built}; repository at {head}; 1-minute load average "
          f"{load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
