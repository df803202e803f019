// The link book: hysteresis (below and above each threshold, peer set changes, republish_after),
// age-out (ttl and consecutive failures; a check keeps a peer alive without changing its
// measurement), aggregation beyond max_listed_peers (this cluster's peers first by name, then the
// others; the rest per site with the median of each field and the oldest `at`), the size bound,
// and bad options refused by name.
#include "noderuntime/prober/link_book.h"

#include <gtest/gtest.h>

#include "api/manifest_error.h"
#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using TimePoint = SteadyClock::time_point;

const TimePoint kStart = TimePoint{} + 1000h;

api::LinkMeasurement link(double rtt_ms, double bulk_gbps,
                          const std::string& at = "2026-11-26T08:00:00Z") {
  return {rtt_ms, rtt_ms * 1.5, bulk_gbps / 2, bulk_gbps, at};
}

api::NodeLinks links_of(std::map<std::string, api::LinkMeasurement> peers) {
  return {std::move(peers)};
}

TEST(LinkBookHysteresis, OnlyAMaterialChangeIsPublished) {
  const LinkBook book{LinkBookOptions{}};
  const auto published = links_of({{"gpu-a", link(10, 1)}, {"member-b/gpu-x", link(0.5, 10)}});
  const auto with = [&](const std::string& peer, auto change) {
    api::NodeLinks candidate = published;
    change(candidate.peers.at(peer));
    return book.should_publish(published, kStart, candidate, kStart + 60s);
  };
  EXPECT_TRUE(book.should_publish(std::nullopt, kStart, published, kStart));
  EXPECT_FALSE(book.should_publish(published, kStart, published, kStart + 60s));
  // Rates: 5% is not material, 15% is (either way, either rate).
  EXPECT_FALSE(with("gpu-a", [](auto& m) { m.bulk_gbps = 1.05; }));
  EXPECT_TRUE(with("gpu-a", [](auto& m) { m.bulk_gbps = 1.15; }));
  EXPECT_TRUE(with("gpu-a", [](auto& m) { m.bulk_gbps = 0.85; }));
  EXPECT_FALSE(with("gpu-a", [](auto& m) { m.small_gbps = 0.52; }));
  EXPECT_TRUE(with("gpu-a", [](auto& m) { m.small_gbps = 0.6; }));
  // RTTs: 5% (0.5 ms) is not material, 20% (2 ms) is; 30% of 0.5 ms (0.15 ms) is below the floor,
  // 60% (0.3 ms) is not.
  EXPECT_FALSE(with("gpu-a", [](auto& m) { m.rtt_p50_ms = 10.5; }));
  EXPECT_TRUE(with("gpu-a", [](auto& m) { m.rtt_p50_ms = 12; }));
  EXPECT_TRUE(with("gpu-a", [](auto& m) { m.rtt_p90_ms = 18; }));
  EXPECT_FALSE(with("member-b/gpu-x", [](auto& m) { m.rtt_p50_ms = 0.65; }));
  EXPECT_FALSE(with("member-b/gpu-x", [](auto& m) { m.rtt_p90_ms = 0.9; }));
  EXPECT_TRUE(with("member-b/gpu-x", [](auto& m) { m.rtt_p50_ms = 0.8; }));
  // A newer `at` alone is not a change.
  EXPECT_FALSE(with("gpu-a", [](auto& m) { m.measured_at = "2026-11-26T08:10:00Z"; }));
  // The peer set: a peer more, a peer less, another peer instead.
  api::NodeLinks more = published;
  more.peers["gpu-b"] = link(10, 1);
  EXPECT_TRUE(book.should_publish(published, kStart, more, kStart + 1s));
  api::NodeLinks fewer = published;
  fewer.peers.erase("gpu-a");
  EXPECT_TRUE(book.should_publish(published, kStart, fewer, kStart + 1s));
  api::NodeLinks other = published;
  other.peers.erase("gpu-a");
  other.peers["gpu-b"] = link(10, 1);
  EXPECT_TRUE(book.should_publish(published, kStart, other, kStart + 1s));
  EXPECT_TRUE(book.should_publish(published, kStart, api::NodeLinks{}, kStart + 1s));
  // What is published gets old: republished as is.
  EXPECT_FALSE(book.should_publish(published, kStart, published, kStart + 1199s));
  EXPECT_TRUE(book.should_publish(published, kStart, published, kStart + 1200s));
}

