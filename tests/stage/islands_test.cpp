// The data-parallel all-reduce over islands (gradient_sync.h): a stage's data-parallel group split
// into islands sums its buckets by the hierarchical all-reduce, here with the TCP ring standing in
// for both levels, over real sockets (one thread per rank). Against the flat ring's run of the
// same job: the same losses and weights within the equivalence tests' 1e-5 relative (only the
// order of the sums differs), every replica's weights bit-identical to the others', and the
// hierarchical all-reduce really used (its inner level counted). Islands of one (or no labels)
// are the flat ring, bit for bit. The device path of the sync (buckets summed where a device
// keeps them, no copy to the host except the tied table's) is run with a CPU chunk that presents
// its gradients as device gradients. job.json's island field, and tessel-stage with islands.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "noderuntime/stage/gpt_chunk.h"
#include "noderuntime/stage/job_spec.h"
#include "noderuntime/transport/transport_error.h"
#include "stage_process_support.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

using placement::ScheduleKind;
using testing::relative_error;
using testing::RunResult;

constexpr int kSteps = 3;
constexpr int kMicroBatches = 4;
constexpr double kRelative = 1e-5;

// The TCP stand-ins, counting the inner level's reduce-scatters and all-reduces (over every
// rank of a run).
struct Counts {
  std::atomic<int> levels{0}, reduce_scatters{0}, inner_all_reduces{0}, ready{0};
};

class CountingInner final : public transport::IslandCollective {
 public:
  CountingInner(transport::IslandCollective& inner, Counts& counts)
      : inner_(inner), counts_(counts) {}
  int size() const override { return inner_.size(); }
  int position() const override { return inner_.position(); }
  transport::Request reduce_scatter(float* data, std::span<const size_t> bounds) override {
    ++counts_.reduce_scatters;
    return inner_.reduce_scatter(data, bounds);
  }
  transport::Request all_gather(float* data, std::span<const size_t> bounds) override {
    return inner_.all_gather(data, bounds);
  }
  transport::Request all_reduce(float* data, size_t count) override {
    ++counts_.inner_all_reduces;
    return inner_.all_reduce(data, count);
  }

 private:
  transport::IslandCollective& inner_;
  Counts& counts_;
};

// The TCP stand-ins; on_device says where the sync must sum (the device path's logic runs with
// host memory standing in for the device's).
class CountingLevels final : public IslandLevels {
 public:
  CountingLevels(transport::Communicator& comm, const std::vector<int>& island, Counts& counts,
                 bool on_device)
      : tcp_(tcp_island_levels()(comm, island, {})),
        inner_(tcp_->inner(), counts),
        counts_(counts),
        on_device_(on_device) {
    ++counts.levels;
  }
  bool on_device() const override { return on_device_; }
  transport::IslandCollective& inner() override { return inner_; }
  transport::CrossIslandAllReduce& cross() override { return tcp_->cross(); }
  std::function<void()> ready_after(CUstream_st* stream) override {
    EXPECT_EQ(stream, fake_stream());
    return [this] { ++counts_.ready; };
  }
  static CUstream_st* fake_stream() { return reinterpret_cast<CUstream_st*>(0x5ea); }

 private:
  std::unique_ptr<IslandLevels> tcp_;
  CountingInner inner_;
  Counts& counts_;
  bool on_device_;
};

IslandLevelsFactory counting_levels(Counts& counts, bool on_device = false) {
  return [&counts, on_device](transport::Communicator& comm, const std::vector<int>& island,
                              const transport::NcclIdExchange&) {
    return std::make_unique<CountingLevels>(comm, island, counts, on_device);
  };
}

