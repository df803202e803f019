// A SharedInformer over the benchmark's ConfigMaps: how long its initial sync takes and how
// much memory its cache holds per object.
#pragma once

#include <vector>

#include "bench/kube/bench_cluster.h"
#include "bench/kube/measurement.h"
#include "kube/informer.h"

namespace tessel::bench {

// Heap in use (glibc mallinfo2: allocated chunks, mmapped ones included) and resident set, in
// bytes, once the process is idle and free memory has been handed back to the system.
struct MemoryUse {
  double heap_bytes = 0;
  double resident_bytes = 0;
};
MemoryUse memory_use();

// Starts `informer` (not yet started) and waits for its first list; reports the sync time and
// the heap and RSS growth divided by `objects`. Throws std::runtime_error when the cache does
// not hold `objects` ConfigMaps.
std::vector<Measurement> measure_initial_sync(kube::SharedInformer& informer, int objects);

}  // namespace tessel::bench