TEST(LinkBookHysteresis, ThresholdsAreTheOptions) {
  LinkBookOptions options;
  options.material_change = 0.5;
  options.rtt_floor_ms = 5;
  options.republish_after = 60s;
  const LinkBook book(options);
  const auto published = links_of({{"gpu-a", link(10, 1)}});
  auto candidate = published;
  candidate.peers["gpu-a"].bulk_gbps = 1.4;
  candidate.peers["gpu-a"].rtt_p50_ms = 14;  // 40%, 4 ms: neither
  EXPECT_FALSE(book.should_publish(published, kStart, candidate, kStart + 59s));
  EXPECT_TRUE(book.should_publish(published, kStart, candidate, kStart + 60s));
  candidate.peers["gpu-a"].rtt_p50_ms = 16;  // 60%, 6 ms
  EXPECT_TRUE(book.should_publish(published, kStart, candidate, kStart + 1s));
}

TEST(LinkBookAgeOut, ByTtlAndByConsecutiveFailures) {
  LinkBook book{LinkBookOptions{}};  // ttl 900 s, 3 failures
  book.set_peers({"gpu-a", "gpu-b", "gpu-c"});
  EXPECT_TRUE(book.links(kStart).peers.empty()) << "nothing measured yet";
  book.record_full("gpu-a", link(1, 10), kStart);
  book.record_full("gpu-b", link(2, 10), kStart);
  book.record_check("gpu-c", kStart);  // alive, but never measured: not listed
  EXPECT_EQ(book.links(kStart + 899s).peers.size(), 2u);
  // A check keeps gpu-a alive; its measurement (and `at`) stays as it was.
  book.record_check("gpu-a", kStart + 800s);
  const api::NodeLinks later = book.links(kStart + 900s);
  ASSERT_EQ(later.peers.size(), 1u);
  EXPECT_EQ(later.peers.at("gpu-a"), link(1, 10));
  EXPECT_TRUE(book.links(kStart + 1700s).peers.empty());
  // Revived by an answer.
  book.record_full("gpu-b", link(3, 10, "2026-11-26T09:00:00Z"), kStart + 2000s);
  EXPECT_EQ(book.links(kStart + 2000s).peers.at("gpu-b"), link(3, 10, "2026-11-26T09:00:00Z"));
  // Failures in a row: listed after two, aged out by the third, back after a success.
  book.record_failure("gpu-b", kStart + 2010s);
  book.record_failure("gpu-b", kStart + 2020s);
  EXPECT_TRUE(book.links(kStart + 2020s).peers.contains("gpu-b"));
  book.record_failure("gpu-b", kStart + 2030s);
  EXPECT_FALSE(book.links(kStart + 2030s).peers.contains("gpu-b"));
  book.record_check("gpu-b", kStart + 2040s);
  EXPECT_TRUE(book.links(kStart + 2040s).peers.contains("gpu-b"));
  // A failure between successes does not add up with later ones.
  book.record_failure("gpu-b", kStart + 2050s);
  book.record_failure("gpu-b", kStart + 2060s);
  book.record_check("gpu-b", kStart + 2070s);
  book.record_failure("gpu-b", kStart + 2080s);
  EXPECT_TRUE(book.links(kStart + 2080s).peers.contains("gpu-b"));
}

TEST(LinkBookAgeOut, PeersThatLeaveAreForgotten) {
  LinkBook book{LinkBookOptions{}};
  book.set_peers({"gpu-a", "gpu-b"});
  book.record_full("gpu-a", link(1, 10), kStart);
  book.record_full("gpu-b", link(1, 10), kStart);
  book.set_peers({"gpu-b"});
  EXPECT_EQ(book.links(kStart).peers.size(), 1u);
  book.record_full("gpu-a", link(1, 10), kStart);  // its probe ended after it left: ignored
  EXPECT_FALSE(book.links(kStart).peers.contains("gpu-a"));
  book.set_peers({"gpu-a", "gpu-b"});  // back: known again, not measured
  EXPECT_FALSE(book.links(kStart).peers.contains("gpu-a"));
  EXPECT_EQ(error_of([&] { book.record_full("gpu-b", link(1, 10, "yesterday"), kStart); }),
            "prober link book: the measurement of gpu-b has measured_at \"yesterday\", not an "
            "RFC 3339 time");
}

