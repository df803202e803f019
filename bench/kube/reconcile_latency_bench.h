// The reconcile queue: how fast a Controller works through every key of a full cache, and the
// latency from a write to the reconcile of the written object's key, through a SharedInformer's
// watch, its handlers, the work queue and a Controller worker.
#pragma once

#include <vector>

#include "bench/kube/bench_cluster.h"
#include "bench/kube/measurement.h"

namespace tessel::bench {

// Starts an informer on the ConfigMaps of `cluster` (measure_initial_sync's rows), then runs a
// Controller (one worker) on it whose reconciler notes when the cache shows the annotation a
// write set; first lets it reconcile every cached object once (reported in keys/s). Then
// `updates` times: a merge patch of one ConfigMap's annotation (objects round robin), and a wait
// until its key is reconciled with that state. Adds the time from just before each write to
// that reconcile, and each write's round trip within it. Throws std::runtime_error when a
// reconcile does not come within 10 s.
std::vector<Measurement> measure_informer_and_reconcile(BenchCluster& cluster, int objects,
                                                        int updates);

}  // namespace tessel::bench
