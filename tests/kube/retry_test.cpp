#include "kube/retry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace tessel::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

AttemptOutcome status(int code, std::string method = "GET") {
  AttemptOutcome outcome;
  outcome.http_status = code;
  outcome.method = std::move(method);
  return outcome;
}

AttemptOutcome connection_error(std::string method, bool request_sent) {
  AttemptOutcome outcome;
  outcome.connection_error = true;
  outcome.request_sent = request_sent;
  outcome.method = std::move(method);
  return outcome;
}

AttemptOutcome success() {
  AttemptOutcome outcome;
  outcome.ok = true;
  outcome.http_status = 200;
  return outcome;
}

TEST(BackoffSequenceTest, DelaysGrowByTheFactorWithinTheJitter) {
  BackoffSequence sequence(Backoff{}, 42);
  double base_ns = 500e6;
  for (int i = 0; i < 5; ++i) {
    const auto delay = static_cast<double>(sequence.next().count());
    EXPECT_GE(delay, base_ns) << i;
    EXPECT_LT(delay, base_ns * 1.1) << i;
    base_ns *= 2.0;
  }
  EXPECT_EQ(sequence.retries(), 5);
}

TEST(BackoffSequenceTest, WithoutJitterDelaysAreExact) {
  BackoffSequence sequence(Backoff{.initial = milliseconds(100), .factor = 3.0, .jitter = 0.0}, 1);
  EXPECT_EQ(sequence.next(), milliseconds(100));
  EXPECT_EQ(sequence.next(), milliseconds(300));
  EXPECT_EQ(sequence.next(), milliseconds(900));
}

TEST(BackoffSequenceTest, CapBoundsTheBaseAndJitterStillSpreads) {
  const Backoff backoff{.initial = seconds(1), .factor = 10.0, .jitter = 0.5, .cap = seconds(5)};
  BackoffSequence sequence(backoff, 7);
  sequence.next();  // 1 s
  std::vector<nanoseconds> capped;
  for (int i = 0; i < 20; ++i) capped.push_back(sequence.next());
  for (const auto delay : capped) {
    EXPECT_GE(delay, seconds(5));
    EXPECT_LT(delay, milliseconds(7500));
  }
  EXPECT_NE(capped.front(), capped.back());

  BackoffSequence exact(Backoff{.initial = seconds(60), .jitter = 0.0, .cap = seconds(30)}, 7);
  EXPECT_EQ(exact.next(), seconds(30));
  EXPECT_EQ(exact.next(), seconds(30));
}

TEST(BackoffSequenceTest, SameSeedGivesTheSameSequence) {
  BackoffSequence first(Backoff{}, 1234);
  BackoffSequence second(Backoff{}, 1234);
  BackoffSequence other(Backoff{}, 4321);
  bool differs = false;
  for (int i = 0; i < 5; ++i) {
    const nanoseconds delay = first.next();
    EXPECT_EQ(delay, second.next()) << i;
    differs = differs || delay != other.next();
  }
  EXPECT_TRUE(differs);
}

TEST(BackoffSequenceTest, StepsBelowOneStillAllowOneAttempt) {
  EXPECT_EQ(BackoffSequence(Backoff{.steps = 0}, 1).max_attempts(), 1);
  EXPECT_EQ(BackoffSequence(Backoff{.steps = 5}, 1).max_attempts(), 5);
}

TEST(ClassifyTest, NamesTheKindOfFailure) {
  EXPECT_EQ(classify(success()), Failure::None);
  EXPECT_EQ(classify(status(503)), Failure::HttpStatus);
  EXPECT_EQ(classify(connection_error("GET", true)), Failure::Connection);
  AttemptOutcome timeout;
  timeout.timed_out = true;
  EXPECT_EQ(classify(timeout), Failure::Timeout);
  EXPECT_EQ(classify(AttemptOutcome{}), Failure::Other);
}

