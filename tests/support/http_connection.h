// One accepted connection of the test HTTP server: the socket (and its TLS session), reading
// requests with their bodies, and writing bytes. One thread serves it; cut() may be called from
// any other thread to end it.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/http_message.h"

namespace tessel::testing::http {

inline constexpr std::size_t kMaxHeadBytes = 1 << 20;  // request line and headers
inline constexpr std::size_t kMaxBodyBytes = 64 << 20;

class HttpConnection {
 public:
  // Takes ownership of the accepted socket; a non-null `tls` context makes it a TLS connection.
  HttpConnection(int fd, SSL_CTX* tls);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // The TLS handshake (nothing for plain TCP); false when it failed. Afterwards client_cn()
  // and client_organizations() hold the verified client certificate's subject, if one came.
  bool handshake();
  const std::string& client_cn() const { return client_cn_; }
  const std::vector<std::string>& client_organizations() const { return client_organizations_; }

  // The next request with its whole body (Content-Length or chunked; answers an
  // `Expect: 100-continue` first). nullopt when the client closed, or the connection broke or
  // was cut, before the request was complete. Throws RequestError for a malformed request.
  std::optional<RequestHead> read_request();

  // Writes all bytes now; false when the connection is broken or cut.
  bool send(std::string_view bytes);

  // Shuts the socket down in both directions (a FIN, and no TLS close_notify): blocked reads
  // and writes return at once. Thread-safe.
  void cut();
  bool is_cut() const { return cut_.load(); }
  // Cut, or the peer has closed its side (checked without blocking).
  bool peer_closed() const;
  // Ends the connection (with close_notify for TLS unless cut) and closes the socket; called by
  // the serving thread, which blocks SIGPIPE. The destructor closes without close_notify.
  void close();

 private:
  bool fill();  // reads more bytes into buffer_; false at end of stream or on error
  std::string read_line(std::size_t max_bytes, int status_when_too_long);
  std::string read_exact(std::size_t count);
  std::string read_chunked_body();
  void read_client_certificate();

  mutable std::mutex fd_mutex_;  // guards fd_ between cut() and close()
  int fd_;
  SSL* ssl_ = nullptr;
  std::atomic<bool> cut_{false};
  std::string buffer_;
  std::size_t buffer_pos_ = 0;  // bytes of buffer_ already consumed
  std::string client_cn_;
  std::vector<std::string> client_organizations_;
};

}  // namespace tessel::testing::http