// A CPU chunk that says its gradients are on a device: device_gradients() hands out its host
// gradients; the copies to the host and back are counted per bucket (the sync may make them only
// for the tied table).
class DeviceLikeChunk final : public ChunkModel {
 public:
  DeviceLikeChunk(const GptConfig& config, const ChunkSpec& spec, int batch,
                  std::atomic<int>& copies)
      : ChunkModel(config, spec, batch),
        cpu_(cpu_chunk_factory()(config, spec, batch)),
        copies_(copies) {}
  Device device() const override { return Device::kCuda; }
  void initialize(uint64_t seed) override { cpu_->initialize(seed); }
  ChunkActivations new_activations() const override { return cpu_->new_activations(); }
  double forward(ChunkActivations& act, const int* tokens, const int* targets,
                 float dloss) override {
    return cpu_->forward(act, tokens, targets, dloss);
  }
  const float* output(const ChunkActivations& act) const override { return cpu_->output(act); }
  void backward(ChunkActivations& act, const int* tokens,
                const std::function<void(int)>& on_block_done) override {
    cpu_->backward(act, tokens, on_block_done);
  }
  std::span<std::byte> receive_buffer(ChunkActivations& act, bool gradient) override {
    return cpu_->receive_buffer(act, gradient);
  }
  std::span<const std::byte> send_payload(ChunkActivations& act, bool gradient) override {
    return cpu_->send_payload(act, gradient);
  }
  void zero_gradients() override { cpu_->zero_gradients(); }
  void start_gradients_to_host(int bucket) override {
    if (layout().buckets().at(bucket).group != BucketGroup::kEmbedding) ++copies_;
  }
  std::span<float> host_gradients(int bucket) override { return cpu_->host_gradients(bucket); }
  void gradients_reduced(int bucket) override {
    if (layout().buckets().at(bucket).group != BucketGroup::kEmbedding) ++copies_;
  }
  DeviceGradients device_gradients(int bucket) override {
    const std::span<float> g = cpu_->host_gradients(bucket);
    return {g.data(), g.size(), CountingLevels::fake_stream()};
  }
  double gradient_sum_of_squares() override { return cpu_->gradient_sum_of_squares(); }
  void adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                  float grad_scale) override {
    cpu_->adamw_step(hp, step, grad_scale);
  }
  ConstHostState state_for_reading() const override { return cpu_->state_for_reading(); }
  HostState state_for_writing() override { return cpu_->state_for_writing(); }
  void state_written() override { cpu_->state_written(); }

 private:
  std::unique_ptr<ChunkModel> cpu_;
  std::atomic<int>& copies_;
};

// island_of_rank for `layout` from the replica's island: islands[r] labels replica r.
std::vector<std::string> labels(const PipelineLayout& layout,
                                const std::vector<std::string>& of_replica) {
  std::vector<std::string> out(layout.world_size());
  for (int s = 0; s < layout.stages; ++s) {
    for (int r = 0; r < layout.replicas; ++r) out[layout.rank(s, r)] = of_replica.at(r);
  }
  return out;
}

struct Case {
  const char* name;
  ScheduleKind kind;
  int stages, replicas, chunks;
  bool overlap;
  std::vector<std::string> islands;  // per replica
  int largest_island;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TrainingOptions options_of(const Case& c) {
  TrainingOptions options = testing::tiny_options(c.kind, kMicroBatches);
  options.overlap = c.overlap;
  return options;
}

const RunResult& flat_run(const Case& c) {
  static std::map<std::string, RunResult> cache;
  const std::string key = std::to_string(c.stages) + "x" + std::to_string(c.replicas) + "v" +
                          std::to_string(c.chunks) + std::to_string(static_cast<int>(c.kind)) +
                          (c.overlap ? "o" : "");
  auto it = cache.find(key);
  if (it == cache.end()) {
    const GptConfig config = testing::tiny_config();
    it = cache
             .emplace(key, testing::run_pipeline(config,
                                                 PipelineLayout::standard(c.stages, c.replicas,
                                                                          c.chunks, config.layers),
                                                 options_of(c), kSteps))
             .first;
  }
  return it->second;
}

// The run equals the flat ring's within kRelative, its replicas agree bit for bit.
void expect_like_flat(const Case& c, const PipelineLayout& layout, const RunResult& run,
                      const RunResult& flat) {
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    ASSERT_EQ(run.losses[rank].size(), size_t{kSteps}) << "rank " << rank;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(run.losses[rank][s], run.losses[0][s]) << "rank " << rank << " step " << s;
      EXPECT_NEAR(run.losses[rank][s], flat.losses[0][s], kRelative * flat.losses[0][s])
          << "rank " << rank << " step " << s;
    }
  }
  EXPECT_LT(run.losses[0][kSteps - 1], run.losses[0][0]);
  const size_t C = testing::tiny_config().channels;
  const double key_bias_bound = 2 * kSteps * options_of(c).adamw.learning_rate * 1.01;
  testing::expect_replicas_match(run.weights, flat.weights[0], C, kRelative, key_bias_bound,
                                 testing::KeyBiasBound::kFromReference, c.stages > 1);
}