TEST(DecideTest, RetriesTooManyRequestsAndServerErrors) {
  for (const int code : {429, 500, 502, 503, 504}) {
    BackoffSequence sequence(Backoff{}, 1);
    const RetryDecision decision = decide(status(code), sequence);
    EXPECT_TRUE(decision.retry) << code;
    EXPECT_GE(decision.delay, milliseconds(500)) << code;
    EXPECT_EQ(sequence.retries(), 1) << code;
  }
}

TEST(DecideTest, DoesNotRetryClientErrorsOrNotImplemented) {
  for (const int code : {400, 401, 403, 404, 409, 410, 422, 501}) {
    BackoffSequence sequence(Backoff{}, 1);
    const RetryDecision decision = decide(status(code), sequence);
    EXPECT_FALSE(decision.retry) << code;
    EXPECT_EQ(decision.delay, nanoseconds(0)) << code;
    EXPECT_EQ(sequence.retries(), 0) << code;
  }
}

TEST(DecideTest, DoesNotRetrySuccessOrOtherFailures) {
  BackoffSequence sequence(Backoff{}, 1);
  EXPECT_FALSE(decide(success(), sequence).retry);
  EXPECT_FALSE(decide(AttemptOutcome{}, sequence).retry);
}

TEST(DecideTest, RetryAfterSetsTheDelay) {
  BackoffSequence sequence(Backoff{}, 1);
  AttemptOutcome outcome = status(429);
  outcome.retry_after_seconds = 3;
  const RetryDecision decision = decide(outcome, sequence);
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, seconds(3));
  // The backoff still advanced: the next delay without Retry-After is the second step.
  const RetryDecision next = decide(status(503), sequence);
  EXPECT_GE(next.delay, seconds(1));
  EXPECT_LT(next.delay, milliseconds(1100));
}

TEST(DecideTest, RetryAfterLongerThanTheCapIsHandedBack) {
  BackoffSequence sequence(Backoff{.cap = seconds(30)}, 1);
  AttemptOutcome outcome = status(503);
  outcome.retry_after_seconds = 60;
  const RetryDecision decision = decide(outcome, sequence);
  EXPECT_FALSE(decision.retry);
  EXPECT_EQ(decision.reason,
            "503 Service Unavailable, Retry-After 60 s; longer than the 30 s cap, not retried");
}

TEST(DecideTest, RetriesConnectionErrorsOnlyWhenRepeatingIsSafe) {
  const auto retried = [](const AttemptOutcome& outcome) {
    BackoffSequence sequence(Backoff{}, 1);
    return decide(outcome, sequence).retry;
  };
  EXPECT_TRUE(retried(connection_error("GET", true)));
  EXPECT_TRUE(retried(connection_error("PUT", true)));
  EXPECT_TRUE(retried(connection_error("DELETE", true)));
  EXPECT_TRUE(retried(connection_error("POST", false)));
  EXPECT_FALSE(retried(connection_error("POST", true)));
  EXPECT_TRUE(retried(connection_error("PATCH", false)));
  EXPECT_FALSE(retried(connection_error("PATCH", true)));

  AttemptOutcome timeout;
  timeout.timed_out = true;
  timeout.method = "GET";
  EXPECT_TRUE(retried(timeout));
  timeout.method = "POST";
  EXPECT_FALSE(retried(timeout));
}

TEST(DecideTest, WritesRetryTooManyRequestsButNotServerErrors) {
  for (const char* method : {"POST", "PATCH"}) {
    BackoffSequence sequence(Backoff{}, 1);
    EXPECT_TRUE(decide(status(429, method), sequence).retry) << method;
    EXPECT_FALSE(decide(status(503, method), sequence).retry) << method;
  }
  BackoffSequence sequence(Backoff{}, 1);
  EXPECT_TRUE(decide(status(503, "PUT"), sequence).retry);
}

