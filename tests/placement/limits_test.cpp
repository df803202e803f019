// The stated limits (placement/limits.h) hold inside the library functions the operator calls:
// the topology, workload and schedule parsers and validators refuse a count, size or number
// past its limit naming the field, the value and the limit, before anything is allocated.
#include "placement/limits.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "placement/schedule.h"
#include "placement/topology.h"
#include "placement/topology_generate.h"
#include "placement/workload.h"

namespace tessel::placement {
namespace {

namespace fs = std::filesystem;

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// The message of the exception fn throws (of type E), or "" when it throws none.
template <typename E, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// A two-device topology whose inter-site link is `link` (YAML flow map fields).
std::string two_sites(const std::string& link,
                      const std::string& gpu = "peak_tflops_fp16_tensor: 312") {
  return "format_version: 1\nid: t\ngpu_types: {A100: {" + gpu +
         ", memory_gib: 80}}\nsites: [{name: a}, {name: b}]\n"
         "devices: [{id: 0, site: a, gpu: A100}, {id: 1, site: b, gpu: A100}]\n"
         "network:\n  intra_site: {latency_ms: 0.1, bandwidth_gbps: 100}\n"
         "  inter_site_default: {" +
         link + "}\n";
}

TEST(CheckedArithmetic, DetectsOverflow) {
  EXPECT_EQ(checked_mul(4, 1073741825), int64_t{4294967300});
  EXPECT_FALSE(checked_mul(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_FALSE(checked_mul(std::numeric_limits<int64_t>::min(), -1));
  EXPECT_EQ(checked_add(1, 2), 3);
  EXPECT_FALSE(checked_add(std::numeric_limits<int64_t>::max(), 1));
}

TEST(Dns1123Label, AcceptsKubernetesNamesOnly) {
  for (const char* name : {"fables", "a", "job-7", "0abc", "x1-y2"}) {
    EXPECT_EQ(dns1123_label_violation(name), "") << name;
  }
  for (const char* name : {"", "../../../../x", "Fables", "my_job", "-a", "a-", "a.b", "a b"}) {
    EXPECT_NE(dns1123_label_violation(name), "") << name;
  }
  EXPECT_EQ(dns1123_label_violation(std::string(63, 'a')), "");
  EXPECT_TRUE(Contains(dns1123_label_violation(std::string(64, 'a')), "at most 63"));
}

TEST(FormatBytes, NamesTheUnit) {
  EXPECT_EQ(format_bytes(12), "12 bytes");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(double(uint64_t{1} << 30)), "1.0 GiB");
  EXPECT_EQ(number_text(100000), "100000");
  EXPECT_EQ(number_text(1e-6), "1e-06");
}

TEST(MemoryShortfall, RefusesWhatNoMachineHas) {
  EXPECT_EQ(memory_shortfall(1024), "");
  EXPECT_TRUE(Contains(memory_shortfall(1e30), "needs about"));
  EXPECT_TRUE(Contains(memory_shortfall(1e30), "available"));
}

class BoundedRead : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-limits-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(BoundedRead, ReadsASmallFileWhole) {
  std::ofstream(dir_ / "small") << "twelve bytes";
  std::string error;
  EXPECT_EQ(read_file_bounded((dir_ / "small").string(), 12, &error), "twelve bytes");
}

TEST_F(BoundedRead, RefusesWhatIsNotABoundedRegularFile) {
  std::ofstream(dir_ / "big") << "thirteen byte";
  std::string error;
  EXPECT_FALSE(read_file_bounded((dir_ / "big").string(), 12, &error));
  EXPECT_TRUE(Contains(error, "more than the limit of 12 bytes"));
  EXPECT_FALSE(read_file_bounded("/dev/zero", 1 << 20, &error));
  EXPECT_TRUE(Contains(error, "not a regular file"));
  EXPECT_FALSE(read_file_bounded(dir_.string(), 1 << 20, &error));
  EXPECT_TRUE(Contains(error, "is a directory"));
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_FALSE(read_file_bounded((dir_ / "fifo").string(), 1 << 20, &error));  // no writer: no wait
  EXPECT_TRUE(Contains(error, "not a regular file"));
  EXPECT_FALSE(read_file_bounded((dir_ / "missing").string(), 1 << 20, &error));
  EXPECT_TRUE(Contains(error, "cannot open"));
}

TEST(TopologyLimits, RefusesTooManyDevicesBeforeBuildingThem) {
  std::string text =
      "format_version: 1\nid: t\ngpu_types: {A100: {peak_tflops_fp16_tensor: 312, memory_gib: "
      "80}}\nsites: [{name: a}]\ndevices: [";
  for (int i = 0; i <= kMaxDevices; ++i) text += "{},";
  text += "]\nnetwork: {intra_site: {latency_ms: 0.1, bandwidth_gbps: 100}}\n";
  EXPECT_TRUE(Contains(error_of<TopologyError>([&] { parse_topology_yaml(text, "big.yaml"); }),
                       "big.yaml: devices: lists 8193 devices, more than the limit of 8192"));

  Topology topology;
  GpuType a100;
  a100.name = "A100";
  a100.peak_tflops = 312;
  a100.memory_gib = 80;
  topology.gpu_types = {a100};
  Site site;
  site.name = "a";
  topology.sites = {site};
  Device device;
  device.site = "a";
  device.gpu = "A100";
  topology.devices.assign(kMaxDevices + 1, device);
  topology.intra_site = {0.1, 100};
  EXPECT_TRUE(Contains(error_of<TopologyError>([&] { topology.finalize("built"); }),
                       "built: devices: lists 8193 devices, more than the limit of 8192"));
}

TEST(TopologyLimits, RefusesLinksOutsideTheirPhysicalBounds) {
  const auto error = [](const std::string& text) {
    return error_of<TopologyError>([&] { parse_topology_yaml(text, "t.yaml"); });
  };
  EXPECT_EQ(error(two_sites("latency_ms: 10, bandwidth_gbps: 1")), "");
  EXPECT_TRUE(Contains(error(two_sites("latency_ms: 10, bandwidth_gbps: 1.0e-300")),
                       "t.yaml: network.inter_site_default.bandwidth_gbps: must be in [1e-06, "
                       "100000] Gbit/s (1 kbit/s to 100 Tbit/s), got 1e-300"));
  EXPECT_TRUE(Contains(error(two_sites("latency_ms: 10, bandwidth_gbps: 1.0e6")),
                       "bandwidth_gbps: must be in [1e-06, 100000] Gbit/s"));
  EXPECT_TRUE(Contains(error(two_sites("latency_ms: 1.0e9, bandwidth_gbps: 1")),
                       "t.yaml: network.inter_site_default.latency_ms: must be in [0, 60000] ms"));
  EXPECT_TRUE(Contains(error(two_sites("latency_ms: .nan, bandwidth_gbps: 1")),
                       "network.inter_site_default.latency_ms"));
  EXPECT_TRUE(
      Contains(error(two_sites("latency_ms: 1, bandwidth_gbps: 1", "peak_tflops_fp16_tensor: 1e9")),
               "t.yaml: gpu_types.A100.peak_tflops_fp16_tensor: must be in [0, 100000] TFLOP/s"));
}

TEST(TopologyLimits, LoadRefusesEndlessAndHugeFiles) {
  EXPECT_TRUE(Contains(error_of<TopologyError>([] { load_topology_file("/dev/zero"); }),
                       "/dev/zero: is not a regular file"));
}

TEST(GeneratorLimits, RefusesCountsAndLinksPastTheLimits) {
  const auto error = [](const GeoTopologySpec& spec) {
    return error_of<std::invalid_argument>([&] { generate_geo_topology(spec); });
  };
  EXPECT_TRUE(Contains(error({.devices = 5'000'000, .sites = 8}),
                       "GeoTopologySpec.devices: must be in [1, 8192], got 5000000"));
  EXPECT_TRUE(Contains(error({.devices = 8192, .sites = 2000}),
                       "GeoTopologySpec.sites: must be in [1, 1024]"));
  EXPECT_TRUE(Contains(error({.min_bandwidth_gbps = 1e-300}),
                       "GeoTopologySpec.min_bandwidth_gbps: must be in [1e-06, 100000] Gbit/s"));
  EXPECT_TRUE(Contains(error({.intra_site_latency_ms = std::nan("")}),
                       "GeoTopologySpec.intra_site_latency_ms"));
}

TEST(WorkloadLimits, RefusesFieldsPastTheirLimits) {
  const auto error = [](const std::string& model, const std::string& training) {
    return error_of<WorkloadError>([&] {
      parse_workload_yaml("model: {" + model + "}\ntraining: {" + training + "}\n", "m.yaml");
    });
  };
  const std::string batch = "micro_batch: 1, global_batch: 16";
  EXPECT_EQ(error("layers: 12, hidden: 768, heads: 12, seq_len: 1024", batch), "");
  EXPECT_TRUE(Contains(error("layers: 12, hidden: 1048576, heads: 16, seq_len: 1024", batch),
                       "m.yaml: hidden: must be at most 65536, got 1048576"));
  EXPECT_TRUE(Contains(error("layers: 2000, hidden: 768, heads: 12, seq_len: 1024", batch),
                       "m.yaml: layers: must be at most 1024, got 2000"));
  EXPECT_TRUE(Contains(error("layers: 12, hidden: 768, heads: 12, seq_len: 2000000", batch),
                       "m.yaml: seq_len: must be at most 1048576"));
  EXPECT_TRUE(
      Contains(error("layers: 12, hidden: 768, heads: 12, seq_len: 8, vocab: 5000000", batch),
               "m.yaml: vocab: must be at most 4194304"));
  EXPECT_TRUE(
      Contains(error("layers: 12, hidden: 768, ffn_hidden: 300000, heads: 12, seq_len: 8", batch),
               "m.yaml: ffn_hidden: must be at most 262144"));
  EXPECT_TRUE(Contains(error("layers: 12, hidden: 768, heads: 12, seq_len: 8",
                             "micro_batch: 1, global_batch: 2000000"),
                       "m.yaml: global_batch: must be at most 1048576"));
  EXPECT_TRUE(Contains(error("layers: 12, hidden: 768, heads: 12, seq_len: 8",
                             "micro_batch: 100000, global_batch: 200000"),
                       "m.yaml: micro_batch: must be at most 65536"));
  // The library validator itself, as a caller that fills a Workload uses it.
  Workload w = workload_preset("gpt2-124m");
  w.hidden = 1 << 20;
  w.heads = 16;
  EXPECT_TRUE(Contains(error_of<WorkloadError>([&] { w.validate("built"); }),
                       "built: hidden: must be at most 65536"));
}

TEST(WorkloadLimits, LoadRefusesEndlessFiles) {
  EXPECT_TRUE(Contains(error_of<WorkloadError>([] { load_workload_file("/dev/zero"); }),
                       "/dev/zero: cannot read the model file: is not a regular file"));
}

TEST(ScheduleLimits, RefusesCountsAndTheirProductPastTheLimits) {
  const auto error = [](ScheduleSpec spec) {
    return error_of<std::invalid_argument>([&] { validate_schedule_spec(spec); });
  };
  EXPECT_EQ(error({ScheduleKind::OneFOneB, 4, 1000, 1}), "");
  EXPECT_TRUE(Contains(error({ScheduleKind::OneFOneB, 1, 2'000'000'000, 1}),
                       "micro-batches (m) must be at most 1048576, got 2000000000"));
  EXPECT_TRUE(Contains(error({ScheduleKind::OneFOneB, 5000, 8, 1}),
                       "stages (p) must be at most 1024, got 5000"));
  EXPECT_TRUE(Contains(error({ScheduleKind::Interleaved, 4, 8, 100000}),
                       "chunks (v) must be at most 64, got 100000"));
  EXPECT_TRUE(Contains(error({ScheduleKind::OneFOneB, 64, 65536, 1}),
                       "p x m x v = 4194304 (rank, micro-batch, chunk) cells, more than the limit "
                       "of 2097152"));
  // generate_schedule validates first: nothing is allocated for a spec past the limits.
  EXPECT_THROW(generate_schedule({ScheduleKind::GPipe, 1, 2'000'000'000, 1}),
               std::invalid_argument);
}

}  // namespace
}  // namespace tessel::placement
