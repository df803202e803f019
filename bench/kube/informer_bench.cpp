#include "bench/kube/informer_bench.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessel::bench {

namespace {

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The test server shares the process and may still be at work (finishing responses, its
// garbage collector), so memory is only read once the whole process has been idle for a moment:
// under 5 ms of CPU in 100 ms, for at most 10 s.
void wait_until_idle() {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (cpu_seconds() - before < 0.005) return;
  }
}

}  // namespace

MemoryUse memory_use() {
  wait_until_idle();
  ::malloc_trim(0);
  const struct mallinfo2 info = ::mallinfo2();
  std::ifstream statm("/proc/self/statm");
  double total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return {static_cast<double>(info.uordblks + info.hblkhd),
          resident_pages * static_cast<double>(::sysconf(_SC_PAGESIZE))};
}

std::vector<Measurement> measure_initial_sync(kube::SharedInformer& informer, int objects) {
  const MemoryUse before = memory_use();
  const auto start = std::chrono::steady_clock::now();
  informer.start();
  if (!informer.wait_for_sync(std::stop_token{}))
    throw std::runtime_error("the informer stopped before its first list");
  const double sync_ms = milliseconds_between(start, std::chrono::steady_clock::now());
  const MemoryUse after = memory_use();
  if (informer.store().size() != static_cast<std::size_t>(objects)) {
    throw std::runtime_error("the informer caches " + std::to_string(informer.store().size()) +
                             " ConfigMaps, expected " + std::to_string(objects));
  }
  const std::string what = "informer initial sync (" + std::to_string(objects) + " objects)";
  return {figure(what, sync_ms, "ms"), figure(what, objects / (sync_ms / 1000), "objects/s"),
          figure("informer cache, heap per object",
                 (after.heap_bytes - before.heap_bytes) / objects, "bytes"),
          figure("informer cache, RSS per object",
                 (after.resident_bytes - before.resident_bytes) / objects, "bytes")};
}

}  // namespace tessel::bench
