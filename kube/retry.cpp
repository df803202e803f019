#include "kube/retry.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tessel::kube {

namespace {

using std::chrono::nanoseconds;

// U[0,1) from the top 53 bits of one draw: every double in it is equally likely and the same
// on every standard library.
double unit_interval(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::string status_text(int code) {
  switch (code) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Request Entity Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "HTTP error";
  }
}

// "350 ms" under a second, else seconds to two decimals without trailing zeros: "2 s", "1.05 s".
std::string format_delay(nanoseconds delay) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  const long long centis = std::llround(static_cast<double>(delay.count()) / 1e7);
  std::string text = std::to_string(centis / 100);
  if (const long long frac = centis % 100; frac != 0) {
    text += '.';
    text += static_cast<char>('0' + frac / 10);
    if (frac % 10 != 0) text += static_cast<char>('0' + frac % 10);
  }
  return text + " s";
}

std::string describe(const AttemptOutcome& outcome) {
  switch (classify(outcome)) {
    case Failure::None:
      return "succeeded";
    case Failure::HttpStatus: {
      std::string text =
          std::to_string(outcome.http_status) + " " + status_text(outcome.http_status);
      if (outcome.retry_after_seconds) {
        text += ", Retry-After " + std::to_string(*outcome.retry_after_seconds) + " s";
      }
      return text;
    }
    case Failure::Connection:
      return outcome.request_sent ? "connection error" : "connection error before sending";
    case Failure::Timeout:
      return outcome.request_sent ? "timeout" : "timeout before sending";
    case Failure::Other:
      break;
  }
  return "transport error";
}

// Whether repeating the request cannot apply it twice, whatever the failure was.
bool safe_to_repeat(const AttemptOutcome& outcome) {
  return is_idempotent(outcome.method) || !outcome.request_sent;
}

RetryDecision stop(const AttemptOutcome& outcome, std::string_view why) {
  return {false, nanoseconds(0), describe(outcome) + "; " + std::string(why)};
}

}  // namespace

BackoffSequence::BackoffSequence(const Backoff& backoff, std::uint64_t seed)
    : backoff_(backoff),
      base_ns_(static_cast<double>(std::min(backoff.initial, backoff.cap).count())),
      rng_(seed) {}

nanoseconds BackoffSequence::next() {
  const double delay_ns = base_ns_ * (1.0 + backoff_.jitter * unit_interval(rng_));
  base_ns_ = std::min(base_ns_ * backoff_.factor, static_cast<double>(backoff_.cap.count()));
  ++retries_;
  return nanoseconds(static_cast<nanoseconds::rep>(delay_ns));
}

int BackoffSequence::max_attempts() const { return std::max(backoff_.steps, 1); }

Failure classify(const AttemptOutcome& outcome) {
  if (outcome.ok) return Failure::None;
  if (outcome.http_status != 0) return Failure::HttpStatus;
  if (outcome.timed_out) return Failure::Timeout;
  if (outcome.connection_error) return Failure::Connection;
  return Failure::Other;
}

bool is_idempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "PUT" ||
         method == "DELETE";
}

bool is_retryable_status(int http_status) {
  return http_status == 429 || (http_status >= 500 && http_status <= 599 && http_status != 501);
}

RetryDecision decide(const AttemptOutcome& outcome, BackoffSequence& sequence) {
  const int attempt = sequence.retries() + 1;
  const int max_attempts = sequence.max_attempts();
  switch (classify(outcome)) {
    case Failure::None:
      return stop(outcome,
                  "attempt " + std::to_string(attempt) + " of " + std::to_string(max_attempts));
    case Failure::Other:
      return stop(outcome, "not retryable");
    case Failure::HttpStatus:
      if (!is_retryable_status(outcome.http_status)) return stop(outcome, "not retryable");
      // A 429 was refused before any handler ran; a 5xx may come after the write.
      if (outcome.http_status != 429 && !safe_to_repeat(outcome)) {
        return stop(outcome, outcome.method + " not retried, it may have been applied");
      }
      break;
    case Failure::Connection:
    case Failure::Timeout:
      if (!safe_to_repeat(outcome)) {
        return stop(outcome, outcome.method + " not retried, it may have been applied");
      }
      break;
  }
  if (attempt >= max_attempts) {
    return stop(outcome, "gave up after " + std::to_string(attempt) + " attempts");
  }
  std::optional<nanoseconds> retry_after;
  if (outcome.http_status != 0 && outcome.retry_after_seconds) {
    retry_after = std::chrono::seconds(std::max(*outcome.retry_after_seconds, 0));
    if (*retry_after > sequence.cap()) {
      return stop(outcome, "longer than the " + format_delay(sequence.cap()) + " cap, not retried");
    }
  }
  const nanoseconds backoff_delay = sequence.next();
  const nanoseconds delay = retry_after.value_or(backoff_delay);
  return {true, delay,
          describe(outcome) + "; attempt " + std::to_string(attempt + 1) + " of " +
              std::to_string(max_attempts) + " in " + format_delay(delay)};
}

RetryResult with_retries(const std::function<AttemptOutcome()>& attempt, const Backoff& backoff,
                         const Sleeper& sleep, std::uint64_t seed,
                         const std::function<void(const RetryDecision&)>& on_retry) {
  BackoffSequence sequence(backoff, seed);
  for (int attempts = 1;; ++attempts) {
    AttemptOutcome outcome = attempt();
    RetryDecision decision = decide(outcome, sequence);
    if (!decision.retry) return {std::move(outcome), attempts, std::move(decision.reason)};
    if (on_retry) on_retry(decision);
    sleep(decision.delay);
  }
}

}  // namespace tessel::kube
