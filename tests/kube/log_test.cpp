#include "kube/log.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kube/client.h"
#include "tests/kube/fake_transport.h"

namespace tessel::kube {
namespace {

constexpr char kToken[] = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.sig";

struct Captured {
  std::vector<std::string> lines;
  Logger logger(LogLevel level = LogLevel::kDebug) {
    return Logger("test", level, [this](std::string_view line) { lines.emplace_back(line); });
  }
};

TEST(LogTest, WritesOneLogfmtLinePerRecord) {
  Captured captured;
  captured.logger().info("watch ended", {{"resource", "pods"}, {"events", 3}, {"ok", true}});
  ASSERT_EQ(captured.lines.size(), 1u);
  const std::string& line = captured.lines[0];
  EXPECT_NE(
      line.find(" level=info component=test msg=\"watch ended\" resource=pods events=3 ok=true"),
      std::string::npos)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line[4], '-');  // starts with the timestamp
  EXPECT_EQ(line.substr(line.find(' ') - 1, 1), "Z");
}

TEST(LogTest, QuotesAndEscapesValues) {
  EXPECT_EQ(format_log_record(LogLevel::kWarning, "c", "m",
                              {{"a", ""}, {"b", "x=y"}, {"c", "say \"hi\"\nbye"}, {"d", "plain"}}),
            R"(level=warning component=c msg=m a="" b="x=y" c="say \"hi\"\nbye" d=plain)");
}

TEST(LogTest, KeysCannotForgeFields) {
  EXPECT_EQ(format_log_record(LogLevel::kInfo, "", "m", {{"a b=c", "v"}}),
            "level=info msg=m a_b_c=v");
}

TEST(LogTest, DropsRecordsBelowTheLevel) {
  Captured captured;
  Logger logger = captured.logger(LogLevel::kWarning);
  logger.info("quiet");
  logger.debug("quiet");
  logger.error("loud");
  ASSERT_EQ(captured.lines.size(), 1u);
  logger.set_level(LogLevel::kDebug);
  logger.debug("now");
  EXPECT_EQ(captured.lines.size(), 2u);
}

TEST(LogTest, WithAddsFieldsToEveryRecordAndSharesTheSink) {
  Captured captured;
  const Logger base = captured.logger();
  const Logger scoped = base.with({{"controller", "trainingjob"}});
  scoped.info("reconciled", {{"key", "default/gpt-a"}});
  base.info("plain");
  ASSERT_EQ(captured.lines.size(), 2u);
  EXPECT_NE(captured.lines[0].find("controller=trainingjob key=default/gpt-a"), std::string::npos);
  EXPECT_EQ(captured.lines[1].find("controller="), std::string::npos);
}

TEST(LogTest, ParsesLevelNames) {
  EXPECT_EQ(parse_log_level("WARN"), LogLevel::kWarning);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  try {
    parse_log_level("loud");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("loud"), std::string::npos);
  }
}

TEST(LogTest, NeverWritesATokenInASensitiveField) {
  Captured captured;
  const Logger logger = captured.logger();
  for (const char* key : {"token", "Authorization", "bearer_token", "client-key", "password",
                          "clientKeyData", "secret"}) {
    logger.info("config", {{key, kToken}});
  }
  for (const std::string& line : captured.lines) {
    EXPECT_EQ(line.find(kToken), std::string::npos) << line;
    EXPECT_NE(line.find("<redacted>"), std::string::npos) << line;
  }
}

TEST(LogTest, NeverWritesABearerCredentialAnywhere) {
  Captured captured;
  const Logger logger = captured.logger();
  const std::string header = std::string("Bearer ") + kToken;
  logger.error("request failed: Authorization: " + header + ", retrying",
               {{"header", header}, {"detail", "basic dXNlcjpwYXNz and more"}});
  ASSERT_EQ(captured.lines.size(), 1u);
  const std::string& line = captured.lines[0];
  EXPECT_EQ(line.find(kToken), std::string::npos) << line;
  EXPECT_EQ(line.find("dXNlcjpwYXNz"), std::string::npos) << line;
  EXPECT_NE(line.find("Bearer <redacted>, retrying"), std::string::npos) << line;
  EXPECT_NE(line.find("and more"), std::string::npos) << line;
}

// The client's own log lines, through a whole failing and retried exchange, name no credential
// even when the server echoes one back.
TEST(LogTest, ClientLogsNoTokenEchoedByTheServer) {
  Captured captured;
  ClientOptions options;
  options.qps = 0;
  options.sleeper = [](std::chrono::nanoseconds) {};
  options.logger = std::make_shared<const Logger>(captured.logger());
  auto transport = std::make_shared<testing::FakeTransport>();
  const std::string echoed = std::string("Authorization: Bearer ") + kToken;
  transport->push(testing::answer(503, {{"kind", "Status"}, {"code", 503}, {"message", echoed}},
                                  {{"Warning", "299 - \"" + echoed + "\""}}));
  transport->push(
      testing::answer(200, {{"kind", "Pod"}}, {{"Warning", "299 - \"" + echoed + "\""}}));
  Client client(transport, options);
  client.request("GET", "/api/v1/namespaces/default/pods/p");
  ASSERT_FALSE(captured.lines.empty());
  for (const std::string& line : captured.lines) {
    EXPECT_EQ(line.find(kToken), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace tessel::kube
