// The libcurl HttpTransport.
//
// Connection reuse: libcurl's shared connection cache (CURL_LOCK_DATA_CONNECT) is documented
// as unsupported between concurrent threads, so connections are pooled instead: each pooled
// slot is an easy handle with a multi handle of its own, whose connection cache keeps the
// slot's keep-alive connection between requests. A request takes the most recently returned
// idle slot (so sequential requests, from any thread, reuse one warm connection); concurrent
// requests take different slots, as HTTP/1.1 needs a connection per request in flight. DNS
// results and TLS sessions are shared by all slots through a locked CURLSH.
//
// Every transfer runs in the slot's multi handle, so that stream() can wait in
// curl_multi_poll() and be woken by curl_multi_wakeup() the moment its stop_token is
// requested, and can measure silence between chunks itself (with millisecond precision,
// unlike CURLOPT_LOW_SPEED_TIME).
//
// tls_server_name (kubeconfig's tls-server-name): the request URL carries the server name,
// so that libcurl sends it as SNI and verifies the certificate against it, CURLOPT_CONNECT_TO
// sends the connection to the server URL's real host and port, and the Host header keeps the
// server URL's authority, as client-go does with tls.Config.ServerName.
//
// HTTP/1.1 only; redirects are not followed. Without config.proxy_url, libcurl's proxy
// environment variables apply (https_proxy, http_proxy, no_proxy), as Go's
// ProxyFromEnvironment does for client-go.
#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/http_transport.h"

namespace tessel::kube {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kMaxIdleSlots = 16;
constexpr milliseconds kLongestPoll{1000};

// curl_global_init, once per process, before any handle exists (a function-local static is
// initialized exactly once even when threads race to it).
void initialize_curl() {
  static const CURLcode result = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (result != CURLE_OK) {
    throw std::runtime_error(std::string("libcurl initialization failed: ") +
                             curl_easy_strerror(result));
  }
}

bool is_success(int status) { return status >= 200 && status <= 299; }

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

void append(Slist& list, const std::string& line) {
  curl_slist* extended = curl_slist_append(list.get(), line.c_str());
  if (extended == nullptr) throw std::bad_alloc();
  static_cast<void>(list.release());
  list.reset(extended);
}

bool has_header(const HeaderList& headers, std::string_view name) {
  return std::ranges::any_of(headers, [name](const auto& header) {
    return std::ranges::equal(header.first, name, [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) ==
             std::tolower(static_cast<unsigned char>(b));
    });
  });
}

// DNS results and TLS sessions, shared by every handle of one transport, across threads.
class CurlShare {
 public:
  CurlShare() : share_(curl_share_init()) {
    if (share_ == nullptr) throw std::runtime_error("libcurl: curl_share_init failed");
    curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &CurlShare::lock);
    curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &CurlShare::unlock);
    curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  ~CurlShare() { curl_share_cleanup(share_); }
  CurlShare(const CurlShare&) = delete;
  CurlShare& operator=(const CurlShare&) = delete;

  CURLSH* get() const { return share_; }

 private:
  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<CurlShare*>(self)->mutexes_[static_cast<std::size_t>(data)].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<CurlShare*>(self)->mutexes_[static_cast<std::size_t>(data)].unlock();
  }

  CURLSH* share_;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> mutexes_;
};

// An easy handle and the multi handle it runs in; the multi handle's connection cache holds
// the slot's idle keep-alive connection.
struct Slot {
  CURL* easy = curl_easy_init();
  CURLM* multi = curl_multi_init();

  Slot() {
    if (easy == nullptr || multi == nullptr) throw std::runtime_error("libcurl: out of memory");
  }
  ~Slot() {
    curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
};

class SlotPool {
 public:
  std::unique_ptr<Slot> acquire() {
    {
      const std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        auto slot = std::move(idle_.back());
        idle_.pop_back();
        return slot;
      }
    }
    return std::make_unique<Slot>();
  }

