// The retry policy of the REST client: which failed attempts are tried again, and after how
// long. Pure logic (no sockets, no clock): the transport reports each attempt as an
// AttemptOutcome and sleeps through an injected Sleeper, so tests run without waiting.
//
// What is retried:
// - 429 Too Many Requests, for every method: kube-apiserver's priority-and-fairness and
//   max-in-flight filters answer 429 before any handler runs, so nothing was applied.
// - 5xx except 501 Not Implemented, for idempotent methods only (GET, HEAD, OPTIONS, PUT,
//   DELETE). A POST or PATCH that got a 5xx may have been applied (a 504 from a proxy, a 500
//   after the write), so it is handed back to the caller, whose reconcile loop reads the state
//   again before repeating it. client-go retries 429/5xx only when a Retry-After header came
//   with it; tessel also retries without one, using exponential backoff.
// - Connection errors and timeouts (no HTTP answer): for idempotent methods always; for POST
//   and PATCH only when the request was never sent (connection refused, DNS failure, connect
//   timeout), as client-go does not retry writes whose fate is unknown.
// - Any other failure (a TLS verification error, a malformed URL) is not transient: never.
// Every other 4xx is an answer about the request itself and is never retried.
//
// Retry-After is honoured exactly, as the delay instead of the backoff (client-go sleeps for
// it as given). One longer than Backoff::cap is not waited for: the attempt is handed back so
// that the caller can requeue the work for later instead of blocking a worker that long.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace tessel::kube {

// The shape of k8s.io/apimachinery/pkg/util/wait.Backoff.
struct Backoff {
  std::chrono::nanoseconds initial = std::chrono::milliseconds(500);
  double factor = 2.0;
  // Each delay is multiplied by 1 + jitter * U[0,1), so that clients failing together do not
  // retry together.
  double jitter = 0.1;
  int steps = 5;  // attempts in all, the first one included
  // Bounds the delay before jitter, as in wait.Backoff: clients that all reached the cap still
  // spread over [cap, cap * (1 + jitter)).
  std::chrono::nanoseconds cap = std::chrono::seconds(30);
};

// The successive delays of one request's retries. Deterministic for a given seed: the uniform
// variate is built from the raw bits of std::mt19937_64, which the standard fixes, unlike
// std::uniform_real_distribution.
class BackoffSequence {
 public:
  BackoffSequence(const Backoff& backoff, std::uint64_t seed);

  // The delay before the next retry: initial * factor^n on the n-th call (from 0), capped,
  // then jittered.
  std::chrono::nanoseconds next();

  int retries() const { return retries_; }  // calls to next() so far
  int max_attempts() const;                 // Backoff::steps, at least 1
  std::chrono::nanoseconds cap() const { return backoff_.cap; }

 private:
  Backoff backoff_;
  double base_ns_;  // the un-jittered delay that next() hands out
  int retries_ = 0;
  std::mt19937_64 rng_;
};

// What one attempt of a request came to, as the transport saw it.
struct AttemptOutcome {
  bool ok = false;
  int http_status = 0;  // 0 when no HTTP answer came
  std::optional<int> retry_after_seconds;
  bool connection_error = false;  // refused, reset, closed early, name not resolved
  bool timed_out = false;         // connect or transfer timeout
  // Whether the request may have reached the server. True unless the transport knows it was
  // not sent: only that makes a failed POST or PATCH safe to repeat.
  bool request_sent = true;
  std::string method = "GET";
};

enum class Failure {
  None,        // the attempt succeeded
  HttpStatus,  // an HTTP error answer
  Connection,  // no answer: the connection failed
  Timeout,     // no answer in time
  Other,       // a failure that waiting does not cure
};

Failure classify(const AttemptOutcome& outcome);

// GET, HEAD, OPTIONS, PUT, DELETE: repeating one does not apply it twice. (A repeated PUT with
// a resourceVersion gets 409 Conflict; a repeated DELETE gets 404 Not Found.)
bool is_idempotent(std::string_view method);

// 429 and 5xx except 501, as ApiError::is_retryable.
bool is_retryable_status(int http_status);

struct RetryDecision {
  bool retry = false;
  std::chrono::nanoseconds delay{0};  // to sleep before the next attempt, when retrying
  // A short line for logs, e.g. "429 Too Many Requests, Retry-After 2 s; attempt 2 of 5 in 2 s".
  std::string reason;
};

// Decides after the attempt numbered sequence.retries() + 1; a decision to retry advances the
// sequence (also when Retry-After sets the delay, so the backoff depends only on the attempt).
RetryDecision decide(const AttemptOutcome& outcome, BackoffSequence& sequence);

using Sleeper = std::function<void(std::chrono::nanoseconds)>;

struct RetryResult {
  AttemptOutcome outcome;  // of the last attempt
  int attempts = 0;
  std::string reason;  // of the last decision: why it stopped
};

// Calls attempt() until it succeeds or decide() says stop, sleeping the decided delay between
// attempts. attempt() keeps whatever else it needs (the response body) in its own captures.
// on_retry, when set, sees each decision to retry before the sleep, for a log line.
RetryResult with_retries(const std::function<AttemptOutcome()>& attempt, const Backoff& backoff,
                         const Sleeper& sleep, std::uint64_t seed,
                         const std::function<void(const RetryDecision&)>& on_retry = {});

}  // namespace tessel::kube
