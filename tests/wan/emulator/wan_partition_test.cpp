// A link of the WAN emulator changed while it forwards (WanEmulator::set_link): loss 1 in both
// directions partitions the pair (every packet dropped, no reset: the kernel's TCP sees silence),
// and healing it lets the same connection go on with nothing lost to the application. Other
// pairs keep working meanwhile. Needs root, /dev/net/tun and `ip`: elsewhere every case skips,
// naming what is missing.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "tests/wan/emulator/wan_measure.h"

namespace tessel::wan {
namespace {

using namespace std::chrono_literals;

// The stream's byte at offset i: a pattern that a lost, repeated or reordered piece breaks.
char pattern_byte(std::uint64_t i) { return static_cast<char>(i % 251); }

// Bytes the kernel of `fd` has received (acknowledged) on the connection, read or not.
std::uint64_t kernel_bytes_received(int fd) {
  tcp_info info{};
  socklen_t length = sizeof info;
  ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length);
  return info.tcpi_bytes_received;
}

// Polls `done` every 10 ms up to `timeout` (generous: it bounds a hang, not a speed).
template <typename Done>
bool wait_until(Done done, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(WanPartition, AStreamStallsWhilePartitionedAndContinuesIntactAfterHealing) {
  WanConfig config;
  config.namespaces = 3;
  config.default_link.delay_ms = 2;
  config.default_link.rate_mbit = 200;
  START_OR_SKIP(wan, config);
  const LinkSettings normal = wan->link(0, 1);

  // A stream from namespace 0 to namespace 1: kTotal bytes of the pattern.
  constexpr std::uint64_t kTotal = 16 << 20;
  int listener = -1, sender = -1;
  std::uint16_t port = 0;
  wan->call_in(1, [&] {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(listener >= 0, "socket");
    sockaddr_in address = socket_address(wan->address(1), 0);
    check(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "bind");
    check(::listen(listener, 1) == 0, "listen");
    socklen_t length = sizeof address;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  });
  wan->call_in(0, [&] { sender = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
  ASSERT_GE(sender, 0);
  const sockaddr_in target = socket_address(wan->address(1), port);
  ASSERT_EQ(::connect(sender, reinterpret_cast<const sockaddr*>(&target), sizeof target), 0)
      << std::strerror(errno);
  const int receiving = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(receiving, 0) << std::strerror(errno);

  std::atomic<std::uint64_t> read_total{0};
  std::atomic<std::int64_t> first_wrong{-1};  // offset of the first byte off the pattern
  std::thread reader([&] {
    std::vector<char> buffer(1 << 16);
    std::uint64_t offset = 0;
    for (;;) {
      const ssize_t got = ::read(receiving, buffer.data(), buffer.size());
      if (got <= 0) break;
      for (ssize_t k = 0; k < got; ++k, ++offset)
        if (buffer[k] != pattern_byte(offset) && first_wrong < 0)
          first_wrong = static_cast<std::int64_t>(offset);
      read_total = offset;
    }
  });
  std::atomic<std::uint64_t> sent_total{0};
  std::thread writer([&] {
    std::vector<char> chunk(64 << 10);
    std::uint64_t offset = 0;
    while (offset < kTotal) {
      for (std::size_t k = 0; k < chunk.size(); ++k) chunk[k] = pattern_byte(offset + k);
      const ssize_t put = ::send(sender, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (put <= 0) break;
      offset += static_cast<std::uint64_t>(put);
      // A partial send leaves the rest of the chunk: the next one starts from `offset` again.
      sent_total = offset;
    }
    ::shutdown(sender, SHUT_WR);
  });

  EXPECT_TRUE(wait_until([&] { return read_total > (1 << 20); }, 60s)) << "the stream never ran";
  LinkSettings cut = normal;
  cut.loss = 1;
  const std::uint64_t dropped_before = wan->stats().dropped_loss;
  wan->set_link(0, 1, cut);
  wan->set_link(1, 0, cut);
  EXPECT_EQ(wan->link(0, 1).loss, 1);
  EXPECT_EQ(wan->link(1, 0).loss, 1);
  // What was on the wire when the cut came lands within the delay; after that the receiving
  // kernel gets nothing more while the cut lasts.
  std::this_thread::sleep_for(300ms);
  const std::uint64_t at_cut = kernel_bytes_received(receiving);
  // The other pairs work meanwhile (ping throws when a reply is lost).
  EXPECT_NO_THROW(ping_ms(*wan, 0, 2, 3)) << "namespace 0 to 2 while 0-1 is partitioned";
  EXPECT_NO_THROW(ping_ms(*wan, 2, 1, 3)) << "namespace 2 to 1 while 0-1 is partitioned";
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(kernel_bytes_received(receiving), at_cut) << "data crossed a partitioned link";
  EXPECT_LT(sent_total.load(), kTotal) << "the sender should be held by its window";
  EXPECT_GT(wan->stats().dropped_loss, dropped_before) << "the sender's retransmissions dropped";

  wan->set_link(0, 1, normal);
  wan->set_link(1, 0, normal);
  // TCP retransmits on its backed-off timer and the same connection goes on to the end.
  EXPECT_TRUE(wait_until([&] { return read_total == kTotal; }, 120s))
      << "after healing only " << read_total << " of " << kTotal << " bytes arrived";
  writer.join();
  reader.join();
  EXPECT_EQ(read_total.load(), kTotal);
  EXPECT_EQ(first_wrong.load(), -1) << "a byte off the pattern: lost, repeated or reordered data";
  ::close(sender);
  ::close(receiving);
  ::close(listener);
}

TEST(WanPartition, SetLinkRefusesPairsAndSettingsOutOfRange) {
  START_OR_SKIP(wan, WanConfig{});
  LinkSettings bad;
  bad.loss = 2;
  try {
    wan->set_link(0, 1, bad);
    ADD_FAILURE() << "loss 2 was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "link 0>1 loss: 2 is out of range (a probability, 0 to 1, 1 for a partition)");
  }
  try {
    wan->set_link(1, 1, {});
    ADD_FAILURE() << "link 1>1 was taken";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(),
                 "WanEmulator::set_link: link 1>1 does not exist (there are 2 namespaces, "
                 "numbered from 0)");
  }
  EXPECT_THROW(wan->set_link(0, 2, {}), std::out_of_range);
  EXPECT_EQ(wan->link(0, 1).loss, 0) << "a refused change left the link as it was";
}

TEST(WanPartition, WithOffloadSetLinkTakesAPartitionButNoPartialLoss) {
  WanConfig config;
  config.offload = true;
  START_OR_SKIP(wan, config);
  LinkSettings lossy;
  lossy.loss = 0.2;
  try {
    wan->set_link(0, 1, lossy);
    ADD_FAILURE() << "loss 0.2 was taken with offload";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "link 0>1: loss 0.2 with offload: a super-packet of up to 64 KB would be lost "
                 "whole (use loss 0 or 1, or turn offload off)");
  }
  LinkSettings partition;
  partition.loss = 1;
  EXPECT_NO_THROW(wan->set_link(0, 1, partition));
  EXPECT_EQ(wan->link(0, 1).loss, 1);
}

}  // namespace
}  // namespace tessel::wan