// Peers of this cluster gpu-a..gpu-e, of member-x three, of member-y one.
LinkBook book_of_nine(size_t max_listed, TimePoint now) {
  LinkBookOptions options;
  options.max_listed_peers = max_listed;
  LinkBook book(options);
  book.set_peers({"member-y/gpu-1", "gpu-e", "member-x/gpu-3", "gpu-d", "member-x/gpu-1", "gpu-c",
                  "member-x/gpu-2", "gpu-b", "gpu-a"});
  book.record_full("gpu-a", link(0.1, 10), now);
  book.record_full("gpu-b", link(0.2, 20, "2026-11-26T08:01:00Z"), now);
  book.record_full("gpu-c", link(0.3, 30, "2026-11-26T07:59:00Z"), now);
  book.record_full("gpu-d", link(0.4, 40, "2026-11-26T08:02:00Z"), now);
  book.record_full("gpu-e", link(0.6, 50, "2026-11-26T08:03:00Z"), now);
  book.record_full("member-x/gpu-1", link(40, 1), now);
  book.record_full("member-x/gpu-2", link(44, 2, "2026-11-26T07:00:00Z"), now);
  book.record_full("member-x/gpu-3", link(50, 0.5), now);
  book.record_full("member-y/gpu-1", link(80, 0.2), now);
  return book;
}

std::vector<std::string> names(const api::NodeLinks& links) {
  std::vector<std::string> out;
  for (const auto& [name, unused] : links.peers) out.push_back(name);
  return out;
}

TEST(LinkBookAggregation, UpToTheLimitEveryPeerByName) {
  const auto links = book_of_nine(9, kStart).links(kStart);
  EXPECT_EQ(links.peers.size(), 9u);
  EXPECT_EQ(links.peers.at("member-x/gpu-2"), link(44, 2, "2026-11-26T07:00:00Z"));
}

TEST(LinkBookAggregation, ThisClusterFirstThenTheOthersThenSites) {
  // 8 entries: this cluster's five and member-x/gpu-1 by name, "member-x/*" for the other two
  // of member-x, and member-y's one peer (a site of one is listed by name). 7 by name would
  // leave member-x/gpu-3 and member-y/gpu-1 to two sites: 9 entries.
  EXPECT_EQ(names(book_of_nine(8, kStart).links(kStart)),
            (std::vector<std::string>{"gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e", "member-x/*",
                                      "member-x/gpu-1", "member-y/gpu-1"}));
  // 6 entries: three of this cluster by name, "*" for gpu-d and gpu-e, "member-x/*", and
  // member-y's only peer by name.
  const api::NodeLinks six = book_of_nine(6, kStart).links(kStart);
  EXPECT_EQ(names(six), (std::vector<std::string>{"*", "gpu-a", "gpu-b", "gpu-c", "member-x/*",
                                                  "member-y/gpu-1"}));
  // Medians of each field; of an even count the mean of the middle two; `at` the oldest.
  EXPECT_DOUBLE_EQ(six.peers.at("*").rtt_p50_ms, 0.5);
  EXPECT_DOUBLE_EQ(six.peers.at("*").bulk_gbps, 45);
  EXPECT_EQ(six.peers.at("*").measured_at, "2026-11-26T08:02:00Z");
  const api::LinkMeasurement& x = six.peers.at("member-x/*");
  EXPECT_DOUBLE_EQ(x.rtt_p50_ms, 44);
  EXPECT_DOUBLE_EQ(x.rtt_p90_ms, 66);
  EXPECT_DOUBLE_EQ(x.small_gbps, 0.5);
  EXPECT_DOUBLE_EQ(x.bulk_gbps, 1);
  EXPECT_EQ(x.measured_at, "2026-11-26T07:00:00Z");
  // 3 entries: every site aggregated.
  EXPECT_EQ(names(book_of_nine(3, kStart).links(kStart)),
            (std::vector<std::string>{"*", "member-x/*", "member-y/gpu-1"}));
  // 2 entries for 3 sites: the first sites only.
  EXPECT_EQ(names(book_of_nine(2, kStart).links(kStart)),
            (std::vector<std::string>{"*", "member-x/*"}));
}