class Islands : public ::testing::TestWithParam<Case> {};

TEST_P(Islands, HierarchicalAllReduceMatchesTheFlatRing) {
  const Case& c = GetParam();
  const GptConfig config = testing::tiny_config();
  const PipelineLayout layout =
      PipelineLayout::standard(c.stages, c.replicas, c.chunks, config.layers);
  Counts counts;
  testing::RunHooks hooks;
  hooks.islands = {labels(layout, c.islands), counting_levels(counts)};
  const RunResult run = testing::run_pipeline(config, layout, options_of(c), kSteps, hooks);
  expect_like_flat(c, layout, run, flat_run(c));
  // Every rank set its levels up, and every bucket went through the islands' reduce-scatter.
  EXPECT_EQ(counts.levels.load(), layout.world_size());
  EXPECT_GT(counts.reduce_scatters.load(), 0);
  EXPECT_EQ(counts.inner_all_reduces.load(), 0);  // more than one island: never the inner one
}

INSTANTIATE_TEST_SUITE_P(Layouts, Islands,
                         ::testing::Values(Case{"one_f_one_b_1x4_2and2",
                                                ScheduleKind::OneFOneB,
                                                1,
                                                4,
                                                1,
                                                true,
                                                {"a", "a", "b", "b"},
                                                2},
                                           Case{"one_f_one_b_2x4_2and2",
                                                ScheduleKind::OneFOneB,
                                                2,
                                                4,
                                                1,
                                                true,
                                                {"node-a", "node-a", "node-b", "node-b"},
                                                2},
                                           Case{"one_f_one_b_2x4_1and3",
                                                ScheduleKind::OneFOneB,
                                                2,
                                                4,
                                                1,
                                                true,
                                                {"", "node-b", "node-b", "node-b"},
                                                3},
                                           Case{"one_f_one_b_2x4_2and2_no_overlap",
                                                ScheduleKind::OneFOneB,
                                                2,
                                                4,
                                                1,
                                                false,
                                                {"a", "b", "a", "b"},
                                                2},
                                           Case{"interleaved_2x4_v2_2and2",
                                                ScheduleKind::Interleaved,
                                                2,
                                                4,
                                                2,
                                                true,
                                                {"a", "a", "b", "b"},
                                                2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(IslandsOf, GroupsLabelsInGroupOrder) {
  const std::vector<std::string> labels = {"x", "", "y", "x", "y", "", "z"};
  EXPECT_EQ(islands_of({0, 1, 2, 3, 4, 5, 6}, labels),
            (std::vector<std::vector<int>>{{0, 3}, {1}, {2, 4}, {5}, {6}}));
  EXPECT_EQ(islands_of({6, 4, 2, 0}, labels), (std::vector<std::vector<int>>{{6}, {4, 2}, {0}}));
  EXPECT_EQ(islands_of({0, 1, 9}, {}), (std::vector<std::vector<int>>{{0}, {1}, {9}}));
}

TEST(Islands, IslandsOfOneAreTheFlatRingBitForBit) {
  const GptConfig config = testing::tiny_config();
  const Case c{"flat", ScheduleKind::OneFOneB, 2, 4, 1, true, {}, 1};
  const PipelineLayout layout = PipelineLayout::standard(2, 4, 1, config.layers);
  Counts counts;
  testing::RunHooks hooks;
  hooks.islands = {labels(layout, {"a", "b", "c", "d"}), counting_levels(counts)};
  const RunResult run = testing::run_pipeline(config, layout, options_of(c), kSteps, hooks);
  const RunResult& flat = flat_run(c);
  EXPECT_EQ(counts.levels.load(), 0);
  EXPECT_EQ(run.losses, flat.losses);
  EXPECT_EQ(run.weights, flat.weights);
}

TEST(Islands, OneIslandIsItsInnerAllReduce) {
  const GptConfig config = testing::tiny_config();
  const Case c{"one", ScheduleKind::OneFOneB, 2, 4, 1, true, {}, 4};
  const PipelineLayout layout = PipelineLayout::standard(2, 4, 1, config.layers);
  Counts counts;
  testing::RunHooks hooks;
  hooks.islands = {labels(layout, {"a", "a", "a", "a"}), counting_levels(counts)};
  const RunResult run = testing::run_pipeline(config, layout, options_of(c), kSteps, hooks);
  expect_like_flat(c, layout, run, flat_run(c));
  EXPECT_GT(counts.inner_all_reduces.load(), 0);
  EXPECT_EQ(counts.reduce_scatters.load(), 0);
}

// The sync's device path: every bucket is summed where device_gradients() says, with no copy to
// the host and back, except the tied table's (its tie goes through the host); the inner level
// is ordered after the chunk's stream once per bucket. Same sums in the same order as the host
// path: bit for bit the same run.
TEST(Islands, DevicePathSumsInPlaceBitForBitLikeTheHostPath) {
  const GptConfig config = testing::tiny_config();
  const Case c{"device", ScheduleKind::OneFOneB, 2, 4, 1, true, {}, 2};
  const PipelineLayout layout = PipelineLayout::standard(2, 4, 1, config.layers);
  const std::vector<std::string> island_of_rank = labels(layout, {"a", "a", "b", "b"});
  Counts host_counts, device_counts;
  testing::RunHooks host;
  host.islands = {island_of_rank, counting_levels(host_counts)};
  const RunResult host_run = testing::run_pipeline(config, layout, options_of(c), kSteps, host);

  std::atomic<int> copies{0};
  testing::RunHooks device;
  device.islands = {island_of_rank, counting_levels(device_counts, /*on_device=*/true)};
  device.make_chunk = [&copies](const GptConfig& g, const ChunkSpec& spec, int batch) {
    return std::make_unique<DeviceLikeChunk>(g, spec, batch, copies);
  };
  const RunResult device_run = testing::run_pipeline(config, layout, options_of(c), kSteps, device);
  EXPECT_EQ(device_run.losses, host_run.losses);
  EXPECT_EQ(device_run.weights, host_run.weights);
  EXPECT_EQ(copies.load(), 0);
  EXPECT_EQ(device_counts.reduce_scatters.load(), host_counts.reduce_scatters.load());
  EXPECT_EQ(device_counts.ready.load(), device_counts.reduce_scatters.load());
  EXPECT_EQ(host_counts.ready.load(), 0);
}

TEST(Islands, LevelsThatCannotBeSetUpFailTheRuntimeNamingThem) {
  const GptConfig config = testing::tiny_config();
  const PipelineLayout layout = PipelineLayout::standard(1, 2, 1, config.layers);
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  DataParallelIslands islands{
      {"a", "a"},
      [](transport::Communicator&, const std::vector<int>&, const transport::NcclIdExchange&)
          -> std::unique_ptr<IslandLevels> { throw transport::TransportError("no NCCL here"); }};
  try {
    StageRuntime runtime(config, layout, testing::tiny_options(ScheduleKind::OneFOneB, 2),
                         testing::tiny_corpus(), *comms[0], nullptr, cpu_chunk_factory(), islands);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "data-parallel islands: no NCCL here");
  }
}

// A rank that goes away after the first step fails every other rank's next step with the
// hierarchical all-reduce's error naming the peer, and nothing hangs: the all-reduce thread
// fails the buckets queued behind the failed one, and the runtime is destroyed cleanly.
TEST(Islands, APeerGoneFailsTheOthersNamingIt) {
  const GptConfig config = testing::tiny_config();
  const PipelineLayout layout = PipelineLayout::standard(1, 4, 1, config.layers);
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  const DataParallelIslands islands{{"a", "a", "b", "b"}, {}};
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        StageRuntime runtime(config, layout, testing::tiny_options(ScheduleKind::OneFOneB, 2),
                             testing::tiny_corpus(), *comms[rank], nullptr, cpu_chunk_factory(),
                             islands);
        runtime.train_step();
        if (rank == 3) {
          comms[rank]->close();
          return;
        }
        runtime.train_step();
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[3], "");
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(errors[rank].find("hierarchical all-reduce at rank " + std::to_string(rank)),
              std::string::npos)
        << errors[rank];
  }
  // Rank 2 shares its island with rank 3: its reduce-scatter names it.
  EXPECT_NE(errors[2].find("stage 0 replica 3"), std::string::npos) << errors[2];
}

