// Throughput of the two halves of list+watch against the test server: reading a whole
// collection page by page, and the watch events of a burst of writes.
#pragma once

#include <vector>

#include "bench/kube/bench_cluster.h"
#include "bench/kube/measurement.h"

namespace tessel::bench {

// A paginated list of the namespace's ConfigMaps, 500 per page (client-go's page size), as
// Client::list_all makes it: the whole list's time and rate, and each page's round trip. Throws
// std::runtime_error when the list does not hold `expected_objects` items.
std::vector<Measurement> measure_paginated_list(BenchCluster& cluster, int expected_objects);

// `updates` merge patches of ConfigMaps 0 .. objects-1 (round robin) from `writer_threads`
// threads, while one client watches the namespace from the resourceVersion before the burst.
// Reports the write rate, the rate at which the watch delivered the burst's events (events over
// the time from the first write to the last event), and the time from the start of each write
// to its event. Throws std::runtime_error when the watch has not
// delivered every event within a minute.
std::vector<Measurement> measure_watch_burst(BenchCluster& cluster, int objects, int updates,
                                             int writer_threads);

}  // namespace tessel::bench
