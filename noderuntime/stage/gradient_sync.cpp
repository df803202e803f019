#include "noderuntime/stage/gradient_sync.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "noderuntime/stage/gpt_config.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::stage {

namespace {

class TcpIslandLevels final : public IslandLevels {
 public:
  TcpIslandLevels(transport::Communicator& comm, const std::vector<int>& island)
      : inner_(comm, island), cross_(comm) {}
  bool on_device() const override { return false; }
  transport::IslandCollective& inner() override { return inner_; }
  transport::CrossIslandAllReduce& cross() override { return cross_; }

 private:
  transport::CommunicatorIslandCollective inner_;
  transport::CommunicatorCrossAllReduce cross_;
};

}  // namespace

IslandLevelsFactory tcp_island_levels() {
  return [](transport::Communicator& comm, const std::vector<int>& island,
            const transport::NcclIdExchange&) {
    return std::make_unique<TcpIslandLevels>(comm, island);
  };
}

std::vector<std::vector<int>> islands_of(const std::vector<int>& group,
                                         const std::vector<std::string>& island_of_rank) {
  std::vector<std::vector<int>> islands;
  std::map<std::string, size_t> index;
  for (int rank : group) {
    const std::string label = rank >= 0 && static_cast<size_t>(rank) < island_of_rank.size()
                                  ? island_of_rank[static_cast<size_t>(rank)]
                                  : std::string();
    if (label.empty()) {
      islands.push_back({rank});
      continue;
    }
    const auto [it, fresh] = index.emplace(label, islands.size());
    if (fresh) islands.emplace_back();
    islands[it->second].push_back(rank);
  }
  return islands;
}

// The hierarchical all-reduces of the data-parallel group, one after another in start order on
// a thread of their own (every member starts them in the same order, so every member's thread
// runs them in the same order). After a failure the ones queued behind it fail without running:
// the group is broken.
class GradientSync::Hierarchical {
 public:
  Hierarchical(transport::HierarchicalGroup group, std::unique_ptr<IslandLevels> levels)
      : group_(std::move(group)), levels_(std::move(levels)), thread_([this] { loop(); }) {}

  ~Hierarchical() {
    bool running = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      running = running_;
      for (Job& job : queue_) job.done->fail("all-reduce not run: the gradient sync was closed");
      queue_.clear();
    }
    wake_.notify_all();
    if (running) levels_->abort();
    thread_.join();
  }

  bool on_device() const { return levels_->on_device(); }
  IslandLevels& levels() { return *levels_; }

  transport::Request start(float* data, size_t count, std::function<void()> before) {
    auto done = std::make_shared<transport::Completion>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.empty()) {
        done->fail("all-reduce not run: an earlier one failed: " + failure_);
        return transport::Request(done);
      }
      queue_.push_back({data, count, std::move(before), done});
    }
    wake_.notify_all();
    return transport::Request(done);
  }

 private:
  struct Job {
    float* data;
    size_t count;
    std::function<void()> before;
    std::shared_ptr<transport::Completion> done;
  };

  void loop() {
    std::string setup_failure;
    try {
      levels_->thread_started();
    } catch (const std::exception& e) {
      setup_failure = e.what();
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!setup_failure.empty()) failure_ = setup_failure;
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      Job job = std::move(queue_.front());
      queue_.pop_front();
      if (!failure_.empty()) {
        job.done->fail("all-reduce not run: an earlier one failed: " + failure_);
        continue;
      }
      running_ = true;
      lock.unlock();
      std::string error;
      try {
        if (job.before) job.before();
        transport::hierarchical_all_reduce(job.data, job.count, group_, levels_->inner(),
                                           levels_->cross());
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      running_ = false;
      if (error.empty()) {
        job.done->complete();
      } else {
        failure_ = error;
        job.done->fail(error);
      }
    }
  }

  const transport::HierarchicalGroup group_;
  const std::unique_ptr<IslandLevels> levels_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  bool running_ = false;
  std::string failure_;  // the first failure; later all-reduces are not run
  std::thread thread_;   // last: starts once the rest is set up
};

GradientSync::GradientSync(transport::Communicator& comm, std::vector<int> data_parallel_group,
                           std::vector<int> tie_group, StepTrace* trace,
                           const DataParallelIslands& islands)
    : comm_(comm),
      data_parallel_group_(std::move(data_parallel_group)),
      tie_group_(std::move(tie_group)),
      trace_(trace) {
  const std::vector<std::vector<int>> parts =
      islands_of(data_parallel_group_, islands.island_of_rank);
  bool shared = islands.islands_of_one && data_parallel_group_.size() > 1;
  for (const auto& island : parts) shared = shared || island.size() > 1;
  if (!shared) return;  // the flat ring
  try {
    transport::HierarchicalGroup group(data_parallel_group_, parts, comm_.rank());
    const IslandLevelsFactory make =
        islands.make_levels ? islands.make_levels : tcp_island_levels();
    const std::vector<int>& island = group.island_members();
    const transport::NcclIdExchange exchange =
        islands.id_exchange ? islands.id_exchange(comm_, island)
                            : transport::communicator_id_exchange(comm_, island);
    std::unique_ptr<IslandLevels> levels = make(comm_, island, exchange);
    hierarchical_ = std::make_unique<Hierarchical>(std::move(group), std::move(levels));
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(std::string("data-parallel islands: ") + e.what());
  }
}

GradientSync::~GradientSync() = default;

bool GradientSync::on_device() const { return hierarchical_ && hierarchical_->on_device(); }