TEST(LinkBookAggregation, AgedOutPeersAreNotAggregated) {
  LinkBook book = book_of_nine(4, kStart);
  for (const std::string peer : {"gpu-b", "gpu-c", "gpu-d", "gpu-e", "member-x/gpu-1"}) {
    book.record_check(peer, kStart + 600s);
  }
  // At +900 s only those five answered within the ttl: "gpu-b".."gpu-e", "member-x/gpu-1".
  EXPECT_EQ(names(book.links(kStart + 900s)),
            (std::vector<std::string>{"*", "gpu-b", "gpu-c", "member-x/gpu-1"}));
  EXPECT_DOUBLE_EQ(book.links(kStart + 900s).peers.at("*").rtt_p50_ms, 0.5);
}

TEST(LinkBookAggregation, TheAnnotationStaysWithinItsSizeAndParses) {
  LinkBookOptions options;
  options.max_listed_peers = kMaxListedPeers;
  LinkBook book(options);
  // 2000 peers with 200-character names: about 300 bytes each by name, 600 KB in all.
  std::vector<std::string> peers;
  for (int i = 0; i < 2000; ++i) {
    const std::string cluster = "member-" + std::to_string(i % 4);
    std::string node = "gpu-" + std::to_string(i) + "-";
    node.resize(200, 'n');
    peers.push_back(cluster + "/" + node);
  }
  book.set_peers(peers);
  // Values of api::kSignificantDigits digits, as the annotation keeps them.
  const auto digits = api::significant;
  for (size_t i = 0; i < peers.size(); ++i) {
    const double rtt = digits(1 + 0.01 * i), gbps = digits(10 + 0.001 * i);
    book.record_full(
        peers[i], {rtt, digits(rtt * 1.5), digits(gbps / 2), gbps, "2026-11-26T08:00:00Z"}, kStart);
  }
  const api::NodeLinks links = book.links(kStart);
  const std::string value = api::format_node_links(links);
  EXPECT_LE(value.size(), api::kMaxLinksAnnotationBytes);
  EXPECT_GT(value.size(), api::kMaxLinksAnnotationBytes * 3 / 4) << "as many as fit by name";
  EXPECT_GT(links.peers.size(), 500u);
  // By name in name order: member-0's 500 peers all, member-2's and member-3's none.
  EXPECT_FALSE(links.peers.contains("member-0/*"));
  EXPECT_TRUE(links.peers.contains(peers[4 * 499]));
  EXPECT_TRUE(links.peers.contains("member-2/*"));
  EXPECT_TRUE(links.peers.contains("member-3/*"));
  try {
    EXPECT_EQ(api::parse_node_links(value, "member-9/gpu-self"), links);
    EXPECT_EQ(api::parse_node_links(api::format_node_links(book_of_nine(6, kStart).links(kStart)),
                                    "gpu-self")
                  .peers.size(),
              6u);
  } catch (const api::ManifestError& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(LinkBookOptionsCheck, BadOptionsNameTheOptionValueAndLimit) {
  const auto refused = [](const std::function<void(LinkBookOptions&)>& bad) {
    LinkBookOptions options;
    bad(options);
    return error_of([&] { LinkBook book(options); });
  };
  EXPECT_EQ(refused([](auto& o) { o.peer_ttl = 0s; }),
            "prober link book option peer_ttl = 0 s: must be 1 s to 86400 s");
  EXPECT_EQ(refused([](auto& o) { o.republish_after = 100000s; }),
            "prober link book option republish_after = 100000 s: must be 1 s to 86400 s");
  EXPECT_EQ(refused([](auto& o) { o.max_failures = 0; }),
            "prober link book option max_failures = 0: must be 1 to 1000");
  EXPECT_EQ(refused([](auto& o) { o.max_listed_peers = 0; }),
            "prober link book option max_listed_peers = 0: must be 1 to 2000");
  EXPECT_EQ(refused([](auto& o) { o.material_change = 1.5; }),
            "prober link book option material_change = 1.5: must be in [0, 1]");
  EXPECT_EQ(refused([](auto& o) { o.rtt_floor_ms = -1; }),
            "prober link book option rtt_floor_ms = -1: must be in [0, 60000] ms");
}

}  // namespace
}  // namespace tessel::prober