TEST(DecideTest, StopsAfterSteps) {
  BackoffSequence sequence(Backoff{.steps = 3}, 1);
  EXPECT_TRUE(decide(status(500), sequence).retry);
  EXPECT_TRUE(decide(status(500), sequence).retry);
  const RetryDecision last = decide(status(500), sequence);
  EXPECT_FALSE(last.retry);
  EXPECT_EQ(last.reason, "500 Internal Server Error; gave up after 3 attempts");
}

TEST(DecideTest, ReasonsReadWell) {
  BackoffSequence sequence(Backoff{.jitter = 0.0}, 1);
  AttemptOutcome throttled = status(429);
  throttled.retry_after_seconds = 2;
  EXPECT_EQ(decide(throttled, sequence).reason,
            "429 Too Many Requests, Retry-After 2 s; attempt 2 of 5 in 2 s");
  EXPECT_EQ(decide(status(503), sequence).reason, "503 Service Unavailable; attempt 3 of 5 in 1 s");
  EXPECT_EQ(decide(connection_error("GET", false), sequence).reason,
            "connection error before sending; attempt 4 of 5 in 2 s");
  EXPECT_EQ(decide(status(404), sequence).reason, "404 Not Found; not retryable");
  EXPECT_EQ(decide(status(500, "POST"), sequence).reason,
            "500 Internal Server Error; POST not retried, it may have been applied");
  EXPECT_EQ(decide(success(), sequence).reason, "succeeded; attempt 4 of 5");

  BackoffSequence fine(Backoff{.initial = milliseconds(250), .factor = 4.2, .jitter = 0.0}, 1);
  EXPECT_EQ(decide(status(502), fine).reason, "502 Bad Gateway; attempt 2 of 5 in 250 ms");
  EXPECT_EQ(decide(status(502), fine).reason, "502 Bad Gateway; attempt 3 of 5 in 1.05 s");
}

TEST(WithRetriesTest, SleepsExactlyTheDecidedDelaysUntilSuccess) {
  std::vector<AttemptOutcome> script = {status(503), status(429), success()};
  script[1].retry_after_seconds = 1;
  int calls = 0;
  std::vector<nanoseconds> slept;
  std::vector<RetryDecision> retries;
  const RetryResult result =
      with_retries([&] { return script[calls++]; }, Backoff{},
                   [&](nanoseconds delay) { slept.push_back(delay); }, 99,
                   [&](const RetryDecision& decision) { retries.push_back(decision); });

  EXPECT_TRUE(result.outcome.ok);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(retries.size(), 2u);
  ASSERT_EQ(slept.size(), 2u);
  EXPECT_EQ(slept[0], retries[0].delay);
  EXPECT_EQ(slept[1], retries[1].delay);
  EXPECT_EQ(slept[1], seconds(1));

  // The same seed replays the same first delay.
  BackoffSequence replay(Backoff{}, 99);
  EXPECT_EQ(slept[0], replay.next());
}

TEST(WithRetriesTest, GivesUpAfterStepsWithTheLastOutcome) {
  int calls = 0;
  std::vector<nanoseconds> slept;
  const RetryResult result = with_retries(
      [&] {
        ++calls;
        return status(503);
      },
      Backoff{.steps = 4}, [&](nanoseconds delay) { slept.push_back(delay); }, 5);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(result.attempts, 4);
  EXPECT_EQ(slept.size(), 3u);
  EXPECT_EQ(result.outcome.http_status, 503);
  EXPECT_EQ(result.reason, "503 Service Unavailable; gave up after 4 attempts");
}

TEST(WithRetriesTest, StopsAtOnceOnAFailureNotToRetry) {
  int sleeps = 0;
  const RetryResult result =
      with_retries([] { return status(404); }, Backoff{}, [&](nanoseconds) { ++sleeps; }, 5);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(sleeps, 0);
  EXPECT_EQ(result.reason, "404 Not Found; not retryable");
}

}  // namespace
}  // namespace tessel::kube
