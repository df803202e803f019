// A scripted HttpTransport for the client's tests: the test queues the answers (whole responses,
// streamed watch bodies, transport failures), the client's requests are recorded in order.
// It is only the injection point: the tests' expectations are about requests and answers, so
// the same tests can run against a real API server behind the curl transport.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "kube/http_transport.h"
#include "tests/kube/fixtures.h"

namespace tessel::kube::testing {

// One scripted answer.
struct Scripted {
  HttpResponse response;            // status, headers; body for round_trip and error answers
  std::vector<std::string> chunks;  // the body of a 2xx stream, chunk by chunk
  // Thrown instead of answering (round_trip), or after the chunks (stream: a broken watch).
  std::optional<TransportError> error;
  // stream: after the chunks, keep the body open until the stop token is triggered.
  bool hold_open = false;
};

inline Scripted answer(int status, const nlohmann::json& body, HeaderList headers = {}) {
  Scripted scripted;
  scripted.response.status = status;
  scripted.response.headers = std::move(headers);
  scripted.response.headers.emplace_back("Content-Type", "application/json");
  scripted.response.body = body.is_null() ? "" : body.dump();
  return scripted;
}

inline Scripted transport_failure(const std::string& what, bool timed_out, bool request_sent,
                                  bool permanent = false) {
  Scripted scripted;
  scripted.error.emplace(what, timed_out, request_sent, permanent);
  return scripted;
}

// A 200 watch whose body arrives in chunks of at most chunk_size bytes (so that events are
// split across chunks), then ends, breaks (error) or stays open (hold_open).
inline Scripted watch_body(const std::string& body, std::size_t chunk_size = 61) {
  Scripted scripted;
  scripted.response.status = 200;
  scripted.response.headers = {{"Content-Type", "application/json"},
                               {"Transfer-Encoding", "chunked"}};
  for (std::size_t at = 0; at < body.size(); at += chunk_size) {
    scripted.chunks.push_back(body.substr(at, chunk_size));
  }
  return scripted;
}

inline std::string watch_line(const std::string& type, const nlohmann::json& object) {
  return nlohmann::json{{"type", type}, {"object", object}}.dump() + "\n";
}

// The raw bytes of a captured watch body (watch-*.jsonl).
inline std::string fixture_text(const std::string& name) {
  std::ifstream in(kFixtures / name, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + (kFixtures / name).string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The recorded response of a request/response fixture, as the server sent it (a header that
// came several times is sent several times).
inline Scripted fixture_answer(const std::string& name) {
  const nlohmann::json recorded = fixture(name).at("response");
  Scripted scripted;
  scripted.response.status = recorded.at("status").get<int>();
  for (const auto& [key, value] : recorded.at("headers").items()) {
    if (value.is_array()) {
      for (const auto& each : value)
        scripted.response.headers.emplace_back(key, each.get<std::string>());
    } else {
      scripted.response.headers.emplace_back(key, value.get<std::string>());
    }
  }
  const nlohmann::json& body = recorded.at("body");
  scripted.response.body = body.is_string() ? body.get<std::string>() : body.dump();
  return scripted;
}

class FakeTransport final : public HttpTransport {
 public:
  // How long a request waits for an answer the test has not queued yet before failing.
  static constexpr auto kAnswerTimeout = std::chrono::seconds(5);

  void push(Scripted scripted) {
    {
      std::lock_guard lock(mutex_);
      script_.push_back(std::move(scripted));
    }
    changed_.notify_all();
  }

  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  HttpRequest request(std::size_t index) const {
    std::lock_guard lock(mutex_);
    if (index >= requests_.size()) {
      throw std::out_of_range("request " + std::to_string(index) + " was never made");
    }
    return requests_[index];
  }
  std::size_t request_count() const {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }
  std::size_t unanswered() const {
    std::lock_guard lock(mutex_);
    return script_.size();
  }
  // Waits (real time, bounded) until at least n requests were made.
  bool wait_for_requests(std::size_t n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kAnswerTimeout, [&] { return requests_.size() >= n; });
  }
  // Waits until a stream call holds a body open (hold_open), e.g. an idle watch.
  bool wait_for_open_streams(int n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kAnswerTimeout, [&] { return open_streams_ >= n; });
  }

  HttpResponse round_trip(const HttpRequest& request) override {
    Scripted scripted = next(request, {});
    if (scripted.error) throw *scripted.error;
    return scripted.response;
  }

  HttpResponse stream(const HttpRequest& request,
                      const std::function<bool(std::string_view)>& on_data,
                      std::stop_token stop) override {
    Scripted scripted = next(request, stop);
    HttpResponse response = scripted.response;
    if (stop.stop_requested()) return response;
    if (response.status < 200 || response.status > 299) return response;
    response.body.clear();
    for (const std::string& chunk : scripted.chunks) {
      if (stop.stop_requested() || !on_data(chunk)) return response;
    }
    if (scripted.error) throw *scripted.error;
    if (scripted.hold_open) {
      std::unique_lock lock(mutex_);
      ++open_streams_;
      changed_.notify_all();
      std::condition_variable_any held;
      held.wait(lock, stop, [] { return false; });
      --open_streams_;
    }
    return response;
  }

 private:
  // The next scripted answer, waiting for the test to queue one; a stream stopped before any
  // answer came gets status 0, as the curl transport returns it.
  Scripted next(const HttpRequest& request, std::stop_token stop) {
    std::unique_lock lock(mutex_);
    requests_.push_back(request);
    changed_.notify_all();
    std::condition_variable_any& cv = changed_;
    const bool ready = cv.wait_for(lock, stop, kAnswerTimeout, [&] { return !script_.empty(); });
    if (!ready) {
      if (stop.stop_requested()) return Scripted{};
      throw std::logic_error("fake transport: no answer scripted for " + request.method + " " +
                             request.target);
    }
    Scripted scripted = std::move(script_.front());
    script_.pop_front();
    return scripted;
  }

  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<Scripted> script_;
  std::vector<HttpRequest> requests_;
  int open_streams_ = 0;
};

// The value of a request header (first of that name, case-insensitive), "" when absent.
inline std::string header_of(const HttpRequest& request, std::string_view name) {
  for (const auto& [key, value] : request.headers) {
    if (key.size() == name.size() &&
        std::equal(key.begin(), key.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return value;
    }
  }
  return "";
}

}  // namespace tessel::kube::testing