  void release(std::unique_ptr<Slot> slot) {
    const std::lock_guard lock(mutex_);
    if (idle_.size() < kMaxIdleSlots) idle_.push_back(std::move(slot));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Slot>> idle_;  // the most recently returned last
};

// The state of one transfer that libcurl's callbacks write to.
struct Transfer {
  HttpResponse response;
  const std::function<bool(std::string_view)>* on_data = nullptr;  // stream() only
  bool handler_stopped = false;                                    // on_data returned false
  std::exception_ptr handler_error;  // on_data threw; rethrown after the transfer
  Clock::time_point last_activity = Clock::now();
  char error[CURL_ERROR_SIZE] = "";

  static size_t on_header(char* data, size_t, size_t size, void* self) {
    auto& transfer = *static_cast<Transfer*>(self);
    transfer.last_activity = Clock::now();
    std::string_view line(data, size);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    if (line.starts_with("HTTP/")) {
      // A new response head (after a 100 Continue, the final one): start over.
      transfer.response.headers.clear();
      const auto space = line.find(' ');
      if (space != std::string_view::npos && line.size() >= space + 4) {
        transfer.response.status = std::atoi(std::string(line.substr(space + 1, 3)).c_str());
      }
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
        value.remove_suffix(1);
      }
      transfer.response.headers.emplace_back(std::string(line.substr(0, colon)),
                                             std::string(value));
    }
    return size;
  }

  static size_t on_body(char* data, size_t, size_t size, void* self) {
    auto& transfer = *static_cast<Transfer*>(self);
    transfer.last_activity = Clock::now();
    if (transfer.on_data == nullptr || !is_success(transfer.response.status)) {
      transfer.response.body.append(data, size);
      return size;
    }
    try {
      if ((*transfer.on_data)(std::string_view(data, size))) return size;
      transfer.handler_stopped = true;
    } catch (...) {
      transfer.handler_error = std::current_exception();
    }
    return 0;  // ends the transfer
  }
};

enum class Ending { kFinished, kStopped, kSilent };

class CurlTransport final : public HttpTransport {
 public:
  CurlTransport(const ClusterConfig& config, const TransportOptions& options)
      : config_(config), options_(options), token_(config) {
    parse_server();
    if (!config_.proxy_url.empty() && config_.proxy_url.find("://") == std::string::npos) {
      throw KubeConfigError(config_.source + ": cluster of context " + config_.name +
                            ": proxy-url has no scheme (http://, https://, socks5://)");
    }
    if (config_.client_cert_pem.empty() != config_.client_key_pem.empty()) {
      throw KubeConfigError(config_.source + ": user of context " + config_.name +
                            ": a client certificate needs its key and a key its certificate");
    }
  }

  HttpResponse round_trip(const HttpRequest& request) override {
    Transfer transfer;
    perform(request, transfer, {}, std::nullopt);
    return std::move(transfer.response);
  }

  HttpResponse stream(const HttpRequest& request,
                      const std::function<bool(std::string_view)>& on_data,
                      std::stop_token stop) override {
    Transfer transfer;
    transfer.on_data = &on_data;
    const milliseconds silence =
        request.timeout.count() > 0 ? request.timeout : options_.request_timeout;
    perform(request, transfer, stop, silence);
    return std::move(transfer.response);
  }