// ---- job.json -------------------------------------------------------------------------------

nlohmann::json job_with_islands(int stages, int replicas) {
  return testing::tiny_job(stages, replicas, 4, 4, "1f1b", 2);
}

std::string error_of(const nlohmann::json& job) {
  try {
    parse_job_spec(job.dump(), "job.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(JobSpecIslands, ReadsTheLabelsPerRank) {
  nlohmann::json job = job_with_islands(2, 2);
  EXPECT_TRUE(parse_job_spec(job.dump(), "job.json").islands.empty());
  job["ranks"][0]["island"] = "node-a";
  job["ranks"][2]["island"] = "cluster.b:rack/3_x";
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  EXPECT_EQ(spec.islands, (std::vector<std::string>{"node-a", "", "cluster.b:rack/3_x", ""}));
  job["ranks"][1]["island"] = std::string(kMaxIslandLabel, 'n');
  EXPECT_EQ(error_of(job), "");
}

TEST(JobSpecIslands, BadLabelsAreRefusedNamingTheField) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {"",
       "job.json: ranks[3].island: must not be empty (leave the field out for an island of "
       "its own)"},
      {7, "job.json: ranks[3].island: expected a string, got 7"},
      {nullptr, "job.json: ranks[3].island: expected a string, got null"},
      {std::string(kMaxIslandLabel + 1, 'n'),
       "job.json: ranks[3].island: is 254 characters long, at most 253"},
      {"node a", "job.json: ranks[3].island: \"node a\" has a character outside [A-Za-z0-9._:/-]"},
      {"n\u00e9",
       "job.json: ranks[3].island: \"n\u00e9\" has a character outside "
       "[A-Za-z0-9._:/-]"},
  };
  for (const auto& [value, expected] : cases) {
    nlohmann::json job = job_with_islands(2, 2);
    job["ranks"][3]["island"] = value;
    EXPECT_EQ(error_of(job), expected) << value.dump();
  }
}

