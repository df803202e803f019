// The WAN emulator's configuration: --link overrides, the YAML file, and the errors that name
// the flag or field, the value and the limit.
#include "tests/support/wan/link_settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>

namespace tessel::wan {
namespace {

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

std::string write_config(const std::string& text) {
  const std::string path = ::testing::TempDir() + "wan-config-" + std::to_string(::getpid()) + "-" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                           ".yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(WanLinkSettings, LinkFlagsSetBothDirectionsOrOne) {
  WanConfig config;
  config.namespaces = 3;
  config.default_link.delay_ms = 25;
  config.default_link.rate_mbit = 1000;
  config.links.push_back(parse_link_override("0-1:delay_ms=75,loss=0.01"));
  config.links.push_back(parse_link_override("2>0:rate_mbit=100"));
  validate_wan_config(config);
  const std::vector<LinkSettings> m = link_matrix(config);
  EXPECT_EQ(m[0 * 3 + 1].delay_ms, 75);
  EXPECT_EQ(m[1 * 3 + 0].delay_ms, 75);
  EXPECT_EQ(m[1 * 3 + 0].loss, 0.01);
  EXPECT_EQ(m[1 * 3 + 0].rate_mbit, 1000);  // not overridden: the default
  EXPECT_EQ(m[2 * 3 + 0].rate_mbit, 100);
  EXPECT_EQ(m[0 * 3 + 2].rate_mbit, 1000);  // one way only
  EXPECT_EQ(m[1 * 3 + 2].delay_ms, 25);
}

TEST(WanLinkSettings, BadLinkFlagsAreNamed) {
  EXPECT_EQ(error_of([] { parse_link_override("0:delay_ms=1"); }),
            "--link 0:delay_ms=1: expected <from>-<to> (both ways) or <from>><to> (one way), then "
            ":key=value,... with keys delay_ms, rate_mbit, loss, queue_ms");
  EXPECT_EQ(error_of([] { parse_link_override("0-1:jitter_ms=3"); }),
            "--link 0-1:jitter_ms=3: unknown key \"jitter_ms\" (known: delay_ms, rate_mbit, loss, "
            "queue_ms)");
  EXPECT_EQ(error_of([] { parse_link_override("0-1:delay_ms=ten"); }),
            "--link 0-1:delay_ms=ten delay_ms: \"ten\" is not a number");
  EXPECT_EQ(error_of([] { parse_link_override("a-1"); }),
            "--link a-1: \"a\" is not a namespace index");
}

TEST(WanLinkSettings, OutOfRangeValuesNameTheFieldAndTheLimit) {
  WanConfig config;
  config.default_link.loss = 1.5;
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "default link loss: 1.5 is out of range (a probability, 0 to 1, 1 for a partition)");
  config.default_link.loss = -0.1;
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "default link loss: -0.1 is out of range (a probability, 0 to 1, 1 for a partition)");
  config.default_link.loss = 1;  // a partition
  EXPECT_NO_THROW(validate_wan_config(config));
  config = {};
  config.links.push_back(parse_link_override("0-1:delay_ms=20000"));
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "link 0-1 delay_ms: 20000 is out of range (0 to 10000 ms)");
  config = {};
  config.links.push_back(parse_link_override("0>2"));
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "link 0>2: namespace 2 does not exist (there are 2, numbered from 0)");
  config = {};
  config.namespaces = 65;
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "namespaces: 65 namespaces is out of range (2 to 64: one forwarding thread serves "
            "them all)");
  config = {};
  config.subnet = "10.1.2.3";
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "subnet: \"10.1.2.3\" is not the base of an IPv4 /24 (a dotted quad ending in .0)");
  config = {};
  config.netns = {"a", "a"};
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }), "netns: \"a\" is named twice");
  config = {};
  config.mtu = 100;
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "mtu: 100 is out of range (576 to 65535)");
}

TEST(WanLinkSettings, AConfigFileGivesTheDefaultAndThePairs) {
  const std::string path = write_config(
      "namespaces: 3\n"
      "mtu: 9000\n"
      "default: {delay_ms: 25, rate_mbit: 1000}\n"
      "links:\n"
      "  - {between: [0, 1], delay_ms: 75}\n"
      "  - {from: 2, to: 0, loss: 0.1}\n");
  const WanConfig config = load_wan_config(path);
  std::remove(path.c_str());
  EXPECT_EQ(config.size(), 3u);
  EXPECT_EQ(config.mtu, 9000);
  const std::vector<LinkSettings> m = link_matrix(config);
  EXPECT_EQ(m[1 * 3 + 0].delay_ms, 75);
  EXPECT_EQ(m[2 * 3 + 0].loss, 0.1);
  EXPECT_EQ(m[0 * 3 + 2].loss, 0);
  EXPECT_EQ(m[0 * 3 + 2].rate_mbit, 1000);
}

TEST(WanLinkSettings, OffloadTakesOnlyLinksThatLoseNothingOrEverything) {
  WanConfig config;
  config.offload = true;
  config.default_link.loss = 1;  // a partition loses every super-packet, as it would every packet
  EXPECT_NO_THROW(validate_wan_config(config));
  config.default_link.loss = 0;
  config.links.push_back(parse_link_override("1>0:loss=0.01"));
  EXPECT_EQ(error_of([&] { validate_wan_config(config); }),
            "link 1>0: loss 0.01 with offload: a super-packet of up to 64 KB would be lost whole "
            "(use loss 0 or 1, or turn offload off)");
  config.offload = false;
  EXPECT_NO_THROW(validate_wan_config(config));

  const std::string path = write_config("offload: true\ndefault: {delay_ms: 75}\n");
  EXPECT_TRUE(load_wan_config(path).offload);
  std::ofstream(path) << "offload: true\ndefault: {loss: 0.5}\n";
  EXPECT_EQ(error_of([&] { load_wan_config(path); }),
            "link 0>1: loss 0.5 with offload: a super-packet of up to 64 KB would be lost whole "
            "(use loss 0 or 1, or turn offload off)");
  std::remove(path.c_str());
}

TEST(WanLinkSettings, ConfigFileErrorsNameTheFileAndTheField) {
  const std::string path = write_config(
      "namespaces: 2\n"
      "links:\n"
      "  - {between: [0, 1], latency_ms: 75}\n");
  EXPECT_EQ(error_of([&] { load_wan_config(path); }),
            "WAN emulator config " + path +
                ": links[0]: unknown field \"latency_ms\" (known: between, delay_ms, from, loss, "
                "queue_ms, rate_mbit, to)");
  std::ofstream(path) << "default: {rate_mbit: fast}\n";
  EXPECT_EQ(error_of([&] { load_wan_config(path); }),
            "WAN emulator config " + path + ": default.rate_mbit: \"fast\" is not a number");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessel::wan