 private:
  // Checks the server URL and works out what tls_server_name needs.
  void parse_server() {
    std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), curl_url_cleanup);
    const auto bad_server = [&](const std::string& why) {
      return KubeConfigError(config_.source + ": cluster of context " + config_.name +
                             ": server \"" + config_.server + "\": " + why);
    };
    if (!url || curl_url_set(url.get(), CURLUPART_URL, config_.server.c_str(), 0) != CURLUE_OK) {
      throw bad_server("not a valid URL");
    }
    const auto part = [&](CURLUPart which, unsigned flags) -> std::optional<std::string> {
      char* text = nullptr;
      if (curl_url_get(url.get(), which, &text, flags) != CURLUE_OK) return std::nullopt;
      std::string value(text);
      curl_free(text);
      return value;
    };
    const std::string scheme = part(CURLUPART_SCHEME, 0).value_or("");
    if (scheme != "https" && scheme != "http") throw bad_server("the scheme must be https or http");
    if (part(CURLUPART_QUERY, 0) || part(CURLUPART_FRAGMENT, 0)) {
      throw bad_server("a query or fragment is not allowed");
    }
    base_url_ = config_.server;
    while (base_url_.ends_with('/')) base_url_.pop_back();
    if (scheme != "https" || config_.tls_server_name.empty()) return;

    const std::string host = part(CURLUPART_HOST, 0).value_or("");
    const std::string port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT).value_or("443");
    const auto explicit_port = part(CURLUPART_PORT, 0);
    host_header_ = "Host: " + host + (explicit_port ? ":" + *explicit_port : "");
    if (curl_url_set(url.get(), CURLUPART_HOST, config_.tls_server_name.c_str(), 0) != CURLUE_OK) {
      throw KubeConfigError(config_.source + ": cluster of context " + config_.name +
                            ": tls-server-name \"" + config_.tls_server_name +
                            "\" is not a valid host name");
    }
    const auto renamed = part(CURLUPART_URL, 0);
    const auto renamed_host = part(CURLUPART_HOST, 0);
    if (!renamed || !renamed_host) throw bad_server("cannot apply tls-server-name");
    base_url_ = *renamed;
    while (base_url_.ends_with('/')) base_url_.pop_back();
    append(connect_to_, *renamed_host + ":" + port + ":" + host + ":" + port);
  }

  // The request's headers, with the transport's.
  Slist headers_for(const HttpRequest& request) {
    Slist headers;
    for (const auto& [name, value] : request.headers) append(headers, name + ": " + value);
    if (!has_header(request.headers, "Authorization")) {
      const std::string token = token_.current();
      if (!token.empty()) append(headers, "Authorization: Bearer " + token);
    }
    // libcurl would label a body application/x-www-form-urlencoded; "Name:" removes a header.
    if (!has_header(request.headers, "Content-Type")) append(headers, "Content-Type:");
    if (!host_header_.empty() && !has_header(request.headers, "Host")) {
      append(headers, host_header_);
    }
    return headers;
  }

  void configure(CURL* easy, const HttpRequest& request, const curl_slist* headers,
                 Transfer& transfer, const std::string& url, bool streaming) const {
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_SHARE, share_.get());
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Transfer::on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    // Notices a peer that vanished during a long, quiet watch.
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 30L);
    if (!streaming) {
      const milliseconds timeout =
          request.timeout.count() > 0 ? request.timeout : options_.request_timeout;
      curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
      curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");  // gzip for large lists
    }

    if (request.method == "GET" && request.body.empty()) {
      curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    } else if (request.method == "HEAD") {
      curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
      if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
          request.method == "PATCH") {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(request.body.size()));
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
      }
    }

    if (config_.insecure_skip_tls_verify) {
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    } else {
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
      if (!config_.ca_pem.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &ca_blob_);
    }
    if (!config_.client_cert_pem.empty()) {
      curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cert_blob_);
      curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &key_blob_);
      curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (connect_to_) curl_easy_setopt(easy, CURLOPT_CONNECT_TO, connect_to_.get());
    if (!config_.proxy_url.empty())
      curl_easy_setopt(easy, CURLOPT_PROXY, config_.proxy_url.c_str());
  }

  // Runs one request to its end, or until `stop` or `silence` ends it. A silence limit makes it
  // a stream: no whole-request timeout, no compression.
  void perform(const HttpRequest& request, Transfer& transfer, std::stop_token stop,
               std::optional<milliseconds> silence) {
    const std::string url = base_url_ + request.target;
    const Slist headers = headers_for(request);
    std::unique_ptr<Slot> slot = pool_.acquire();
    curl_easy_reset(slot->easy);  // options only: the caches stay
    configure(slot->easy, request, headers.get(), transfer, url, silence.has_value());

    CURLcode code = CURLE_OK;
    Ending ending = Ending::kFinished;
    if (const CURLMcode added = curl_multi_add_handle(slot->multi, slot->easy); added != CURLM_OK) {
      throw TransportError(describe(request) + ": " + curl_multi_strerror(added), false, false);
    }
    {
      const std::stop_callback wake(stop, [multi = slot->multi] { curl_multi_wakeup(multi); });
      ending = run(*slot, transfer, stop, silence, code);
    }
    curl_multi_remove_handle(slot->multi, slot->easy);
    long status = 0;
    curl_easy_getinfo(slot->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 0) transfer.response.status = static_cast<int>(status);
    curl_off_t pretransfer_us = 0;
    curl_easy_getinfo(slot->easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
    pool_.release(std::move(slot));

    if (transfer.handler_error) std::rethrow_exception(transfer.handler_error);
    if (ending == Ending::kStopped || transfer.handler_stopped) return;
    if (ending == Ending::kSilent) {
      throw TransportError(
          describe(request) + ": no data for " + std::to_string(silence->count()) + " ms", true,
          pretransfer_us > 0);
    }
    if (code == CURLE_OK) return;

    const bool timed_out = code == CURLE_OPERATION_TIMEDOUT;
    // Only a connection that was never made (timing out included) is known not to have
    // carried the request.
    const bool request_sent =
        !(code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
          code == CURLE_COULDNT_RESOLVE_PROXY || (timed_out && pretransfer_us == 0));
    std::string cause = transfer.error[0] != '\0' ? transfer.error : curl_easy_strerror(code);
    if (transfer.response.status != 0) {
      cause = "the response broke off after status " + std::to_string(transfer.response.status) +
              ": " + cause;
    }
    // TLS verification and URL errors repeat identically on every attempt.
    const bool permanent =
        code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
        code == CURLE_SSL_CERTPROBLEM || code == CURLE_URL_MALFORMAT ||
        code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
    throw TransportError(describe(request) + ": " + cause, timed_out, request_sent, permanent);
  }

  // The curl_multi loop. `code` receives the transfer's result when it finished.
  static Ending run(Slot& slot, Transfer& transfer, const std::stop_token& stop,
                    std::optional<milliseconds> silence, CURLcode& code) {
    transfer.last_activity = Clock::now();
    while (true) {
      int running = 0;
      if (const CURLMcode result = curl_multi_perform(slot.multi, &running); result != CURLM_OK) {
        std::snprintf(transfer.error, sizeof transfer.error, "%s", curl_multi_strerror(result));
        code = CURLE_RECV_ERROR;
        return Ending::kFinished;
      }
      if (running == 0) break;
      if (stop.stop_requested()) return Ending::kStopped;
      milliseconds wait = kLongestPoll;
      if (silence) {
        const auto quiet = Clock::now() - transfer.last_activity;
        if (quiet >= *silence) return Ending::kSilent;
        wait = std::min(wait, std::chrono::ceil<milliseconds>(*silence - quiet));
      }
      curl_multi_poll(slot.multi, nullptr, 0, static_cast<int>(wait.count()), nullptr);
    }
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(slot.multi, &left)) {
      if (message->msg == CURLMSG_DONE) code = message->data.result;
    }
    return Ending::kFinished;
  }

  // "GET https://10.0.0.1:6443/api/v1/pods": the server as configured, the path without the
  // query.
  std::string describe(const HttpRequest& request) const {
    const auto query = request.target.find('?');
    std::string server = config_.server;
    while (server.ends_with('/')) server.pop_back();
    return request.method + " " + server + request.target.substr(0, query);
  }

  const ClusterConfig config_;
  const TransportOptions options_;
  BearerToken token_;
  std::string base_url_;     // requests go to base_url_ + target
  std::string host_header_;  // with tls_server_name: the server URL's authority
  Slist connect_to_;         // with tls_server_name: where to connect instead
  // libcurl keeps pointers into config_ (CURL_BLOB_NOCOPY) for as long as a handle uses them.
  curl_blob ca_blob_{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(),
                     CURL_BLOB_NOCOPY};
  curl_blob cert_blob_{const_cast<char*>(config_.client_cert_pem.data()),
                       config_.client_cert_pem.size(), CURL_BLOB_NOCOPY};
  curl_blob key_blob_{const_cast<char*>(config_.client_key_pem.data()),
                      config_.client_key_pem.size(), CURL_BLOB_NOCOPY};
  CurlShare share_;
  SlotPool pool_;  // declared last: its handles go before the share they use
};

}  // namespace

std::unique_ptr<HttpTransport> make_curl_transport(const ClusterConfig& config,
                                                   const TransportOptions& options) {
  initialize_curl();
  return std::make_unique<CurlTransport>(config, options);
}

}  // namespace tessel::kube
