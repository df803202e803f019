#include "bench/kube/reconcile_latency_bench.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "bench/kube/informer_bench.h"
#include "kube/controller.h"
#include "kube/informer.h"
#include "kube/object.h"

namespace tessel::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSequenceAnnotation = "bench.tessel.dev/sequence";
constexpr auto kReconcileDeadline = std::chrono::seconds(10);

// What the reconciler and the driver share: the sequence number the driver waits for, and
// when the reconciler first saw it.
class Rendezvous {
 public:
  void expect(long sequence) {
    std::lock_guard lock(mutex_);
    expected_ = sequence;
    seen_ = false;
  }

  void saw(long sequence) {
    std::lock_guard lock(mutex_);
    if (sequence != expected_ || seen_) return;
    seen_ = true;
    seen_at_ = Clock::now();
    changed_.notify_all();
  }

  void reconciled() {
    std::lock_guard lock(mutex_);
    ++reconciles_;
    changed_.notify_all();
  }

  // False when the deadline passed first.
  bool wait_seen(Clock::time_point& seen_at) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, kReconcileDeadline, [&] { return seen_; })) return false;
    seen_at = seen_at_;
    return true;
  }

  bool wait_reconciles(long count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kReconcileDeadline * 3, [&] { return reconciles_ >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  long expected_ = -1;
  bool seen_ = false;
  Clock::time_point seen_at_;
  long reconciles_ = 0;
};

}  // namespace

std::vector<Measurement> measure_informer_and_reconcile(BenchCluster& cluster, int objects,
                                                        int updates) {
  Rendezvous rendezvous;
  const kube::SharedInformer* informer_cache = nullptr;  // set once the informer exists
  kube::ControllerOptions options;
  options.name = "kube-bench";
  const auto controller_logger =
      std::make_shared<const kube::Logger>("kube-bench", kube::LogLevel::kWarning);
  options.logger = controller_logger;
  kube::Controller controller(
      [&](const std::string& key) {
        // Level-triggered, as a real reconciler: read the cached state of the key.
        if (const kube::ObjectSnapshot object = informer_cache->store().get(key)) {
          if (const auto sequence = kube::get_annotation(*object, kSequenceAnnotation))
            rendezvous.saw(std::stol(*sequence));
        }
        rendezvous.reconciled();
        return kube::ReconcileResult{};
      },
      std::move(options));
  // Declared after the controller, so that it stops before the queue its handler feeds goes.
  const std::shared_ptr<kube::Client> informer_client = cluster.new_client();
  kube::InformerOptions informer_options;
  informer_options.reflector.logger = controller_logger;
  kube::SharedInformer informer(*informer_client, cluster.config_maps(), kBenchNamespace,
                                informer_options);
  informer_cache = &informer;
  std::vector<Measurement> rows = measure_initial_sync(informer, objects);

  // Adding the handler queues every cached key; the controller works through them first.
  const auto drain_start = Clock::now();
  controller.watch(informer);
  std::jthread running([&](std::stop_token stop) { controller.run(stop); });
  if (!rendezvous.wait_reconciles(objects))
    throw std::runtime_error("the controller did not reconcile the initial objects in time");
  const double drain_seconds = milliseconds_between(drain_start, Clock::now()) / 1000;
  rows.push_back(figure("controller: first reconcile of every cached key (1 worker)",
                        objects / drain_seconds, "keys/s"));

  std::vector<double> latencies_ms, writes_ms;
  for (int i = 0; i < updates; ++i) {
    rendezvous.expect(i);
    const auto written_at = Clock::now();
    cluster.client().patch(cluster.config_maps(), kBenchNamespace, config_map_name(i % objects),
                           kube::PatchType::kMerge,
                           kube::annotation_merge_patch(kSequenceAnnotation, std::to_string(i)));
    writes_ms.push_back(milliseconds_between(written_at, Clock::now()));
    Clock::time_point seen_at;
    if (!rendezvous.wait_seen(seen_at)) {
      throw std::runtime_error("update " + std::to_string(i) + " of " +
                               config_map_name(i % objects) + " was not reconciled within 10 s");
    }
    latencies_ms.push_back(milliseconds_between(written_at, seen_at));
  }
  rows.push_back(per_event("write start -> reconcile of that state", latencies_ms, "ms"));
  rows.push_back(per_event("  of which the write's round trip", writes_ms, "ms"));
  return rows;
}

}  // namespace tessel::bench
