// Reflector::failure(): the last list or watch error and when the failures began, until a list
// or a watch event succeeds; a caller tells "refused" from "still connecting" by it.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "kube/clock.h"
#include "kube/reflector.h"
#include "tests/kube/fake_transport.h"
#include "tests/kube/waiting.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using testing::answer;
using testing::require;

const ResourceInfo& nodes() {
  static const ResourceRegistry registry;
  return *registry.find_resource("", "nodes");
}

json node_list(const std::string& rv) {
  return {{"kind", "NodeList"},
          {"apiVersion", "v1"},
          {"metadata", {{"resourceVersion", rv}}},
          {"items", json::array()}};
}

// The error a failure holds, rethrown and read back.
std::string error_text(const Reflector::Failure& failure) {
  try {
    std::rethrow_exception(failure.error);
  } catch (const ApiError& error) {
    return "ApiError " + error.reason();
  } catch (const TransportError& error) {
    return std::string("TransportError ") + error.what();
  }
}

TEST(ReflectorFailure, HoldsTheLastErrorAndWhenFailingBeganUntilASuccess) {
  const auto quiet =
      std::make_shared<const Logger>("test", LogLevel::kError, [](std::string_view) {});
  auto transport = std::make_shared<testing::FakeTransport>();
  ClientOptions client_options;
  client_options.qps = 0;
  client_options.backoff.steps = 1;
  client_options.logger = quiet;
  Client client(transport, client_options);
  FakeClock clock;
  ReflectorOptions options;
  options.clock = &clock;
  options.backoff = reflector_backoff();
  options.logger = quiet;
  ObjectStore store;
  Reflector reflector(client, nodes(), "", store, options);
  EXPECT_FALSE(reflector.failure());

  transport->push(answer(401, {{"kind", "Status"}, {"code", 401}, {"reason", "Unauthorized"}}));
  transport->push(testing::transport_failure("connection refused", false, false, true));
  transport->push(answer(200, node_list("7")));
  testing::Scripted idle = testing::watch_body("");
  idle.hold_open = true;
  transport->push(idle);
  const Clock::time_point began = clock.now();
  std::jthread thread([&](std::stop_token stop) { reflector.run(stop); });

  require(clock.await_waiters(1, std::chrono::seconds(5)), "the first backoff");
  ASSERT_TRUE(reflector.failure());
  EXPECT_EQ(error_text(*reflector.failure()), "ApiError Unauthorized");
  EXPECT_EQ(reflector.failure()->since, began);
  EXPECT_FALSE(reflector.has_synced());

  clock.advance(std::chrono::seconds(2));
  require(testing::eventually([&] { return transport->request_count() == 2; }), "the second list");
  require(clock.await_waiters(1, std::chrono::seconds(5)), "the second backoff");
  ASSERT_TRUE(reflector.failure());
  EXPECT_NE(error_text(*reflector.failure()).find("connection refused"), std::string::npos);
  EXPECT_EQ(reflector.failure()->since, began);  // failing since the first of them

  clock.advance(std::chrono::seconds(5));
  require(transport->wait_for_open_streams(1), "the watch after the list");
  EXPECT_TRUE(reflector.has_synced());
  EXPECT_FALSE(reflector.failure());
}

}  // namespace
}  // namespace tessel::kube