// ---- tessel-stage -----------------------------------------------------------------------------

TEST(IslandProcesses, AJobWithIslandsTrainsLikeTheFlatRing) {
  using namespace std::chrono_literals;
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-stage-islands-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json job = testing::tiny_job(1, 4, 4, 4, "1f1b", kSteps);
  for (int r = 0; r < 4; ++r) job["ranks"][r]["island"] = r < 2 ? "node-a" : "node-b";
  const std::string path = (dir / "job.json").string();
  std::ofstream(path) << job.dump(2);
  std::vector<std::unique_ptr<testing::StageProcess>> processes;
  for (int r = 0; r < 4; ++r) {
    processes.push_back(std::make_unique<testing::StageProcess>(path, r));
  }
  const GptConfig config = testing::tiny_config(4);
  const RunResult flat =
      testing::run_pipeline(config, PipelineLayout::standard(1, 4, 1, config.layers),
                            testing::tiny_options(ScheduleKind::OneFOneB, 4), kSteps);
  std::vector<double> first;
  for (auto& p : processes) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    const std::vector<double> losses = p->losses();
    ASSERT_EQ(losses.size(), size_t{kSteps});
    if (first.empty()) first = losses;
    EXPECT_EQ(losses, first);
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(losses[s], flat.losses[0][s], kRelative * flat.losses[0][s]) << s;
    }
  }
  // A bad label: refused before anything runs, naming the field.
  job["ranks"][1]["island"] = "node a";
  std::ofstream(path) << job.dump(2);
  testing::StageProcess bad(path, 0);
  EXPECT_EQ(bad.finish(30s), 2);
  EXPECT_NE(bad.stderr_text().find("ranks[1].island: \"node a\" has a character outside"),
            std::string::npos)
      << bad.stderr_text();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::stage
