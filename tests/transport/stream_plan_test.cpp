// The stream plan of a link (stream_plan.h): N = ceil(BDP / window) within the cap, buffers of
// the BDP's share within net.core.wmem_max / rmem_max, and the sysctl named when it caps them.
#include "noderuntime/transport/stream_plan.h"

#include <gtest/gtest.h>

#include "noderuntime/transport/transport_error.h"
#include "tests/transport/local_mesh.h"

namespace tessel::transport {
namespace {

using testing::Contains;

constexpr double kGbit = 1e9 / 8;                      // bytes/s
constexpr SocketBufferLimits k4MiB{4 << 20, 4 << 20};  // this machine's net.core limits

TEST(StreamPlan, ALongFatLinkGetsEnoughStreamsToCoverItsBandwidthDelayProduct) {
  // 1 Gbit/s x 150 ms = 18.75 MB; 4 MiB per stream: ceil(18.75 / 4.19) = 5 streams.
  const StreamPlan plan = plan_link_streams(kGbit, 0.150, 0, k4MiB);
  EXPECT_EQ(plan.streams, 5);
  EXPECT_DOUBLE_EQ(plan.bdp_bytes, 18.75e6);
  EXPECT_EQ(plan.buffer_bytes, static_cast<uint64_t>(4 << 20));  // 18.75 MB / 5 x 1.25 > 4 MiB
  EXPECT_EQ(plan.capped_by, "net.core.wmem_max");
  EXPECT_GE(plan.window_bound_bytes_per_s, kGbit);
  // Each extra 50 ms of round trip needs more streams; 250 ms: 31.25 MB, 8 streams.
  EXPECT_EQ(plan_link_streams(kGbit, 0.050, 0, k4MiB).streams, 2);
  EXPECT_EQ(plan_link_streams(kGbit, 0.250, 0, k4MiB).streams, 8);
}

TEST(StreamPlan, AShortLinkKeepsOneStreamAndTheKernelsAutotuning) {
  for (const auto& [capacity, rtt] :
       {std::pair{kGbit, 0.0}, {kGbit, 0.001}, {0.0, 0.150}, {10 * kGbit, 0.0005}}) {
    const StreamPlan plan = plan_link_streams(capacity, rtt, 0, k4MiB);
    EXPECT_EQ(plan.streams, 1) << capacity << " " << rtt;
    EXPECT_EQ(plan.buffer_bytes, 0u);
    EXPECT_TRUE(plan.capped_by.empty());
  }
}

TEST(StreamPlan, TheCapBoundsTheStreamsAndTheWindowBoundSaysWhatTheyCarry) {
  // 10 Gbit/s x 250 ms = 312.5 MB: 75 streams of 4 MiB would be needed, 16 are allowed.
  const StreamPlan plan = plan_link_streams(10 * kGbit, 0.250, 0, k4MiB);
  EXPECT_EQ(plan.streams, kMaxStreamsPerLink);
  EXPECT_EQ(plan.buffer_bytes, static_cast<uint64_t>(4 << 20));
  EXPECT_NEAR(plan.window_bound_bytes_per_s, 16.0 * (4 << 20) / 0.250, 1);
  EXPECT_LT(plan.window_bound_bytes_per_s, 10 * kGbit);
  EXPECT_EQ(plan_link_streams(10 * kGbit, 0.250, 0, k4MiB, 4).streams, 4);
}

TEST(StreamPlan, ConfiguredStreamsAreTakenAndBuffersShareTheProduct) {
  const StreamPlan plan = plan_link_streams(kGbit, 0.150, 8, k4MiB);
  EXPECT_EQ(plan.streams, 8);
  // 18.75 MB / 8 x 1.25 = 2.93 MB per stream, under the cap.
  EXPECT_EQ(plan.buffer_bytes, 2929688u);
  EXPECT_EQ(plan_link_streams(0, 0, 3, k4MiB).streams, 3);
  // The smaller of the two limits decides, and is the one named.
  const StreamPlan small_rmem = plan_link_streams(kGbit, 0.150, 0, {4 << 20, 1 << 20});
  EXPECT_EQ(small_rmem.capped_by, "net.core.rmem_max");
  EXPECT_EQ(small_rmem.streams, 16);  // ceil(18.75 MB / 1 MiB) = 18, capped
}

TEST(StreamPlan, DescribesItselfNamingTheSysctl) {
  EXPECT_EQ(describe(plan_link_streams(kGbit, 0.150, 0, k4MiB)),
            "5 streams, buffers 4.2 MB (BDP 18.8 MB; net.core.wmem_max caps one stream below "
            "it)");
  EXPECT_EQ(describe(plan_link_streams(0, 0, 0, k4MiB)), "1 stream, kernel-tuned buffers");
}

TEST(StreamPlan, RejectsBadInputNamingIt) {
  const auto error = [](auto call) -> std::string {
    try {
      call();
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error([] { plan_link_streams(kGbit, 0.1, 17, k4MiB); }),
                       "streams per link 17 outside [1, 16] (0 chooses)"));
  EXPECT_TRUE(
      Contains(error([] { plan_link_streams(kGbit, 0.1, -1, k4MiB); }), "streams per link -1"));
  EXPECT_TRUE(
      Contains(error([] { plan_link_streams(kGbit, 0.1, 0, k4MiB, 0); }), "max streams 0 outside"));
  EXPECT_TRUE(Contains(error([] { plan_link_streams(-1, 0.1, 0, k4MiB); }), "capacity -1"));
  EXPECT_TRUE(Contains(error([] { plan_link_streams(kGbit, std::nan(""), 0, k4MiB); }), "rtt"));
}

TEST(StreamPlan, ReadsTheSystemsLimits) {
  const SocketBufferLimits limits = read_socket_buffer_limits();
  EXPECT_GT(limits.wmem_max, 0u);
  EXPECT_GT(limits.rmem_max, 0u);
}

}  // namespace
}  // namespace tessel::transport