bool GradientSync::via_host(const GradientBucket& b) const {
  const bool tie = b.group == BucketGroup::kEmbedding && tie_group_.size() > 1;
  return tie || !on_device();
}

GradientSync::InFlight GradientSync::start_data_parallel(ChunkModel& chunk, int bucket, float* data,
                                                         size_t size, const std::string& name) {
  if (!hierarchical_) {
    return start_all_reduce(chunk, bucket, true, data, size, data_parallel_group_, name);
  }
  InFlight op;
  op.name = name;
  op.chunk = &chunk;
  op.bucket = bucket;
  op.last = true;
  std::function<void()> before;
  if (hierarchical_->on_device()) {
    const ChunkModel::DeviceGradients device = chunk.device_gradients(bucket);
    if (!device.data) {
      throw std::logic_error("gradient sync: the islands' levels sum on a device, but the " +
                             to_string(chunk.device()) + " chunk of bucket " +
                             chunk.layout().buckets().at(bucket).name + " has no device gradients");
    }
    data = device.data;
    size = device.size;
    before = hierarchical_->levels().ready_after(device.stream);
    op.on_device = true;
  }
  if (trace_) op.trace_id = trace_->open(placement::Stream::OptimizerComm, name);
  op.request = hierarchical_->start(data, size, std::move(before));
  return op;
}

GradientSync::InFlight GradientSync::start_all_reduce(ChunkModel& chunk, int bucket, bool last,
                                                      float* data, size_t size,
                                                      const std::vector<int>& group,
                                                      const std::string& name) {
  InFlight op;
  op.name = name;
  op.chunk = &chunk;
  op.bucket = bucket;
  op.last = last;
  if (trace_) op.trace_id = trace_->open(placement::Stream::OptimizerComm, name);
  op.request = comm_.iall_reduce(data, size, transport::DType::kF32, group);
  if (op.request.test()) finish(op);  // a group of one has nothing to send
  return op;
}

void GradientSync::start(int chunk_index, ChunkModel& chunk, int bucket) {
  if (!started_.insert({chunk_index, bucket}).second) return;
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  const bool tie = b.group == BucketGroup::kEmbedding && tie_group_.size() > 1;
  const bool data_parallel = data_parallel_group_.size() > 1;
  if (!tie && !data_parallel) return;
  if (!via_host(b)) {  // summed where the device keeps it, in start order
    in_flight_.push_back(start_data_parallel(
        chunk, bucket, nullptr, 0, "all-reduce c" + std::to_string(chunk_index) + " " + b.name));
    return;
  }
  chunk.start_gradients_to_host(bucket);
  waiting_.push_back({chunk_index, &chunk, bucket});
  launch_waiting(false);
}

void GradientSync::launch_waiting(bool wait) {
  while (!waiting_.empty()) {
    const Waiting w = waiting_.front();
    if (!w.chunk->gradients_on_host(w.bucket)) {
      if (!wait) return;
      w.chunk->wait_gradients_on_host(w.bucket);
    }
    waiting_.pop_front();
    launch(w.chunk_index, *w.chunk, w.bucket);
  }
}

void GradientSync::flush() { launch_waiting(true); }

void GradientSync::launch(int chunk_index, ChunkModel& chunk, int bucket) {
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  const bool tie = b.group == BucketGroup::kEmbedding && tie_group_.size() > 1;
  const bool data_parallel = data_parallel_group_.size() > 1;
  const std::span<float> gradients = chunk.host_gradients(bucket);
  float* data = gradients.data();
  const size_t size = gradients.size();
  const std::string name = "all-reduce c" + std::to_string(chunk_index) + " " + b.name;
  if (tie) {
    InFlight op = start_all_reduce(chunk, bucket, !data_parallel, data, size, tie_group_,
                                   "tie c" + std::to_string(chunk_index) + " " + b.name);
    if (data_parallel) {  // the table's data-parallel all-reduce follows, in wait_all
      op.table = data;
      op.table_size = size;
      op.name = name;
    }
    in_flight_.push_back(std::move(op));
    return;
  }
  in_flight_.push_back(start_data_parallel(chunk, bucket, data, size, name));
}

void GradientSync::start_all(int chunk_index, ChunkModel& chunk) {
  const int buckets = static_cast<int>(chunk.layout().buckets().size());
  for (int b = 0; b < buckets; ++b) start(chunk_index, chunk, b);
}

void GradientSync::finish(InFlight& op) {
  op.done = true;
  if (trace_) trace_->close(op.trace_id);
  if (op.last && !op.on_device) op.chunk->gradients_reduced(op.bucket);
}

void GradientSync::poll() {
  launch_waiting(false);
  for (InFlight& op : in_flight_) {
    if (!op.done && op.request.test()) finish(op);
  }
}

void GradientSync::wait_all() {
  flush();
  // The ties first, then the tables' data-parallel all-reduces after every other bucket, in
  // the same order on every member of the group.
  std::vector<InFlight> tables;
  for (InFlight& op : in_flight_) {
    if (!op.done) {
      op.request.wait();
      finish(op);
    }
    if (op.table) {
      // Summed on the device: the tie's sum goes back there first (queued on the chunk's
      // stream, so the all-reduce, ordered after that stream's work, sums it).
      if (on_device()) op.chunk->gradients_reduced(op.bucket);
      tables.push_back(start_data_parallel(*op.chunk, op.bucket, op.table, op.table_size, op.name));
    }
  }
  for (InFlight& op : tables) {
    if (op.done) continue;
    op.request.wait();
    finish(op);
  }
  in_flight_.clear();
  started_.clear();
}

}  // namespace tessel::stage
