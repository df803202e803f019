// A small libcurl client for the API test server's own tests: whole requests, and watches
// read line by line on a thread of their own.
#pragma once

#include <curl/curl.h>
#include <strings.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessel::testing {

// The fixture client's User-Agent: the server names the field manager "tessel-operator".
inline constexpr const char* kFixtureUserAgent = "tessel-operator/0.1.0 (linux/amd64)";

struct ClientResponse {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::vector<std::string> header_values(const std::string& name) const {
    std::vector<std::string> values;
    for (const auto& [key, value] : headers) {
      if (strcasecmp(key.c_str(), name.c_str()) == 0) values.push_back(value);
    }
    return values;
  }
};

struct ClientCredentials {
  std::string token;     // bearer token; "" for none
  std::string cert_pem;  // client certificate; "" for none
  std::string key_pem;
};

class TestClient {
 public:
  TestClient(std::string url, std::string ca_pem, ClientCredentials credentials)
      : url_(std::move(url)), ca_pem_(std::move(ca_pem)), credentials_(std::move(credentials)) {}

  ClientResponse request(const std::string& method, const std::string& target,
                         const std::string& body = "",
                         const std::string& content_type = "application/json",
                         const std::string& accept = "application/json",
                         const std::vector<std::string>& extra_headers = {}) const {
    ClientResponse response;
    CURL* curl = prepare(target);
    curl_slist* headers = base_headers(accept);
    for (const std::string& header : extra_headers) {
      headers = curl_slist_append(headers, header.c_str());
    }
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
      headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &append_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &append_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.headers);
    const CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (code != CURLE_OK) {
      throw std::runtime_error(method + " " + target + ": " + curl_easy_strerror(code));
    }
    return response;
  }

  ClientResponse get(const std::string& target,
                     const std::string& accept = "application/json") const {
    return request("GET", target, "", "", accept);
  }
  ClientResponse send(const std::string& method, const std::string& target,
                      const nlohmann::json& body,
                      const std::string& content_type = "application/json") const {
    return request(method, target, body.is_null() ? "" : body.dump(), content_type);
  }

  // A watch: the response body's lines, read as they come.
  class Watch {
   public:
    Watch(const TestClient& client, const std::string& target, const std::string& accept) {
      curl_ = client.prepare(target);
      headers_ = client.base_headers(accept);
      curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
      curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &Watch::receive);
      curl_easy_setopt(curl_, CURLOPT_WRITEDATA, this);
      curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, &Watch::progress);
      curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, this);
      thread_ = std::thread([this] {
        const CURLcode code = curl_easy_perform(curl_);
        std::lock_guard lock(mutex_);
        result_ = code;
        curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status_);
        done_ = true;
        changed_.notify_all();
      });
    }
    ~Watch() {
      {
        std::lock_guard lock(mutex_);
        stop_ = true;
      }
      thread_.join();
      curl_slist_free_all(headers_);
      curl_easy_cleanup(curl_);
    }
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

    // The next line, or nullopt when the stream ended or the timeout passed first.
    std::optional<nlohmann::json> next(
        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, timeout, [&] { return !lines_.empty() || done_; });
      if (lines_.empty()) return std::nullopt;
      std::string line = std::move(lines_.front());
      lines_.pop_front();
      return nlohmann::json::parse(line);
    }
    // Waits for the end of the stream; returns libcurl's result (CURLE_OK for a clean end).
    std::optional<CURLcode> wait_end(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
      std::unique_lock lock(mutex_);
      if (!changed_.wait_for(lock, timeout, [&] { return done_; })) return std::nullopt;
      return result_;
    }
    long status() {
      std::lock_guard lock(mutex_);
      return status_;
    }

   private:
    static std::size_t receive(char* data, std::size_t size, std::size_t count, void* self) {
      auto* watch = static_cast<Watch*>(self);
      std::lock_guard lock(watch->mutex_);
      watch->partial_.append(data, size * count);
      std::size_t newline;
      while ((newline = watch->partial_.find('\n')) != std::string::npos) {
        watch->lines_.push_back(watch->partial_.substr(0, newline));
        watch->partial_.erase(0, newline + 1);
      }
      watch->changed_.notify_all();
      return size * count;
    }
    static int progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
      auto* watch = static_cast<Watch*>(self);
      std::lock_guard lock(watch->mutex_);
      return watch->stop_ ? 1 : 0;
    }

    CURL* curl_ = nullptr;
    curl_slist* headers_ = nullptr;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::string> lines_;
    std::string partial_;
    bool done_ = false;
    bool stop_ = false;
    CURLcode result_ = CURLE_OK;
    long status_ = 0;
  };

 private:
  CURL* prepare(const std::string& target) const {
    CURL* curl = curl_easy_init();
    curl_easy_setopt(curl, CURLOPT_URL, (url_ + target).c_str());
    curl_easy_setopt(curl, CURLOPT_USERAGENT, kFixtureUserAgent);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    if (!ca_pem_.empty()) {
      curl_blob ca{const_cast<char*>(ca_pem_.data()), ca_pem_.size(), CURL_BLOB_COPY};
      curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (!credentials_.cert_pem.empty()) {
      curl_blob cert{const_cast<char*>(credentials_.cert_pem.data()), credentials_.cert_pem.size(),
                     CURL_BLOB_COPY};
      curl_blob key{const_cast<char*>(credentials_.key_pem.data()), credentials_.key_pem.size(),
                    CURL_BLOB_COPY};
      curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
    }
    return curl;
  }

  curl_slist* base_headers(const std::string& accept) const {
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, ("Accept: " + accept).c_str());
    headers = curl_slist_append(headers, "Expect:");
    if (!credentials_.token.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + credentials_.token).c_str());
    }
    return headers;
  }

  static std::size_t append_body(char* data, std::size_t size, std::size_t count, void* body) {
    static_cast<std::string*>(body)->append(data, size * count);
    return size * count;
  }
  static std::size_t append_header(char* data, std::size_t size, std::size_t count, void* out) {
    std::string line(data, size * count);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
      static_cast<std::vector<std::pair<std::string, std::string>>*>(out)->emplace_back(
          line.substr(0, colon), value);
    }
    return size * count;
  }

  std::string url_;
  std::string ca_pem_;
  ClientCredentials credentials_;
};

}  // namespace tessel::testing
